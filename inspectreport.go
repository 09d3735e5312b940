package ckpt

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math"
	"math/big"
	"strings"

	"github.com/ckpt-dev/ckpt/gguf"
	"github.com/ckpt-dev/ckpt/pickle"
	"github.com/ckpt-dev/ckpt/remap"
	"github.com/ckpt-dev/ckpt/statedict"
)

// InspectReport is what a checkpoint holds, as `ckpt inspect --json`
// prints it; docs/cli-json.md ("inspect") is its schema.
type InspectReport struct {
	File        string            `json:"file"`
	Format      string            `json:"format"`
	Version     string            `json:"version,omitempty"`
	ByteOrder   string            `json:"byteorder"`
	Compression string            `json:"compression,omitempty"`
	Shards      []string          `json:"shards,omitempty"`
	Summary     InspectSummary    `json:"summary"`
	Tensors     []InspectTensor   `json:"tensors"`
	Objects     []InspectObject   `json:"objects"`
	Opaque      []InspectObject   `json:"opaque"`
	Foreign     []InspectObject   `json:"foreign"`
	Strays      []remap.Stray     `json:"strays"`
	Metadata    map[string]string `json:"metadata,omitempty"`
	GGUF        *gguf.File        `json:"gguf,omitempty"`
	// Quantization: a quantized release read dequantized, its schemes
	// (each tensor's stored form is its "stored").
	Quantization *statedict.QuantizationInfo `json:"quantization,omitempty"`
	Warnings     []string                    `json:"warnings"`
	// Requests counts the HTTP requests made for a URL source; the caller
	// that watched the object store (WithObjectStore) sets it.
	Requests *int64 `json:"requests,omitempty"`
}

// InspectSummary is the inspect report's totals.
type InspectSummary struct {
	Tensors      int              `json:"tensors"`
	Storages     int              `json:"storages"`
	Shared       int              `json:"shared_storages"`
	Elements     int64            `json:"elements"`
	Bytes        int64            `json:"bytes"`
	StorageBytes int64            `json:"storage_bytes"`
	ByDType      map[string]int64 `json:"bytes_by_dtype"`
	ByDevice     map[string]int64 `json:"bytes_by_device"`
}

// InspectTensor is one tensor of an inspect report.
type InspectTensor struct {
	Name          string          `json:"name"`
	DType         string          `json:"dtype"`
	Shape         []int64         `json:"shape"`
	Strides       []int64         `json:"strides"`
	StorageOffset int64           `json:"storage_offset"`
	Device        string          `json:"device"`
	NBytes        int64           `json:"nbytes"`
	Storage       *InspectStorage `json:"storage"`
	Layout        string          `json:"layout"`
	RequiresGrad  bool            `json:"requires_grad"`
	Parameter     bool            `json:"parameter"`
	Shared        bool            `json:"shared"`
	View          bool            `json:"view"`
	Contiguous    bool            `json:"contiguous"`
	Stray         bool            `json:"stray"`
	Quantized     bool            `json:"quantized"`
	Meta          bool            `json:"meta,omitempty"`
	Subclass      string          `json:"subclass,omitempty"`
	Stats         *InspectStats   `json:"stats,omitempty"`
	Quant         map[string]any  `json:"quantization,omitempty"`
	Chunks        []InspectChunk  `json:"chunks,omitempty"`  // DCP: the chunks the tensor is assembled from
	Problem       string          `json:"problem,omitempty"` // DCP: why the tensor cannot be read

	// DTensor: a DTensor's local shard (global shape, placements, mesh);
	// Attribute: a TorchScript module's plain tensor attribute, not in
	// state_dict().
	DTensor   *statedict.DTensor `json:"dtensor,omitempty"`
	Attribute bool               `json:"attribute,omitempty"`
	// GGML: a GGUF tensor's ggml type, dims (ggml order), offset, stored bytes.
	GGML *statedict.GGML `json:"ggml,omitempty"`
	// Stored: a dequantized weight's stored form (scheme, codes' dtype and
	// shape, companion scales); its dtype and shape above are the logical ones.
	Stored *statedict.QuantStored `json:"stored,omitempty"`
}

// InspectStorage is the storage an inspected tensor views.
type InspectStorage struct {
	Key      string `json:"key"`
	NBytes   int64  `json:"nbytes"`
	Location string `json:"location"`
	Record   string `json:"record"`
}

// InspectStats are a tensor's statistics (InspectReport.AddStats): nil
// extremes and mean when no element is finite.
type InspectStats struct {
	Min  *float64 `json:"min"`
	Max  *float64 `json:"max"`
	Mean *float64 `json:"mean"`
	NaN  int64    `json:"nan"`
	Inf  int64    `json:"inf"`
}

// InspectObject is a non-tensor value, or an opaque or foreign object.
type InspectObject struct {
	Name  string `json:"name"`
	Type  string `json:"type"`
	Value any    `json:"value,omitempty"` // JSONValue of the value; values only
}

// InspectChunk is one chunk of a DCP tensor.
type InspectChunk struct {
	Offsets []int64 `json:"offsets"`
	Sizes   []int64 `json:"sizes"`
	File    string  `json:"file"`
	Rank    int     `json:"rank"` // -1 when the file name does not say
	Offset  int64   `json:"byte_offset"`
	Length  int64   `json:"byte_length"`
}

// StorageValue is a storage saved as a value, as the inspect report has
// it: torch loads every storage as a TypedStorage (untyped ones as uint8).
type StorageValue struct {
	Ref    *pickle.StorageRef `json:"-"`
	Key    string             `json:"storage"`
	DType  string             `json:"dtype"`
	Size   int64              `json:"size"`
	Device string             `json:"device"`
}

// Inspect reports what ck holds, reading no tensor data: file is the
// name to report it under; keep, when not nil, selects the tensors and
// values by name (opaque and foreign objects are all listed).
func Inspect(ck *statedict.Checkpoint, file string, keep func(name string) bool) *InspectReport {
	if keep == nil {
		keep = func(string) bool { return true }
	}
	sum := ck.Summary()
	rep := &InspectReport{
		File: file, Format: string(ck.Format), Version: ck.Version, ByteOrder: ck.ByteOrder,
		Compression: ck.Compression, Shards: ck.Shards, Metadata: ck.Metadata, GGUF: ck.GGUF, Quantization: ck.Quantization,
		Summary: InspectSummary{Tensors: sum.Tensors, Storages: sum.Storages, Shared: sum.Shared, Elements: sum.Elements,
			Bytes: sum.Bytes, StorageBytes: sum.StorageBytes, ByDType: map[string]int64{}, ByDevice: map[string]int64{}},
		Tensors: []InspectTensor{}, Objects: []InspectObject{}, Opaque: []InspectObject{}, Foreign: []InspectObject{},
		Strays: remap.DetectStrays(ck.Tensors), Warnings: ck.Warnings,
	}
	if rep.Strays == nil {
		rep.Strays = []remap.Stray{}
	}
	if rep.Warnings == nil {
		rep.Warnings = []string{}
	}
	for _, g := range sum.ByDType {
		rep.Summary.ByDType[g.Key] = g.Bytes
	}
	for _, g := range sum.ByDevice {
		rep.Summary.ByDevice[g.Key] = g.Bytes
	}
	shared := map[*statedict.Storage]bool{}
	for st := range ck.SharedStorages() {
		shared[st] = true
	}
	stray := map[string]bool{}
	for _, st := range rep.Strays {
		stray[st.Name] = true
	}
	for _, t := range ck.Tensors {
		if !keep(t.Name) {
			continue
		}
		it := InspectTensor{
			Name: t.Name, DType: t.DType.String(), Shape: nonNil(t.Shape), Strides: nonNil(t.Strides), StorageOffset: t.Offset,
			Device: t.Device, NBytes: t.NBytes(), Layout: string(t.Layout), RequiresGrad: t.RequiresGrad, Parameter: t.Parameter,
			View: t.IsView(), Contiguous: t.IsContiguous(), Stray: stray[t.Name], Quantized: t.Quant != nil, Meta: t.Meta,
			Subclass: t.Subclass, DTensor: t.DTensor, Attribute: t.Attribute, GGML: t.GGML, Stored: t.QuantStored,
		}
		if t.Storage != nil {
			it.Shared = shared[t.Storage]
			it.Storage = &InspectStorage{Key: t.Storage.Key, NBytes: t.Storage.NBytes, Location: t.Storage.Location, Record: t.Storage.Record}
		}
		it.Chunks, it.Problem = dcpInfo(t)
		if q := t.Quant; q != nil {
			it.Quant = map[string]any{"scheme": q.Scheme}
			if q.Scales == nil {
				it.Quant["scale"], it.Quant["zero_point"] = q.Scale, q.ZeroPoint
			} else {
				it.Quant["axis"] = q.Axis
			}
		}
		rep.Tensors = append(rep.Tensors, it)
	}
	for _, o := range ck.Objects {
		if keep(o.Name) {
			rep.Objects = append(rep.Objects, InspectObject{Name: o.Name, Type: o.Type, Value: JSONValue(o.Value)})
		}
	}
	for _, o := range ck.Opaque {
		rep.Opaque = append(rep.Opaque, InspectObject{Name: o.Name, Type: o.Type})
	}
	for _, o := range ck.Foreign {
		rep.Foreign = append(rep.Foreign, InspectObject{Name: o.Name, Type: o.Type})
	}
	return rep
}

// dcpInfo lists a DCP tensor's chunks and its problem ("" when readable).
func dcpInfo(t *statedict.Tensor) ([]InspectChunk, string) {
	var out []InspectChunk
	for _, c := range t.Chunks() {
		out = append(out, InspectChunk{Offsets: nonNil(c.Offsets), Sizes: nonNil(c.Sizes), File: c.File, Rank: c.Rank, Offset: c.Begin, Length: c.Length})
	}
	problem := ""
	if err := t.Problem(); err != nil {
		problem = strings.TrimPrefix(err.Error(), "statedict: ")
	}
	return out, problem
}

func nonNil(s []int64) []int64 {
	if s == nil {
		return []int64{}
	}
	return s
}

// JSONValue turns a plain pickle leaf into something encoding/json writes
// faithfully: big ints as strings, NaN/Inf and bytes as their Python
// repr, a storage as a StorageValue.
func JSONValue(v any) any {
	switch x := v.(type) {
	case nil, bool, int64, string:
		return x
	case float64:
		if math.IsNaN(x) || math.IsInf(x, 0) {
			return fmt.Sprint(x)
		}
		return x
	case *big.Int:
		return x.String()
	case pickle.Device:
		return string(x)
	case pickle.Global:
		return x.Module + "." + x.Name
	case *pickle.StorageRef:
		return StorageValue{Ref: x, Key: x.Key, DType: cmp.Or(x.DType, "uint8"), Size: x.Len(), Device: x.Location}
	}
	return pickle.Repr(v)
}

// AddStats reads the data of the report's tensors of ck (the checkpoint
// Inspect reported) and sets their Stats; progress, when not nil, is
// called with the bytes of each tensor done. Statistics are computed once
// per view: a tensor named many times (tied weights, or a shared tree
// naming one tensor from every path) costs its storage once. Tensors of
// dtypes without real values (statedict.ErrNoStats) get none.
func (r *InspectReport) AddStats(ctx context.Context, ck *statedict.Checkpoint, progress func(n int64)) error {
	if progress == nil {
		progress = func(int64) {}
	}
	byName := map[string]*statedict.Tensor{}
	for _, t := range ck.Tensors {
		byName[t.Name] = t
	}
	done := map[statedict.View]*InspectStats{}
	for i := range r.Tensors {
		it := &r.Tensors[i]
		t := byName[it.Name]
		if st, ok := done[t.View()]; ok {
			it.Stats = st
			progress(max(it.NBytes, 0))
			continue
		}
		st, err := statedict.ComputeStats(ctx, t, progress)
		if err != nil {
			if errors.Is(err, statedict.ErrNoStats) {
				done[t.View()] = nil
				continue
			}
			return err
		}
		it.Stats = &InspectStats{Min: finite(st.Min), Max: finite(st.Max), Mean: finite(st.Mean), NaN: st.NaN, Inf: st.Inf}
		done[t.View()] = it.Stats
	}
	return nil
}

// StatsBytes is the bytes AddStats reads at most: the report's tensors'.
func (r *InspectReport) StatsBytes() int64 {
	var total int64
	for _, it := range r.Tensors {
		total += max(it.NBytes, 0)
	}
	return total
}

func finite(f float64) *float64 {
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return nil
	}
	return &f
}

// Repr writes a value of an InspectReport (an InspectObject's Value,
// after JSONValue) as Python's repr() would, a StorageValue as the
// storage reference it stands for.
func Repr(v any) string {
	if s, ok := v.(StorageValue); ok {
		return pickle.Repr(s.Ref)
	}
	return pickle.Repr(v)
}

// FormatGGUFValue renders a GGUF metadata value (an entry of an
// InspectReport's GGUF.KV) for people, as gguf.Format does: scalars as Go
// prints them, strings quoted, arrays as their element type and length
// with at most shown elements.
func FormatGGUFValue(v any, shown int) string { return gguf.Format(v, shown) }

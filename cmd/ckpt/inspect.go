package main

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"github.com/ckpt-dev/ckpt/internal/human"
	"io"
	"math"
	"math/big"
	"path"
	"strings"
	"text/tabwriter"

	"github.com/ckpt-dev/ckpt"
	"github.com/ckpt-dev/ckpt/gguf"
	"github.com/ckpt-dev/ckpt/objstore"
	"github.com/ckpt-dev/ckpt/pickle"
	"github.com/ckpt-dev/ckpt/remap"
	"github.com/ckpt-dev/ckpt/statedict"
	"github.com/spf13/cobra"
)

func init() { commands = append(commands, newInspectCmd) }

type inspectOptions struct {
	Path   string
	JSON   bool
	Stats  bool
	Filter string
}

func newInspectCmd(s *streams) *cobra.Command {
	opts := &inspectOptions{}
	cmd := &cobra.Command{
		Use:   "inspect PATH",
		Short: "Show what a checkpoint holds: tensors, dtypes, shapes, devices, values",
		Long: `Inspect reads a checkpoint's metadata (never its tensor data, unless --stats)
and shows a summary, one row per tensor, the non-tensor values, and any
foreign objects. Nothing in the file is executed.

PATH may be a torch zip (.pt/.pth/.bin), a legacy or tar torch file, a
safetensors file, a Hugging Face index.json, a directory holding one of
those, or a gzip/zstd-compressed file. The format is found from the content.

A torch.distributed.checkpoint (DCP) directory (.metadata plus __R_N.distcp
files) shows as one checkpoint: global shapes, and per tensor its number of
chunks and the ranks that saved them; chunks that leave a gap, overlap, reach
outside the shape or sit in a missing file flag the tensor BAD-CHUNKS and
are listed under Warnings.`,
		Example: `  ckpt inspect model.pt
  ckpt inspect --json checkpoints/last.ckpt | jq '.summary'
  ckpt inspect --filter 'optimizer.*' --stats run/epoch7.pth
  ckpt inspect ./llama-7b/   # a directory with model.safetensors.index.json
  ckpt inspect ./step_1000/  # a torch.distributed.checkpoint directory`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.Path = args[0]
			if opts.Filter != "" {
				if _, err := path.Match(opts.Filter, ""); err != nil {
					return usagef("--filter %q: %v", opts.Filter, err)
				}
			}
			return runInspect(cmd.Context(), s, opts)
		},
	}
	f := cmd.Flags()
	f.BoolVar(&opts.JSON, "json", false, "print one JSON object (schema in docs/cli-json.md)")
	f.BoolVar(&opts.Stats, "stats", false, "read the data and add min, max, mean and NaN/Inf counts per tensor")
	f.StringVar(&opts.Filter, "filter", "", "only tensors whose name matches this glob (* matches dots too)")
	return cmd
}

// inspectTensor is one tensor in `inspect --json`.
type inspectTensor struct {
	Name          string         `json:"name"`
	DType         string         `json:"dtype"`
	Shape         []int64        `json:"shape"`
	Strides       []int64        `json:"strides"`
	StorageOffset int64          `json:"storage_offset"`
	Device        string         `json:"device"`
	NBytes        int64          `json:"nbytes"`
	Storage       *inspectStore  `json:"storage"`
	Layout        string         `json:"layout"`
	RequiresGrad  bool           `json:"requires_grad"`
	Parameter     bool           `json:"parameter"`
	Shared        bool           `json:"shared"`
	View          bool           `json:"view"`
	Contiguous    bool           `json:"contiguous"`
	Stray         bool           `json:"stray"`
	Quantized     bool           `json:"quantized"`
	Meta          bool           `json:"meta,omitempty"`
	Subclass      string         `json:"subclass,omitempty"`
	Stats         *inspectStats  `json:"stats,omitempty"`
	Quant         map[string]any `json:"quantization,omitempty"`
	Chunks        []inspectChunk `json:"chunks,omitempty"`  // DCP: the chunks the tensor is assembled from
	Problem       string         `json:"problem,omitempty"` // DCP: why the tensor cannot be read

	// DTensor: a DTensor's local shard (global shape, placements, mesh);
	// Attribute: a TorchScript module's plain tensor attribute, not in
	// state_dict().
	DTensor   *statedict.DTensor `json:"dtensor,omitempty"`
	Attribute bool               `json:"attribute,omitempty"`
	// GGML: a GGUF tensor's ggml type, dims (ggml order), offset, stored bytes.
	GGML *statedict.GGML `json:"ggml,omitempty"`
}

type inspectStore struct {
	Key      string `json:"key"`
	NBytes   int64  `json:"nbytes"`
	Location string `json:"location"`
	Record   string `json:"record"`
}

type inspectStats struct {
	Min  *float64 `json:"min"`
	Max  *float64 `json:"max"`
	Mean *float64 `json:"mean"`
	NaN  int64    `json:"nan"`
	Inf  int64    `json:"inf"`
}

type inspectObject struct {
	Name  string `json:"name"`
	Type  string `json:"type"`
	Value any    `json:"value,omitempty"`
}

type inspectReport struct {
	File        string            `json:"file"`
	Format      string            `json:"format"`
	Version     string            `json:"version,omitempty"`
	ByteOrder   string            `json:"byteorder"`
	Compression string            `json:"compression,omitempty"`
	Shards      []string          `json:"shards,omitempty"`
	Summary     inspectSummary    `json:"summary"`
	Tensors     []inspectTensor   `json:"tensors"`
	Objects     []inspectObject   `json:"objects"`
	Opaque      []inspectObject   `json:"opaque"`
	Foreign     []inspectObject   `json:"foreign"`
	Strays      []remap.Stray     `json:"strays"`
	Metadata    map[string]string `json:"metadata,omitempty"`
	GGUF        *gguf.File        `json:"gguf,omitempty"`
	Warnings    []string          `json:"warnings"`
	// Requests counts the HTTP requests made for a URL source.
	Requests *int64 `json:"requests,omitempty"`
}

type inspectSummary struct {
	Tensors      int              `json:"tensors"`
	Storages     int              `json:"storages"`
	Shared       int              `json:"shared_storages"`
	Elements     int64            `json:"elements"`
	Bytes        int64            `json:"bytes"`
	StorageBytes int64            `json:"storage_bytes"`
	ByDType      map[string]int64 `json:"bytes_by_dtype"`
	ByDevice     map[string]int64 `json:"bytes_by_device"`
}

func runInspect(ctx context.Context, s *streams, opts *inspectOptions) error {
	var st *objstore.Store
	ck, err := ckpt.Open(ctx, opts.Path, ckpt.WithObjectStore(func(s *objstore.Store) { st = s }))
	if err != nil {
		return err
	}
	defer ck.Close()
	rep := buildInspectReport(ck, opts)
	if opts.Stats {
		if err := addStats(ctx, s, ck, rep, opts.JSON); err != nil {
			return err
		}
	}
	rep.Requests = requests(st)
	if opts.JSON {
		enc := json.NewEncoder(s.Out)
		enc.SetIndent("", "  ")
		return enc.Encode(rep)
	}
	printInspect(s.Out, rep, opts.Filter)
	return nil
}

func buildInspectReport(ck *statedict.Checkpoint, opts *inspectOptions) *inspectReport {
	sum := ck.Summary()
	rep := &inspectReport{
		File: opts.Path, Format: string(ck.Format), Version: ck.Version, ByteOrder: ck.ByteOrder,
		Compression: ck.Compression, Shards: ck.Shards, Metadata: ck.Metadata, GGUF: ck.GGUF,
		Summary: inspectSummary{Tensors: sum.Tensors, Storages: sum.Storages, Shared: sum.Shared, Elements: sum.Elements,
			Bytes: sum.Bytes, StorageBytes: sum.StorageBytes, ByDType: map[string]int64{}, ByDevice: map[string]int64{}},
		Tensors: []inspectTensor{}, Objects: []inspectObject{}, Opaque: []inspectObject{}, Foreign: []inspectObject{},
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
		if !matchName(opts.Filter, t.Name) {
			continue
		}
		it := inspectTensor{
			Name: t.Name, DType: t.DType.String(), Shape: nonNil(t.Shape), Strides: nonNil(t.Strides), StorageOffset: t.Offset,
			Device: t.Device, NBytes: t.NBytes(), Layout: string(t.Layout), RequiresGrad: t.RequiresGrad, Parameter: t.Parameter,
			View: t.IsView(), Contiguous: t.IsContiguous(), Stray: stray[t.Name], Quantized: t.Quant != nil, Meta: t.Meta,
			Subclass: t.Subclass, DTensor: t.DTensor, Attribute: t.Attribute, GGML: t.GGML,
		}
		if t.Storage != nil {
			it.Shared = shared[t.Storage]
			it.Storage = &inspectStore{Key: t.Storage.Key, NBytes: t.Storage.NBytes, Location: t.Storage.Location, Record: t.Storage.Record}
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
		if matchName(opts.Filter, o.Name) {
			rep.Objects = append(rep.Objects, inspectObject{Name: o.Name, Type: o.Type, Value: jsonValue(o.Value)})
		}
	}
	for _, o := range ck.Opaque {
		rep.Opaque = append(rep.Opaque, inspectObject{Name: o.Name, Type: o.Type})
	}
	for _, o := range ck.Foreign {
		rep.Foreign = append(rep.Foreign, inspectObject{Name: o.Name, Type: o.Type})
	}
	return rep
}

func matchName(glob, name string) bool {
	if glob == "" {
		return true
	}
	ok, _ := path.Match(glob, name)
	return ok
}

func nonNil(s []int64) []int64 {
	if s == nil {
		return []int64{}
	}
	return s
}

// jsonValue turns a plain pickle leaf into something encoding/json writes
// faithfully (big ints as strings, NaN/Inf and bytes as their Python repr).
func jsonValue(v any) any {
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
		return storageValue{ref: x, Key: x.Key, DType: cmp.Or(x.DType, "uint8"), Size: x.Len(), Device: x.Location}
	}
	return pickle.Repr(v)
}

func addStats(ctx context.Context, s *streams, ck *statedict.Checkpoint, rep *inspectReport, quiet bool) error {
	var total int64
	byName := map[string]*statedict.Tensor{}
	for _, t := range ck.Tensors {
		byName[t.Name] = t
	}
	for _, it := range rep.Tensors {
		total += max(it.NBytes, 0)
	}
	bar := newProgress(s, "stats", total, quiet)
	defer bar.Done()
	// Statistics are computed once per view: a tensor named many times
	// (tied weights, or a shared tree naming one tensor from every path)
	// costs its storage once, not once per name.
	done := map[statedict.View]*inspectStats{}
	for i := range rep.Tensors {
		it := &rep.Tensors[i]
		t := byName[it.Name]
		if st, ok := done[t.View()]; ok {
			it.Stats = st
			bar.Add(max(it.NBytes, 0))
			continue
		}
		st, err := statedict.ComputeStats(ctx, t, bar.Add)
		if err != nil {
			if errorsIsNoStats(err) {
				done[t.View()] = nil
				continue
			}
			return err
		}
		it.Stats = &inspectStats{Min: finite(st.Min), Max: finite(st.Max), Mean: finite(st.Mean), NaN: st.NaN, Inf: st.Inf}
		done[t.View()] = it.Stats
	}
	return nil
}

func finite(f float64) *float64 {
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return nil
	}
	return &f
}

func printInspect(w io.Writer, rep *inspectReport, filter string) {
	sum := rep.Summary
	format := rep.Format
	if rep.Version != "" {
		format += " (version " + rep.Version + ")"
	}
	if rep.Compression != "" {
		format += ", " + rep.Compression + "-compressed"
	}
	fmt.Fprintf(w, "File:      %s\n", clean(rep.File))
	fmt.Fprintf(w, "Format:    %s, %s-endian\n", format, rep.ByteOrder)
	if len(rep.Shards) > 0 {
		fmt.Fprintf(w, "Shards:    %d (%s)\n", len(rep.Shards), clean(strings.Join(rep.Shards, ", ")))
	}
	fmt.Fprintf(w, "Tensors:   %s (%s elements, %s) in %s storages (%d shared, %s stored)\n", humanCount(int64(sum.Tensors)),
		humanCount(sum.Elements), human.Bytes(sum.Bytes), humanCount(int64(sum.Storages)), sum.Shared, human.Bytes(sum.StorageBytes))
	fmt.Fprintf(w, "By dtype:  %s\n", groupLine(sum.ByDType))
	fmt.Fprintf(w, "By device: %s\n", groupLine(sum.ByDevice))
	if filter != "" && len(rep.Tensors) == 0 {
		fmt.Fprintf(w, "\nNo tensor matches --filter %q (of %s tensors).\n", filter, humanCount(int64(sum.Tensors)))
	}
	if len(rep.Tensors) > 0 {
		fmt.Fprintln(w)
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
		header := "NAME\tDTYPE\tSHAPE\tDEVICE\tSIZE\tFLAGS"
		withStats := anyStats(rep.Tensors)
		if withStats {
			header += "\tMIN\tMAX\tMEAN\tNAN\tINF"
		}
		fmt.Fprintln(tw, header)
		for _, t := range rep.Tensors {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s", displayName(t.Name), t.DType, shapeString(t.Shape), clean(t.Device), human.Bytes(t.NBytes), clean(tensorFlags(t)))
			if st := t.Stats; st != nil {
				fmt.Fprintf(tw, "\t%s\t%s\t%s\t%d\t%d", fnum(st.Min), fnum(st.Max), fnum(st.Mean), st.NaN, st.Inf)
			} else if withStats {
				fmt.Fprint(tw, "\t-\t-\t-\t-\t-")
			}
			fmt.Fprintln(tw)
		}
		tw.Flush()
	}
	if len(rep.Strays) > 0 {
		fmt.Fprintf(w, "\n%s\n", strayHeading(rep.Strays))
		for _, st := range rep.Strays {
			fmt.Fprintf(w, "  %s on %s (%s)\n", displayName(st.Name), clean(st.Tag), human.Bytes(st.NBytes))
		}
	}
	printObjects(w, "Values", rep.Objects, true)
	printObjects(w, "Opaque objects (kept, not executed)", rep.Opaque, false)
	printObjects(w, "Foreign objects (unknown classes, never executed)", rep.Foreign, false)
	if len(rep.Metadata) > 0 {
		fmt.Fprintln(w, "\nMetadata:")
		for _, k := range sortedKeys(rep.Metadata) {
			fmt.Fprintf(w, "  %s = %s\n", clean(k), clean(rep.Metadata[k]))
		}
	}
	printGGUF(w, rep.GGUF)
	if len(rep.Warnings) > 0 {
		fmt.Fprintln(w, "\nWarnings:")
		for _, m := range rep.Warnings {
			fmt.Fprintf(w, "  %s\n", clean(m))
		}
	}
}

func anyStats(ts []inspectTensor) bool {
	for _, t := range ts {
		if t.Stats != nil {
			return true
		}
	}
	return false
}

func printObjects(w io.Writer, title string, objs []inspectObject, values bool) {
	if len(objs) == 0 {
		return
	}
	fmt.Fprintf(w, "\n%s:\n", title)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	for _, o := range objs {
		name := displayName(o.Name)
		if values {
			fmt.Fprintf(tw, "  %s\t%s\t%s\n", name, clean(o.Type), clean(pyRepr(o.Value)))
		} else {
			fmt.Fprintf(tw, "  %s\t%s\n", name, clean(o.Type))
		}
	}
	tw.Flush()
}

// storageValue is a storage saved as a value, as --json reports it: torch
// loads every storage as a TypedStorage (untyped ones as uint8).
type storageValue struct {
	ref    *pickle.StorageRef
	Key    string `json:"storage"`
	DType  string `json:"dtype"`
	Size   int64  `json:"size"`
	Device string `json:"device"`
}

// pyRepr prints a value (after jsonValue) as Python's repr() would.
func pyRepr(v any) string {
	if s, ok := v.(storageValue); ok {
		return pickle.Repr(s.ref)
	}
	return pickle.Repr(v)
}

func fnum(f *float64) string {
	if f == nil {
		return "-"
	}
	return fmt.Sprintf("%.6g", *f)
}

func tensorFlags(t inspectTensor) string {
	var f []string
	add := func(ok bool, s string) {
		if ok {
			f = append(f, s)
		}
	}
	add(t.Parameter, "param")
	add(t.RequiresGrad, "grad")
	add(t.Shared, "shared")
	add(t.View, "view")
	add(!t.Contiguous, "non-contiguous")
	add(t.Stray, "STRAY")
	add(t.Layout != "strided", t.Layout)
	add(t.Quantized, "quantized")
	add(t.Meta, "meta")
	add(t.Attribute, "attr")
	add(t.Subclass != "" && t.DTensor == nil, t.Subclass)
	if d := t.DTensor; d != nil {
		f = append(f, fmt.Sprintf("DTensor %v %s", d.Shape, strings.Join(d.Placements, " ")))
	}
	f = append(f, chunkFlags(t)...)
	f = append(f, ggufFlag(t)...)
	return strings.Join(f, ",")
}

func groupLine(m map[string]int64) string {
	keys := sortedKeys(m)
	parts := make([]string, 0, len(keys))
	for _, k := range keys {
		parts = append(parts, fmt.Sprintf("%s %s", clean(k), human.Bytes(m[k])))
	}
	if len(parts) == 0 {
		return "-"
	}
	return strings.Join(parts, ", ")
}

package statedict

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"path"
	"path/filepath"

	"github.com/ckpt-dev/ckpt/dtype"
	"github.com/ckpt-dev/ckpt/quant"
)

// QuantStored describes how a dequantized tensor is stored: the scheme,
// the stored codes' dtype and shape, and the companion tensors (scales)
// its values come from, which the checkpoint no longer lists.
type QuantStored struct {
	Scheme     string      `json:"scheme"`             // "fp8 e4m3, 128x128 blocks, scales in weight_scale_inv"
	Method     string      `json:"method"`             // config.json's quant_method: "fp8", "compressed-tensors"
	DType      dtype.DType `json:"-"`                  // the stored codes' dtype
	DTypeName  string      `json:"dtype"`              // its torch spelling
	Shape      []int64     `json:"shape"`              // the stored codes' shape
	Companions []string    `json:"companions"`         // scales (and zero points), consumed
	Consumed   []string    `json:"consumed,omitempty"` // other stored tensors used up (activation scales)

	stored []*Tensor // the codes, the companions, then the consumed tensors, as stored
}

// StoredTensors returns the tensors as the checkpoint stores them that
// the dequantized weight stands for: the codes first, then the
// companions, then the other tensors it consumed (activation scales),
// each read as stored (Tensor.Raw, Open). A checksum the file records for
// them (a zip record's CRC32, ckpt's per-tensor digest) is of these
// bytes, not of the values the weight reads as.
func (q *QuantStored) StoredTensors() []*Tensor {
	if q == nil {
		return nil
	}
	return append([]*Tensor(nil), q.stored...)
}

// QuantizationInfo is what a checkpoint's quantization scheme made of it.
type QuantizationInfo struct {
	Method  string              `json:"method"`  // quant_method
	Config  string              `json:"config"`  // the config.json it came from
	DType   string              `json:"dtype"`   // logical dtype of the dequantized weights
	Schemes []quant.SchemeCount `json:"schemes"` // each scheme and how many weights it quantizes
}

// maxModelConfig bounds the config.json read beside a checkpoint.
const maxModelConfig = 16 << 20

// WithModelConfig names the model's config.json, whose
// quantization_config says how the checkpoint's weights are quantized.
// Without it, Open and OpenFS look for config.json beside the file or in
// the directory.
func WithModelConfig(path string) Option { return func(c *config) { c.modelConfig = path } }

// WithRaw keeps the stored tensors of a quantized checkpoint as they are
// (codes and scales as separate tensors) instead of reading each
// quantized weight as its dequantized values.
func WithRaw() Option { return func(c *config) { c.raw = true } }

// readModelConfig returns config.json's bytes and where they came from:
// WithModelConfig's file, else config.json in the directory p or beside
// the file p; nil when there is none.
func readModelConfig(p string, isDir bool, cfg *config) ([]byte, string, error) {
	if cfg.modelConfig != "" {
		f, fi, err := openRegular(cfg.modelConfig)
		if err != nil {
			return nil, "", err
		}
		defer f.Close()
		if fi.Size() > maxModelConfig {
			return nil, "", &Error{File: cfg.modelConfig, Err: fmt.Errorf("%w: config of %d bytes exceeds the limit of %d", ErrMalformed, fi.Size(), maxModelConfig)}
		}
		b, err := io.ReadAll(io.LimitReader(f, maxModelConfig))
		return b, cfg.modelConfig, err
	}
	name := cfg.sibling(p, "config.json")
	if isDir {
		if cfg.fs != nil {
			name = path.Join(p, "config.json")
		} else {
			name = filepath.Join(p, "config.json")
		}
	}
	if cfg.fs != nil {
		// An object store or web server: only a directory's listing (which
		// opening it already asked for) may show a config.json; a request
		// more per open, or a web server's page taken for one, is not worth
		// it. A single remote file needs WithModelConfig.
		if !isDir || len(cfg.glob(p, "config.json")) == 0 {
			return nil, "", nil
		}
	}
	r, size, closer, err := cfg.open(name)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, "", nil
		}
		var e *Error
		if errors.As(err, &e) && errors.Is(err, ErrNotRegular) {
			return nil, "", nil
		}
		return nil, "", err
	}
	defer closer.Close()
	if size > maxModelConfig {
		return nil, "", &Error{File: cfg.display(name), Err: fmt.Errorf("%w: config of %d bytes exceeds the limit of %d", ErrMalformed, size, maxModelConfig)}
	}
	b := make([]byte, size)
	if _, err := r.ReadAt(b, 0); err != nil && err != io.EOF {
		return nil, "", err
	}
	return b, cfg.display(name), nil
}

// applyQuant reads each weight of a quantized checkpoint as one logical
// tensor (the unquantized model's name, dtype and shape) whose data is
// dequantized on read; the companions are consumed. What a scheme
// quantizes but ckpt cannot dequantize is refused here, before any data
// is read or written.
func applyQuant(ck *Checkpoint, p string, isDir bool, cfg *config) error {
	if cfg.raw {
		return nil
	}
	conf, from, err := readModelConfig(p, isDir, cfg)
	if err != nil {
		return err
	}
	if cfg.modelConfig == "" && len(conf) > 0 && !json.Valid(conf) {
		// A config.json that happens to sit beside the file but is not
		// JSON says nothing about quantization: set aside with a warning
		// (float8 weights with scales are still refused below).
		ck.Warnings = append(ck.Warnings, from+" is not valid JSON: not read for a quantization_config")
		conf = nil
	}
	ck.ModelConfig = conf
	byName := make(map[string]*Tensor, len(ck.Tensors))
	stored := make([]quant.Stored, 0, len(ck.Tensors))
	for _, t := range ck.Tensors {
		if t.Storage == nil || t.Meta || t.Layout != Strided || t.Component != "" || t.GGML != nil {
			continue
		}
		byName[t.Name] = t
		stored = append(stored, quant.Stored{Name: t.Name, DType: t.DType, Shape: t.Shape, Read: smallReader(t)})
	}
	plan, err := quant.Detect(conf, stored)
	if err != nil {
		var qe *quant.Error
		if errors.As(err, &qe) && qe.Tensor != "" {
			file := ""
			if t := byName[qe.Tensor]; t != nil && t.Storage != nil {
				file = t.Storage.File
			}
			return &Error{File: file, Err: err}
		}
		return err
	}
	if plan == nil {
		return nil
	}
	ck.Quantization = &QuantizationInfo{Method: plan.Method, Config: from, DType: plan.DType.String(), Schemes: plan.Schemes()}
	replace := make(map[string]*Tensor, len(plan.Groups))
	drop := make(map[string]bool)
	for _, g := range plan.Groups {
		w := byName[g.Weight.Name]
		src := &quantSource{codes: w, codec: g.Codec, dt: g.DType, numel: quant.Stored{Shape: g.Shape}.NumEl(), name: g.Name}
		qs := &QuantStored{Scheme: g.Scheme, Method: plan.Method, DType: w.DType, DTypeName: w.DType.String(), Shape: w.Shape, Consumed: g.Consumed,
			stored: []*Tensor{w}}
		for _, c := range g.Companions {
			src.comps = append(src.comps, byName[c.Name])
			qs.Companions = append(qs.Companions, c.Name)
			qs.stored = append(qs.stored, byName[c.Name])
			drop[c.Name] = true
		}
		for _, c := range g.Consumed {
			if t := byName[c]; t != nil {
				qs.stored = append(qs.stored, t)
			}
			drop[c] = true
		}
		if src.numel < 0 || src.numel > (1<<62)/int64(g.DType.Size()) {
			return &Error{File: w.Storage.File, Tensor: g.Name, Err: fmt.Errorf("%w: %s elements", ErrOverflow, shapeText(g.Shape))}
		}
		s := &Storage{Key: g.Name, Location: w.Storage.Location, DType: g.DType, NBytes: src.numel * int64(g.DType.Size()),
			Record: w.Storage.Record, File: w.Storage.File, src: src}
		replace[g.Weight.Name] = &Tensor{Name: g.Name, DType: g.DType, Shape: g.Shape, Strides: contiguousStrides(g.Shape),
			Device: w.Device, Storage: s, Layout: Strided, RequiresGrad: w.RequiresGrad, Parameter: w.Parameter, QuantStored: qs}
	}
	var tensors []*Tensor
	kept := make(map[*Storage]bool)
	for _, t := range ck.Tensors {
		if r := replace[t.Name]; r != nil && byName[t.Name] == t {
			tensors = append(tensors, r)
			continue
		}
		if drop[t.Name] && byName[t.Name] == t {
			continue
		}
		tensors = append(tensors, t)
		kept[t.Storage] = true
	}
	var storages []*Storage
	for _, s := range ck.Storages {
		if kept[s] {
			storages = append(storages, s)
		}
	}
	for _, t := range tensors {
		if t.QuantStored != nil {
			storages = append(storages, t.Storage)
		}
	}
	ck.Tensors, ck.Storages = tensors, storages
	return nil
}

// maxSchemeRead bounds the bytes of a tensor a scheme reads to plan its
// groups (a shape, a JSON state).
const maxSchemeRead = 1 << 20

// smallReader reads t whole for a scheme's planning, refusing a tensor
// larger than maxSchemeRead.
func smallReader(t *Tensor) func() ([]byte, error) {
	return func() ([]byte, error) {
		if n := t.NBytes(); n > maxSchemeRead {
			return nil, &Error{Tensor: t.Name, Err: fmt.Errorf("%w: %d bytes where a scheme expects at most %d", ErrMalformed, n, maxSchemeRead)}
		}
		return t.ReadAll()
	}
}

// withQuant finishes an open: a quantized release's weights read
// dequantized (applyQuant), or the checkpoint is closed on refusal.
func withQuant(ck *Checkpoint, err error, p string, isDir bool, cfg *config) (*Checkpoint, error) {
	if err != nil {
		return nil, err
	}
	if err := applyQuant(ck, p, isDir, cfg); err != nil {
		ck.Close()
		return nil, withFile(err, cfg.display(p))
	}
	return ck, nil
}

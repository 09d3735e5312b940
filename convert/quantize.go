package convert

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/ckpt-dev/ckpt/dtype"
	"github.com/ckpt-dev/ckpt/internal/atomicfile"
	"github.com/ckpt-dev/ckpt/quant"
	"github.com/ckpt-dev/ckpt/statedict"
)

// WithQuantize writes the output's weights quantized in spec's native
// layout (quant.ParseQuantize: fp8-block, fp8-channel, mxfp4, nvfp4):
// each weight the scheme takes becomes its stored tensors (codes and
// scales, computed on all cores in row blocks, see package quant), the
// rest is written as it is (or cast by WithDType). Which tensors are left
// out follows upstream (norms, embeddings, lm_head, MoE routers and gates,
// biases, 1-D tensors, shapes the scheme cannot take) and
// WithQuantizeIgnore; the Summary lists them with the reason. A
// directory output gets a config.json with the scheme's
// quantization_config (the input's config.json with the block replaced,
// when the input had one). Safetensors and .pth outputs only.
func WithQuantize(spec quant.QuantizeSpec) Option {
	return func(c *options) { c.quantize = &spec }
}

// WithQuantizeIgnore leaves tensors whose name, or module name (the name
// without ".weight"), matches one of the globs (path.Match syntax)
// unquantized under WithQuantize.
func WithQuantizeIgnore(glob ...string) Option {
	return func(c *options) { c.quantIgnore = append(c.quantIgnore, glob...) }
}

// QuantizeReport is what WithQuantize did.
type QuantizeReport struct {
	Scheme    string    `json:"scheme"`
	Quantized int       `json:"quantized"`        // weights written quantized
	Copied    int       `json:"copied,omitempty"` // of them, written as the input stores them (WithQuantizeSame)
	Skipped   []Dropped `json:"skipped"`          // float tensors left as they are, and why
	Config    string    `json:"config,omitempty"`
}

// quantJob is one weight's quantization: the scales are computed once
// (Prepare), on the first read of any of its outputs.
type quantJob struct {
	q    quant.WeightQuantizer
	read quant.RowReader
	once sync.Once
	err  error

	mu      sync.Mutex // the chunk cache of codes (from quantBufs)
	chunk   int64
	cache   *[]byte
	perRows int64
	perSize int64
}

func (j *quantJob) prepare() error {
	j.once.Do(func() { j.err = j.q.Prepare(j.read) })
	return j.err
}

// codesAt serves the codes, a chunk of about 8 MiB computed at a time.
type codesAt struct{ j *quantJob }

func (r codesAt) ReadAt(p []byte, off int64) (int, error) {
	j := r.j
	if err := j.prepare(); err != nil {
		return 0, err
	}
	_, total := j.q.CodeSpan(0, j.q.Rows())
	j.mu.Lock()
	defer j.mu.Unlock()
	n := 0
	for n < len(p) {
		o := off + int64(n)
		if o >= total {
			j.release()
			return n, io.EOF
		}
		k := o / j.perSize
		if j.cache == nil || j.chunk != k {
			r0 := k * j.perRows
			r1 := min(j.q.Rows(), r0+j.perRows)
			b, e := j.q.CodeSpan(r0, r1)
			if j.cache != nil && int64(cap(*j.cache)) >= e-b {
				*j.cache = (*j.cache)[:e-b]
			} else {
				quantBufs.Put(j.cache)
				j.cache = quantBufs.Get(int(e - b))
			}
			if err := quant.QuantizeRows(j.q, j.read, *j.cache, r0, r1); err != nil {
				j.release()
				return n, err
			}
			j.chunk = k
		}
		n += copy(p[n:], (*j.cache)[o-k*j.perSize:])
	}
	if off+int64(n) >= total {
		// The weight's last codes are out: a writer reads on to the next
		// tensor, and a read again recomputes its chunk.
		j.release()
	}
	return n, nil
}

// release gives the chunk cache back to quantBufs; j.mu is held.
func (j *quantJob) release() {
	quantBufs.Put(j.cache)
	j.cache = nil
}

// companionAt serves output i (a scale) once Prepare has computed it.
type companionAt struct {
	j *quantJob
	i int
}

func (r companionAt) ReadAt(p []byte, off int64) (int, error) {
	if err := r.j.prepare(); err != nil {
		return 0, err
	}
	return bytes.NewReader(r.j.q.Companion(r.i)).ReadAt(p, off)
}

// sourceRows reads the rows of a weight --quantize quantizes, as float32:
// the first pass (the quantizer's Prepare, which asks for every row once,
// in ascending ranges) streams the tensor through the checked read every
// convert read goes through (sourceChecks.tensorReader: the input's
// CRC32 and recorded digest computed as the bytes pass, compared at the
// end), so damaged input fails the conversion with the error a plain
// convert gives; the second pass (the codes, in chunks, any order) reads
// the same rows in place through the storage's ReaderAt. Neither holds
// more than the rows asked for.
type sourceRows struct {
	ctx    context.Context
	t      *statedict.Tensor
	sc     *sourceChecks
	cols   int64
	es     int64
	rows   int64
	mu     sync.Mutex
	cond   *sync.Cond
	next   int64 // the first row the stream has not given
	rc     io.ReadCloser
	cr     *checkedReader
	done   bool // the stream was read to its end and verified
	err    error
	raOnce sync.Once
	ra     io.ReaderAt
	raErr  error
}

// rowReader returns the RowReader of a contiguous little-endian float
// tensor, or why it cannot be read by rows.
func rowReader(ctx context.Context, sc *sourceChecks, t *statedict.Tensor, cols int64) (quant.RowReader, string) {
	if !t.IsContiguous() || t.Storage == nil || t.Storage.BigEndian && t.DType.Size() > 1 {
		return nil, "not a contiguous little-endian tensor"
	}
	s := &sourceRows{ctx: ctx, t: t, sc: sc, cols: cols, es: int64(t.DType.Size()), rows: t.NumEl() / max(cols, 1)}
	s.cond = sync.NewCond(&s.mu)
	return s.read, ""
}

func (s *sourceRows) read(dst []float32, r0, r1 int64) error {
	bp := quantBufs.Get(int((r1 - r0) * s.cols * s.es))
	defer quantBufs.Put(bp)
	b := *bp
	streamed, err := s.stream(b, r0, r1)
	if err != nil {
		return err
	}
	if !streamed {
		if err := s.readAt(b, r0); err != nil {
			return err
		}
	}
	dtype.DecodeFloat32(s.t.DType, dst, b)
	return nil
}

// stream fills b with rows [r0, r1) from the checked stream when they are
// its next rows (waiting for the ranges before them), and reports false
// once the stream is done or for rows it has passed.
func (s *sourceRows) stream(b []byte, r0, r1 int64) (bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for !s.done && s.err == nil && r0 > s.next {
		s.cond.Wait()
	}
	if s.err != nil {
		return false, s.err
	}
	if s.done || r0 < s.next {
		return false, nil
	}
	defer s.cond.Broadcast()
	if s.rc == nil {
		rc, cr, err := s.sc.tensorReader(s.ctx, s.t, true)
		if err != nil {
			s.err = err
			return false, err
		}
		s.rc, s.cr = rc, cr
	}
	if _, err := io.ReadFull(ctxReader{s.ctx, s.rc}, b); err != nil {
		if err == io.EOF {
			err = io.ErrUnexpectedEOF
		}
		s.rc.Close()
		s.err = &TensorError{Name: s.t.Name, Err: err}
		return false, s.err
	}
	s.next = r1
	if s.next >= s.rows {
		s.rc.Close()
		// Opened as a cast: the reader computed the digest itself.
		if err := s.cr.verify(0); err != nil {
			s.err = err
			return false, err
		}
		s.done = true
	}
	return true, nil
}

// damagedInput returns the input's ErrDamaged error (the tensor whose
// checksum failed) when err, a failure to write an output tensor, came
// from it: --quantize reads its input while it computes a stored tensor
// the writer is reading, and the refusal should read as a plain
// convert's, not as a failure to write that tensor. nil otherwise.
func damagedInput(err error) error {
	var te *TensorError
	if !errors.Is(err, ErrDamaged) || !errors.As(err, &te) {
		return nil
	}
	for {
		var inner *TensorError
		if !errors.As(te.Err, &inner) {
			return te
		}
		te = inner
	}
}

// readAt reads rows from r0 in place (the second pass).
func (s *sourceRows) readAt(b []byte, r0 int64) error {
	s.raOnce.Do(func() { s.ra, s.raErr = s.t.Storage.ReaderAt() })
	if s.raErr != nil {
		return &TensorError{Name: s.t.Name, Err: s.raErr}
	}
	begin, _ := s.t.Span()
	if _, err := s.ra.ReadAt(b, begin+r0*s.cols*s.es); err != nil {
		if err == io.EOF {
			err = io.ErrUnexpectedEOF
		}
		return &TensorError{Name: s.t.Name, Err: err}
	}
	return nil
}

// applyQuantize returns a copy of ck whose quantizable weights are
// replaced by the scheme's stored tensors, and the report. The copy has no
// object tree (a .pth output is a flat state dict).
func (c *config) applyQuantize(ctx context.Context, ck *statedict.Checkpoint) (*statedict.Checkpoint, error) {
	src := c.checks // the input's checks, which the source rows stream through
	spec := *c.quantize
	rep := &QuantizeReport{Scheme: spec.Scheme, Skipped: []Dropped{}}
	if c.quantSame {
		rep.Scheme = specText(spec)
	}
	names := map[string]bool{}
	for _, t := range ck.Tensors {
		names[t.Name] = true
	}
	var tensors, asIs []*statedict.Tensor // asIs: stored tensors kept as they are (WithQuantizeSame)
	var derived []*statedict.Storage
	for _, t := range ck.Tensors {
		if c.quantSame && c.selected(t.Name) && t.QuantStored != nil && c.transformed[t.Storage] != t {
			st, err := asStored(t)
			if err != nil {
				return nil, err
			}
			tensors, asIs = append(tensors, st...), append(asIs, st...)
			rep.Quantized++
			rep.Copied++
			continue
		}
		if !c.selected(t.Name) || !t.DType.IsFloat() || t.Layout != statedict.Strided || t.Meta {
			tensors = append(tensors, t)
			continue
		}
		if c.quantSame && t.QuantStored == nil {
			rep.Skipped = append(rep.Skipped, Dropped{Name: t.Name, Type: "tensor", Reason: "stored unquantized in the input"})
			tensors = append(tensors, t)
			continue
		}
		q, why := quant.NewQuantizer(spec, t.Name, t.DType, t.Shape, c.quantIgnore)
		var read quant.RowReader
		if why == "" {
			var w string
			if read, w = c.quantRows(ctx, src, t, q.Cols()); w != "" {
				why = quant.Skip(w)
			}
		}
		if why != "" && c.quantSame {
			return nil, &TensorError{Name: t.Name, Err: fmt.Errorf("%w: the input stores it quantized, and %s leaves it unquantized: %s", ErrQuantizeSame, spec.Scheme, why)}
		}
		if why != "" {
			rep.Skipped = append(rep.Skipped, Dropped{Name: t.Name, Type: "tensor", Reason: string(why)})
			tensors = append(tensors, t)
			continue
		}
		var keep []*statedict.Tensor // the input's activation scales (WithQuantizeSame)
		if c.quantSame {
			var err error
			if keep, err = sameOutputs(t, q); err != nil {
				return nil, err
			}
		}
		j := &quantJob{q: q, read: read}
		j.perRows = max(1, (8<<20)/max(1, q.Cols()*q.RowAlign())) * q.RowAlign()
		_, j.perSize = q.CodeSpan(0, j.perRows)
		for i, o := range q.Outputs() {
			if o.Name != t.Name && names[o.Name] {
				return nil, &TensorError{Name: t.Name, Err: fmt.Errorf("%w: quantized as %s it needs %q, which the input already has", ErrCollision, spec.Scheme, o.Name)}
			}
			size := quant.Stored{Shape: o.Shape}.NumEl() * int64(o.DType.Size())
			var r io.ReaderAt = companionAt{j, i}
			if i == 0 {
				r = codesAt{j}
			}
			nt := statedict.NewDerivedTensor(o.Name, o.DType, o.Shape, r, size, t)
			tensors = append(tensors, nt)
			derived = append(derived, nt.Storage)
		}
		tensors, asIs = append(tensors, keep...), append(asIs, keep...)
		rep.Quantized++
	}
	if rep.Quantized == 0 {
		var why []string
		for _, s := range rep.Skipped[:min(len(rep.Skipped), 3)] {
			why = append(why, strconv.Quote(s.Name)+": "+s.Reason)
		}
		if len(rep.Skipped) > 3 {
			why = append(why, "...")
		}
		return nil, fmt.Errorf("%w: --quantize %s: no tensor to quantize (%d float tensors skipped: %s)", ErrNothing, spec.Scheme, len(rep.Skipped), strings.Join(why, "; "))
	}
	cp := *ck
	cp.Root = nil
	cp.Tensors = tensors
	kept := map[*statedict.Storage]bool{}
	for _, t := range tensors {
		kept[t.Storage] = true
	}
	cp.Storages = nil
	for _, s := range ck.Storages {
		if kept[s] {
			cp.Storages = append(cp.Storages, s)
		}
	}
	listed := map[*statedict.Storage]bool{}
	for _, s := range cp.Storages {
		listed[s] = true
	}
	for _, t := range asIs { // stored tensors kept: never cast either
		if !listed[t.Storage] {
			listed[t.Storage] = true
			derived = append(derived, t.Storage)
		}
	}
	cp.Storages = append(cp.Storages, derived...)
	c.quantKeep = map[*statedict.Storage]bool{}
	for _, s := range derived {
		c.quantKeep[s] = true
	}
	for _, t := range asIs {
		c.quantKeep[t.Storage] = true
	}
	c.quantReport = rep
	return &cp, nil
}

// quantConfig is the quantization_config block of spec for the weights
// the report skipped, as each upstream writes it.
func quantConfig(spec quant.QuantizeSpec, rep *QuantizeReport) map[string]any {
	var ignore []string
	for _, s := range rep.Skipped {
		if len(s.Name) > 7 && s.Name[len(s.Name)-7:] == ".weight" {
			ignore = append(ignore, quant.ModuleOf(s.Name))
		}
	}
	if ignore == nil {
		ignore = []string{}
	}
	ct := func(format string, weights map[string]any) map[string]any {
		return map[string]any{
			"quant_method": "compressed-tensors", "format": format, "quantization_status": "compressed",
			"config_groups": map[string]any{"group_0": map[string]any{
				"targets": []string{"Linear"}, "weights": weights, "input_activations": nil, "output_activations": nil, "format": format}},
			"ignore": ignore,
		}
	}
	switch spec.Scheme {
	case quant.SchemeFP8Block:
		return map[string]any{"quant_method": "fp8", "fmt": "e4m3", "activation_scheme": "dynamic", "weight_block_size": []int64{spec.Block[0], spec.Block[1]}}
	case quant.SchemeFP8Channel:
		return ct("float-quantized", map[string]any{"num_bits": 8, "type": "float", "strategy": "channel", "symmetric": true, "dynamic": false, "observer": "minmax"})
	case quant.SchemeNVFP4:
		return ct("nvfp4-pack-quantized", map[string]any{"num_bits": 4, "type": "float", "strategy": "tensor_group", "group_size": 16, "symmetric": true, "dynamic": false, "observer": "minmax"})
	case quant.SchemeMXFP4:
		return map[string]any{"quant_method": "mxfp4", "modules_to_not_convert": []string{"model.layers.*.self_attn", "model.layers.*.mlp.router", "model.embed_tokens", "lm_head"}}
	}
	return nil
}

// quantConfigPath is where a directory output's config.json goes, "" for
// a single-file output or a Destination.
func (c *config) quantConfigPath(out string) string {
	if c.quantize == nil || c.dest != nil {
		return ""
	}
	switch {
	case c.isDir(out):
		return filepath.Join(out, "config.json")
	case len(out) > 11 && out[len(out)-11:] == ".index.json":
		return filepath.Join(filepath.Dir(out), "config.json")
	}
	return ""
}

// writeQuantConfig writes config.json: the input's, with its
// quantization_config replaced (and a torch_dtype kept), or one holding
// only the block.
func (c *config) writeQuantConfig(ck *statedict.Checkpoint, path string) error {
	m := map[string]any{}
	if len(ck.ModelConfig) > 0 {
		if err := json.Unmarshal(ck.ModelConfig, &m); err != nil || m == nil {
			m = map[string]any{}
		}
	}
	if v := m["quantization_config"]; v == nil || !c.quantSame {
		// WithQuantizeSame keeps the input's block, which still describes
		// every weight: the quantized ones are stored as they were.
		m["quantization_config"] = quantConfig(*c.quantize, c.quantReport)
	}
	b, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return err
	}
	f, err := atomicfile.Create(path, nil)
	if err != nil {
		return err
	}
	if _, err := f.Writer().Write(append(b, '\n')); err != nil {
		f.Discard()
		return err
	}
	if err := f.Finish(); err != nil {
		f.Discard()
		return err
	}
	return f.Commit(c.force)
}

// checkQuantConfig refuses an existing config.json without WithForce.
func (c *config) checkQuantConfig(path string) error {
	if path == "" || c.force {
		return nil
	}
	if _, err := os.Lstat(path); err == nil {
		return fmt.Errorf("%w: %s", ErrExists, path)
	}
	return nil
}

// convertQuantized is Convert with WithQuantize: the weights are
// replaced by their quantized tensors, the output written, then a
// directory output's config.json.
func (c *config) convertQuantized(ctx context.Context, o output, ck *statedict.Checkpoint, out string, start time.Time) (*Summary, error) {
	switch o.(type) {
	case safetensorsOut, pthOut:
	default:
		return nil, fmt.Errorf("%w: --quantize writes safetensors or .pth (GGUF has its own types: --gguf-type)", ErrOption)
	}
	if c.dcpOpt.part.Count > 1 {
		return nil, fmt.Errorf("%w: --quantize and --part cannot be combined", ErrOption)
	}
	cfgPath := c.quantConfigPath(out)
	if err := c.checkQuantConfig(cfgPath); err != nil {
		return nil, err
	}
	qck, err := c.applyQuantize(ctx, ck)
	if err != nil {
		return nil, err
	}
	c.checks = newSourceChecks(qck)
	sum, err := o.convert(ctx, c, qck, out, start)
	if err != nil {
		return nil, err
	}
	if cfgPath != "" {
		if err := c.writeQuantConfig(ck, cfgPath); err != nil {
			return nil, fmt.Errorf("convert: write %s: %w", cfgPath, err)
		}
		c.quantReport.Config = cfgPath
	}
	sum.Quantize = c.quantReport
	return sum, nil
}

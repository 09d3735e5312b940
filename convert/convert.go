package convert

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"strings"
	"time"

	"github.com/ckpt-dev/ckpt/dtype"
	"github.com/ckpt-dev/ckpt/internal/atomicfile"
	"github.com/ckpt-dev/ckpt/statedict"
)

// Summary reports what Convert wrote.
type Summary struct {
	Format Format `json:"format"`
	// Structure is "tree" when a .pth output keeps the source's object tree
	// (nested dicts, lists, tuples, int keys, as saved), or a DCP output
	// the nesting torch's dcp.save gives it (planner_data), and "flat" for a
	// flat state dict of dotted names (safetensors, and .pth output renamed,
	// filtered or sharded, or from a source without a tree).
	Structure string            `json:"structure"`
	Files     []string          `json:"files"`           // output files, shards in order
	Index     string            `json:"index,omitempty"` // index.json of sharded output
	Tensors   int               `json:"tensors"`         // tensors written
	Bytes     int64             `json:"bytes"`           // tensor data bytes written
	Aliases   map[string]string `json:"aliases"`         // safetensors: dropped alias -> kept name
	Casts     int               `json:"casts"`           // tensors written in another dtype
	Renamed   int               `json:"renamed"`         // tensors whose name changed
	Values    []string          `json:"values"`          // non-tensor values kept
	// Floats counts the float values kept in .pth output: torch.load with
	// weights_only=True reads them on torch 2.0 and later, not on 1.13.
	Floats int `json:"floats"`
	// Torch2Values counts the other kept values of .pth output that torch
	// 1.13's weights_only loader cannot read (bytes, sets, complex numbers,
	// torch.device), which torch 2.x's allowlist names.
	Torch2Values int `json:"torch2_values"`
	// Torch2DTypes lists the dtypes of .pth output tensors that only torch
	// 2.x has (float8 from 2.1, uint16-64 from 2.3, ...), written as torch
	// 2.x writes them; torch 1.13 cannot load such an output.
	Torch2DTypes []string `json:"torch2_dtypes"`
	// RecentCodes lists the safetensors dtype codes written that older
	// readers refuse the whole file for (safetensors.Recent).
	RecentCodes []string  `json:"recent_safetensors_codes"`
	Dropped     []Dropped `json:"dropped"` // what the output does not carry
	// GGUF says what a GGUF output of a Hugging Face model directory got
	// (architecture, names, permutation, notes); nil otherwise.
	GGUF *GGUFReport `json:"gguf,omitempty"`
	// GGUFTypes says which ggml types a GGUF output's tensors got and
	// why some are not WithGGUFType's; nil for other outputs.
	GGUFTypes *GGUFTypes `json:"gguf_types,omitempty"`
	// Quantize says what WithQuantize quantized and left as it was; nil
	// without it.
	Quantize *QuantizeReport `json:"quantize,omitempty"`
	// Synced is true when every output was on the disk (WithSync) or
	// acknowledged by its object store before Convert returned; false when
	// local outputs were left to the kernel's write-back (see WithSync).
	Synced  bool    `json:"synced"`
	Seconds float64 `json:"seconds"`
}

// layout is where the output goes.
type layout struct {
	format Format
	out    fileOutput // the format's writer; nil for DCP
	dir    string
	single string // path of a single output file ("" when sharded)
	stem   string // shard name stem: "model", "pytorch_model"
	ext    string // shard extension: ".safetensors", ".bin"
	index  string // index path ("" when single)
	// indexTarget is where the index is written: index, or the file
	// it links to.
	indexTarget string
	indexed     bool // an index was asked for explicitly
	mkdir       bool // dir may be created (a directory or an index was named)
}

// isDir reports whether out names a directory: an existing one, or a
// name ending in a separator (a Destination's prefix, or "").
func (c *config) isDir(out string) bool {
	if c.dest != nil {
		return out == "" || strings.HasSuffix(out, "/")
	}
	fi, err := os.Stat(out)
	return err == nil && fi.IsDir() || strings.HasSuffix(out, string(os.PathSeparator))
}

// resolveLayout works out the output paths of format f written by o.
func resolveLayout(out string, c *config, f Format, o fileOutput) (*layout, error) {
	l := &layout{format: f, out: o}
	p := c.paths()
	l.stem, l.ext = o.names()
	if err := o.checkLayout(c, out); err != nil {
		return nil, err
	}
	switch {
	case c.isDir(out):
		if c.compress != "" {
			return nil, fmt.Errorf("%w: --compress needs a file name, not a directory", ErrOption)
		}
		l.dir, l.mkdir = out, true
		l.single = p.join(out, l.stem+l.ext)
	case strings.HasSuffix(out, ".index.json"):
		if c.compress != "" {
			return nil, fmt.Errorf("%w: --compress cannot write sharded output", ErrOption)
		}
		l.dir, l.indexed, l.mkdir = p.dir(out), true, true
		base := strings.TrimSuffix(p.base(out), ".index.json")
		l.stem, l.ext = strings.TrimSuffix(base, p.ext(base)), p.ext(base)
		l.index = out
	default:
		l.dir, l.single = p.dir(out), out
		if c.shard > 0 {
			base := strings.TrimSuffix(p.base(out), ".zst")
			l.stem, l.ext = strings.TrimSuffix(base, p.ext(base)), p.ext(base)
		}
	}
	return l, nil
}

// pathOps are the path functions of the output's names: the file
// system's, or slash paths for a Destination.
type pathOps struct {
	join           func(...string) string
	dir, base, ext func(string) string
}

func (c *config) paths() pathOps {
	if c.dest != nil {
		return pathOps{path.Join, path.Dir, path.Base, path.Ext}
	}
	return pathOps{filepath.Join, filepath.Dir, filepath.Base, filepath.Ext}
}

// makeDir creates the output directory when it is missing and may be
// created, and returns a function that removes what it created, if still
// empty, for when the conversion fails. A missing directory for a single
// file is an error, as for cp.
func (l *layout) makeDir() (undo func(), err error) {
	if fi, err := os.Stat(l.dir); err == nil {
		if !fi.IsDir() {
			return nil, fmt.Errorf("convert: output directory %s: not a directory", l.dir)
		}
		return func() {}, nil
	}
	if !l.mkdir {
		return nil, fmt.Errorf("convert: output directory %s does not exist", l.dir)
	}
	var created []string // the missing ancestors, innermost first
	for d := filepath.Clean(l.dir); ; d = filepath.Dir(d) {
		if _, err := os.Lstat(d); err == nil || d == filepath.Dir(d) {
			break
		}
		created = append(created, d)
	}
	if err := os.MkdirAll(l.dir, 0o755); err != nil {
		return nil, fmt.Errorf("convert: create output directory: %w", err)
	}
	return func() {
		for _, d := range created {
			os.Remove(d) // fails, as it should, if something else is in it
		}
	}, nil
}

// shards splits the items into groups of at most max bytes, keeping
// tensors of one storage together for .pth output.
func shards(items []*item, max int64, byStorages bool) [][]*item {
	if max <= 0 {
		return [][]*item{items}
	}
	type unit struct {
		items []*item
		size  int64
	}
	var units []*unit
	byStorage := map[*statedict.Storage]*unit{}
	for _, it := range items {
		if byStorages {
			if u, ok := byStorage[it.src.Storage]; ok {
				u.items = append(u.items, it)
				continue
			}
			u := &unit{items: []*item{it}, size: it.src.Storage.NBytes / int64(it.src.Storage.DType.Size()) * int64(it.dtype.Size())}
			byStorage[it.src.Storage] = u
			units = append(units, u)
			continue
		}
		units = append(units, &unit{items: []*item{it}, size: it.nbytes()})
	}
	var out [][]*item
	var cur []*item
	var size int64
	for _, u := range units {
		if len(cur) > 0 && size+u.size > max {
			out = append(out, cur)
			cur, size = nil, 0
		}
		cur = append(cur, u.items...)
		size += u.size
	}
	return append(out, cur)
}

// Convert writes the checkpoint ck to out, streaming tensor by tensor,
// and reports what it wrote. out is a file (format from WithFormat or its
// extension), a directory (model.safetensors or pytorch_model.bin in it,
// or shards), or a "*.index.json" path for sharded output. Everything is
// decided and checked (names, collisions, existing files) before the
// first byte is written, and nothing appears at an output path unless it
// is complete.
func Convert(ctx context.Context, ck *statedict.Checkpoint, out string, opts ...Option) (*Summary, error) {
	start := time.Now()
	c := newConfig(opts)
	if err := c.validate(); err != nil {
		return nil, err
	}
	if err := c.validatePart(); err != nil {
		return nil, err
	}
	if err := c.checkLocal(out); err != nil {
		return nil, err
	}
	c.checks = newSourceChecks(ck)
	if err := c.planTransforms(ck); err != nil {
		return nil, err
	}
	if err := c.resolveSame(ck); err != nil {
		return nil, err
	}
	c.initWriteBack()
	o, err := c.pickOutput(out)
	if err != nil {
		return nil, err
	}
	if c.quantize == nil {
		return o.convert(ctx, c, ck, out, start)
	}
	return c.convertQuantized(ctx, o, ck, out, start)
}

// convertFiles is Convert for the file outputs (fileOutput): one file, or
// shards and an index, of format f written by o.
func (c *config) convertFiles(ctx context.Context, ck *statedict.Checkpoint, out string, start time.Time, f Format, o fileOutput) (*Summary, error) {
	l, err := resolveLayout(out, c, f, o)
	if err != nil {
		return nil, err
	}
	if c.ggufKeep, err = ggufSource(ck); err != nil {
		return nil, err
	}
	if err := o.prepare(c, ck); err != nil {
		return nil, err
	}
	p, err := makePlan(ck, c, f)
	if err != nil {
		return nil, err
	}
	if c.quantize == nil { // --quantize writes its own config.json (convertQuantized)
		if c.modelConfig, err = outputModelConfig(ck, c.dtype); err != nil {
			return nil, err
		}
	}
	if err := o.checkPlan(c, ck, p.items); err != nil {
		return nil, err
	}
	groups := shards(p.items, c.shard, o.storageShards())
	var finals []string
	if len(groups) == 1 && !l.indexed {
		finals = []string{l.single}
		l.index = ""
	} else {
		for i := range groups {
			finals = append(finals, c.paths().join(l.dir, fmt.Sprintf("%s-%05d-of-%05d%s", l.stem, i+1, len(groups), l.ext)))
		}
		if l.index == "" {
			l.index = c.paths().join(l.dir, l.stem+l.ext+".index.json")
		}
	}
	if err := c.checkPart(l); err != nil {
		return nil, err
	}
	if c.dest != nil {
		return c.convertTo(ctx, start, p, l, groups, finals)
	}
	// Where each output goes: only a missing or regular file is
	// replaced; a symbolic link is written through (see atomicfile.ResolveTarget).
	targets := make([]string, len(finals))
	for i, f := range append(append([]string{}, finals...), l.index) {
		if f == "" {
			continue
		}
		if c.dcpOpt.part.skips(i, len(finals)) { // another part's (--part)
			continue
		}
		target, err := atomicfile.ResolveTarget(f)
		if err != nil {
			return nil, err
		}
		if _, err := os.Lstat(f); !c.force && err == nil {
			return nil, fmt.Errorf("%w: %s", ErrExists, f)
		}
		if i < len(finals) {
			targets[i] = target
		} else {
			l.indexTarget = target
		}
	}
	sum := newSummary(p, l)
	sum.GGUF = c.ggufArch.summary()
	sum.GGUFTypes = c.ggufTypes
	undoDir, err := l.makeDir()
	if err != nil {
		return nil, err
	}
	for _, f := range append(append([]string{}, targets...), l.indexTarget) {
		if f != "" {
			atomicfile.RemoveStale(f)
		}
	}
	var temps []*tempFile
	var total int64
	committed := false
	defer func() {
		for _, t := range temps {
			t.discard()
		}
		if !committed {
			undoDir()
		}
	}()
	temps, total, err = c.writeOutputs(ctx, p, l, groups, targets, finals, l.indexTarget)
	if err != nil {
		return nil, err
	}
	for i, t := range temps { // shards first, the index last
		if i == len(temps)-1 && l.index != "" && c.dcpOpt.part.Index == 0 {
			if err := c.waitOtherParts(ctx, p, l, groups, finals); err != nil {
				return nil, err
			}
		}
		if err := t.commit(c.force); err != nil {
			return nil, err
		}
	}
	committed = true
	sum.tally(p, l)
	sum.Files, sum.Bytes = c.dcpOpt.part.own(finals), total
	sum.Synced, sum.Seconds = c.synced(), time.Since(start).Seconds()
	return sum, nil
}

// newSummary starts the Summary of a conversion.
func newSummary(p *plan, l *layout) *Summary {
	sum := &Summary{Format: l.format, Structure: "flat", Aliases: p.aliases, Dropped: p.dropped, Index: l.index, Values: []string{}}
	if sum.Dropped == nil {
		sum.Dropped = []Dropped{}
	}
	for _, v := range p.values {
		sum.Values = append(sum.Values, v.name)
		if _, ok := v.v.(float64); ok && outputs[l.format].countsFloats() {
			sum.Floats++
		}
	}
	if p.tree != nil {
		sum.Structure = "tree"
		sum.Floats, sum.Torch2Values = p.tree.floats, p.tree.newer
	}
	return sum
}

// tally counts the tensors written, casts, renames and the dtypes older
// readers lack.
func (sum *Summary) tally(p *plan, l *layout) {
	sum.Torch2DTypes, sum.RecentCodes = []string{}, []string{}
	o := outputs[l.format]
	newDTypes := map[dtype.DType]bool{}
	for _, it := range p.items {
		if !newDTypes[it.dtype] {
			o.tally(sum, it.dtype)
			newDTypes[it.dtype] = true
		}
		sum.Tensors++
		if it.dtype != it.src.DType {
			sum.Casts++
		}
		if it.name != it.src.Name {
			sum.Renamed++
		}
	}
}

// writeFile writes one output file to a finished (synced, closed)
// temporary file, which the caller commits or discards.
func (c *config) writeFile(ctx context.Context, final string, o fileOutput, items []*item, values []value, tr *tree, md map[string]string) (*tempFile, int64, error) {
	var head int64
	if c.dest != nil {
		var err error
		if head, err = o.headLen(c, items, md); err != nil {
			return nil, 0, writeErr(c.destName(final), err)
		}
	}
	t, err := c.create(ctx, final, head)
	if err != nil {
		return nil, 0, err
	}
	final = t.final
	n, err := o.write(ctx, c, t, items, values, tr, md)
	if err != nil {
		if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
			return t, 0, fmt.Errorf("convert: interrupted; %s not written: %w", final, err)
		}
		var te *TensorError
		if errors.As(err, &te) || strings.HasPrefix(err.Error(), "convert:") {
			return t, 0, err
		}
		return t, 0, writeErr(final, err)
	}
	return t, n, t.finish()
}

// writeOutputs writes every shard (groups[i] to outs[i], named finals[i]
// in the index; several at once where shardConcurrency allows) and then
// the index, when the layout has one, to index; it
// returns the finished outputs, shards first, for the caller to commit,
// and those made so far on error, for the caller to discard.
func (c *config) writeOutputs(ctx context.Context, p *plan, l *layout, groups [][]*item, outs, finals []string, index string) ([]*tempFile, int64, error) {
	md, err := l.out.metadata(c, p)
	if err != nil {
		return nil, 0, err
	}
	temps, sizes, err := c.writeShards(ctx, p, l, groups, outs, md, c.shardConcurrency(l, groups))
	if err != nil {
		return temps, 0, err
	}
	weightMap := map[string]string{}
	var total int64
	for i, g := range groups {
		total += sizes[i]
		for _, it := range g {
			weightMap[it.name] = path.Base(filepath.ToSlash(finals[i]))
		}
	}
	if c.modelConfig != nil && (l.mkdir || l.index != "") && c.dcpOpt.part.Index == 0 {
		// A directory output's config.json (modelconfig.go), before the index.
		t, err := c.writeSmall(ctx, c.paths().join(l.dir, "config.json"), c.modelConfig)
		if t != nil {
			temps = append(temps, t)
		}
		if err != nil {
			return temps, 0, err
		}
	}
	if l.index == "" || c.dcpOpt.part.Index != 0 {
		return temps, total, nil
	}
	b, err := json.MarshalIndent(map[string]any{"metadata": map[string]any{"total_size": total}, "weight_map": weightMap}, "", "  ")
	if err != nil {
		return temps, 0, err
	}
	t, err := c.create(ctx, index, 0)
	if err != nil {
		return temps, 0, err
	}
	temps = append(temps, t)
	bw := c.output(t)
	if _, err := bw.Write(append(b, '\n')); err != nil {
		return temps, 0, writeErr(c.destName(l.index), err)
	}
	if err := bw.Flush(); err != nil {
		return temps, 0, writeErr(c.destName(l.index), err)
	}
	return temps, total, t.finish()
}

// destName returns how messages name the output final.
func (c *config) destName(final string) string {
	if c.dest == nil {
		return final
	}
	return c.dest.Name(final)
}

// convertTo is Convert's second half for a Destination: the outputs are
// checked, written, and committed at the end (shards first, the index
// last); on failure the outputs not committed are aborted and those
// committed removed.
func (c *config) convertTo(ctx context.Context, start time.Time, p *plan, l *layout, groups [][]*item, finals []string) (*Summary, error) {
	if !c.force {
		for i, f := range append(append([]string{}, finals...), l.index) {
			if f == "" || c.dcpOpt.part.skips(i, len(finals)) { // another part's (--part)
				continue
			}
			ok, err := c.dest.Exists(ctx, f)
			if err != nil {
				return nil, err
			}
			if ok {
				return nil, fmt.Errorf("%w: %s", ErrExists, c.dest.Name(f))
			}
		}
	}
	sum := newSummary(p, l)
	sum.GGUF = c.ggufArch.summary()
	sum.GGUFTypes = c.ggufTypes
	temps, total, err := c.writeOutputs(ctx, p, l, groups, finals, finals, l.index)
	defer func() {
		for _, t := range temps {
			t.discard()
		}
	}()
	if err != nil {
		return nil, err
	}
	for i, t := range temps { // shards first, the index last
		var err error
		if i == len(temps)-1 && l.index != "" && c.dcpOpt.part.Index == 0 {
			// Once the other parts' shards are there (--part).
			err = c.waitOtherParts(ctx, p, l, groups, finals)
		}
		if err == nil {
			err = t.out.Commit(ctx)
		}
		if err != nil {
			rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
			defer cancel()
			for _, done := range temps[:i] {
				c.dest.Remove(rctx, done.key)
			}
			if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
				return nil, fmt.Errorf("convert: interrupted; %s not written: %w", t.final, err)
			}
			return nil, err
		}
		t.out = nil // committed: nothing to discard
	}
	sum.tally(p, l)
	sum.Files = []string{}
	for _, f := range c.dcpOpt.part.own(finals) {
		sum.Files = append(sum.Files, c.dest.Name(f))
	}
	if l.index != "" {
		sum.Index = c.dest.Name(l.index)
	}
	sum.Bytes = total
	sum.Synced, sum.Seconds = c.synced(), time.Since(start).Seconds()
	return sum, nil
}

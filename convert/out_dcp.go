package convert

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/ckpt-dev/ckpt/dcp"
	"github.com/ckpt-dev/ckpt/statedict"
)

// DCP is torch.distributed.checkpoint's FileSystemWriter layout: a
// directory with .metadata and __R_0.distcp files (see WithDCPRanks). A
// nested input ({"model": ..., "optim": ...} saved with torch.save, or a
// DCP directory) keeps its nesting: the fqns, planner_data paths and
// whole-leaf values torch's default save planner would give it
// (Summary.Structure "tree"; docs/dcp-write.md).
const DCP Format = "dcp"

// dcpOut writes DCP directories through package dcp's Writer: one file
// per rank and the .metadata, not the shards of convertFiles (or the
// safetensors layout, out_dcp_safetensors.go).
type dcpOut struct{ baseOutput }

func (dcpOut) convert(ctx context.Context, c *config, ck *statedict.Checkpoint, out string, start time.Time) (*Summary, error) {
	return c.convertDCP(ctx, ck, out, start)
}

func (dcpOut) unsupported(t *statedict.Tensor) string { return unsupportedTorch(t) }

func (dcpOut) value(v any, dropFloats bool) (any, string) { return plainValue(v, false, dropFloats) }

// dcpOptions are the options of a DCP output and of split (--part)
// conversions.
type dcpOptions struct {
	ranks    int                   // WithDCPRanks
	split    []statedict.SplitRule // WithSplit
	part     Part                  // WithPart
	partWait time.Duration         // WithPartWait
	// serialization is WithDCPSerialization's layout.
	serialization DCPSerialization
}

// WithDCPRanks makes a DCP output as ranks processes of
// torch.distributed.checkpoint.save would write it: one file
// __R_0.distcp per rank R, tensors spread over the ranks by a
// deterministic plan balancing their bytes (largest first, each to the
// rank with the fewest bytes so far; ties to the lowest rank), or split
// into chunks by WithSplit. Default 1.
func WithDCPRanks(ranks int) Option { return func(c *options) { c.dcpOpt.ranks = ranks } }

// WithSplit splits, in a DCP output of several ranks, each tensor a rule
// matches along the rule's dimension into one chunk per rank, placed as
// torch.chunk and DTensor's Shard place them (statedict.ChunkRange), as a
// tensor-parallel model saves them; chunk R goes to rank R.
func WithSplit(rules []statedict.SplitRule) Option {
	return func(c *options) { c.dcpOpt.split = rules }
}

// DCPSerialization is how a DCP output stores its tensors (--dcp-format).
type DCPSerialization string

const (
	// DCPTorchSave is FileSystemWriter's default layout: .metadata and
	// __R_0.distcp files of torch.save zips.
	DCPTorchSave DCPSerialization = "torch"
	// DCPSafetensors is HuggingFaceStorageWriter's safetensors layout
	// (out_dcp_safetensors.go).
	DCPSafetensors DCPSerialization = "safetensors"
)

// WithDCPSerialization chooses the layout of a DCP output (default
// DCPTorchSave).
func WithDCPSerialization(s DCPSerialization) Option {
	return func(c *options) { c.dcpOpt.serialization = s }
}

// convertDCP is Convert for a DCP output: the directory out gets
// .metadata and one __R_0.distcp per rank.
func (c *config) convertDCP(ctx context.Context, ck *statedict.Checkpoint, out string, start time.Time) (*Summary, error) {
	if c.compress != "" || c.shard > 0 {
		return nil, fmt.Errorf("%w: a DCP output has no --compress or --max-shard-size (use --dcp-ranks)", ErrOption)
	}
	if c.dcpOpt.ranks < 0 || c.dcpOpt.ranks > 1<<16 {
		return nil, fmt.Errorf("%w: %d DCP ranks", ErrOption, c.dcpOpt.ranks)
	}
	if c.dcpOpt.serialization != "" && c.dcpOpt.serialization != DCPTorchSave {
		return c.convertDCPSafetensors(ctx, ck, out, start)
	}
	R := max(c.dcpOpt.ranks, 1)
	part := c.dcpOpt.part
	p, err := makePlan(ck, c, DCP)
	if err != nil {
		return nil, err
	}
	if err := c.nestDCP(ck, p); err != nil {
		return nil, err
	}
	w, src, err := c.dcpWriter(p)
	if err != nil {
		return nil, err
	}
	files := make([]string, R)
	for r := range files {
		files[r] = c.paths().join(out, dcp.FileName(r))
	}
	metaPath := c.paths().join(out, dcp.MetadataFile)
	writeMeta := part.Index == 0
	var check []string
	for r, f := range files {
		if part.mine(r) {
			check = append(check, f)
		}
	}
	if writeMeta {
		check = append(check, metaPath)
	}
	dst, err := c.prepareDCP(ctx, out, check) // local directory or Destination (outdir.go)
	if err != nil {
		return nil, err
	}
	defer dst.release(ctx)
	sizes := make([]int64, R) // file sizes
	var total int64
	for r := range R {
		if !part.mine(r) { // another part's: measured only
			if sizes[r], err = w.WriteRank(ctx, r, nil, src); err != nil {
				return nil, src.err(err)
			}
			continue
		}
		t, err := dst.create(ctx, files[r])
		if err != nil {
			return nil, err
		}
		dst.track(t)
		bw := c.output(t)
		if sizes[r], err = w.WriteRank(ctx, r, bw, src); err != nil {
			return nil, src.err(err)
		}
		total += src.bytes(w, r)
		if err := bw.Flush(); err != nil {
			return nil, writeErr(files[r], err)
		}
		if err := t.finish(); err != nil {
			return nil, err
		}
	}
	sum := newSummary(p, &layout{format: DCP})
	if p.nested() {
		sum.Structure = "tree"
	}
	finals, err := dst.commitPending(ctx)
	if err != nil {
		return nil, err
	}
	sum.Files = append(sum.Files, finals...)
	if writeMeta {
		if !part.whole() {
			var others []string
			var want []int64
			for r, f := range files {
				if !part.mine(r) {
					others, want = append(others, f), append(want, sizes[r])
				}
			}
			if err := c.waitFor(ctx, others, want); err != nil {
				return nil, err
			}
		}
		md, err := w.Metadata()
		if err != nil {
			return nil, err
		}
		b, err := md.Encode()
		if err != nil {
			return nil, err
		}
		if _, err := dst.writeSmall(ctx, metaPath, b); err != nil {
			return nil, err
		}
		sum.Index = c.destName(metaPath)
	}
	sum.tally(p, &layout{format: DCP})
	for _, v := range p.values {
		sum.Tensors += len(v.tensors) // written inside a value
	}
	sum.Bytes = total
	sum.Synced, sum.Seconds = c.synced(), time.Since(start).Seconds()
	dst.done = true
	return sum, nil
}

// nested reports whether a DCP output keeps some nesting of its input.
func (p *plan) nested() bool {
	for _, it := range p.items {
		if len(it.path) > 1 {
			return true
		}
	}
	for _, v := range p.values {
		if len(v.path) > 1 {
			return true
		}
	}
	return false
}

// spec is the dcp.TensorSpec of an item as a DCP output writes it.
func (it *item) spec() dcp.TensorSpec {
	return dcp.TensorSpec{DType: it.dtype, Shape: it.src.Shape, RequiresGrad: it.src.RequiresGrad}
}

// specs returns the tensor specs of a value's tensors.
func (v *value) specs() []dcp.TensorSpec {
	var out []dcp.TensorSpec
	for _, it := range v.tensors {
		out = append(out, it.spec())
	}
	return out
}

// dcpWriter plans the DCP output of p: the plan's tensors (split by
// WithSplit's rules when there are several ranks) then its values, as a
// dcp.Writer's items, and the source of their bytes. Every chunk's slice
// of its tensor is taken now, before anything is written.
func (c *config) dcpWriter(p *plan) (*dcp.Writer, *dcpSource, error) {
	R := max(c.dcpOpt.ranks, 1)
	src := &dcpSource{c: c, chunks: map[chunkKey]*item{}}
	var items []dcp.WriteItem
	for _, it := range p.items {
		wi := dcp.WriteItem{FQN: it.name, Path: it.path, Pos: it.pos, Tensor: true, Spec: it.spec()}
		if R > 1 && len(c.dcpOpt.split) > 0 && len(it.src.Shape) > 0 {
			d, err := statedict.SplitDim(c.dcpOpt.split, it.src)
			if err != nil {
				return nil, nil, err
			}
			wi.Split, wi.Dim = d >= 0, d
		}
		items = append(items, wi)
		src.items, src.values = append(src.items, it), append(src.values, nil)
	}
	for i := range p.values {
		v := &p.values[i]
		items = append(items, dcp.WriteItem{FQN: v.name, Path: v.path, Pos: v.pos, Value: v.v, ValueTensors: v.specs()})
		src.items, src.values = append(src.items, nil), append(src.values, v)
	}
	w, err := dcp.NewWriter(items, dcp.WithRanks(R), dcp.WithBufferSize(c.bufSize))
	if err != nil {
		return nil, nil, err
	}
	for r := range R {
		for _, pc := range w.Pieces(r) {
			if !items[pc.Item].Split {
				continue
			}
			it := src.items[pc.Item]
			ranges := make([]statedict.Range, len(pc.Offsets))
			for d := range ranges {
				ranges[d] = statedict.Range{Start: pc.Offsets[d], Stop: pc.Offsets[d] + pc.Sizes[d]}
			}
			s, err := it.src.Slice(ranges...)
			if err != nil {
				return nil, nil, err
			}
			src.chunks[chunkKey{pc.Item, pc.Rank}] = &item{name: it.name, src: s, dtype: it.dtype}
		}
	}
	return w, src, nil
}

// chunkKey names the chunk of a split tensor: its item, and its rank.
type chunkKey struct{ item, rank int }

// dcpSource is the dcp.Source of a DCP output: each tensor's bytes as
// itemReader gives them (cast when asked), the input's checksums checked
// when a reader is closed.
type dcpSource struct {
	c      *config
	items  []*item            // by writer item: a tensor's, nil for a value
	values []*value           // by writer item: a value's, nil for a tensor
	chunks map[chunkKey]*item // the chunks of split tensors
}

// piece returns the item whose bytes piece pc is.
func (s *dcpSource) piece(pc dcp.Piece) *item {
	if it := s.chunks[chunkKey{pc.Item, pc.Rank}]; it != nil {
		return it
	}
	return s.items[pc.Item]
}

func (s *dcpSource) Tensor(ctx context.Context, pc dcp.Piece) (io.ReadCloser, error) {
	return s.open(ctx, s.piece(pc))
}

func (s *dcpSource) ValueTensor(ctx context.Context, i, k int) (io.ReadCloser, error) {
	return s.open(ctx, s.values[i].tensors[k])
}

func (s *dcpSource) open(ctx context.Context, it *item) (io.ReadCloser, error) {
	rc, cr, err := s.c.itemReader(ctx, it)
	if err != nil {
		return nil, err
	}
	return verifyingReader{rc, cr}, nil
}

// verifyingReader closes its reader, then checks the input's checksums.
type verifyingReader struct {
	io.ReadCloser
	cr *checkedReader
}

func (v verifyingReader) Close() error {
	v.ReadCloser.Close()
	return v.cr.verify(0)
}

// bytes is the tensor data rank r's file holds (values' tensors included).
func (s *dcpSource) bytes(w *dcp.Writer, r int) int64 {
	var n int64
	if r == 0 {
		for _, v := range s.values {
			if v != nil {
				for _, it := range v.tensors {
					n += it.nbytes()
				}
			}
		}
	}
	for _, pc := range w.Pieces(r) {
		n += s.piece(pc).nbytes()
	}
	return n
}

// err gives a failure of the dcp.Writer the words of the other outputs:
// a tensor's own failure is a TensorError (or an interruption), the
// source's errors are its own, and a value's are prefixed with its name.
func (s *dcpSource) err(err error) error {
	var ie *dcp.ItemError
	if !errors.As(err, &ie) {
		return err
	}
	interrupted := errors.Is(ie.Err, context.Canceled) || errors.Is(ie.Err, context.DeadlineExceeded)
	if it := s.items[ie.Item]; it != nil {
		switch {
		case ie.FromSource:
			return ie.Err
		case interrupted:
			return fmt.Errorf("convert: interrupted: %w", ie.Err)
		}
		return &TensorError{Name: it.name, Err: ie.Err}
	}
	v, e := s.values[ie.Item], ie.Err
	switch {
	case ie.FromSource:
	case interrupted:
		e = fmt.Errorf("convert: interrupted: %w", e)
	case ie.Tensor >= 0:
		e = &TensorError{Name: v.tensors[ie.Tensor].src.Name, Err: e}
	}
	var te *TensorError
	if errors.As(e, &te) || errors.Is(e, context.Canceled) || errors.Is(e, context.DeadlineExceeded) {
		return e
	}
	return fmt.Errorf("convert: value %q: %w", v.name, e)
}

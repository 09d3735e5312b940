package convert

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sort"
	"time"

	"github.com/ckpt-dev/ckpt/dcp"
	"github.com/ckpt-dev/ckpt/statedict"
)

// DCP writing (issue 23): Convert with WithFormat(DCP) writes a directory
// in torch.distributed.checkpoint's FileSystemWriter layout (package dcp).

// dcpOptions are the options of a DCP output and of split (--part)
// conversions.
type dcpOptions struct {
	ranks    int                   // WithDCPRanks
	split    []statedict.SplitRule // WithSplit
	part     Part                  // WithPart
	partWait time.Duration         // WithPartWait
	// serialization is WithDCPSerialization's layout (dcp_hf.go).
	serialization DCPSerialization
}

// Part is one process's share of a conversion split over Count processes
// (ckpt convert --part I/N): process Index writes only its own output
// files, chosen by a deterministic plan every process computes alike, and
// process 0 writes the index (.metadata, index.json) once the other
// processes' files exist. The zero Part is a whole conversion.
type Part struct{ Index, Count int }

// whole reports whether p is a whole (unsplit) conversion.
func (p Part) whole() bool { return p.Count <= 1 }

// mine reports whether output file i (of a list of files) is this part's:
// files go round-robin, file i to part i mod Count.
func (p Part) mine(i int) bool { return p.whole() || i%p.Count == p.Index }

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

// WithPart makes Convert write only part p of a sharded output (DCP with
// several ranks, or sharded safetensors or .pth): see Part. Part 0 waits
// up to WithPartWait for the others' files before writing the index.
func WithPart(p Part) Option { return func(c *options) { c.dcpOpt.part = p } }

// DefaultPartWait is how long part 0 waits for the other parts' files.
const DefaultPartWait = time.Hour

// WithPartWait sets how long part 0 waits for the other parts' files
// before it writes the index (default DefaultPartWait); past it, Convert
// fails with ErrPartMissing.
func WithPartWait(d time.Duration) Option { return func(c *options) { c.dcpOpt.partWait = d } }

// ErrPartMissing reports that part 0 gave up waiting for a file another
// part writes.
var ErrPartMissing = errors.New("convert: another part's output is missing")

// skips reports whether file i of the outputs (n files, then the index at
// i == n) is another part's to write.
func (p Part) skips(i, n int) bool {
	if p.whole() {
		return false
	}
	if i == n {
		return p.Index != 0
	}
	return !p.mine(i)
}

// own returns the files of finals this part writes.
func (p Part) own(finals []string) []string {
	var out []string
	for i, f := range finals {
		if !p.skips(i, len(finals)) {
			out = append(out, f)
		}
	}
	return out
}

// checkPart refuses --part for outputs whose parts cannot be planned
// alone: .pth shards share storages, so their sizes need the others.
func (c *config) checkPart(l *layout) error {
	if !c.dcpOpt.part.whole() && !l.out.splits() {
		return fmt.Errorf("%w: --part splits safetensors and DCP outputs, not %s", ErrOption, l.format)
	}
	return nil
}

// waitOtherParts waits, in part 0, for the shards the other parts write
// (targets[i] of shard i, with the sizes shardSizes plans) before the
// index is committed.
func (c *config) waitOtherParts(ctx context.Context, pl *plan, l *layout, groups [][]*item, targets []string) error {
	p := c.dcpOpt.part
	if p.whole() {
		return nil
	}
	sizes, err := l.out.sizes(c, pl, groups)
	if err != nil {
		return err
	}
	var files []string
	var want []int64
	for i, f := range targets {
		if p.skips(i, len(targets)) {
			files, want = append(files, f), append(want, sizes[i])
		}
	}
	return c.waitFor(ctx, files, want)
}

// validatePart checks the Part option.
func (c *config) validatePart() error {
	p := c.dcpOpt.part
	if p.Count < 0 || p.Count > 0 && (p.Index < 0 || p.Index >= p.Count) {
		return fmt.Errorf("%w: part %d of %d", ErrOption, p.Index, p.Count)
	}
	if _, ok := c.dest.(SizeDestination); !p.whole() && c.dest != nil && !ok {
		return fmt.Errorf("%w: --part needs a destination that reports sizes (convert.SizeDestination)", ErrOption)
	}
	return nil
}

// waitFor waits until every file exists with its size (want[i] < 0: any
// size), polling, up to the part wait.
func (c *config) waitFor(ctx context.Context, files []string, want []int64) error {
	wait := c.dcpOpt.partWait
	if wait == 0 {
		wait = DefaultPartWait
	}
	deadline := time.Now().Add(wait)
	poll := 10 * time.Millisecond // doubling up to a second
	for i, f := range files {
		for {
			size, ok, err := c.outSize(ctx, f)
			if err != nil {
				return err
			}
			if ok && (want[i] < 0 || size == want[i]) {
				break
			}
			if ok && size > want[i] {
				return fmt.Errorf("%w: %s has %d bytes, the plan says %d (another conversion's output?)", ErrPartMissing, c.destName(f), size, want[i])
			}
			if time.Now().After(deadline) {
				return fmt.Errorf("%w: %s not there after %s", ErrPartMissing, c.destName(f), wait)
			}
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(poll):
			}
			poll = min(2*poll, time.Second)
		}
	}
	return nil
}

// dcpPiece is one tensor item of a DCP output: a whole tensor or a chunk.
type dcpPiece struct {
	it     *item // its src is the chunk (a statedict slice) when split
	entry  int   // index in the metadata's entries
	chunk  int   // index in the entry's chunks
	rank   int
	offset []int64
}

func (pc *dcpPiece) spec() dcp.TensorSpec {
	return dcp.TensorSpec{DType: pc.it.dtype, Shape: pc.it.src.Shape, RequiresGrad: pc.it.src.RequiresGrad}
}

// dcpPlan places the tensors of p on ranks.
// Its entries are in torch's order of the input's leaves (item and value
// pos, tensors before values where equal); valueEntry[i] is the entry of
// p.values[i].
func (c *config) dcpPlan(p *plan) (md *dcp.Metadata, pieces []*dcpPiece, valueEntry []int, err error) {
	R := max(c.dcpOpt.ranks, 1)
	md = &dcp.Metadata{}
	var whole []*dcpPiece
	load := make([]int64, R)
	type ent struct {
		it  *item
		val int // index in p.values when it is nil
		pos int
	}
	var seq []ent
	for _, it := range p.items {
		seq = append(seq, ent{it: it, pos: it.pos})
	}
	for i, v := range p.values {
		seq = append(seq, ent{val: i, pos: v.pos})
	}
	sort.SliceStable(seq, func(i, j int) bool { return seq[i].pos < seq[j].pos })
	valueEntry = make([]int, len(p.values))
	for _, en := range seq {
		it := en.it
		if it == nil {
			v := p.values[en.val]
			valueEntry[en.val] = len(md.Entries)
			md.Entries = append(md.Entries, dcp.Entry{FQN: v.name, Path: v.path, Value: dcp.Location{File: dcp.FileName(0)}})
			continue
		}
		e := dcp.Entry{FQN: it.name, Path: it.path, Tensor: true, DType: it.dtype, Size: it.src.Shape, RequiresGrad: it.src.RequiresGrad}
		ei := len(md.Entries)
		dim := -1
		if R > 1 && len(c.dcpOpt.split) > 0 && len(it.src.Shape) > 0 {
			d, err := statedict.SplitDim(c.dcpOpt.split, it.src)
			if err != nil {
				return nil, nil, nil, err
			}
			dim = d
		}
		if dim < 0 {
			pc := &dcpPiece{it: it, entry: ei, offset: make([]int64, len(it.src.Shape))}
			e.Chunks = []dcp.Chunk{{Offsets: pc.offset, Sizes: it.src.Shape}}
			pieces = append(pieces, pc)
			whole = append(whole, pc)
		} else {
			for r := range R {
				rg := statedict.ChunkRange(it.src.Shape[dim], r, R)
				if rg.Stop <= rg.Start {
					continue
				}
				ranges := make([]statedict.Range, len(it.src.Shape))
				for d, n := range it.src.Shape {
					ranges[d] = statedict.Range{Start: 0, Stop: n}
				}
				ranges[dim] = rg
				s, err := it.src.Slice(ranges...)
				if err != nil {
					return nil, nil, nil, err
				}
				off := make([]int64, len(it.src.Shape))
				off[dim] = rg.Start
				pc := &dcpPiece{it: &item{name: it.name, src: s, dtype: it.dtype}, entry: ei, chunk: len(e.Chunks), rank: r, offset: off}
				e.Chunks = append(e.Chunks, dcp.Chunk{Offsets: off, Sizes: s.Shape})
				pieces = append(pieces, pc)
				load[r] += pc.it.nbytes()
			}
		}
		md.Entries = append(md.Entries, e)
	}
	// Whole tensors: largest first, each to the least loaded rank.
	order := append([]*dcpPiece(nil), whole...)
	sort.SliceStable(order, func(i, j int) bool { return order[i].it.nbytes() > order[j].it.nbytes() })
	for _, pc := range order {
		r := 0
		for k := 1; k < R; k++ {
			if load[k] < load[r] {
				r = k
			}
		}
		pc.rank = r
		load[r] += pc.it.nbytes()
	}
	return md, pieces, valueEntry, nil
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
	md, pieces, valueEntry, err := c.dcpPlan(p)
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
	dst, err := c.prepareDCP(ctx, out, check) // local directory or Destination (dcp_dest.go)
	if err != nil {
		return nil, err
	}
	var temps []*tempFile
	done := false
	defer func() {
		for _, t := range temps {
			t.discard()
		}
		if !done {
			dst.undo(ctx)
		}
	}()
	byRank := make([][]*dcpPiece, R)
	for _, pc := range pieces {
		byRank[pc.rank] = append(byRank[pc.rank], pc)
	}
	sizes := make([]int64, R) // file sizes
	var total int64
	var order []dcp.ItemRef
	for r := range R {
		mine := part.mine(r)
		var t *tempFile
		var bw outWriter
		if mine {
			if t, err = dst.create(ctx, files[r]); err != nil {
				return nil, err
			}
			temps = append(temps, t)
			bw = c.output(t)
		}
		var off int64
		if r == 0 { // values first, as torch writes byte items first
			for i, v := range p.values {
				ei := valueEntry[i]
				var n int64
				if mine {
					n, err = c.writeDCPValue(ctx, bw, v)
					for _, it := range v.tensors {
						total += it.nbytes()
					}
				} else {
					n, err = dcp.ValueTensorsLength(v.v, v.specs())
				}
				if err != nil {
					var te *TensorError
					if errors.As(err, &te) || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
						return nil, err
					}
					return nil, fmt.Errorf("convert: value %q: %w", v.name, err)
				}
				md.Entries[ei].Value = dcp.Location{File: dcp.FileName(0), Offset: off, Length: n}
				order = append(order, dcp.ItemRef{Entry: ei})
				off += n
			}
		}
		for _, pc := range byRank[r] {
			var n int64
			if mine {
				n, err = c.writeDCPTensor(ctx, bw, pc)
				total += pc.it.nbytes()
			} else {
				n, err = dcp.TensorLength(pc.spec())
			}
			if err != nil {
				return nil, err
			}
			md.Entries[pc.entry].Chunks[pc.chunk].Location = dcp.Location{File: dcp.FileName(r), Offset: off, Length: n}
			order = append(order, dcp.ItemRef{Entry: pc.entry, Chunk: pc.chunk})
			off += n
		}
		sizes[r] = off
		if mine {
			if err := bw.Flush(); err != nil {
				return nil, writeErr(files[r], err)
			}
			if err := t.finish(); err != nil {
				return nil, err
			}
		}
	}
	md.Order = order
	sum := newSummary(p, &layout{format: DCP})
	if p.nested() {
		sum.Structure = "tree"
	}
	for _, t := range temps {
		if err := dst.commit(ctx, t); err != nil {
			return nil, err
		}
		sum.Files = append(sum.Files, t.final)
	}
	temps = nil
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
		b, err := md.Encode()
		if err != nil {
			return nil, err
		}
		t, err := dst.create(ctx, metaPath)
		if err != nil {
			return nil, err
		}
		temps = append(temps, t)
		bw := c.output(t)
		if _, err := bw.Write(b); err != nil {
			return nil, writeErr(metaPath, err)
		}
		if err := bw.Flush(); err != nil {
			return nil, writeErr(metaPath, err)
		}
		if err := t.finish(); err != nil {
			return nil, err
		}
		if err := dst.commit(ctx, t); err != nil {
			return nil, err
		}
		temps = nil
		sum.Index = c.destName(metaPath)
	}
	sum.tally(p, &layout{format: DCP})
	for _, v := range p.values {
		sum.Tensors += len(v.tensors) // written inside a value
	}
	sum.Bytes = total
	sum.Synced, sum.Seconds = c.synced(), time.Since(start).Seconds()
	done = true
	return sum, nil
}

// writeDCPTensor writes one tensor item, streaming its bytes from the
// source, and checks the source's checksums.
func (c *config) writeDCPTensor(ctx context.Context, w outWriter, pc *dcpPiece) (int64, error) {
	rc, cr, err := c.itemReader(ctx, pc.it)
	if err != nil {
		return 0, err
	}
	n, err := dcp.WriteTensor(w, pc.spec(), rc, c.bufSize)
	rc.Close()
	if err != nil {
		if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
			return 0, fmt.Errorf("convert: interrupted: %w", err)
		}
		return 0, &TensorError{Name: pc.it.name, Err: err}
	}
	if err := cr.verify(0); err != nil {
		return 0, err
	}
	return n, nil
}

// specs returns the tensor specs of a value's tensors.
func (v *value) specs() []dcp.TensorSpec {
	var out []dcp.TensorSpec
	for _, it := range v.tensors {
		out = append(out, dcp.TensorSpec{DType: it.dtype, Shape: it.src.Shape, RequiresGrad: it.src.RequiresGrad})
	}
	return out
}

// writeDCPValue writes one value item, streaming the bytes of the tensors
// it holds from the source and checking the source's checksums.
func (c *config) writeDCPValue(ctx context.Context, w outWriter, v value) (int64, error) {
	if len(v.tensors) == 0 {
		return dcp.WriteValue(w, v.v)
	}
	var open []io.Closer
	var checks []*checkedReader
	defer func() {
		for _, rc := range open {
			rc.Close()
		}
	}()
	cur := -1
	n, err := dcp.WriteValueTensors(w, v.v, v.specs(), func(i int) (io.Reader, error) {
		cur = i
		rc, cr, err := c.itemReader(ctx, v.tensors[i])
		if err != nil {
			return nil, err
		}
		open, checks = append(open, rc), append(checks, cr)
		return rc, nil
	}, c.bufSize)
	if err != nil {
		if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
			return 0, fmt.Errorf("convert: interrupted: %w", err)
		}
		if cur >= 0 {
			return 0, &TensorError{Name: v.tensors[cur].src.Name, Err: err}
		}
		return 0, err
	}
	for _, cr := range checks {
		if err := cr.verify(0); err != nil {
			return 0, err
		}
	}
	return n, nil
}

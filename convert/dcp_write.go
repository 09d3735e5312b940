package convert

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"time"

	"github.com/ckpt-dev/ckpt/dcp"
	"github.com/ckpt-dev/ckpt/statedict"
)

// DCP writing (issue 23): Convert with WithFormat(DCP) writes a directory
// in torch.distributed.checkpoint's FileSystemWriter layout (package dcp).

// DCP is torch.distributed.checkpoint's FileSystemWriter layout: a
// directory with .metadata and __R_0.distcp files (see WithDCPRanks).
const DCP Format = "dcp"

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
func WithDCPRanks(ranks int) Option { return func(c *config) { c.dcpOpt.ranks = ranks } }

// WithSplit splits, in a DCP output of several ranks, each tensor a rule
// matches along the rule's dimension into one chunk per rank, placed as
// torch.chunk and DTensor's Shard place them (statedict.ChunkRange), as a
// tensor-parallel model saves them; chunk R goes to rank R.
func WithSplit(rules []statedict.SplitRule) Option {
	return func(c *config) { c.dcpOpt.split = rules }
}

// WithPart makes Convert write only part p of a sharded output (DCP with
// several ranks, or sharded safetensors or .pth): see Part. Part 0 waits
// up to WithPartWait for the others' files before writing the index.
func WithPart(p Part) Option { return func(c *config) { c.dcpOpt.part = p } }

// DefaultPartWait is how long part 0 waits for the other parts' files.
const DefaultPartWait = time.Hour

// WithPartWait sets how long part 0 waits for the other parts' files
// before it writes the index (default DefaultPartWait); past it, Convert
// fails with ErrPartMissing.
func WithPartWait(d time.Duration) Option { return func(c *config) { c.dcpOpt.partWait = d } }

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
func (c *config) checkPart(f Format) error {
	if !c.dcpOpt.part.whole() && f != Safetensors {
		return fmt.Errorf("%w: --part splits safetensors and DCP outputs, not %s", ErrOption, f)
	}
	return nil
}

// waitOtherParts waits, in part 0, for the shards the other parts write
// (targets[i] of shard i) before the index is committed.
func (c *config) waitOtherParts(ctx context.Context, targets []string) error {
	p := c.dcpOpt.part
	if p.whole() {
		return nil
	}
	var files []string
	var want []int64
	for i, f := range targets {
		if p.skips(i, len(targets)) {
			files, want = append(files, f), append(want, -1)
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
	if !p.whole() && c.dest != nil {
		return fmt.Errorf("%w: --part writes local outputs only", ErrOption)
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
			fi, err := os.Stat(f)
			if err == nil && (want[i] < 0 || fi.Size() == want[i]) {
				break
			}
			if err == nil && fi.Size() > want[i] {
				return fmt.Errorf("%w: %s has %d bytes, the plan says %d (another conversion's output?)", ErrPartMissing, f, fi.Size(), want[i])
			}
			if time.Now().After(deadline) {
				return fmt.Errorf("%w: %s not there after %s", ErrPartMissing, f, wait)
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
func (c *config) dcpPlan(p *plan) (*dcp.Metadata, []*dcpPiece, error) {
	R := max(c.dcpOpt.ranks, 1)
	md := &dcp.Metadata{}
	var pieces, whole []*dcpPiece
	load := make([]int64, R)
	for _, it := range p.items {
		e := dcp.Entry{FQN: it.name, Tensor: true, DType: it.dtype, Size: it.src.Shape, RequiresGrad: it.src.RequiresGrad}
		ei := len(md.Entries)
		dim := -1
		if R > 1 && len(c.dcpOpt.split) > 0 && len(it.src.Shape) > 0 {
			d, err := statedict.SplitDim(c.dcpOpt.split, it.src)
			if err != nil {
				return nil, nil, err
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
					return nil, nil, err
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
	for _, v := range p.values {
		md.Entries = append(md.Entries, dcp.Entry{FQN: v.name, Value: dcp.Location{File: dcp.FileName(0)}})
	}
	return md, pieces, nil
}

// convertDCP is Convert for a DCP output: the directory out gets
// .metadata and one __R_0.distcp per rank.
func (c *config) convertDCP(ctx context.Context, ck *statedict.Checkpoint, out string, start time.Time) (*Summary, error) {
	if c.dest != nil {
		return nil, fmt.Errorf("%w: a DCP output goes to a local directory (write it there, then upload)", ErrOption)
	}
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
	md, pieces, err := c.dcpPlan(p)
	if err != nil {
		return nil, err
	}
	files := make([]string, R)
	for r := range files {
		files[r] = filepath.Join(out, dcp.FileName(r))
	}
	metaPath := filepath.Join(out, dcp.MetadataFile)
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
	if fi, err := os.Stat(out); err == nil && !fi.IsDir() {
		return nil, fmt.Errorf("convert: output directory %s: not a directory", out)
	}
	for _, f := range check {
		if _, err := os.Lstat(f); err == nil && !c.force {
			return nil, fmt.Errorf("%w: %s", ErrExists, f)
		}
	}
	l := &layout{format: DCP, dir: out, mkdir: true}
	undoDir, err := l.makeDir()
	if err != nil {
		return nil, err
	}
	var temps []*tempFile
	committed := false
	defer func() {
		for _, t := range temps {
			t.discard()
		}
		if !committed {
			undoDir()
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
			removeStale(files[r])
			if t, err = c.create(ctx, files[r], 0); err != nil {
				return nil, err
			}
			temps = append(temps, t)
			bw = c.output(t)
		}
		var off int64
		if r == 0 { // values first, as torch writes byte items first
			for i, v := range p.values {
				ei := len(p.items) + i
				var n int64
				if mine {
					n, err = dcp.WriteValue(bw, v.v)
				} else {
					n, err = dcp.ValueLength(v.v)
				}
				if err != nil {
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
	for _, t := range temps {
		if err := t.commit(c.force); err != nil {
			return nil, err
		}
		sum.Files = append(sum.Files, t.final)
	}
	temps = nil
	committed = true
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
		removeStale(metaPath)
		t, err := c.create(ctx, metaPath, 0)
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
		if err := t.commit(c.force); err != nil {
			return nil, err
		}
		temps = nil
		sum.Index = metaPath
	}
	sum.tally(p, &layout{format: DCP})
	sum.Bytes = total
	sum.Seconds = time.Since(start).Seconds()
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

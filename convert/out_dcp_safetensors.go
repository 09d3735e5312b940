package convert

import (
	"context"
	"fmt"
	"path/filepath"
	"time"

	"github.com/ckpt-dev/ckpt/dcp"
	"github.com/ckpt-dev/ckpt/dtype"
	"github.com/ckpt-dev/ckpt/internal/atomicfile"
	"github.com/ckpt-dev/ckpt/pickle"
	"github.com/ckpt-dev/ckpt/statedict"
)

// The safetensors-backed DCP layout of torch >= 2.8
// (HuggingFaceStorageWriter): package dcp names the files and places the
// tensors (dcp/write_safetensors.go); each rank's file is written as the
// safetensors output writes its files.

// convertDCPSafetensors is convertDCP for DCPSafetensors.
func (c *config) convertDCPSafetensors(ctx context.Context, ck *statedict.Checkpoint, out string, start time.Time) (*Summary, error) {
	if c.dcpOpt.serialization != DCPSafetensors {
		return nil, fmt.Errorf("%w: DCP serialization %q (want %s or %s)", ErrOption, c.dcpOpt.serialization, DCPTorchSave, DCPSafetensors)
	}
	R := max(c.dcpOpt.ranks, 1)
	part := c.dcpOpt.part
	p, err := makePlan(ck, c, DCP)
	if err != nil {
		return nil, err
	}
	var kept []*item
	for _, it := range p.items {
		if why := unsupported(it.src, Safetensors); why != "" || it.dtype != it.src.DType && !safetensorsDType(it.dtype) {
			if why == "" {
				why = "safetensors has no dtype for " + it.dtype.String()
			}
			p.dropped = append(p.dropped, Dropped{Name: it.name, Type: "tensor", Reason: why})
			continue
		}
		kept = append(kept, it)
	}
	for _, v := range p.values {
		p.dropped = append(p.dropped, Dropped{Name: v.name, Type: pickle.TypeName(v.v), Reason: "a safetensors DCP checkpoint holds tensors only"})
	}
	p.items, p.values, p.tree = kept, nil, nil
	if len(p.items) == 0 {
		return nil, fmt.Errorf("%w: no tensor safetensors can hold", ErrNothing)
	}
	w, src, err := c.dcpWriter(p)
	if err != nil {
		return nil, err
	}
	byRank := dcp.SafetensorsPieces(w)
	files := make([]string, R)
	var check []string
	for r := range R {
		files[r] = c.paths().join(out, dcp.SafetensorsFile(r, R))
		if part.mine(r) && len(byRank[r]) > 0 {
			check = append(check, files[r])
		}
	}
	indexPath := ""
	if R == 1 && part.Index == 0 {
		indexPath = c.paths().join(out, dcp.SafetensorsIndex)
		check = append(check, indexPath)
	}
	dst, err := c.prepareDCP(ctx, out, check) // local directory or Destination (outdir.go)
	if err != nil {
		return nil, err
	}
	defer dst.release(ctx)
	sum := newSummary(p, &layout{format: DCP})
	var total int64
	weights := map[string]string{}
	var totalSize int64
	for r := range R {
		if len(byRank[r]) == 0 {
			continue // torch writes no file for a rank without items
		}
		items := make([]*item, len(byRank[r]))
		offsets := make(map[string][]int64, len(items))
		for i, pc := range byRank[r] {
			it := src.piece(pc)
			items[i] = it
			offsets[it.name] = pc.Offsets
			weights[it.name] = filepath.Base(files[r])
			totalSize += it.nbytes()
		}
		if !part.mine(r) {
			continue
		}
		meta, err := dcp.SafetensorsMetadata(offsets)
		if err != nil {
			return nil, err
		}
		if c.dest == nil {
			atomicfile.RemoveStale(files[r])
		}
		var head int64 // the header is rewritten at the end (digests): an object store holds it back
		if c.dest != nil {
			if head, err = (safetensorsOut{}).headLen(c, items, meta); err != nil {
				return nil, writeErr(c.destName(files[r]), err)
			}
		}
		t, err := c.create(ctx, files[r], head)
		if err != nil {
			return nil, err
		}
		dst.track(t)
		n, err := c.writeSafetensors(ctx, t, items, meta)
		if err != nil {
			return nil, err
		}
		if err := t.finish(); err != nil {
			return nil, err
		}
		total += n
	}
	finals, err := dst.commitPending(ctx)
	if err != nil {
		return nil, err
	}
	sum.Files = append(sum.Files, finals...)
	if indexPath != "" {
		b, err := dcp.SafetensorsIndexJSON(totalSize, weights)
		if err != nil {
			return nil, err
		}
		final, err := dst.writeSmall(ctx, indexPath, b)
		if err != nil {
			return nil, err
		}
		sum.Index = final
	}
	dst.done = true
	sum.tally(p, &layout{format: DCP})
	sum.Bytes = total
	sum.Synced, sum.Seconds = c.synced(), time.Since(start).Seconds()
	return sum, nil
}

// safetensorsDType reports whether safetensors can hold dtype d.
func safetensorsDType(d dtype.DType) bool {
	code, ok := d.Safetensors()
	return ok && knownSafetensors(code)
}

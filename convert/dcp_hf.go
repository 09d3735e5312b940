package convert

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/ckpt-dev/ckpt/dcp"
	"github.com/ckpt-dev/ckpt/dtype"
	"github.com/ckpt-dev/ckpt/internal/atomicfile"
	"github.com/ckpt-dev/ckpt/pickle"
	"github.com/ckpt-dev/ckpt/statedict"
)

// The safetensors-backed DCP layout of torch >= 2.8
// (torch.distributed.checkpoint.HuggingFaceStorageWriter, docs/dcp-write.md):
// every file is a plain safetensors file whose __metadata__ carries
// DCP_SHARDING_INFO (each tensor's saved_offsets in its global tensor),
// DCP_VERSION "1.0" and format "pt".
//
//   - One rank: model-00001-of-00001.safetensors with whole tensors and
//     model.safetensors.index.json (metadata.total_size, weight_map), as
//     the writer saves a rank-0 state dict.
//   - Several ranks (WithDCPRanks, WithSplit): one file per rank that holds
//     something, shard-RRRRR-model-00001-of-00001.safetensors with RRRRR
//     the rank plus one, and no index, as the writer saves with
//     save_distributed (save_sharded in its first version) and no
//     consolidation; torch's HuggingFaceStorageReader and
//     consolidate_safetensors_files read such a directory.

// DCPSerialization is how a DCP output stores its tensors (--dcp-format).
type DCPSerialization string

const (
	// DCPTorchSave is FileSystemWriter's default layout: .metadata and
	// __R_0.distcp files of torch.save zips (dcp_write.go).
	DCPTorchSave DCPSerialization = "torch"
	// DCPSafetensors is HuggingFaceStorageWriter's safetensors layout.
	DCPSafetensors DCPSerialization = "safetensors"
)

// WithDCPSerialization chooses the layout of a DCP output (default
// DCPTorchSave).
func WithDCPSerialization(s DCPSerialization) Option {
	return func(c *options) { c.dcpOpt.serialization = s }
}

// hfDCPFile is the name of rank r's file when ranks > 1, else of the
// single file.
func hfDCPFile(r, ranks int) string {
	if ranks > 1 {
		return fmt.Sprintf("shard-%05d-model-%05d-of-%05d.safetensors", r+1, 1, 1)
	}
	return fmt.Sprintf("model-%05d-of-%05d.safetensors", 1, 1)
}

// hfDCPIndex is the index HuggingFaceStorageWriter writes for one rank.
const hfDCPIndex = "model.safetensors.index.json"

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
	_, pieces, _, err := c.dcpPlan(p)
	if err != nil {
		return nil, err
	}
	// A tensor split on a dimension of size 0 has no chunk at all; a
	// safetensors DCP lists tensors only through its files' chunks, so it
	// goes whole (empty) to rank 0.
	placed := map[string]bool{}
	for _, pc := range pieces {
		placed[pc.it.name] = true
	}
	for _, it := range p.items {
		if !placed[it.name] {
			pieces = append(pieces, &dcpPiece{it: it, offset: make([]int64, len(it.src.Shape))})
		}
	}
	byRank := make([][]*dcpPiece, R)
	for _, pc := range pieces {
		byRank[pc.rank] = append(byRank[pc.rank], pc)
	}
	files := make([]string, R)
	var check []string
	for r := range R {
		files[r] = filepath.Join(out, hfDCPFile(r, R))
		if part.mine(r) && len(byRank[r]) > 0 {
			check = append(check, files[r])
		}
	}
	indexPath := ""
	if R == 1 && part.Index == 0 {
		indexPath = filepath.Join(out, hfDCPIndex)
		check = append(check, indexPath)
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
	sum := newSummary(p, &layout{format: DCP})
	var total int64
	weights := map[string]string{}
	var totalSize int64
	for r := range R {
		if len(byRank[r]) == 0 {
			continue // torch writes no file for a rank without items
		}
		items := make([]*item, len(byRank[r]))
		info := make(map[string]map[string][]int64, len(items))
		for i, pc := range byRank[r] {
			items[i] = pc.it
			info[pc.it.name] = map[string][]int64{"saved_offsets": pc.offset}
			weights[pc.it.name] = filepath.Base(files[r])
			totalSize += pc.it.nbytes()
		}
		if !part.mine(r) {
			continue
		}
		b, err := json.Marshal(info)
		if err != nil {
			return nil, err
		}
		meta := map[string]string{dcp.ShardingInfoKey: string(b), dcp.VersionKey: "1.0", "format": "pt"}
		atomicfile.RemoveStale(files[r])
		t, err := c.create(ctx, files[r], 0)
		if err != nil {
			return nil, err
		}
		temps = append(temps, t)
		n, err := c.writeSafetensors(ctx, t, items, meta)
		if err != nil {
			return nil, err
		}
		if err := t.finish(); err != nil {
			return nil, err
		}
		total += n
	}
	for _, t := range temps {
		if err := t.commit(c.force); err != nil {
			return nil, err
		}
		sum.Files = append(sum.Files, t.final)
	}
	temps = nil
	committed = true
	if indexPath != "" {
		b, err := json.MarshalIndent(map[string]any{"metadata": map[string]int64{"total_size": totalSize}, "weight_map": weights}, "", "  ")
		if err != nil {
			return nil, err
		}
		atomicfile.RemoveStale(indexPath)
		t, err := c.create(ctx, indexPath, 0)
		if err != nil {
			return nil, err
		}
		temps = append(temps, t)
		bw := c.output(t)
		if _, err := bw.Write(b); err != nil {
			return nil, writeErr(indexPath, err)
		}
		if err := bw.Flush(); err != nil {
			return nil, writeErr(indexPath, err)
		}
		if err := t.finish(); err != nil {
			return nil, err
		}
		if err := t.commit(c.force); err != nil {
			return nil, err
		}
		temps = nil
		sum.Index = indexPath
	}
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

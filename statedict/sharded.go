package statedict

import (
	"encoding/json"
	"fmt"
	"io"
	"path/filepath"
	"sort"
	"strings"
)

// shardIndex is the Hugging Face index.json layout.
type shardIndex struct {
	Metadata  map[string]any    `json:"metadata"`
	WeightMap map[string]string `json:"weight_map"`
}

// openSharded opens every shard an index.json names and merges them into one
// Checkpoint. Shards are read lazily like any file; the index must agree
// with them: every listed tensor present in its shard, no tensor twice.
func openSharded(path string, r io.ReaderAt, size int64, cfg *config) (*Checkpoint, error) {
	if size > cfg.maxIndex {
		return nil, &Error{Record: "index", Err: fmt.Errorf("%w: index of %d bytes exceeds the limit of %d", ErrMalformed, size, cfg.maxIndex)}
	}
	raw := make([]byte, size)
	if _, err := r.ReadAt(raw, 0); err != nil && err != io.EOF {
		return nil, err
	}
	var idx shardIndex
	if err := json.Unmarshal(raw, &idx); err != nil {
		return nil, &Error{Record: "index", Err: fmt.Errorf("%w: %v", ErrMalformed, err)}
	}
	if len(idx.WeightMap) == 0 {
		return nil, &Error{Record: "index", Err: fmt.Errorf("%w: index.json has no weight_map", ErrMalformed)}
	}
	var shards []string
	seen := make(map[string]bool)
	for _, f := range idx.WeightMap {
		if f == "" || filepath.IsAbs(f) || strings.Contains(f, "..") || strings.ContainsAny(f, `/\`) {
			return nil, &Error{Record: "index", Err: fmt.Errorf("%w: shard name %q must be a plain file name beside the index", ErrMalformed, f)}
		}
		if !seen[f] {
			seen[f] = true
			shards = append(shards, f)
		}
	}
	sort.Strings(shards)
	ck := &Checkpoint{Format: FormatSharded, ByteOrder: "little"}
	ok := false
	defer func() {
		if !ok {
			ck.Close()
		}
	}()
	names := make(map[string]string)
	for _, name := range shards {
		if err := cfg.canceled(); err != nil {
			return nil, err
		}
		c := *cfg
		c.shard = true
		sp := cfg.sibling(path, name)
		sub, err := openFile(sp, &c)
		if err != nil {
			return nil, err
		}
		ck.closers = append(ck.closers, sub)
		if sub.Format == FormatSharded {
			return nil, &Error{File: cfg.display(sp), Err: fmt.Errorf("%w: a shard is itself an index", ErrMalformed)}
		}
		if sub.ByteOrder == "big" {
			ck.ByteOrder = "big"
		}
		for _, t := range sub.Tensors {
			if prev, dup := names[t.Name]; dup {
				return nil, &Error{File: cfg.display(sp), Tensor: t.Name, Err: fmt.Errorf("%w: tensor also in shard %s", ErrMalformed, prev)}
			}
			names[t.Name] = name
			if want, listed := idx.WeightMap[t.Name]; !listed {
				ck.Warnings = append(ck.Warnings, fmt.Sprintf("tensor %q in shard %s is not in the index", t.Name, name))
			} else if want != name {
				return nil, &Error{File: cfg.display(sp), Tensor: t.Name, Err: fmt.Errorf("%w: the index puts it in %s", ErrMalformed, want)}
			}
			if t.Storage != nil {
				t.Storage.File = cfg.display(sp)
			}
		}
		ck.Tensors = append(ck.Tensors, sub.Tensors...)
		ck.Storages = append(ck.Storages, sub.Storages...)
		ck.Objects = append(ck.Objects, sub.Objects...)
		ck.Opaque = append(ck.Opaque, sub.Opaque...)
		ck.Foreign = append(ck.Foreign, sub.Foreign...)
		for _, w := range sub.Warnings {
			ck.Warnings = append(ck.Warnings, name+": "+w)
		}
		if sub.Metadata != nil {
			if ck.ShardMetadata == nil {
				ck.ShardMetadata = make(map[string]map[string]string)
			}
			ck.ShardMetadata[cfg.display(sp)] = sub.Metadata
		}
		if sub.Metadata != nil && ck.Metadata == nil {
			ck.Metadata = sub.Metadata
		}
		ck.Shards = append(ck.Shards, name)
		if ck.ShardFormat == "" {
			ck.ShardFormat = sub.Format
		}
	}
	var missing []string
	for n, f := range idx.WeightMap {
		if _, ok := names[n]; !ok {
			missing = append(missing, n+" ("+f+")")
		}
	}
	if len(missing) > 0 {
		sort.Strings(missing)
		return nil, &Error{Record: "index", Tensor: missing[0], Err: fmt.Errorf("%w: %d tensor(s) the index lists are not in their shards: %s",
			ErrMissingRecord, len(missing), strings.Join(missing[:min(len(missing), 5)], ", "))}
	}
	ok = true
	return ck, nil
}

package dcp

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"regexp"
	"strconv"
	"sync"
)

// torch >= 2.8 safetensors-backed DCP (HuggingFaceStorageWriter, and
// FileSystemWriter with SerializationFormat.SAFETENSORS): each file is a
// plain safetensors file, one tensor per name, whose header metadata
// carries the DCP facts: ShardingInfoKey maps each tensor name to
// {"saved_offsets": [...]}, where that file's tensor (a chunk) lies in
// the global tensor. A tensor's global shape is, as torch's reader and
// consolidator compute it, the largest offset+size over its chunks in
// each dimension. Found by content, never by file name.
const (
	ShardingInfoKey = "DCP_SHARDING_INFO"
	VersionKey      = "DCP_VERSION"
	savedOffsets    = "saved_offsets"
)

// MaxSafetensorsFiles bounds the safetensors files of one directory read
// as a safetensors DCP checkpoint (one per rank and output file).
const MaxSafetensorsFiles = 1 << 16

// hfShardFile is the name HuggingFaceStorageWriter gives a rank's file
// when every rank saves its own share: shard-RRRRR-model-IIIII-of-NNNNN,
// RRRRR the rank plus one. Compiled on first use, not at start-up.
var hfShardFile = sync.OnceValue(func() *regexp.Regexp {
	return regexp.MustCompile(`^shard-(\d{5,})-model-\d{5,}-of-\d{5,}\.safetensors$`)
})

// ShardFileRank returns the rank that wrote the safetensors file named
// name (HuggingFaceStorageWriter's shard-RRRRR-model-IIIII-of-NNNNN,
// RRRRR the rank plus one), -1 when the name does not say.
func ShardFileRank(name string) int {
	if m := hfShardFile().FindStringSubmatch(name); m != nil {
		if r, err := strconv.Atoi(m[1]); err == nil && r >= 1 {
			return r - 1
		}
	}
	return -1
}

// SavedOffsets returns the saved_offsets of every tensor a safetensors
// file's metadata lists under ShardingInfoKey; ok is false when the
// metadata has no such key. The JSON is untrusted: every entry must be an
// object whose saved_offsets is a list of at most 64 non-negative
// integers (ErrMalformed otherwise).
func SavedOffsets(md map[string]string) (offsets map[string][]int64, ok bool, err error) {
	raw, ok := md[ShardingInfoKey]
	if !ok {
		return nil, false, nil
	}
	var info map[string]map[string]json.RawMessage
	if err := json.Unmarshal([]byte(raw), &info); err != nil {
		return nil, true, fmt.Errorf("%w: %s is not a JSON object of objects: %v", ErrMalformed, ShardingInfoKey, err)
	}
	offsets = make(map[string][]int64, len(info))
	for name, e := range info {
		v, has := e[savedOffsets]
		if !has {
			return nil, true, fmt.Errorf("%w: %s entry %q has no %s", ErrMalformed, ShardingInfoKey, name, savedOffsets)
		}
		var offs []int64
		if err := json.Unmarshal(v, &offs); err != nil || len(offs) > 64 {
			return nil, true, fmt.Errorf("%w: %s entry %q: %s is not a list of at most 64 integers", ErrMalformed, ShardingInfoKey, name, savedOffsets)
		}
		for _, o := range offs {
			if o < 0 {
				return nil, true, fmt.Errorf("%w: %s entry %q: negative offset %v", ErrMalformed, ShardingInfoKey, name, offs)
			}
		}
		offsets[name] = offs
	}
	return offsets, true, nil
}

// ChunksAway reports whether a safetensors file's metadata places a chunk
// of a safetensors DCP checkpoint away from the origin: the file alone is
// not the whole of its tensors.
func ChunksAway(md map[string]string) bool {
	offs, _, err := SavedOffsets(md)
	if err != nil {
		return false
	}
	for _, o := range offs {
		for _, v := range o {
			if v != 0 {
				return true
			}
		}
	}
	return false
}

// ShardedSafetensors reports whether the safetensors files of a
// directory (files of them) are a safetensors DCP checkpoint rather than
// a plain (or consolidated) safetensors one, judging by one file's header
// metadata md: it carries ShardingInfoKey, and either there are several
// files, or the entry is malformed (an error to report, not a file to read
// plainly), or it places a chunk away from the origin (ChunksAway).
func ShardedSafetensors(md map[string]string, files int) bool {
	_, ok, err := SavedOffsets(md)
	return ok && (files > 1 || err != nil || ChunksAway(md))
}

// CheckSavedOffsets checks a file's saved_offsets for one of its tensors
// against the tensor's shape: one offset per dimension, offset+size
// within 2^62.
func CheckSavedOffsets(offs, shape []int64) error {
	if len(offs) != len(shape) {
		return fmt.Errorf("%w: %s %v for a tensor of shape %v", ErrMalformed, savedOffsets, offs, shape)
	}
	for d := range offs {
		if offs[d] > maxDim-shape[d] {
			return fmt.Errorf("%w: offset %v + size %v", ErrOverflow, offs, shape)
		}
	}
	return nil
}

// maxDim bounds offset+size in a dimension so that sums cannot overflow.
const maxDim = int64(1) << 62

// SafetensorsAt reports whether the bytes at off of a file of size bytes
// start a safetensors header whose length fits the file: where
// FileSystemWriter with SerializationFormat.SAFETENSORS (torch >= 2.8)
// puts the one safetensors blob holding a .distcp file's tensor items,
// after its byte items. It reads 9 bytes.
func SafetensorsAt(r io.ReaderAt, size, off int64) bool {
	var head [9]byte
	if off < 0 || off > size-9 {
		return false
	}
	if _, err := r.ReadAt(head[:], off); err != nil {
		return false
	}
	n := binary.LittleEndian.Uint64(head[:8])
	return head[8] == '{' && n <= uint64(size-off-8)
}

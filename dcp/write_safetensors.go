package dcp

import (
	"encoding/json"
	"fmt"
)

// Writing torch >= 2.8's safetensors-backed layout
// (torch.distributed.checkpoint.HuggingFaceStorageWriter, docs/dcp-write.md):
// every file is a plain safetensors file whose __metadata__ carries
// ShardingInfoKey (each tensor's saved_offsets in its global tensor),
// VersionKey "1.0" and format "pt".
//
//   - One rank: SafetensorsFile(0, 1), model-00001-of-00001.safetensors,
//     with whole tensors and SafetensorsIndex (metadata.total_size,
//     weight_map), as the writer saves a rank-0 state dict.
//   - Several ranks: one file per rank that holds something,
//     shard-RRRRR-model-00001-of-00001.safetensors with RRRRR the rank
//     plus one, and no index, as the writer saves with save_distributed
//     (save_sharded in its first version) and no consolidation; torch's
//     HuggingFaceStorageReader and consolidate_safetensors_files read
//     such a directory.
//
// The tensors are placed as a Writer places them; writing the
// safetensors files themselves is the caller's.

// SafetensorsIndex is the index HuggingFaceStorageWriter writes for one
// rank.
const SafetensorsIndex = "model.safetensors.index.json"

// SafetensorsFile is the name of rank r's file when ranks > 1, else of
// the single file.
func SafetensorsFile(r, ranks int) string {
	if ranks > 1 {
		return fmt.Sprintf("shard-%05d-model-%05d-of-%05d.safetensors", r+1, 1, 1)
	}
	return fmt.Sprintf("model-%05d-of-%05d.safetensors", 1, 1)
}

// SafetensorsPieces returns, by rank, the tensors w places, for the
// safetensors layout: as Pieces, plus every tensor split on a dimension
// of size 0 (which has no chunk at all) whole on rank 0, since a
// safetensors checkpoint lists its tensors only through its files'
// chunks. A rank without pieces gets no file.
func SafetensorsPieces(w *Writer) [][]Piece {
	out := make([][]Piece, w.ranks)
	placed := map[int]bool{}
	for r := range out {
		out[r] = append(out[r], w.byRank[r]...)
		for _, pc := range w.byRank[r] {
			placed[pc.Item] = true
		}
	}
	for i, it := range w.items {
		if it.Tensor && !placed[i] {
			out[0] = append(out[0], Piece{Item: i, Offsets: make([]int64, len(it.Spec.Shape)), Sizes: it.Spec.Shape})
		}
	}
	return out
}

// SafetensorsMetadata returns the header metadata of a rank's file
// holding tensors at the given saved_offsets, by name.
func SafetensorsMetadata(offsets map[string][]int64) (map[string]string, error) {
	info := make(map[string]map[string][]int64, len(offsets))
	for name, o := range offsets {
		info[name] = map[string][]int64{savedOffsets: o}
	}
	b, err := json.Marshal(info)
	if err != nil {
		return nil, err
	}
	return map[string]string{ShardingInfoKey: string(b), VersionKey: "1.0", "format": "pt"}, nil
}

// SafetensorsIndexJSON returns the bytes of SafetensorsIndex: the total
// size of the tensors' data and the file of each tensor.
func SafetensorsIndexJSON(totalSize int64, weights map[string]string) ([]byte, error) {
	return json.MarshalIndent(map[string]any{"metadata": map[string]int64{"total_size": totalSize}, "weight_map": weights}, "", "  ")
}

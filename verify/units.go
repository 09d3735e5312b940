package verify

import "github.com/ckpt-dev/ckpt/statedict"

// storedUnits returns the tensors and storages whose bytes the file's
// checksums are of: ck's, with each dequantized weight replaced by the
// tensors it is stored as, and their storages added, each once.
func storedUnits(ck *statedict.Checkpoint) ([]*statedict.Tensor, []*statedict.Storage) {
	var tensors []*statedict.Tensor
	storages := make([]*statedict.Storage, 0, len(ck.Storages))
	seen := map[*statedict.Storage]bool{}
	quantized := map[*statedict.Storage]bool{}
	for _, t := range ck.Tensors {
		if st := t.QuantStored.StoredTensors(); len(st) > 0 {
			tensors = append(tensors, st...)
			quantized[t.Storage] = true
			continue
		}
		tensors = append(tensors, t)
	}
	for _, s := range ck.Storages {
		if !quantized[s] && !seen[s] {
			seen[s] = true
			storages = append(storages, s)
		}
	}
	for _, t := range tensors {
		if s := t.Storage; s != nil && !seen[s] && !quantized[s] {
			seen[s] = true
			storages = append(storages, s)
		}
	}
	return tensors, storages
}

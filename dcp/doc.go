// Package dcp writes torch.distributed.checkpoint (DCP) checkpoints in the
// layout torch 2.6's FileSystemWriter writes: a directory holding a
// ".metadata" pickle (torch.distributed.checkpoint.metadata.Metadata) and
// one "__R_0.distcp" file per rank R, each a concatenation of items. A
// tensor item is the torch.save zip of one contiguous CPU tensor (a whole
// tensor or one chunk of it); a non-tensor value is the torch.save zip of
// the value (BytesStorageMetadata), with the tensors it holds when torch's
// planner saves it whole (a tuple of tensors: WriteValueTensors).
//
// The package only encodes: which tensor goes to which rank, and the bytes
// of each tensor, are the caller's (package convert plans and streams
// them). Reading DCP is statedict's (statedict.ParseDCPMetadata).
//
// Item lengths depend only on a tensor's dtype, shape and flags
// (TensorLength), so every process of a split conversion can work out the
// whole .metadata without seeing the other processes' files.
package dcp

// Package scan audits checkpoints without running them: it finds every
// pickle in every container torch.load reads (torch zip, nested zips such
// as TorchScript archives' data.pkl and constants.pkl, the legacy
// magic-number stream, torch < 0.3 tar, gzip/zstd-wrapped files, bare
// pickles such as DCP's .metadata, directories of shards) and lists each
// global the pickles import, with where it is (file, record, opcode
// offset) and a verdict from pickle.Classify: allowed, data, unsafe or
// unknown.
//
// Globals are found statically (pickle.Globals): STACK_GLOBAL operands are
// traced through the stack and the memo, so hiding a name behind memoized
// strings does not hide it, and a name computed at load time is reported
// as unknown. Nothing is built or called, so a pickle the loader would
// refuse is still listed in full. Memory is bounded by the largest pickle,
// not by the checkpoint: tensor data is never read.
package scan

// Package scan audits checkpoints without running them: it finds every
// pickle in every container torch.load reads (torch zip, nested zips such
// as TorchScript archives' data.pkl and constants.pkl, the legacy
// magic-number stream, torch < 0.3 tar, gzip/zstd-wrapped files, bare
// pickles such as DCP's .metadata, directories of shards) and lists each
// global the pickles import, with where it is (file, record, opcode
// offset) and a verdict from pickle.Classify: allowed, data, unsafe or
// unknown.
//
// Which containers a file is and which records are pickles is decided by
// statedict.Routes, torchzip.IsPickleRecord and torchzip.RecordKey,
// the one description of torch's loader paths that statedict.Open reads
// by too, so a scan never sees less than a loader. A file is scanned along
// every route it can be taken along, not only the first: a safetensors
// file (or a tar, or a gzip) whose first bytes are also a pickle is
// scanned as that pickle too, since torch.load's legacy path unpickles
// from offset 0 whatever it takes for no zip and no tar; zip records are
// found as torch finds them (data.PKL is data.pkl); a zip found by its end
// record, or holding one member, is scanned as torch.hub would load it;
// and each torch.save item of a DCP data file (__R_N.distcp) is scanned on
// its own, at the ranges its .metadata lists and wherever a zip ends in it.
// A path that is not a regular file (a FIFO, a device) is refused at once.
// A GGUF file holds no pickle; its chat templates (Jinja2, rendered by
// Python runtimes) are checked for what a sandbox escape needs: dunder
// attributes, os/subprocess/sys, popen, eval.
//
// Globals are found statically (pickle.Globals): STACK_GLOBAL operands are
// traced through the stack and the memo, so hiding a name behind memoized
// strings does not hide it, and a name computed at load time is reported
// as unknown. Nothing is built or called, so a pickle the loader would
// refuse is still listed in full. Memory is bounded by the largest pickle,
// not by the checkpoint: tensor data is never read.
package scan

// Package pickle reads Python pickles written by torch.save without running
// any Python and without calling anything the pickle names.
//
// It owns the safe unpickling layer of ckpt: it validates the opcode stream,
// resolves every global against an allowlist (torch rebuild functions,
// dtypes, layouts, storage classes, a few standard-library containers and
// benign data classes), refuses dangerous globals (os.system, builtins.eval,
// subprocess, ...) with an *UnsafeError as soon as they are named, and
// returns a tree of plain Go values in which every torch tensor is a
// *Tensor describing dtype, shape, strides, offset and storage. It never
// reads storage bytes: persistent ids are handed to a caller hook (see
// WithPersistentLoad and ParseStoragePID).
//
// The opcode machine is github.com/nlpodyssey/gopickle's Unpickler. Before it
// runs, a validating pass walks the whole stream (every length within the
// input, known opcodes, protocol <= 5, stack and mark discipline, memo
// indices, Limits) and rewrites it into an equivalent stream that gopickle
// can execute without panicking: frames are dropped, every global becomes an
// index into a table resolved by the validating pass (so gopickle's own
// handling of OrderedDict and copy_reg never runs), and sets, which gopickle
// keeps in Go maps that panic on unhashable keys, are built by this package.
//
// # Values
//
// Unpickle returns: nil, bool, int64, *big.Int (integers outside int64),
// float64, complex128, string, []byte (bytes and bytearray), *Tuple, *List,
// *Dict (dict, collections.OrderedDict, Counter, defaultdict; insertion
// order kept), *Set, *Tensor, Global (a harmless global used as a value,
// such as torch.float32), Device, *Object (known benign classes, never
// instantiated), *Foreign (anything else, never called) and whatever the
// persistent-load hook returned (*StorageRef by default).
//
// Values may be shared (one *Tensor or *List reachable through several
// paths) and may be cyclic (a list appended into itself through the memo).
// Code that walks a result must remember what it has visited. The nesting
// depth of the result is at most Limits.MaxDepth.
//
// # Limits
//
// A hostile stream costs time linear in its size and memory of a fixed
// overhead plus a multiple of its size: Limits bounds nesting, memo, stack,
// container sizes, integer sizes and string bytes, each failing with a
// *LimitError that names the field raising it, and WithContext stops both
// passes when a context ends. docs/limits.md lists every limit of ckpt with
// its default and the measured budget.
//
// # Rebuilding torch objects
//
// The Go functions standing in for torch's rebuild callables are split by
// what they build: tensor.go (Tensor, StorageRef and the other result
// types), storage.go (storage classes, dtype names, ParseStoragePID),
// rebuild_args.go (argument checks shared by every rebuild function),
// rebuild_strided.go (_rebuild_tensor(_v2/_v3), parameters),
// rebuild_quantized.go (_rebuild_qtensor), rebuild_sparse.go (sparse and
// nested tensors), rebuild_storageless.go (meta tensors, wrapper
// subclasses, numpy- and CPU-backed device tensors, _rebuild_from_type_v2),
// rebuild_legacy.go (torch < 0.4 tensor classes and their BUILD) and
// torch_values.go (torch.Size, torch.device, layouts, LONG4 integers).
// globals.go resolves a global to one of them.
//
// # Reading the opcodes
//
// Before anything runs, a validating pass rewrites the stream for the
// machine that builds values: opcodes.go (the opcode table and argument
// encodings), scan.go (the scanner, its walk and argument reading),
// scan_memo.go (the first pass finding which memo slots are read, and the
// memo table), scan_step.go (one opcode's checks and rewrite),
// scan_strings.go (protocol-0 string literals). audit.go turns the same
// walk into Globals' list of globals with a verdict each.
package pickle

// Package dcp reads and writes torch.distributed.checkpoint (DCP)
// checkpoints: a directory holding a ".metadata" pickle
// (torch.distributed.checkpoint.metadata.Metadata) and the data files it
// points into, "__R_N.distcp" per rank R in the layout torch's
// FileSystemWriter writes, each a concatenation of items. A tensor item
// is the torch.save zip of one contiguous CPU tensor (a whole tensor or
// one chunk of it); a non-tensor value is the torch.save zip of the value
// (BytesStorageMetadata), with the tensors it holds when torch's planner
// saves it whole (a tuple of tensors: WriteValueTensors).
//
// One type, Metadata, is both directions' view of .metadata: Encode
// writes it, ParseMetadata reads it (never executing anything: the pickle
// is decoded by package pickle into plain objects). The Python class
// names it holds are spelled once, in internal/dcpclass: package pickle,
// which sits below this package and admits exactly those classes, imports
// that leaf package too, where it could not import this one.
//
// Reading (read_*.go): Open or NewReader over an FS of the directory
// (DirFS for a local one) gives a Reader: the parsed Metadata, the chunks
// each tensor is assembled from (CheckTiling: inside the shape, no
// overlap, no gap, replicated copies once), and each item's bytes as a
// section of its file (Item). Decoding an item (a torch.save zip into a
// tensor, a safetensors blob) is left to the caller: package statedict
// opens a Reader as a checkpoint. torch >= 2.8's safetensors-backed
// layout (HuggingFaceStorageWriter, and FileSystemWriter with
// SerializationFormat.SAFETENSORS) keeps the DCP facts in each
// safetensors file's metadata: SavedOffsets reads them, SafetensorsAt
// finds a .distcp file's safetensors blob.
//
// Writing (write*.go): NewWriter plans a checkpoint of the given
// tensors and values (WriteItem: name, planner path, dtype, shape; no
// statedict or convert types): each tensor whole on the rank with the
// fewest bytes, or split into one chunk per rank (ChunkBounds, torch.chunk's
// placement). WriteRank then streams a rank's items into an io.Writer,
// reading each tensor's bytes from a Source, and Metadata is the
// .metadata once every rank is written. Item lengths depend only on a
// tensor's dtype, shape and flags (TensorLength), so WriteRank with no
// writer measures a rank another process writes, and every process of a
// split conversion works out the whole .metadata alike. ValueCheck and
// TensorValue decide which leaves of a nested state dict are written
// whole as values; SafetensorsPieces, SafetensorsFile and
// SafetensorsMetadata lay out torch >= 2.8's safetensors-backed variant
// (the safetensors files themselves are the caller's to write: package
// convert plans, streams and commits the files).
// The planner paths torch's default save planner gives a nested state
// dict are the package's too (write_paths.go): Flatten walks a pickle
// tree as flatten_state_dict does, RenamedPath follows a rename, and
// ConsistentPaths checks that a set of paths nests.
package dcp

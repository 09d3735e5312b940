package statedict

import (
	"io"
	"math/bits"

	"github.com/ckpt-dev/ckpt/dtype"
)

// Format names a checkpoint container format, spelled as `ckpt inspect --json` reports it.
type Format string

// The container formats ckpt reads.
const (
	FormatTorchZip    Format = "torch-zip"    // torch.save since 1.6
	FormatTorchLegacy Format = "torch-legacy" // magic-number stream, torch < 1.6
	FormatTorchTar    Format = "torch-tar"    // tar container, torch < 0.3
	FormatSafetensors Format = "safetensors"
	FormatSharded     Format = "sharded" // Hugging Face index.json over several files
	FormatGGUF        Format = "gguf"    // llama.cpp / ggml's GGUF
)

// Layout is a tensor's memory layout as torch names it.
type Layout string

// Layouts ckpt recognises.
const (
	Strided   Layout = "strided"
	SparseCOO Layout = "sparse_coo"
	SparseCSR Layout = "sparse_csr"
	SparseCSC Layout = "sparse_csc"
	SparseBSR Layout = "sparse_bsr"
	SparseBSC Layout = "sparse_bsc"
	Nested    Layout = "nested" // strided nested tensors (buffer, sizes, strides, storage_offsets)
	Jagged    Layout = "jagged" // jagged nested tensors, torch.jagged (values, offsets[, lengths])
)

// Storage is one contiguous run of bytes in the checkpoint that one or more
// tensors view. Its bytes are not read until asked for.
type Storage struct {
	Key      string      // storage key as saved ("0", "1", ... or a pointer in old files)
	Location string      // location tag exactly as saved: "cpu", "cuda:0", "cuda", "mps", ...
	DType    dtype.DType // element type the storage was saved with
	NBytes   int64       // size in bytes
	Record   string      // where the bytes live: zip record, tar member or file, for messages
	File     string      // the file (or shard) holding the record, for messages

	// BigEndian is true when the bytes in the file are big-endian. Raw
	// readers return file order; logical readers swap to little-endian.
	BigEndian bool

	// CRC32 is the checksum the container recorded for the record, when HasCRC.
	CRC32  uint32
	HasCRC bool

	src    storageSource
	sparse []*sparseGroup // sparse tensors with a component here, checked before any read
}

// PieceReaderAt is an io.ReaderAt that can tell its caller about each
// piece of a read as soon as the piece's bytes are in place, so that the
// caller can check them while they are still in the CPU's cache and while
// the rest of the read is under way. objstore.Object is one (each piece of
// each ranged GET is reported as it arrives); the readers of Storage.Open
// for bytes read in place are too, forwarding to the file's reader.
type PieceReaderAt interface {
	io.ReaderAt
	// ReadAtPieces reads len(p) bytes at off as ReadAt does and calls
	// landed(piece, pieceOff) for pieces of p whose bytes are final,
	// pieceOff being piece's offset in the reader. Together the pieces
	// cover the bytes read. landed runs on the goroutines doing the
	// reading, possibly several at once for disjoint pieces, and before
	// ReadAtPieces returns. A piece may be reported more than once (a
	// request retried after it was cut short); its bytes are then the
	// same. When ReadAtPieces returns an error, the pieces reported may
	// not cover p.
	ReadAtPieces(p []byte, off int64, landed func(piece []byte, off int64)) (int, error)
}

// storageSource gives access to a storage's bytes in file order.
type storageSource interface {
	// open returns a reader over the storage bytes starting at byte off.
	open(off, n int64) (io.ReadCloser, error)
	// readerAt gives random access to exactly the storage's bytes
	// (compressed records are decompressed to a temporary file first).
	readerAt() (io.ReaderAt, error)
}

// Tensor is one tensor of a checkpoint: metadata plus lazy access to its data.
type Tensor struct {
	Name    string      // path in the object tree, nested keys joined with "."
	DType   dtype.DType // element type
	Shape   []int64     // sizes in elements
	Strides []int64     // strides in elements
	Offset  int64       // storage offset in elements
	Device  string      // location tag exactly as saved ("cpu", "cuda:1", ...)
	Storage *Storage

	RequiresGrad bool
	Parameter    bool   // saved as torch.nn.Parameter
	Layout       Layout // "strided" for dense tensors
	// Component is set on the parts of a sparse tensor ("indices", "values",
	// "crow_indices", ...); Name then ends with ".<component>".
	Component string
	// Quant describes a quantized tensor's parameters; nil otherwise.
	Quant *Quantization
	// Subclass is the Python class of a tensor subclass, "" for torch.Tensor.
	Subclass string
	// Meta is true for tensors saved without data (device "meta").
	Meta bool
	// Attribute is true for a TorchScript module's plain tensor attribute
	// (self.table = torch.tensor(...)): saved in the archive but not a
	// parameter or buffer, so not in ScriptModule.state_dict().
	Attribute bool
	// DTensor is set on the local shard of a torch.distributed DTensor
	// (FSDP2, tensor parallelism): the global shape, placements and mesh.
	// Shape, Strides and the data are the local shard's.
	DTensor *DTensor
	// GGML is set on the tensors of a GGUF file: the ggml type and how
	// the tensor is stored. A quantized tensor's DType is float32, the
	// type its elements read as.
	GGML *GGML
	// QuantStored is set on a weight of a quantized release read as its
	// dequantized values: the scheme and the stored form (codes' dtype
	// and shape, companion scales), which the checkpoint no longer lists.
	QuantStored *QuantStored
}

// Quantization holds the quantizer of a quantized tensor.
type Quantization struct {
	Scheme    string  // "per_tensor_affine", "per_channel_affine", ...
	Scale     float64 // per-tensor
	ZeroPoint int64   // per-tensor
	Axis      int64   // per-channel
	Scales    *Tensor // per-channel
	Zeros     *Tensor // per-channel
}

// NumEl returns the number of elements, or -1 when the product overflows int64.
func (t *Tensor) NumEl() int64 {
	n := int64(1)
	for _, s := range t.Shape {
		if s < 0 {
			return -1
		}
		hi, lo := bits.Mul64(uint64(n), uint64(s))
		if hi != 0 || lo > 1<<62 {
			return -1
		}
		n = int64(lo)
	}
	return n
}

// NBytes is the number of bytes of the tensor's logical elements
// (quint4x2 and quint2x4 pack 2 and 4 elements to a byte).
func (t *Tensor) NBytes() int64 {
	n := t.NumEl()
	if n < 0 {
		return -1
	}
	if k := t.DType.PerByte(); k > 1 {
		return (n + k - 1) / k // packed sub-byte elements
	}
	return n * int64(t.DType.Size())
}

// IsContiguous reports whether the tensor's elements are laid out in C order
// without gaps (size-1 dimensions may have any stride, as in torch).
func (t *Tensor) IsContiguous() bool {
	if t.NumEl() == 0 {
		return true
	}
	want := int64(1)
	for i := len(t.Shape) - 1; i >= 0; i-- {
		if t.Shape[i] == 1 {
			continue
		}
		if t.Strides[i] != want {
			return false
		}
		want *= t.Shape[i]
	}
	return true
}

// IsView reports whether the tensor covers less than its whole storage
// (an offset, a slice, or a non-contiguous layout).
func (t *Tensor) IsView() bool {
	if t.Storage == nil || t.NumEl() == 0 && t.Storage.NBytes == 0 {
		return false
	}
	return t.Offset != 0 || !t.IsContiguous() || t.NBytes() != t.Storage.NBytes
}

package pickle

// maxDims bounds the rank of a tensor (torch itself supports at most 64
// dimensions in most kernels); it keeps tensor rebuilds constant-size.
const maxDims = 64

// StorageRef is a storage named by a persistent id: the bytes live outside
// the pickle (a zip record, a legacy-stream block).
type StorageRef struct {
	Class    string // storage class name: "FloatStorage", ..., or "UntypedStorage"
	DType    string // torch dtype name from the class ("float32"); "" for UntypedStorage
	Key      string // key as string (ints formatted decimal)
	Location string // location tag as saved ("cpu", "cuda:0", ...)
	Numel    int64  // as saved: elements for typed classes, BYTES for UntypedStorage
	Ref      any    // free slot: a persistent-load hook may keep its own resolved storage here
	// View is set when the id names a slice of the storage Key (the view
	// metadata of torch < 0.4's legacy format); Numel is then the root's.
	View *StorageView
}

// Len is the storage's size as torch's len() reports it for the loaded
// storage: the view's size for a view, else Numel.
func (s *StorageRef) Len() int64 {
	if s.View != nil {
		return s.View.Numel
	}
	return s.Numel
}

// StorageView is a storage that is a slice of another (torch < 0.4):
// elements [Offset, Offset+Numel) of the root storage.
type StorageView struct {
	Key           string // the view's own key
	Offset, Numel int64
}

// Tensor is a torch tensor as rebuilt from its pickle: metadata only.
// Sizes, strides and offsets count elements.
type Tensor struct {
	Storage       *StorageRef // nil for storage-less tensors (meta, sparse, nested, wrapper subclass)
	DType         string      // torch name ("float32"): from the storage class or the dtype argument
	Offset        int64       // storage offset in elements
	Shape, Stride []int64     // Stride is nil when the tensor has no strides (sparse, nested)
	RequiresGrad  bool
	Parameter     bool   // wrapped by _rebuild_parameter(_with_state) or nn.Parameter
	Rebuild       string // rebuild function that built the data, e.g. "_rebuild_tensor_v2"
	Layout        string // "strided", "sparse_coo", "sparse_csr", ..., or "nested"
	// Components are the parts of sparse and nested tensors, in torch's
	// order: COO indices, values; CSR crow_indices, col_indices, values;
	// CSC ccol_indices, row_indices, values; BSR/BSC likewise; nested
	// buffer, sizes, strides, storage_offsets.
	Components []NamedTensor
	Quant      *QParams
	// Coalesced is a sparse COO tensor's is_coalesced flag as torch >= 2.1
	// pickles it (false when the file does not say): torch.load then
	// refuses indices that are not sorted and distinct.
	Coalesced bool
	Subclass  string // module.name of a tensor subclass from _rebuild_from_type_v2 or a wrapper subclass
	Device    string // device of storage-less tensors ("meta", a wrapper subclass's device, ...)
	// Attributes are the Python attributes _rebuild_from_type_v2 restores
	// on the tensor (its state, usually a dict): a wrapper subclass keeps
	// its real data there (e.g. {'elem': tensor}) over a storage-less shell.
	// nil when there are none.
	Attributes any
}

// NamedTensor is one component of a sparse or nested tensor.
type NamedTensor struct {
	Name   string
	Tensor *Tensor
}

// QParams are the quantizer parameters of a quantized tensor. Per-tensor
// schemes use Scale and ZeroPoint; per-channel schemes use Scales,
// ZeroPoints (nil when the pickle stored plain lists) and Axis.
type QParams struct {
	Scheme     string // "per_tensor_affine", "per_channel_affine", "per_channel_affine_float_qparams"
	Scale      float64
	ZeroPoint  int64
	Scales     *Tensor
	ZeroPoints *Tensor
	Axis       int64
}

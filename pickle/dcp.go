package pickle

// The classes of torch.distributed.checkpoint's .metadata pickle (torch
// 2.x FileSystemWriter): plain dataclasses and an enum, recorded as
// *Object and never instantiated. torch.Size, dtypes and layouts (through
// torch.serialization._get_layout) are already known; pathlib._local is
// where Python 3.13 defines the PosixPath of StorageMeta.checkpoint_id.
var dcpClasses = []string{
	"torch.distributed.checkpoint.metadata.Metadata",
	"torch.distributed.checkpoint.metadata.MetadataIndex",
	"torch.distributed.checkpoint.metadata.StorageMeta",
	"torch.distributed.checkpoint.metadata.TensorStorageMetadata",
	"torch.distributed.checkpoint.metadata.BytesStorageMetadata",
	"torch.distributed.checkpoint.metadata.ChunkStorageMetadata",
	"torch.distributed.checkpoint.metadata.TensorProperties",
	"torch.distributed.checkpoint.metadata._MEM_FORMAT_ENCODING",
	"torch.distributed.checkpoint.filesystem._StorageInfo",
	"torch.distributed.checkpoint.filesystem._StoragePrefix",
	"pathlib._local.Path", "pathlib._local.PosixPath", "pathlib._local.WindowsPath",
	"pathlib._local.PurePath", "pathlib._local.PurePosixPath", "pathlib._local.PureWindowsPath",
}

func init() {
	for _, c := range dcpClasses {
		objectClasses[c] = true
	}
}

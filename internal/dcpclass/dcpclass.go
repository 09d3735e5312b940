package dcpclass

// The modules the classes live in.
const (
	Metadata   = "torch.distributed.checkpoint.metadata"
	Filesystem = "torch.distributed.checkpoint.filesystem"
)

// The class names, as pickle records them (module and name apart).
const (
	MetadataClass       = "Metadata"
	MetadataIndex       = "MetadataIndex"
	StorageMeta         = "StorageMeta"
	TensorStorage       = "TensorStorageMetadata"
	BytesStorage        = "BytesStorageMetadata"
	ChunkStorage        = "ChunkStorageMetadata"
	TensorProperties    = "TensorProperties"
	MemFormatEncoding   = "_MEM_FORMAT_ENCODING"
	StorageInfo         = "_StorageInfo"   // in Filesystem
	StoragePrefix       = "_StoragePrefix" // in Filesystem
	pathlibModule       = "pathlib._local"
	metadataPrefix      = Metadata + "."
	filesystemPrefix    = Filesystem + "."
	pathlibModulePrefix = pathlibModule + "."
)

// All returns the module.name spellings of every class a .metadata pickle
// of torch 2.x's FileSystemWriter holds beyond what torch.load knows
// anyway (torch.Size, dtypes, layouts): the dataclasses and enum above,
// and pathlib._local's paths, where Python 3.13 defines the PosixPath of
// StorageMeta.checkpoint_id.
func All() []string {
	return []string{
		metadataPrefix + MetadataClass,
		metadataPrefix + MetadataIndex,
		metadataPrefix + StorageMeta,
		metadataPrefix + TensorStorage,
		metadataPrefix + BytesStorage,
		metadataPrefix + ChunkStorage,
		metadataPrefix + TensorProperties,
		metadataPrefix + MemFormatEncoding,
		filesystemPrefix + StorageInfo,
		filesystemPrefix + StoragePrefix,
		pathlibModulePrefix + "Path", pathlibModulePrefix + "PosixPath", pathlibModulePrefix + "WindowsPath",
		pathlibModulePrefix + "PurePath", pathlibModulePrefix + "PurePosixPath", pathlibModulePrefix + "PureWindowsPath",
	}
}

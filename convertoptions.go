package ckpt

import (
	"time"

	"github.com/ckpt-dev/ckpt/convert"
	"github.com/ckpt-dev/ckpt/dtype"
	"github.com/ckpt-dev/ckpt/gguf"
	"github.com/ckpt-dev/ckpt/statedict"
)

// The option, report and value types of Convert and ConvertTensorParallel,
// named at the door. The ConvertWith* functions below configure a
// conversion; they are named apart from Load's options (Option), which
// configure Open and Load. Each is the convert option of the same name
// without the prefix, so a library user may also pass convert's options
// directly.
type (
	// ConvertOption configures Convert and ConvertTensorParallel
	// (convert.Option).
	ConvertOption = convert.Option
	// ConvertSummary is what one conversion wrote (convert.Summary).
	ConvertSummary = convert.Summary
	// GGUFReport says what a GGUF output of a Hugging Face model got:
	// llama.cpp's names, permuted q/k tensors, notes (convert.GGUFReport).
	GGUFReport = convert.GGUFReport
	// GGUFTypes says which ggml types a GGUF output's tensors got and, under
	// --gguf-type, which could not get it and why (convert.GGUFTypes).
	GGUFTypes = convert.GGUFTypes
	// GGUFFallback is one group of GGUFTypes.Fallbacks (convert.GGUFFallback).
	GGUFFallback = convert.GGUFFallback
	// ConvertPart is one process's share of a conversion split over
	// several processes; the zero ConvertPart is a whole conversion
	// (convert.Part).
	ConvertPart = convert.Part
	// OutputFormat is an output format of Convert (convert.Format).
	OutputFormat = convert.Format
	// DCPSerialization is how a DCP output stores its tensors
	// (convert.DCPSerialization).
	DCPSerialization = convert.DCPSerialization
	// Rename is one rename rule, a regular expression and its
	// replacement (convert.Rename).
	Rename = convert.Rename
	// GGUFKV is one GGUF metadata entry, a key and a typed value
	// (gguf.KV).
	GGUFKV = gguf.KV
	// SplitRule says along which dimension the tensors whose names match
	// a pattern are split over the ranks of a tensor-parallel group
	// (statedict.SplitRule).
	SplitRule = statedict.SplitRule
	// DType is a tensor element type (dtype.DType).
	DType = dtype.DType
)

// The output formats of Convert.
const (
	OutputSafetensors = convert.Safetensors // safetensors, single or sharded
	OutputPyTorch     = convert.PyTorch     // a torch.save zip (.pt, .pth, .bin)
	OutputGGUF        = convert.GGUF        // llama.cpp's GGUF
	OutputDCP         = convert.DCP         // a torch.distributed.checkpoint directory
)

// The layouts of a DCP output.
const (
	// DCPTorchSave is FileSystemWriter's default layout: .metadata and
	// __R_0.distcp files of torch.save zips.
	DCPTorchSave = convert.DCPTorchSave
	// DCPSafetensors is torch's HuggingFaceStorageWriter layout.
	DCPSafetensors = convert.DCPSafetensors
)

// Sentinel errors of Convert and ConvertTensorParallel (those of the
// convert package, matched by errors.Is alike).
var (
	// ErrOutputFormat reports an output format Convert does not know
	// (convert.ErrFormat).
	ErrOutputFormat = convert.ErrFormat
	// ErrConvertOption reports an invalid or conflicting conversion
	// option (convert.ErrOption).
	ErrConvertOption = convert.ErrOption
	// ErrOutputTooLarge reports an output that would hold more tensor
	// data than ConvertWithMaxMaterialized allows (convert.ErrTooLarge).
	ErrOutputTooLarge = convert.ErrTooLarge
	// ErrOutputExists reports an existing output, replaced only with
	// ConvertWithForce(true) (convert.ErrExists).
	ErrOutputExists = convert.ErrExists
)

// ParseSize parses a size as Hugging Face writes them: "5GB" is
// 5,000,000,000 bytes, "1GiB" 2^30; a plain number is bytes
// (convert.ParseSize).
func ParseSize(s string) (int64, error) { return convert.ParseSize(s) }

// ParseRename parses a rename rule REGEX=REPLACEMENT (convert.ParseRename).
func ParseRename(s string) (Rename, error) { return convert.ParseRename(s) }

// ParseGGUFMeta parses one GGUF metadata entry KEY=VALUE or
// KEY:TYPE=VALUE (convert.ParseGGUFMeta).
func ParseGGUFMeta(s string) (GGUFKV, error) { return convert.ParseGGUFMeta(s) }

// ParseGGUFMetaJSON parses GGUF metadata from JSON: an object of KEY:
// VALUE, or the gguf.metadata list of an inspect report
// (convert.ParseGGUFMetaJSON).
func ParseGGUFMetaJSON(b []byte) ([]GGUFKV, error) { return convert.ParseGGUFMetaJSON(b) }

// ParseSplitRules parses tensor-parallel split rules
// PATTERN=DIM[,PATTERN=DIM...] and PATTERN=replicate, for WithRank,
// ConvertTensorParallel and ConvertWithSplit (statedict.ParseSplitRules).
func ParseSplitRules(s string) ([]SplitRule, error) { return statedict.ParseSplitRules(s) }

// ParseCastDType parses the name of a dtype ConvertWithDType casts to
// (bf16, f16, f32, f64 and their other spellings, as dtype.Parse reads
// them); ok is false for any other name or dtype.
func ParseCastDType(s string) (d DType, ok bool) {
	d, ok = dtype.Parse(s)
	return d, ok && convert.CastTarget(d)
}

// ConvertWithFormat sets the output format (default: from the output's
// name) (convert.WithFormat).
func ConvertWithFormat(f OutputFormat) ConvertOption { return convert.WithFormat(f) }

// ConvertWithDType casts floating tensors to d: Float64, Float32, Float16
// or BFloat16, as ParseCastDType returns them (convert.WithDType).
func ConvertWithDType(d DType) ConvertOption { return convert.WithDType(d) }

// ConvertWithRules retags the storages of a PyTorch output where rules
// say, as ParseMapLocation returns them (convert.WithRules).
func ConvertWithRules(r Rules) ConvertOption { return convert.WithRules(r) }

// ConvertWithStripPrefix removes each prefix from the start of the names
// that have it, in order, each once (convert.WithStripPrefix).
func ConvertWithStripPrefix(prefix ...string) ConvertOption {
	return convert.WithStripPrefix(prefix...)
}

// ConvertWithOnly keeps only the tensors and values whose source name
// matches one of the globs (convert.WithOnly).
func ConvertWithOnly(glob ...string) ConvertOption { return convert.WithOnly(glob...) }

// ConvertWithRename applies rename rules to names, in order
// (convert.WithRename).
func ConvertWithRename(r ...Rename) ConvertOption { return convert.WithRename(r...) }

// ConvertWithForce replaces an existing output (convert.WithForce).
func ConvertWithForce(force bool) ConvertOption { return convert.WithForce(force) }

// ConvertWithSync has a local output on the disk before Convert returns
// (convert.WithSync).
func ConvertWithSync(sync bool) ConvertOption { return convert.WithSync(sync) }

// ConvertWithDropFloats leaves out of a PyTorch output the values torch
// 1.13's weights_only loader refuses (convert.WithDropFloats).
func ConvertWithDropFloats(drop bool) ConvertOption { return convert.WithDropFloats(drop) }

// ConvertWithAttributes also writes a TorchScript input's plain tensor
// attributes (convert.WithAttributes).
func ConvertWithAttributes(keep bool) ConvertOption { return convert.WithAttributes(keep) }

// ConvertWithMaxShardSize splits the output into shards of at most n bytes
// plus an index (convert.WithMaxShardSize).
func ConvertWithMaxShardSize(n int64) ConvertOption { return convert.WithMaxShardSize(n) }

// ConvertWithMaxMaterialized refuses (ErrOutputTooLarge) a safetensors
// output holding more than n bytes of tensor data
// (convert.WithMaxMaterialized).
func ConvertWithMaxMaterialized(n int64) ConvertOption { return convert.WithMaxMaterialized(n) }

// ConvertWithCompress compresses the output; "zstd" is the only codec
// (convert.WithCompress).
func ConvertWithCompress(codec string) ConvertOption { return convert.WithCompress(codec) }

// ConvertWithProgress has fn called with the number of source bytes read
// so far, as the conversion goes (convert.WithProgress).
func ConvertWithProgress(fn func(n int64)) ConvertOption { return convert.WithProgress(fn) }

// ConvertWithGGUFType sets the ggml type of a GGUF output's weights (f32,
// f16, bf16, q8_0, q4_0, q4_1, q5_0, q5_1, q4_k, q5_k, q6_k)
// (convert.WithGGUFType).
func ConvertWithGGUFType(name string) ConvertOption { return convert.WithGGUFType(name) }

// ConvertWithGGUFMetadata adds (or replaces) metadata entries of a GGUF
// output (convert.WithGGUFMetadata).
func ConvertWithGGUFMetadata(kvs ...GGUFKV) ConvertOption {
	return convert.WithGGUFMetadata(kvs...)
}

// ConvertWithHFModelDir names the Hugging Face model directory whose
// config.json maps a GGUF output to llama.cpp's names and keys
// (convert.WithHFModelDir).
func ConvertWithHFModelDir(dir string) ConvertOption { return convert.WithHFModelDir(dir) }

// ConvertWithDCPRanks writes a DCP output as ranks processes would
// (convert.WithDCPRanks).
func ConvertWithDCPRanks(ranks int) ConvertOption { return convert.WithDCPRanks(ranks) }

// ConvertWithDCPSerialization chooses the layout of a DCP output (default
// DCPTorchSave) (convert.WithDCPSerialization).
func ConvertWithDCPSerialization(s DCPSerialization) ConvertOption {
	return convert.WithDCPSerialization(s)
}

// ConvertWithSplit chunks the tensors that rules split over a DCP
// output's ranks (convert.WithSplit).
func ConvertWithSplit(rules []SplitRule) ConvertOption { return convert.WithSplit(rules) }

// ConvertWithPart writes only part p of a sharded or DCP output; part 0
// writes the index once the other parts' files exist (convert.WithPart).
func ConvertWithPart(p ConvertPart) ConvertOption { return convert.WithPart(p) }

// ConvertWithPartWait sets how long part 0 waits for the other parts'
// files (default an hour) (convert.WithPartWait).
func ConvertWithPartWait(d time.Duration) ConvertOption { return convert.WithPartWait(d) }

package statedict

import (
	"errors"
	"io"

	"github.com/ckpt-dev/ckpt/gguf"
)

// Checkpoint is an opened checkpoint: all metadata, no tensor data. Tensor
// bytes are read on demand through each Tensor's readers, from the
// io.ReaderAt the checkpoint was opened on, so Close it when done.
type Checkpoint struct {
	Format    Format
	Version   string // container version: zip "version" record, legacy protocol, "" when none
	ByteOrder string // "little" or "big", as the file says (little when it says nothing)
	// Shards lists the shard files of a sharded checkpoint and ShardFormat
	// their format; both are empty otherwise.
	Shards      []string
	ShardFormat Format
	// Compression is "gzip" or "zstd" for a wrapped file, "" otherwise.
	Compression string

	Tensors  []*Tensor  // every tensor, in pickle (or file) order
	Storages []*Storage // every storage, each once, in order of first use
	Objects  []Object   // non-tensor leaves (epoch: 7, config strings, ...)
	Opaque   []Object   // benign non-plain values kept unexecuted (argparse.Namespace, numpy)
	Foreign  []Object   // unknown globals, never called, kept as placeholders

	// Metadata is the safetensors __metadata__ (nil for other formats).
	Metadata map[string]string
	// GGUF is a GGUF file's header: version, typed metadata and tensor
	// infos (nil for other formats).
	GGUF *gguf.File
	// ShardMetadata is, for a sharded checkpoint, each safetensors shard's
	// __metadata__ by its file name as Storage.File gives it.
	ShardMetadata map[string]map[string]string
	// Warnings are non-fatal findings (TorchScript archive, unused records...).
	Warnings []string
	// Quantization is set when the checkpoint is a quantized release whose
	// weights read dequantized (see WithRaw); nil otherwise.
	Quantization *QuantizationInfo
	// ModelConfig is the config.json found beside the checkpoint (or
	// named by WithModelConfig), nil when there is none.
	ModelConfig []byte
	// Root is the unpickled object tree (nil for safetensors).
	Root any

	closers []io.Closer
}

// Object is a non-tensor value found in the checkpoint tree.
type Object struct {
	Name  string // path in the tree, like a tensor name
	Type  string // Python type: "int", "float", "str", "argparse.Namespace", ...
	Value any    // Go value for plain leaves (nil, bool, int64, *big.Int, float64, string, []byte, complex128); the pickle value otherwise
}

// Close releases the files and temporary files the checkpoint holds.
func (c *Checkpoint) Close() error {
	var errs []error
	for i := len(c.closers) - 1; i >= 0; i-- {
		errs = append(errs, c.closers[i].Close())
	}
	c.closers = nil
	return errors.Join(errs...)
}

// Tensor returns the tensor with the given name, or nil.
func (c *Checkpoint) Tensor(name string) *Tensor {
	for _, t := range c.Tensors {
		if t.Name == name {
			return t
		}
	}
	return nil
}

// SharedStorages returns, for every storage that more than one tensor views,
// the names of those tensors (tied weights, views).
func (c *Checkpoint) SharedStorages() map[*Storage][]string {
	users := make(map[*Storage][]string)
	for _, t := range c.Tensors {
		if t.Storage != nil {
			users[t.Storage] = append(users[t.Storage], t.Name)
		}
	}
	for s, names := range users {
		if len(names) < 2 {
			delete(users, s)
		}
	}
	return users
}

package convert

import (
	"fmt"
	"io"
	"math"
	"path"
	"regexp"
	"strconv"
	"strings"
	"sync/atomic"

	"github.com/ckpt-dev/ckpt/dtype"
	"github.com/ckpt-dev/ckpt/ggml"
	"github.com/ckpt-dev/ckpt/gguf"
	"github.com/ckpt-dev/ckpt/quant"
	"github.com/ckpt-dev/ckpt/remap"
	"github.com/ckpt-dev/ckpt/statedict"
)

// Format is an output format: Safetensors, PyTorch, GGUF or DCP.
type Format string

// DefaultBufferSize is the size of the copy buffers that sit between the
// source and the output: the cast buffer, the zip writer's buffer when the
// output is wrapped (WithOutputWrapper), and the wrapper's write buffer.
// The output file itself is written through its own large aligned buffers
// (direct I/O on Linux; see bench/convert.sh and docs/benchmarks.md).
const DefaultBufferSize = 64 << 10

// Rename is one --rename rule: every match of Pattern in a name is
// replaced by Replacement (regexp.ReplaceAllString syntax, $1 for groups).
type Rename struct {
	Pattern     *regexp.Regexp
	Replacement string
}

// ParseRename parses "REGEX=REPL", splitting at the last "=" (so REGEX may
// contain "=" and REPL may not); REPL may be empty.
func ParseRename(s string) (Rename, error) {
	i := strings.LastIndex(s, "=")
	if i <= 0 {
		return Rename{}, fmt.Errorf("%w: rename %q: want REGEX=REPLACEMENT", ErrOption, s)
	}
	re, err := regexp.Compile(s[:i])
	if err != nil {
		return Rename{}, fmt.Errorf("%w: rename %q: %v", ErrOption, s, err)
	}
	return Rename{Pattern: re, Replacement: s[i+1:]}, nil
}

// ParseSize parses a size with an optional decimal unit as Hugging Face
// writes them: "5GB" is 5,000,000,000 bytes; KB, MB, GB, TB and the binary
// KiB, MiB, GiB, TiB are accepted, case-insensitively, and a plain number
// is bytes. Fractions are allowed ("1.5GB"); the result must be positive.
func ParseSize(s string) (int64, error) {
	t := strings.ToUpper(strings.TrimSpace(s))
	mult := 1.0
	for _, u := range []struct {
		suffix string
		mult   float64
	}{{"KIB", 1 << 10}, {"MIB", 1 << 20}, {"GIB", 1 << 30}, {"TIB", 1 << 40},
		{"KB", 1e3}, {"MB", 1e6}, {"GB", 1e9}, {"TB", 1e12}, {"B", 1}} {
		if strings.HasSuffix(t, u.suffix) {
			t, mult = strings.TrimSpace(strings.TrimSuffix(t, u.suffix)), u.mult
			break
		}
	}
	v, err := strconv.ParseFloat(t, 64)
	if err != nil || math.IsNaN(v) || v*mult < 1 || v*mult >= 1<<62 {
		return 0, fmt.Errorf("%w: size %q: want a positive number of bytes like 5GB or 500MB", ErrOption, s)
	}
	return int64(v * mult), nil
}

// options are the settings the functional options make; nothing changes
// them once Convert has applied the options.
type options struct {
	format   Format
	rules    remap.Rules
	hasRules bool
	dtype    dtype.DType
	strip    []string
	renames  []Rename
	only     []string
	shard    int64
	// maxMaterialized bounds a safetensors output's tensor bytes (0: the default)
	maxMaterialized int64
	compress        string
	force           bool
	sync            bool // WithSync
	dropFloats      bool
	attributes      bool
	progress        func(int64)
	bufSize         int
	wrap            func(io.Writer) io.Writer
	dest            Destination
	ggufType        string              // WithGGUFType
	ggufMeta        []gguf.KV           // WithGGUFMetadata
	hfDir           string              // WithHFModelDir
	transform       TensorTransform     // WithTransform
	quantize        *quant.QuantizeSpec // WithQuantize
	quantIgnore     []string            // WithQuantizeIgnore
	quantSame       bool                // WithQuantizeSame

	dcpOpt dcpOptions // DCP output and --part (out_dcp.go, part.go)
}

// runState is what one conversion works out as it goes.
type runState struct {
	pageCache *atomic.Int64 // initWriteBack: output bytes that may go to the page cache; nil with WithSync
	checks    *sourceChecks // the source's digests and CRCs to check as it is read
	ggufKeep  *ggufKeep     // a GGUF input's header, for GGUF and safetensors outputs
	ggufArch  *hfArch       // a GGUF output's Hugging Face architecture (gguf_llama.go)
	ggufTypes *GGUFTypes    // a GGUF output's types and fallbacks (gguf_types.go)
	// transformed maps the storage of each tensor WithTransform replaces
	// to that tensor (planTransforms).
	transformed map[*statedict.Storage]*statedict.Tensor
	ahead       *transformAhead // the transformed tensors computed ahead (transform.go)
	// WithQuantize: the storages of the quantized tensors (never cast)
	// and the report of what was quantized (quantize.go).
	quantKeep   map[*statedict.Storage]bool
	quantReport *QuantizeReport
	// modelConfig is the config.json written beside a directory output (modelconfig.go)
	modelConfig []byte
}

// config is one conversion: its options and its state.
type config struct {
	options
	runState
}

// newConfig applies opts over the defaults.
func newConfig(opts []Option) *config {
	c := &config{options: options{bufSize: DefaultBufferSize}}
	for _, o := range opts {
		o(&c.options)
	}
	return c
}

// progressAdd reports n bytes of progress.
func (c *config) progressAdd(n int64) {
	if c.progress != nil {
		c.progress(n)
	}
}

// Option configures Convert.
type Option func(*options)

// WithFormat sets the output format; without it the format follows the
// output's extension (.safetensors; .pt, .pth, .bin, .ckpt; a trailing
// .zst and .index.json are looked through).
func WithFormat(f Format) Option { return func(c *options) { c.format = f } }

// WithRules retags storages for .pth output: each storage's location tag
// becomes rules.Target(tag). Without it tags are kept as saved.
func WithRules(r remap.Rules) Option {
	return func(c *options) { c.rules, c.hasRules = r, true }
}

// WithDType casts floating tensors to d (Float64, Float32, Float16 or
// BFloat16).
func WithDType(d dtype.DType) Option { return func(c *options) { c.dtype = d } }

// CastTarget reports whether WithDType accepts d: float64, float32,
// float16 or bfloat16.
func CastTarget(d dtype.DType) bool {
	switch d {
	case dtype.Float64, dtype.Float32, dtype.Float16, dtype.BFloat16:
		return true
	}
	return false
}

// WithStripPrefix removes prefix from the start of every name that has
// it; several prefixes are tried in order, each once ("module.",
// "_orig_mod.").
func WithStripPrefix(prefix ...string) Option {
	return func(c *options) { c.strip = append(c.strip, prefix...) }
}

// WithRename applies rename rules, in order, after prefix stripping.
func WithRename(r ...Rename) Option { return func(c *options) { c.renames = append(c.renames, r...) } }

// WithOnly keeps only the tensors and values whose source name matches
// one of the globs (path.Match syntax; "*" also matches dots).
func WithOnly(glob ...string) Option { return func(c *options) { c.only = append(c.only, glob...) } }

// WithMaxShardSize splits the output into shards of at most n bytes of
// tensor data (a single larger tensor gets a shard of its own), in the
// Hugging Face layout with an index.json.
func WithMaxShardSize(n int64) Option { return func(c *options) { c.shard = n } }

// WithMaxMaterialized bounds the tensor bytes of a safetensors output to
// n. Safetensors holds every tensor contiguous, so an overlapping view (a
// broadcast made by expand, stride 0) is written at its full size: a
// (2^40,) float32 view of one element would be 4 TiB. Convert refuses,
// before writing anything, an output past the bound with ErrTooLarge
// naming the tensor that grows most. The default is the larger of
// DefaultMaxMaterialized (1 GiB) and MaterializedFactor (64) times the
// input's storage bytes; .pth output keeps views and is not bounded.
func WithMaxMaterialized(n int64) Option { return func(c *options) { c.maxMaterialized = n } }

// WithCompress compresses the output; "zstd" is the only codec.
func WithCompress(codec string) Option { return func(c *options) { c.compress = codec } }

// WithDropFloats leaves float values out of .pth output, and with them
// every other value torch 1.13's torch.load(weights_only=True) cannot read
// (bytes, sets, complex numbers, torch.device values): the output then
// loads with weights_only=True on torch 1.13. Without it they are written;
// weights_only loaders read floats from torch 2.0 on, and the others on
// the torch 2.x releases whose allowlist names them. Dropped values are
// listed in the Summary.
func WithDropFloats(drop bool) Option { return func(c *options) { c.dropFloats = drop } }

// WithAttributes writes a TorchScript module's plain tensor attributes
// (statedict.Tensor.Attribute: not parameters or buffers, so not in
// ScriptModule.state_dict()) too. Without it they are dropped, and listed
// in the Summary as dropped.
func WithAttributes(keep bool) Option { return func(c *options) { c.attributes = keep } }

// WithSync(true) has every local output file on the disk before Convert
// returns: written behind (handed to the disk as it is written) where the
// system allows, and synced (fsync) before it gets its name. By default
// outputs are not synced, as cp does not sync: the first bytes of a
// conversion's outputs, up to the kernel's free-run ceiling (half way
// between the background and the dirty thresholds, vm.dirty_background_*
// and vm.dirty_*, less the pages dirty already), go through the page
// cache and are left to the kernel's write-back; the rest is written
// behind, which past that point is faster than buffered writes that meet
// the kernel's dirty-page throttling. Summary.Synced says which was done.
// Object-store outputs are unaffected: each is complete when the store
// acknowledges it.
func WithSync(sync bool) Option { return func(c *options) { c.sync = sync } }

// WithForce allows replacing existing output files.
func WithForce(force bool) Option { return func(c *options) { c.force = force } }

// WithProgress calls fn with the number of source bytes read, as the
// conversion goes (for a callback like a progress bar).
func WithProgress(fn func(n int64)) Option { return func(c *options) { c.progress = fn } }

// WithBufferSize sets the copy buffer size (default DefaultBufferSize).
func WithBufferSize(n int) Option {
	return func(c *options) {
		if n >= 4096 {
			c.bufSize = n
		}
	}
}

// WithOutputWrapper wraps every output file's writer, for quotas,
// metering or fault injection. Errors of the wrapped writer abort the
// conversion and leave no output.
func WithOutputWrapper(wrap func(io.Writer) io.Writer) Option {
	return func(c *options) { c.wrap = wrap }
}

func (c *options) validate() error {
	if c.ggufType != "" {
		t, err := ggml.ParseType(c.ggufType)
		if err != nil || !ggml.CanQuantize(t) || t == ggml.Q8_K {
			return fmt.Errorf("%w: GGUF type %q: want f32, f16, bf16, q8_0, q4_0, q4_1, q5_0, q5_1, q4_k, q5_k, q6_k or mxfp4", ErrOption, c.ggufType)
		}
	}
	if err := c.validateSame(); err != nil {
		return err
	}
	if c.dtype != dtype.Invalid && !CastTarget(c.dtype) {
		return fmt.Errorf("%w: cast to %s is not supported (float64, float32, float16, bfloat16)", ErrOption, c.dtype)
	}
	for _, g := range c.quantIgnore {
		if _, err := path.Match(g, ""); err != nil {
			return fmt.Errorf("%w: --ignore glob %q: %v", ErrOption, g, err)
		}
	}
	for _, g := range c.only {
		if _, err := path.Match(g, ""); err != nil {
			return fmt.Errorf("%w: glob %q: %v", ErrOption, g, err)
		}
	}
	if c.compress != "" && c.compress != "zstd" {
		return fmt.Errorf("%w: compression %q (only zstd)", ErrOption, c.compress)
	}
	if c.compress != "" && c.shard > 0 {
		return fmt.Errorf("%w: --compress and --max-shard-size cannot be combined", ErrOption)
	}
	if c.maxMaterialized < 0 {
		return fmt.Errorf("%w: negative --max-materialized", ErrOption)
	}
	if c.shard < 0 {
		return fmt.Errorf("%w: negative shard size", ErrOption)
	}
	return nil
}

// formatFor infers the output format from a file name.
func formatFor(name string) (Format, bool) {
	n := strings.ToLower(name)
	n = strings.TrimSuffix(n, ".zst")
	n = strings.TrimSuffix(n, ".index.json")
	switch path.Ext(n) {
	case ".safetensors":
		return Safetensors, true
	case ".pt", ".pth", ".bin", ".ckpt":
		return PyTorch, true
	case ".gguf":
		return GGUF, true
	}
	return "", false
}

// Forced reports whether opts allow replacing existing output files
// (WithForce(true)), for callers that write convert's output elsewhere
// afterwards (an upload) and must apply the same rule there.
func Forced(opts ...Option) bool {
	return newConfig(opts).force
}

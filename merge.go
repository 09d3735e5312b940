package ckpt

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/ckpt-dev/ckpt/convert"
	"github.com/ckpt-dev/ckpt/lora"
	"github.com/ckpt-dev/ckpt/objstore"
	"github.com/ckpt-dev/ckpt/statedict"
)

// The names in a PEFT adapter directory.
const (
	adapterConfigName = "adapter_config.json"
	adapterSafeName   = "adapter_model.safetensors"
	adapterBinName    = "adapter_model.bin"
)

// MergeAdapter is one adapter of Merge: a PEFT directory (local, or an
// s3://, gs://, az:// or https:// prefix) and the weight its delta is
// merged with.
type MergeAdapter struct {
	Path   string
	Weight float64
}

// ParseMergeAdapter parses "PATH" (weight 1) or "PATH:WEIGHT", the weight
// a decimal number that may be negative; a PATH with a ":" in it (a URL)
// keeps it unless what follows the last ":" is a number.
func ParseMergeAdapter(s string) (MergeAdapter, error) {
	if i := strings.LastIndex(s, ":"); i > 0 {
		if w, err := strconv.ParseFloat(s[i+1:], 64); err == nil {
			if w != w || w > 1e30 || w < -1e30 {
				return MergeAdapter{}, fmt.Errorf("%w: adapter %q: weight %v", ErrMergeOption, s, w)
			}
			return MergeAdapter{Path: s[:i], Weight: w}, nil
		}
	}
	if s == "" {
		return MergeAdapter{}, fmt.Errorf("%w: empty adapter", ErrMergeOption)
	}
	return MergeAdapter{Path: s, Weight: 1}, nil
}

// ErrMergeOption reports an invalid Merge argument.
var ErrMergeOption = errors.New("merge: invalid option")

// The sentinel errors of Merge's refusals (those of the lora package).
var (
	// ErrAdapterNotLoRA: the adapter's peft_type is not LORA.
	ErrAdapterNotLoRA = lora.ErrNotLoRA
	// ErrAdapterUnsupported: a setting that changes the merge and that
	// ckpt does not implement.
	ErrAdapterUnsupported = lora.ErrUnsupported
	// ErrAdapterMismatch: an adapter module or tensor the base lacks.
	ErrAdapterMismatch = lora.ErrMissing
	// ErrAdapterShape: adapter shapes that do not fit the base or rank.
	ErrAdapterShape = lora.ErrShape
	// ErrAdapterConfig: an adapter_config.json that does not parse.
	ErrAdapterConfig = lora.ErrConfig
)

// MergeOption configures Merge.
type MergeOption func(*mergeConfig)

type mergeConfig struct {
	convert []ConvertOption
	open    []Option
}

// MergeWithConvertOptions passes options to the conversion that writes
// the output (ConvertWithDType, ConvertWithFormat, ConvertWithForce, ...).
func MergeWithConvertOptions(opts ...ConvertOption) MergeOption {
	return func(c *mergeConfig) { c.convert = append(c.convert, opts...) }
}

// MergeWithQuantizeSame writes the output quantized as the base is
// (convert.WithQuantizeSame): the quantized weights no adapter touches
// are copied as the base stores them (codes and scales, byte for byte),
// each merged one is quantized from its merged values with the base's
// scheme and block size, and a directory output gets the base's
// config.json with its quantization_config. A base quantized in a scheme
// ckpt does not write (GPTQ, AWQ, bitsandbytes, MLX, ...) is refused with
// ErrQuantizeSame before anything is written; a dense base is merged as
// without the option.
func MergeWithQuantizeSame() MergeOption {
	return func(c *mergeConfig) { c.convert = append(c.convert, convert.WithQuantizeSame()) }
}

// ErrQuantizeSame reports a base MergeWithQuantizeSame cannot write back
// in its own scheme (convert.ErrQuantizeSame).
var ErrQuantizeSame = convert.ErrQuantizeSame

// MergeWithOpenOptions passes options to Open for the base and the
// adapters.
func MergeWithOpenOptions(opts ...Option) MergeOption {
	return func(c *mergeConfig) { c.open = append(c.open, opts...) }
}

// MergeReport is what Merge did: the adapters, each module's scale, and
// the output written (ConvertSummary).
type MergeReport struct {
	Base   string          `json:"base"`
	Output *ConvertSummary `json:"output"`
	*lora.Report
	Seconds float64 `json:"seconds"`
}

// Merge writes base with the adapters merged to out, as PEFT's
// merge_and_unload would leave the weights: W + sum of w_i * delta_i,
// delta_i = scaling_i * B_i @ A_i laid out as W (docs/merge.md has the
// rules). base is anything Open reads; out anything Convert writes, in
// the base's dtypes unless MergeWithConvertOptions casts. Every adapter is
// checked against the base (modules, shapes, ranks, settings) before a
// byte is written, and a failure leaves no output. Tensors stream one at
// a time: only the tensor being merged and its adapter pair are in
// memory, and a plain LoRA weight not even whole (its rows are merged a
// block at a time on their way to the output, docs/merge.md).
func Merge(ctx context.Context, base, out string, adapters []MergeAdapter, opts ...MergeOption) (*MergeReport, error) {
	start := time.Now()
	cfg := &mergeConfig{}
	for _, o := range opts {
		o(cfg)
	}
	if len(adapters) == 0 {
		return nil, fmt.Errorf("%w: no adapter", ErrMergeOption)
	}
	ck, err := Open(ctx, base, cfg.open...)
	if err != nil {
		return nil, err
	}
	defer ck.Close()
	var las []*lora.Adapter
	for _, a := range adapters {
		la, closeFn, err := openAdapter(ctx, a, cfg.open)
		if err != nil {
			return nil, err
		}
		defer closeFn()
		las = append(las, la)
	}
	m, err := lora.Plan(ck, las)
	if err != nil {
		return nil, err
	}
	sum, err := Convert(ctx, ck, out, append(append([]ConvertOption{}, cfg.convert...), convert.WithTransform(m))...)
	if err != nil {
		return nil, err
	}
	return &MergeReport{Base: base, Output: sum, Report: m.Report(), Seconds: time.Since(start).Seconds()}, nil
}

// openAdapter reads a PEFT directory's config and opens its weights
// (adapter_model.safetensors, else adapter_model.bin, read as any
// checkpoint: a pickle is never executed).
func openAdapter(ctx context.Context, a MergeAdapter, open []Option) (*lora.Adapter, func(), error) {
	cfgBytes, weights, err := adapterFiles(ctx, a.Path)
	if err != nil {
		return nil, nil, err
	}
	c, err := lora.ParseConfig(cfgBytes)
	if err != nil {
		return nil, nil, fmt.Errorf("adapter %s: %w", a.Path, err)
	}
	ck, err := Open(ctx, weights, open...)
	if err != nil {
		return nil, nil, err
	}
	la, err := lora.NewAdapter(a.Path, c, ck, a.Weight)
	if err != nil {
		ck.Close()
		return nil, nil, err
	}
	return la, func() { ck.Close() }, nil
}

// adapterFiles returns the adapter_config.json of the PEFT directory dir
// and the path or URL of its weights.
func adapterFiles(ctx context.Context, dir string) ([]byte, string, error) {
	if !objstore.IsURL(dir) {
		b, err := readSmall(dir, filepath.Join(dir, adapterConfigName))
		if err != nil {
			return nil, "", err
		}
		for _, n := range []string{adapterSafeName, adapterBinName} {
			if _, err := os.Stat(filepath.Join(dir, n)); err == nil {
				return b, filepath.Join(dir, n), nil
			}
		}
		return nil, "", fmt.Errorf("adapter %s: %w: neither %s nor %s", dir, ErrAdapterMismatch, adapterSafeName, adapterBinName)
	}
	st, key, err := objstore.NewStore(ctx, dir)
	if err != nil {
		return nil, "", err
	}
	key = strings.TrimSuffix(key, "/")
	o, err := st.Open(path.Join(key, adapterConfigName))
	if err != nil {
		return nil, "", err
	}
	defer o.Close()
	if o.Size() > lora.MaxConfigSize {
		return nil, "", fmt.Errorf("adapter %s: %w: %s is %d bytes", dir, ErrAdapterConfig, adapterConfigName, o.Size())
	}
	b := make([]byte, o.Size())
	if _, err := o.ReadAt(b, 0); err != nil && err != io.EOF {
		return nil, "", err
	}
	for _, n := range []string{adapterSafeName, adapterBinName} {
		if ok, err := st.Exists(ctx, path.Join(key, n)); err != nil {
			return nil, "", err
		} else if ok {
			return b, strings.TrimSuffix(dir, "/") + "/" + n, nil
		}
	}
	return nil, "", fmt.Errorf("adapter %s: %w: neither %s nor %s", dir, ErrAdapterMismatch, adapterSafeName, adapterBinName)
}

// readSmall reads a regular file of at most lora.MaxConfigSize bytes.
func readSmall(dir, name string) ([]byte, error) {
	f, fi, err := statedict.OpenRegular(name)
	if err != nil {
		return nil, fmt.Errorf("adapter %s: %w", dir, err)
	}
	defer f.Close()
	if fi.Size() > lora.MaxConfigSize {
		return nil, fmt.Errorf("adapter %s: %w: %s is %d bytes", dir, ErrAdapterConfig, adapterConfigName, fi.Size())
	}
	return io.ReadAll(io.LimitReader(f, lora.MaxConfigSize+1))
}

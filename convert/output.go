package convert

import (
	"context"
	"fmt"
	"math"
	"math/big"
	"time"

	"github.com/ckpt-dev/ckpt/dtype"
	"github.com/ckpt-dev/ckpt/pickle"
	"github.com/ckpt-dev/ckpt/statedict"
)

// output is one output format: what the conversion asks of a format.
// Each lives in its own file (out_safetensors.go, out_pth.go, out_gguf.go,
// out_dcp.go); outputs maps the Format constants to them. Adding a format
// is one file and one line in outputs.
type output interface {
	// convert runs the whole conversion of ck to out; the file formats
	// hand it to the shared pipeline (convertFiles) with their fileOutput.
	convert(ctx context.Context, c *config, ck *statedict.Checkpoint, out string, start time.Time) (*Summary, error)
	// unsupported says why a tensor cannot be written, or "".
	unsupported(t *statedict.Tensor) string
	// value returns the value to write for a non-tensor leaf of a flat
	// state dict, or why it cannot be written.
	value(v any, dropFloats bool) (any, string)
	// aliases says how tensors that share their data are written.
	aliases() aliasing
	// keepsTree reports whether the output can keep the source's object
	// tree (useTree).
	keepsTree() bool
	// tally notes in sum a dtype written that older readers lack.
	tally(sum *Summary, d dtype.DType)
	// countsFloats reports whether the float values of a flat output
	// count in Summary.Floats.
	countsFloats() bool
	// rankExt returns the extension of tensor-parallel rank files.
	rankExt() string
}

// fileOutput is an output of one file, or of shards and an index, written
// by the shared pipeline (convertFiles): safetensors, .pth, GGUF.
type fileOutput interface {
	output
	// names returns the file name stem and extension of a directory or
	// sharded output ("model", ".safetensors").
	names() (stem, ext string)
	// checkLayout refuses options and output names the format cannot
	// honour.
	checkLayout(c *config, out string) error
	// storageShards reports whether shards keep the tensors of one
	// storage together.
	storageShards() bool
	// splits reports whether --part can split the output's files.
	splits() bool
	// prepare works out, before the plan, what the output needs of ck.
	prepare(c *config, ck *statedict.Checkpoint) error
	// checkPlan refuses, before anything is written, items the output
	// cannot hold.
	checkPlan(c *config, ck *statedict.Checkpoint, items []*item) error
	// metadata returns the metadata of the output files.
	metadata(c *config, p *plan) (map[string]string, error)
	// headLen returns the length of a file's header rewritten at the end
	// (Destination.Create), or 0.
	headLen(c *config, items []*item, md map[string]string) (int64, error)
	// write writes one output file (items, and values and tr for the
	// first) to t, and returns the tensor bytes written.
	write(ctx context.Context, c *config, t *tempFile, items []*item, values []value, tr *tree, md map[string]string) (int64, error)
	// sizes returns the size of each file of a split output as write
	// writes it, -1 where it cannot be told ahead (waitOtherParts).
	sizes(c *config, p *plan, groups [][]*item) ([]int64, error)
}

// outputs are the output formats.
var outputs = map[Format]output{
	Safetensors: safetensorsOut{},
	PyTorch:     pthOut{},
	GGUF:        ggufOut{},
	DCP:         dcpOut{},
}

// aliasing is how an output writes tensors that share their data.
type aliasing int

const (
	aliasKeep    aliasing = iota // as the plan finds them
	aliasRestore                 // restoreAliases: views of one storage stay views
	aliasDedupe                  // dedupe: identical views are written once
)

// pickOutput returns the output format: WithFormat's, or the one out's
// name tells (safetensors for a directory).
func (c *config) pickOutput(out string) (output, error) {
	f := c.format
	if f == "" {
		var ok bool
		if f, ok = formatFor(out); !ok {
			if !c.isDir(out) {
				return nil, fmt.Errorf("%w: cannot tell the format of %q from its name (use --to)", ErrFormat, out)
			}
			f = Safetensors
		}
	}
	o, ok := outputs[f]
	if !ok {
		return nil, fmt.Errorf("%w: %q", ErrFormat, f)
	}
	return o, nil
}

// baseOutput holds the defaults of the output methods.
type baseOutput struct{}

func (baseOutput) checkLayout(*config, string) error                          { return nil }
func (baseOutput) aliases() aliasing                                          { return aliasKeep }
func (baseOutput) keepsTree() bool                                            { return false }
func (baseOutput) storageShards() bool                                        { return false }
func (baseOutput) splits() bool                                               { return false }
func (baseOutput) prepare(*config, *statedict.Checkpoint) error               { return nil }
func (baseOutput) tally(*Summary, dtype.DType)                                {}
func (baseOutput) countsFloats() bool                                         { return false }
func (baseOutput) rankExt() string                                            { return ".safetensors" }
func (baseOutput) headLen(*config, []*item, map[string]string) (int64, error) { return 0, nil }

func (baseOutput) checkPlan(*config, *statedict.Checkpoint, []*item) error { return nil }

func (baseOutput) metadata(_ *config, p *plan) (map[string]string, error) { return p.metadata() }

func (baseOutput) sizes(_ *config, _ *plan, groups [][]*item) ([]int64, error) {
	sizes := make([]int64, len(groups))
	for i := range sizes {
		sizes[i] = -1
	}
	return sizes, nil
}

// unsupported says why a tensor cannot be written to the format, or "".
func unsupported(t *statedict.Tensor, f Format) string {
	return outputs[f].unsupported(t)
}

// unsupportedData says why a tensor cannot be written to any format, or "".
func unsupportedData(t *statedict.Tensor) string {
	switch {
	case t.Storage == nil || t.Meta:
		return "tensor without data (meta)"
	case t.Quant != nil || t.DType.IsQuantized():
		return "quantized tensor"
	case t.Layout != "" && t.Layout != statedict.Strided:
		return "sparse tensor part (" + string(t.Layout) + ")"
	case t.Subclass != "" && t.DTensor == nil: // a whole DTensor is written as its local tensor
		return "tensor subclass " + t.Subclass
	case t.NumEl() < 0:
		return "size overflows"
	}
	return ""
}

// plainValue returns the value to write for a non-tensor leaf of a flat
// state dict, or why it cannot be written: to JSON metadata (asJSON), or
// to a pickle.
func plainValue(v any, asJSON, dropFloats bool) (any, string) {
	switch x := v.(type) {
	case nil, bool, int64, string:
		return x, ""
	case *big.Int:
		if asJSON {
			return x.String(), "" // JSON numbers this large lose precision in most readers
		}
		if (x.BitLen()+8)/8 > 255 {
			return nil, fmt.Sprintf("integer of %d bits: longer than LONG1 can write", x.BitLen())
		}
		return x, ""
	case float64:
		if !asJSON {
			if dropFloats {
				return nil, "float: dropped for torch 1.13's weights_only loader (--drop-floats)"
			}
			return x, ""
		}
		if math.IsNaN(x) || math.IsInf(x, 0) {
			return fmt.Sprint(x), ""
		}
		return x, ""
	}
	return nil, fmt.Sprintf("%s values are not kept", pickle.TypeName(v))
}

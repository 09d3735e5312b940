package convert

import (
	"context"
	"encoding/json"
	"fmt"
	"os"

	"github.com/ckpt-dev/ckpt/dtype"
	"github.com/ckpt-dev/ckpt/statedict"
)

// A directory output (OUT a directory, or shards and their index) of a checkpoint that came
// with a config.json gets that config.json beside it, as a Hugging Face
// model directory has one: without its quantization block
// (quantization_config, MLX's quantization), the weights being written
// dequantized, and with torch_dtype (and transformers' newer dtype, when
// present) set to the dtype the weights are written in. A single-file
// output gets none: there is no directory of the model's to put it in.
// DCP outputs do not get one either.

// outputModelConfig returns the config.json to write beside a directory
// output of ck, nil when ck came without one or it is not a JSON object.
func outputModelConfig(ck *statedict.Checkpoint, cast dtype.DType) ([]byte, error) {
	if len(ck.ModelConfig) == 0 {
		return nil, nil
	}
	var m map[string]json.RawMessage
	if json.Unmarshal(ck.ModelConfig, &m) != nil || m == nil {
		return nil, nil
	}
	delete(m, "quantization_config")
	delete(m, "quantization")
	dt := cast
	if dt == dtype.Invalid && ck.Quantization != nil {
		dt, _ = dtype.Parse(ck.Quantization.DType)
	}
	if dt != dtype.Invalid {
		s, _ := json.Marshal(dt.String())
		m["torch_dtype"] = s
		if _, ok := m["dtype"]; ok {
			m["dtype"] = s
		}
	}
	b, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return nil, fmt.Errorf("convert: config.json: %w", err)
	}
	return append(b, '\n'), nil
}

// writeSmall writes b to final (a file of the output beside its shards)
// as a temporary committed with the others; an existing final is refused
// without WithForce, as the shards are.
func (c *config) writeSmall(ctx context.Context, final string, b []byte) (*tempFile, error) {
	if !c.force {
		exists := false
		if c.dest != nil {
			ok, err := c.dest.Exists(ctx, final)
			if err != nil {
				return nil, err
			}
			exists = ok
		} else if _, err := os.Lstat(final); err == nil {
			exists = true
		}
		if exists {
			return nil, fmt.Errorf("%w: %s", ErrExists, c.destName(final))
		}
	}
	t, err := c.create(ctx, final, 0)
	if err != nil {
		return nil, err
	}
	bw := c.output(t)
	if _, err := bw.Write(b); err != nil {
		return t, writeErr(c.destName(final), err)
	}
	if err := bw.Flush(); err != nil {
		return t, writeErr(c.destName(final), err)
	}
	return t, t.finish()
}

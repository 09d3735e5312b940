package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strconv"
	"strings"

	"github.com/ckpt-dev/ckpt/internal/human"

	"github.com/ckpt-dev/ckpt"
)

const splitHelp = "tensor-parallel split rules PATTERN=DIM[,PATTERN=DIM...] (first match wins; unmatched tensors are replicated)"

// splitRulesDoc documents the rule syntax shared by convert and load.
const splitRulesDoc = `RULES is a comma-separated list of
PATTERN=DIM: tensors whose whole name matches the glob PATTERN ('*' matches
any characters, dots included) are split along dimension DIM (negative counts
from the last: -1); PATTERN=replicate keeps matching tensors whole. The first
rule that matches decides; tensors no rule matches are replicated (every rank
gets them whole). A dimension of size n splits as torch.chunk and DTensor's
Shard(dim) do: each rank gets ceil(n/W) indices in rank order, so the last
ranks may get fewer or none (10 rows over 4 ranks: 3, 3, 3, 1).`

const tpHelp = `With --tensor-parallel W, OUT is a directory (or an s3://, gs:// or az://
prefix ending in /) that receives W files,
rank-00000-of-0000W.safetensors to rank-0000(W-1)-of-0000W.safetensors (or
.pth with --to pth), rank r's file holding its part of every tensor under the
tensor's own name, and the values. ` + splitRulesDoc

func parseSplit(split string) ([]ckpt.SplitRule, error) {
	rules, err := ckpt.ParseSplitRules(split)
	if err != nil {
		return nil, usagef("--split: %v", err)
	}
	return rules, nil
}

// resolveRank turns --rank (N, or auto: read from a launcher's
// environment, as convert's --part auto reads it) and --world-size into
// a rank and a world size; with auto it says on stderr which launcher
// it used.
func resolveRank(s *streams, spec string, world int) (int, int, error) {
	if spec != "auto" {
		r, err := strconv.Atoi(strings.TrimSpace(spec))
		if err != nil {
			return 0, 0, usagef("--rank %q: want a number or auto", spec)
		}
		return r, world, nil
	}
	p, src, err := partFromEnv(os.Getenv, world)
	if err != nil {
		return 0, 0, usagef("--rank auto%s", strings.ReplaceAll(strings.TrimPrefix(err.Error(), "--part auto"), "--part-count", "--world-size"))
	}
	if world != 0 && world != p.Count {
		return 0, 0, usagef("--rank auto: %s, but --world-size %d", src, world)
	}
	fmt.Fprintf(s.Err, "ckpt: rank %d of %d (%s)\n", p.Index, p.Count, src)
	return p.Index, p.Count, nil
}

// rankOption is the ckpt option that restricts a load to one rank's part.
func rankOption(rank, world int, split string) (ckpt.Option, error) {
	if world == 0 {
		return nil, usagef("--rank and --split need --world-size")
	}
	if world < 0 || rank < 0 || rank >= world {
		return nil, usagef("--rank %d --world-size %d: want 0 <= rank < world-size", rank, world)
	}
	rules, err := parseSplit(split)
	if err != nil {
		return nil, err
	}
	return ckpt.WithRank(rank, world, rules), nil
}

type tpReport struct {
	In    string                 `json:"in"`
	Out   string                 `json:"out"`
	World int                    `json:"world_size"`
	Ranks []*ckpt.ConvertSummary `json:"ranks"`
}

func runConvertTP(ctx context.Context, s *streams, o *convertOptions, copts []ckpt.ConvertOption) error {
	if o.TP < 1 {
		return usagef("--split needs --tensor-parallel W with W >= 1")
	}
	if o.MaxShard != "" || o.Compress != "" {
		return usagef("--tensor-parallel writes one file per rank: no --max-shard-size or --compress")
	}
	rules, err := parseSplit(o.Split)
	if err != nil {
		return err
	}
	ck, err := ckpt.Open(ctx, o.In, o.Quant.options()...)
	if err != nil {
		return err
	}
	defer ck.Close()
	sums, err := ckpt.ConvertTensorParallel(ctx, ck, o.Out, o.TP, rules, copts...)
	if err != nil {
		return err
	}
	if o.JSON {
		enc := json.NewEncoder(s.Out)
		enc.SetIndent("", "  ")
		return enc.Encode(tpReport{In: o.In, Out: o.Out, World: o.TP, Ranks: sums})
	}
	var total int64
	var secs float64
	for _, sum := range sums {
		total += sum.Bytes
		secs += sum.Seconds
		for _, f := range sum.Files {
			fmt.Fprintf(s.Out, "wrote %s (%d tensors, %s)\n", f, sum.Tensors, human.Bytes(sum.Bytes))
		}
	}
	fmt.Fprintf(s.Out, "%s -> %d ranks in %s: %s in %.2f s\n", o.In, o.TP, o.Out, human.Bytes(total), secs)
	return nil
}

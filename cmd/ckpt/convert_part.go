package main

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/ckpt-dev/ckpt"
	"github.com/spf13/pflag"
)

// addPartFlags adds the flags of DCP output and split conversions.
func addPartFlags(f *pflag.FlagSet, o *convertOptions) {
	f.IntVar(&o.DCPRanks, "dcp-ranks", 0, "dcp: write R files __0_0.distcp..__{R-1}_0.distcp as R ranks would (tensors balanced by bytes; --split chunks them as for tensor parallel)")
	f.StringVar(&o.DCPFormat, "dcp-format", "torch", "dcp: torch (.metadata and .distcp files of torch.save zips) or safetensors (torch >= 2.8's HuggingFaceStorageWriter layout: model-00001-of-00001.safetensors and its index, or with --dcp-ranks R one shard-RRRRR-model-00001-of-00001.safetensors per rank, chunks placed by DCP_SHARDING_INFO saved_offsets)")
	f.StringVar(&o.Part, "part", "", "write only part I of N of a sharded output (--dcp-ranks, --max-shard-size): I/N, or auto (torchrun RANK/WORLD_SIZE, Slurm SLURM_PROCID/SLURM_NTASKS, JOB_COMPLETION_INDEX with --part-count); part 0 writes the index once the others' files exist")
	f.IntVar(&o.PartCount, "part-count", 0, "--part auto: the number of parts for a Kubernetes Indexed Job (JOB_COMPLETION_INDEX)")
	f.StringVar(&o.PartWait, "part-wait", "", "--part: how long part 0 waits for the other parts' files before writing the index (default 1h)")
}

// partFromEnv reads the part from a launcher's environment: torchrun
// (RANK, WORLD_SIZE), Slurm (SLURM_PROCID, SLURM_NTASKS), a Kubernetes
// Indexed Job (JOB_COMPLETION_INDEX, with count from --part-count), in
// that order; it says which it used.
func partFromEnv(getenv func(string) string, count int) (ckpt.ConvertPart, string, error) {
	for _, l := range []struct{ name, index, count string }{
		{"torchrun", "RANK", "WORLD_SIZE"},
		{"Slurm", "SLURM_PROCID", "SLURM_NTASKS"},
	} {
		i, n := getenv(l.index), getenv(l.count)
		if i == "" || n == "" {
			continue
		}
		p, err := partOf(i, n)
		if err != nil {
			return p, "", usagef("--part auto: %s=%q %s=%q: %v", l.index, i, l.count, n, err)
		}
		return p, fmt.Sprintf("%s: %s=%d %s=%d", l.name, l.index, p.Index, l.count, p.Count), nil
	}
	if i := getenv("JOB_COMPLETION_INDEX"); i != "" {
		if count <= 0 {
			return ckpt.ConvertPart{}, "", usagef("--part auto: JOB_COMPLETION_INDEX is set but not --part-count (the Job's completions)")
		}
		p, err := partOf(i, strconv.Itoa(count))
		if err != nil {
			return p, "", usagef("--part auto: JOB_COMPLETION_INDEX=%q --part-count %d: %v", i, count, err)
		}
		return p, fmt.Sprintf("Kubernetes Indexed Job: JOB_COMPLETION_INDEX=%d --part-count %d", p.Index, p.Count), nil
	}
	return ckpt.ConvertPart{}, "", usagef("--part auto: no launcher environment (RANK/WORLD_SIZE, SLURM_PROCID/SLURM_NTASKS, JOB_COMPLETION_INDEX)")
}

func partOf(i, n string) (ckpt.ConvertPart, error) {
	idx, err1 := strconv.Atoi(strings.TrimSpace(i))
	cnt, err2 := strconv.Atoi(strings.TrimSpace(n))
	if err1 != nil || err2 != nil || cnt < 1 || cnt > 1<<16 || idx < 0 || idx >= cnt {
		return ckpt.ConvertPart{}, fmt.Errorf("want 0 <= I < N <= 65536")
	}
	return ckpt.ConvertPart{Index: idx, Count: cnt}, nil
}

// parsePart parses --part: "I/N" or "auto".
func parsePart(spec string, count int, getenv func(string) string) (ckpt.ConvertPart, string, error) {
	if spec == "auto" {
		return partFromEnv(getenv, count)
	}
	i, n, ok := strings.Cut(spec, "/")
	if !ok {
		return ckpt.ConvertPart{}, "", usagef("--part %q: want I/N (0-based I) or auto", spec)
	}
	p, err := partOf(i, n)
	if err != nil {
		return p, "", usagef("--part %q: %v", spec, err)
	}
	return p, fmt.Sprintf("--part %d/%d", p.Index, p.Count), nil
}

// partOptions turns --dcp-ranks, --split (for dcp), --part and
// --part-wait into convert options.
func (o *convertOptions) partOptions() ([]ckpt.ConvertOption, error) {
	var out []ckpt.ConvertOption
	if o.DCPRanks != 0 {
		if o.To != "dcp" {
			return nil, usagef("--dcp-ranks needs --to dcp")
		}
		if o.DCPRanks < 1 || o.DCPRanks > 1<<16 {
			return nil, usagef("--dcp-ranks %d: want 1 to 65536", o.DCPRanks)
		}
		out = append(out, ckpt.ConvertWithDCPRanks(o.DCPRanks))
	}
	switch {
	case o.DCPFormat == "torch":
	case o.To != "dcp":
		return nil, usagef("--dcp-format needs --to dcp")
	case o.DCPFormat == "safetensors":
		out = append(out, ckpt.ConvertWithDCPSerialization(ckpt.DCPSafetensors))
	default:
		return nil, usagef("--dcp-format %q: want torch or safetensors", o.DCPFormat)
	}
	if o.To == "dcp" && o.Split != "" {
		if o.TP != 0 {
			return nil, usagef("--tensor-parallel writes safetensors or pth files; with --to dcp use --dcp-ranks")
		}
		rules, err := ckpt.ParseSplitRules(o.Split)
		if err != nil {
			return nil, usagef("--split: %v", err)
		}
		out = append(out, ckpt.ConvertWithSplit(rules))
	}
	if o.PartWait != "" {
		d, err := time.ParseDuration(o.PartWait)
		if err != nil || d <= 0 {
			return nil, usagef("--part-wait %q: want a duration like 30m", o.PartWait)
		}
		out = append(out, ckpt.ConvertWithPartWait(d))
	}
	if o.Part == "" {
		return out, nil
	}
	p, src, err := parsePart(o.Part, o.PartCount, os.Getenv)
	if err != nil {
		return nil, err
	}
	o.partNote = fmt.Sprintf("ckpt: part %d of %d (%s)", p.Index, p.Count, src)
	return append(out, ckpt.ConvertWithPart(p)), nil
}

package main

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/ckpt-dev/ckpt"
)

// ggufOptions turns --gguf-type, --gguf-meta-file and --gguf-meta (in that
// order: a --gguf-meta entry replaces the file's) into convert options.
func (o *convertOptions) ggufOptions() ([]ckpt.ConvertOption, error) {
	var out []ckpt.ConvertOption
	if o.GGUFType != "" {
		out = append(out, ckpt.ConvertWithGGUFType(o.GGUFType))
	}
	var kvs []ckpt.GGUFKV
	if o.GGUFMetaF != "" {
		b, err := os.ReadFile(o.GGUFMetaF)
		if err != nil {
			return nil, err
		}
		if kvs, err = ckpt.ParseGGUFMetaJSON(b); err != nil {
			return nil, err
		}
	}
	for _, m := range o.GGUFMeta {
		kv, err := ckpt.ParseGGUFMeta(m)
		if err != nil {
			return nil, usagef("%v", err)
		}
		kvs = append(kvs, kv)
	}
	if len(kvs) > 0 {
		out = append(out, ckpt.ConvertWithGGUFMetadata(kvs...))
	}
	switch o.GGUFHFDir {
	case "none":
	case "":
		if dir := hfModelDir(o.In); dir != "" {
			out = append(out, ckpt.ConvertWithHFModelDir(dir))
		}
	default:
		if _, err := os.Stat(filepath.Join(o.GGUFHFDir, "config.json")); err != nil {
			return nil, usagef("--gguf-hf-dir: %v", err)
		}
		out = append(out, ckpt.ConvertWithHFModelDir(o.GGUFHFDir))
	}
	return out, nil
}

// hfModelDir returns where a local input's config.json would be: the
// input itself when it is a directory (a Hugging Face model directory),
// else the directory holding it; "" for a URL.
func hfModelDir(in string) string {
	if in == "" || strings.Contains(in, "://") {
		return ""
	}
	if fi, err := os.Stat(in); err == nil && fi.IsDir() {
		return in
	}
	return filepath.Dir(in)
}

// printGGUFReport prints what a GGUF output of a Hugging Face model got.
func printGGUFReport(w io.Writer, r *ckpt.GGUFReport) {
	if r == nil {
		return
	}
	if r.Mapped {
		fmt.Fprintf(w, "gguf: %s mapped to llama.cpp's %s names and hyperparameters", clean(r.HFArchitecture), clean(r.Architecture))
		if r.Permuted > 0 {
			fmt.Fprintf(w, ", %d q/k tensors permuted", r.Permuted)
		}
		fmt.Fprintln(w)
	}
	for _, n := range r.Notes {
		fmt.Fprintf(w, "gguf: note: %s\n", clean(n))
	}
}

// printGGUFTypes prints, for a GGUF output, the MXFP4 blocks copied and,
// under --gguf-type, how many tensors got the type and which did not, and
// why.
func printGGUFTypes(w io.Writer, r *ckpt.GGUFTypes) {
	if r == nil {
		return
	}
	if r.Requested != "" {
		fmt.Fprintf(w, "gguf: %d tensors as %s", r.Written[r.Requested], clean(r.Requested))
		n := 0
		for _, f := range r.Fallbacks {
			n += f.Tensors
		}
		if n > 0 {
			fmt.Fprintf(w, ", %d not (--gguf-type could not apply):", n)
		}
		fmt.Fprintln(w)
		for _, f := range r.Fallbacks {
			fmt.Fprintf(w, "gguf:   %d tensors as %s: %s (first: %s)\n", f.Tensors, clean(f.Type), clean(f.Reason), displayName(f.First))
		}
	}
	if r.MXFP4Copied > 0 {
		fmt.Fprintf(w, "gguf: %d MXFP4 tensors copied block for block into ggml's mxfp4, as stored [experts, rows, cols] (no float round trip)\n", r.MXFP4Copied)
	}
}

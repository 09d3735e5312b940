package main

import (
	"os"

	"github.com/ckpt-dev/ckpt/convert"
	"github.com/ckpt-dev/ckpt/gguf"
)

// ggufOptions turns --gguf-type, --gguf-meta-file and --gguf-meta (in that
// order: a --gguf-meta entry replaces the file's) into convert options.
func (o *convertOptions) ggufOptions() ([]convert.Option, error) {
	var out []convert.Option
	if o.GGUFType != "" {
		out = append(out, convert.WithGGUFType(o.GGUFType))
	}
	var kvs []gguf.KV
	if o.GGUFMetaF != "" {
		b, err := os.ReadFile(o.GGUFMetaF)
		if err != nil {
			return nil, err
		}
		if kvs, err = convert.ParseGGUFMetaJSON(b); err != nil {
			return nil, err
		}
	}
	for _, m := range o.GGUFMeta {
		kv, err := convert.ParseGGUFMeta(m)
		if err != nil {
			return nil, usagef("%v", err)
		}
		kvs = append(kvs, kv)
	}
	if len(kvs) > 0 {
		out = append(out, convert.WithGGUFMetadata(kvs...))
	}
	return out, nil
}

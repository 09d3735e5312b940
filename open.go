package ckpt

import (
	"context"
	"fmt"
	"strings"

	"github.com/ckpt-dev/ckpt/statedict"
)

// Open opens the checkpoint that src names and returns it lazily: only the
// container's directory and the pickle (or the safetensors header) are read,
// never tensor data. The caller closes it.
//
// src is a local file (torch zip, legacy, tar, safetensors, a Hugging Face
// *.index.json, gzip/zstd wrapped) or a directory holding one. A source with
// a URL scheme ("s3://...", "https://...") is refused with an error matching
// ErrUnsupportedSource until a reader for that scheme is added; a Windows
// style drive letter or a path containing ":" without "//" is a path.
//
// Options that do not concern opening (map location, filters...) are
// ignored, so the same options can be passed to Open and Load.
func Open(ctx context.Context, src string, opts ...Option) (*statedict.Checkpoint, error) {
	cfg := newConfig(opts)
	return open(ctx, src, cfg)
}

// open is the single place where a source string becomes a checkpoint.
func open(ctx context.Context, src string, cfg *config) (*statedict.Checkpoint, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if src == "" {
		return nil, fmt.Errorf("%w: empty source", ErrUnsupportedSource)
	}
	switch scheme := sourceScheme(src); scheme {
	case "", "file":
		path := src
		if scheme == "file" {
			path = strings.TrimPrefix(src, "file://")
		}
		return statedict.OpenContext(ctx, path, cfg.open...)
	default:
		return nil, &SourceError{Source: src, Scheme: scheme}
	}
}

// sourceScheme returns the lowercase URL scheme of src ("s3", "https",
// "file"), or "" for a plain path. Only "scheme://" counts as a URL.
func sourceScheme(src string) string {
	i := strings.Index(src, "://")
	if i <= 0 {
		return ""
	}
	scheme := src[:i]
	for j, c := range scheme {
		ok := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || j > 0 && (c >= '0' && c <= '9' || c == '+' || c == '-' || c == '.')
		if !ok {
			return ""
		}
	}
	return strings.ToLower(scheme)
}

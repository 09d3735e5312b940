package ckpt

import (
	"context"
	"fmt"
	"strings"

	"github.com/ckpt-dev/ckpt/objstore"
	"github.com/ckpt-dev/ckpt/statedict"
)

// Open opens the checkpoint that src names and returns it lazily: only the
// container's directory and the pickle (or the safetensors header) are read,
// never tensor data. The caller closes it.
//
// src is a local file (torch zip, legacy, tar, safetensors, a Hugging Face
// *.index.json, gzip/zstd wrapped), a directory holding one (a DCP
// directory included), or an s3://, gs://, az:// or http(s):// URL
// (package objstore: ranged reads, a prefix as a directory, shards beside
// their index, a DCP directory as a prefix, or over http(s):// as a URL
// ending in "/" or its .metadata's URL). Other URL schemes (abfs://) fail
// with objstore.ErrUnsupportedScheme, and
// any other "scheme://" with an error matching ErrUnsupportedSource; a
// Windows style drive letter or a path containing ":" without "//" is a
// path.
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
	if objstore.IsURL(src) {
		return openURL(ctx, src, cfg)
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

// openURL opens an object-store or web source through objstore, handing
// the store to WithObjectStore's function.
func openURL(ctx context.Context, src string, cfg *config) (*statedict.Checkpoint, error) {
	st, key, err := objstore.NewStore(ctx, src)
	if err != nil {
		return nil, err
	}
	ck, err := statedict.OpenFS(storeFS{st}, key, append([]statedict.Option{statedict.WithContext(ctx)}, cfg.open...)...)
	if err != nil {
		return nil, err
	}
	if cfg.store != nil {
		cfg.store(st)
	}
	return ck, nil
}

// storeFS serves statedict.OpenFS from an objstore.Store.
type storeFS struct{ s *objstore.Store }

func (f storeFS) OpenFile(name string) (statedict.File, error) { return f.s.Open(name) }
func (f storeFS) IsDir(name string) (bool, error)              { return f.s.IsDir(name) }
func (f storeFS) ReadDir(name string) ([]string, error)        { return f.s.List(name) }
func (f storeFS) DisplayName(name string) string               { return f.s.URL(name) }

// Checkpoint is an opened checkpoint (statedict.Checkpoint): what Open
// returns, LoadCheckpoint and Inspect take.
type Checkpoint = statedict.Checkpoint

// ObjectStore is the object store a URL source was opened through
// (objstore.Store), as WithObjectStore hands it over: its Requests
// counts the HTTP requests made.
type ObjectStore = objstore.Store

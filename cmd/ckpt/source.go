package main

import (
	"context"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"strings"

	"github.com/ckpt-dev/ckpt/convert"
	"github.com/ckpt-dev/ckpt/objstore"
	"github.com/ckpt-dev/ckpt/statedict"
)

// openSource opens a checkpoint from a local path or an s3:// or
// https:// URL (objstore). For a URL it also returns the Store, whose
// request count the reports show; it is nil for a local path. This is the
// one place the commands turn a source string into a checkpoint.
func openSource(ctx context.Context, src string) (*statedict.Checkpoint, *objstore.Store, error) {
	if !objstore.IsURL(src) {
		ck, err := statedict.Open(src)
		return ck, nil, err
	}
	st, key, err := objstore.NewStore(ctx, src)
	if err != nil {
		return nil, nil, err
	}
	ck, err := statedict.OpenFS(storeFS{st}, key)
	if err != nil {
		return nil, nil, err
	}
	return ck, st, nil
}

// requests returns the store's request count for --json, nil for a local
// source.
func requests(st *objstore.Store) *int64 {
	if st == nil {
		return nil
	}
	n := st.Requests()
	return &n
}

// storeFS serves statedict.OpenFS from an objstore.Store.
type storeFS struct{ s *objstore.Store }

func (f storeFS) OpenFile(name string) (statedict.File, error) { return f.s.Open(name) }
func (f storeFS) IsDir(name string) (bool, error)              { return f.s.IsDir(name) }
func (f storeFS) ReadDir(name string) ([]string, error)        { return f.s.List(name) }
func (f storeFS) DisplayName(name string) string               { return f.s.URL(name) }

// convertTo converts ck to out, a local path or an s3:// URL. To a URL,
// the output is written to a temporary local directory by the same code
// as a local output, then uploaded file by file (shards first, the index
// last) with multipart uploads; on any failure the uploads are aborted
// and the files already uploaded removed, so nothing is left behind.
func convertTo(ctx context.Context, ck *statedict.Checkpoint, out string, force bool, opts []convert.Option) (*convert.Summary, error) {
	if !objstore.IsURL(out) {
		return convert.Convert(ctx, ck, out, opts...)
	}
	st, key, err := objstore.NewStore(ctx, out)
	if err != nil {
		return nil, err
	}
	tmp, err := os.MkdirTemp("", "ckpt-upload-*")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(tmp)
	local := filepath.Join(tmp, "out")
	dir := key // the prefix the output's files go under
	switch {
	case key == "" || strings.HasSuffix(key, "/"):
		local += string(os.PathSeparator)
	default:
		dir = path.Dir(key)
		if dir == "." {
			dir = ""
		}
		os.Mkdir(local, 0o755)
		local = filepath.Join(local, path.Base(key))
	}
	dir = strings.TrimSuffix(dir, "/")
	root := filepath.Join(tmp, "out")
	sum, err := convert.Convert(ctx, ck, local, append(opts, convert.WithForce(true))...)
	if err != nil {
		return nil, err
	}
	files := append([]string{}, sum.Files...)
	if sum.Index != "" {
		files = append(files, sum.Index)
	}
	keys := make([]string, len(files))
	for i, f := range files {
		rel, err := filepath.Rel(root, f)
		if err != nil {
			return nil, err
		}
		keys[i] = path.Join(dir, filepath.ToSlash(rel))
	}
	if !force {
		for _, k := range keys {
			ok, err := st.Exists(ctx, k)
			if err != nil {
				return nil, err
			}
			if ok {
				return nil, fmt.Errorf("%w: %s", convert.ErrExists, st.URL(k))
			}
		}
	}
	for i, f := range files {
		if err := st.Upload(ctx, f, keys[i]); err != nil {
			for _, k := range keys[:i] {
				st.Remove(context.WithoutCancel(ctx), k)
			}
			return nil, err
		}
	}
	for i := range sum.Files {
		sum.Files[i] = st.URL(keys[i])
	}
	if sum.Index != "" {
		sum.Index = st.URL(keys[len(keys)-1])
	}
	return sum, nil
}

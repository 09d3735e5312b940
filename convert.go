package ckpt

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

// Convert converts ck to out as convert.Convert does, where out may also be
// an s3:// URL (a key, or a prefix ending in "/" for directory and sharded
// outputs). To a URL the output is written to a temporary local directory
// by the same code as a local output (so $TMPDIR needs room for it), then
// uploaded file by file (shards first, the index last) with multipart
// uploads: each object appears only when complete, and on any failure the
// uploads are aborted and the objects already uploaded removed, so
// nothing is left behind. Existing objects are replaced only with
// convert.WithForce(true).
func Convert(ctx context.Context, ck *statedict.Checkpoint, out string, opts ...convert.Option) (*convert.Summary, error) {
	force := convert.Forced(opts...)
	if !objstore.IsURL(out) {
		return convert.Convert(ctx, ck, out, opts...)
	}
	st, key, err := objstore.NewStore(ctx, out)
	if err != nil {
		return nil, err
	}
	if !st.Writable() {
		return nil, &objstore.Error{Op: "upload", URL: st.URL(key), Err: objstore.ErrReadOnly}
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
	sum, err := convert.Convert(ctx, ck, local, append(append([]convert.Option{}, opts...), convert.WithForce(true))...)
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

package objstore

import (
	"context"
	"errors"
	"os"
	"time"

	"github.com/minio/minio-go/v7"
)

// ErrReadOnly is returned when writing to a store that cannot be written
// (https://).
var ErrReadOnly = errors.New("this kind of URL can only be read")

// Upload copies the local file src to the object key (replacing it),
// through a Writer: parts in parallel where the backend allows, the
// object appearing only when complete; on any failure or cancellation
// nothing is left behind, not even a pending upload.
func (s *Store) Upload(ctx context.Context, src, key string) error {
	if !s.Writable() {
		return &Error{Op: "upload", URL: s.b.url(key), Err: ErrReadOnly}
	}
	f, err := os.Open(src)
	if err != nil {
		return err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return err
	}
	w, err := s.Create(ctx, key, WithReplace(true), WithSizeHint(fi.Size()))
	if err != nil {
		return err
	}
	if _, err := w.ReadFrom(f); err != nil {
		w.Abort()
		return err
	}
	return w.Commit(ctx)
}

// Remove deletes the object key (used to take back the files of an
// output that could not be completed).
func (s *Store) Remove(ctx context.Context, key string) error {
	return s.do("remove", key, func(rctx context.Context) error {
		switch b := s.b.(type) {
		case *s3Backend:
			return b.core.RemoveObject(ctx, b.bucket, key, minio.RemoveObjectOptions{})
		case *gcsBackend:
			return b.remove(ctx, key)
		case *azureBackend:
			_, err := b.c.NewBlobClient(key).Delete(ctx, nil)
			return err
		}
		return ErrReadOnly
	})
}

// Exists reports whether the object key exists.
func (s *Store) Exists(ctx context.Context, key string) (bool, error) {
	_, ok, err := s.Size(ctx, key)
	return ok, err
}

// Size returns the size of the object key and whether it exists (a HEAD
// request, or its backend's equivalent; a one-byte read over http).
// Objects appear only when complete, so an object of the expected size is
// one a writer committed.
func (s *Store) Size(ctx context.Context, key string) (int64, bool, error) {
	var size int64
	err := s.do("stat", key, func(rctx context.Context) error {
		switch b := s.b.(type) {
		case *s3Backend:
			info, err := b.core.StatObject(ctx, b.bucket, key, minio.StatObjectOptions{})
			size = info.Size
			return err
		case *gcsBackend:
			n, _, err := b.attrs(ctx, key)
			size = n
			return err
		case *azureBackend:
			props, err := b.c.NewBlobClient(key).GetProperties(ctx, nil)
			if err == nil && props.ContentLength != nil {
				size = *props.ContentLength
			}
			return err
		}
		_, n, _, err := s.b.get(ctx, key, 0, into(make([]byte, 1)), version{})
		size = n
		return err
	})
	if errors.Is(err, ErrNotFound) {
		return 0, false, nil
	}
	if err != nil {
		return 0, false, err
	}
	return size, true, nil
}

// abortStale aborts the multipart uploads left pending for exactly key by
// an upload that never finished (its process killed). Two uploads of one
// key at once would overwrite each other anyway; the later one wins here
// too. Buckets can also expire such uploads with a lifecycle rule
// (AbortIncompleteMultipartUpload).
func (s *Store) abortStale(ctx context.Context, key string) {
	b := s.s3
	lctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	listCtx, _ := s.withListBudget(lctx) // bounded like any listing
	for u := range b.core.ListIncompleteUploads(listCtx, b.bucket, key, false) {
		if u.Err != nil {
			return
		}
		if u.Key == key {
			b.core.AbortMultipartUpload(lctx, b.bucket, key, u.UploadID)
		}
	}
}

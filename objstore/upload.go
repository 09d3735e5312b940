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
			return b.h.Object(key).Delete(ctx)
		case *azureBackend:
			_, err := b.c.NewBlobClient(key).Delete(ctx, nil)
			return err
		}
		return ErrReadOnly
	})
}

// Exists reports whether the object key exists.
func (s *Store) Exists(ctx context.Context, key string) (bool, error) {
	err := s.do("stat", key, func(rctx context.Context) error {
		switch b := s.b.(type) {
		case *s3Backend:
			_, err := b.core.StatObject(ctx, b.bucket, key, minio.StatObjectOptions{})
			return err
		case *gcsBackend:
			_, err := b.h.Object(key).Attrs(ctx)
			return err
		case *azureBackend:
			_, err := b.c.NewBlobClient(key).GetProperties(ctx, nil)
			return err
		}
		_, _, _, err := s.b.get(ctx, key, 0, make([]byte, 1), version{})
		return err
	})
	if errors.Is(err, ErrNotFound) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	return true, nil
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

package objstore

import (
	"context"
	"errors"
	"io"
	"os"
	"sort"
	"sync"
	"time"

	"github.com/minio/minio-go/v7"
)

// ErrReadOnly is returned when writing to a store that cannot be written
// (https://, gs://, az://).
var ErrReadOnly = errors.New("this kind of URL can only be read")

// Writable reports whether Upload can write to the Store (s3:// only), so
// that a writer can refuse a read-only output before doing any work.
func (s *Store) Writable() bool { return s.s3 != nil }

// Upload copies the local file src to the object key with a multipart
// upload, parts in parallel (at most the Store's concurrency). The object
// appears only when every part is in; on any failure or cancellation the
// upload is aborted, so no part is left pending.
func (s *Store) Upload(ctx context.Context, src, key string) error {
	if s.s3 == nil {
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
	b := s.s3
	// A convert killed mid-upload (kill -9) cannot abort its own upload:
	// the next upload of the same key aborts what was left pending for
	// it. Best effort: a failure here does not stop the upload.
	s.abortStale(ctx, key)
	var id string
	if err := s.do("upload", key, func(rctx context.Context) error {
		var err error
		id, err = b.core.NewMultipartUpload(ctx, b.bucket, key, minio.PutObjectOptions{ContentType: "application/octet-stream"})
		return err
	}); err != nil {
		return err
	}
	completed := false
	defer func() {
		if !completed {
			// Abort even when ctx is cancelled (Ctrl-C): the parts must
			// not linger.
			actx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
			defer cancel()
			for i := 0; i < 3; i++ {
				if b.core.AbortMultipartUpload(actx, b.bucket, key, id) == nil {
					return
				}
				time.Sleep(200 * time.Millisecond)
			}
		}
	}()
	size := fi.Size()
	psize := s.cfg.partSize
	for size/psize >= 10000 {
		psize *= 2
	}
	nparts := int((size + psize - 1) / psize)
	if nparts == 0 {
		nparts = 1
	}
	pctx, cancel := context.WithCancel(ctx)
	defer cancel()
	parts := make([]minio.CompletePart, nparts)
	var wg sync.WaitGroup
	var once sync.Once
	var first error
	work := make(chan int)
	for w := 0; w < min(s.cfg.concurrency, nparts); w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range work {
				off := int64(i) * psize
				n := min(psize, size-off)
				err := s.do("upload", key, func(rctx context.Context) error {
					if err := pctx.Err(); err != nil {
						return err
					}
					p, err := b.core.PutObjectPart(pctx, b.bucket, key, id, i+1, io.NewSectionReader(f, off, n), n, minio.PutObjectPartOptions{})
					if err == nil {
						parts[i] = minio.CompletePart{PartNumber: i + 1, ETag: p.ETag}
					}
					return err
				})
				if err != nil {
					once.Do(func() { first = err; cancel() })
				}
			}
		}()
	}
feed:
	for i := 0; i < nparts; i++ {
		select {
		case work <- i:
		case <-pctx.Done():
			break feed
		}
	}
	close(work)
	wg.Wait()
	if first == nil && ctx.Err() != nil {
		first = &Error{Op: "upload", URL: s.b.url(key), Err: ctx.Err()}
	}
	if first != nil {
		return first
	}
	sort.Slice(parts, func(i, j int) bool { return parts[i].PartNumber < parts[j].PartNumber })
	if err := s.do("upload", key, func(rctx context.Context) error {
		_, err := b.core.CompleteMultipartUpload(ctx, b.bucket, key, id, parts, minio.PutObjectOptions{})
		return err
	}); err != nil {
		return err
	}
	completed = true
	return nil
}

// Remove deletes the object key (used to take back the files of an
// output that could not be completed).
func (s *Store) Remove(ctx context.Context, key string) error {
	if s.s3 == nil {
		return &Error{Op: "remove", URL: s.b.url(key), Err: ErrReadOnly}
	}
	return s.do("remove", key, func(rctx context.Context) error {
		return s.s3.core.RemoveObject(ctx, s.s3.bucket, key, minio.RemoveObjectOptions{})
	})
}

// Exists reports whether the object key exists.
func (s *Store) Exists(ctx context.Context, key string) (bool, error) {
	if s.s3 == nil {
		return false, &Error{Op: "stat", URL: s.b.url(key), Err: ErrReadOnly}
	}
	err := s.do("stat", key, func(rctx context.Context) error {
		_, err := s.s3.core.StatObject(ctx, s.s3.bucket, key, minio.StatObjectOptions{})
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
	for u := range b.core.ListIncompleteUploads(lctx, b.bucket, key, false) {
		if u.Err != nil {
			return
		}
		if u.Key == key {
			b.core.AbortMultipartUpload(lctx, b.bucket, key, u.UploadID)
		}
	}
}

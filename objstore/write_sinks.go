package objstore

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"

	"cloud.google.com/go/storage"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/streaming"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/blob"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/bloberror"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/blockblob"
	"github.com/minio/minio-go/v7"
	"google.golang.org/api/iterator"
)

const octetStream = "application/octet-stream"

func randomToken() string {
	var b [8]byte
	rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// existsErr turns a refused condition (the object exists) into ErrExists.
func existsErr(err error) error {
	var e *Error
	if errors.As(err, &e) && errors.Is(err, ErrChanged) {
		return &Error{Op: e.Op, URL: e.URL, Err: ErrExists}
	}
	return err
}

// s3Sink writes an S3 multipart upload.
type s3Sink struct {
	s       *Store
	b       *s3Backend
	key     string
	replace bool

	id    string
	begun bool // an initiation was sent: the server may hold an upload
	mu    sync.Mutex
	etags map[int]string
}

func (k *s3Sink) parallel() bool { return true }

func (k *s3Sink) begin(ctx context.Context) error {
	// A process killed mid-upload (kill -9) cannot abort its own upload:
	// the next upload of the same key aborts what was left pending.
	k.s.abortStale(ctx, k.key)
	k.etags = map[int]string{}
	k.begun = true
	// The initiation itself is not cut short by ctx: a cancel (Ctrl-C)
	// landing while the server creates the upload would leave the client
	// without its ID and the upload pending after Abort.
	ictx, cancel := context.WithTimeout(context.WithoutCancel(ctx), abortTimeout)
	defer cancel()
	err := k.s.do("write", k.key, func(context.Context) error {
		var err error
		k.id, err = k.b.core.NewMultipartUpload(ictx, k.b.bucket, k.key, minio.PutObjectOptions{ContentType: octetStream})
		return err
	})
	if err == nil {
		err = ctx.Err()
	}
	return err
}

func (k *s3Sink) put(ctx context.Context, i int, p []byte) error {
	return k.s.do("write", k.key, func(context.Context) error {
		if err := ctx.Err(); err != nil {
			return err
		}
		part, err := k.b.core.PutObjectPart(ctx, k.b.bucket, k.key, k.id, i+1, bytes.NewReader(p), int64(len(p)), minio.PutObjectPartOptions{})
		if err == nil {
			k.mu.Lock()
			k.etags[i] = part.ETag
			k.mu.Unlock()
		}
		return err
	})
}

func (k *s3Sink) opts() minio.PutObjectOptions {
	o := minio.PutObjectOptions{ContentType: octetStream}
	if !k.replace {
		o.SetMatchETagExcept("*")
	}
	return o
}

func (k *s3Sink) commit(ctx context.Context, n int) error {
	parts := make([]minio.CompletePart, 0, n)
	k.mu.Lock()
	for i := 0; i < n; i++ {
		parts = append(parts, minio.CompletePart{PartNumber: i + 1, ETag: k.etags[i]})
	}
	k.mu.Unlock()
	sort.Slice(parts, func(i, j int) bool { return parts[i].PartNumber < parts[j].PartNumber })
	return existsErr(k.s.do("write", k.key, func(context.Context) error {
		_, err := k.b.core.CompleteMultipartUpload(ctx, k.b.bucket, k.key, k.id, parts, k.opts())
		return err
	}))
}

func (k *s3Sink) single(ctx context.Context, p []byte) error {
	k.s.abortStale(ctx, k.key)
	return existsErr(k.s.do("write", k.key, func(context.Context) error {
		_, err := k.b.core.PutObject(ctx, k.b.bucket, k.key, bytes.NewReader(p), int64(len(p)), "", "", k.opts())
		return err
	}))
}

func (k *s3Sink) abort(ctx context.Context) {
	if k.id == "" {
		if k.begun {
			// The initiation failed or was given up without its ID:
			// whatever the server made for this key goes, as the next
			// upload of the key would take it.
			k.s.abortStale(ctx, k.key)
		}
		return
	}
	retryAbort(func() error { return k.b.core.AbortMultipartUpload(ctx, k.b.bucket, k.key, k.id) })
}

// azureSink stages the blocks of a block blob.
type azureSink struct {
	s       *Store
	bb      *blockblob.Client
	key     string
	replace bool
	token   string // names this writer's blocks
}

func newAzureSink(s *Store, b *azureBackend, key string, replace bool) *azureSink {
	return &azureSink{s: s, bb: b.c.NewBlockBlobClient(key), key: key, replace: replace, token: randomToken()}
}

func (k *azureSink) parallel() bool { return true }

func (k *azureSink) begin(context.Context) error { return nil }

// blockID names block i; every ID of a blob has the same length.
func (k *azureSink) blockID(i int) string {
	return base64.StdEncoding.EncodeToString([]byte(fmt.Sprintf("ckpt-%s-%08d", k.token, i)))
}

func (k *azureSink) put(ctx context.Context, i int, p []byte) error {
	return k.s.do("write", k.key, func(context.Context) error {
		if err := ctx.Err(); err != nil {
			return err
		}
		_, err := k.bb.StageBlock(ctx, k.blockID(i), streaming.NopCloser(bytes.NewReader(p)), nil)
		return err
	})
}

func (k *azureSink) conditions() *blob.AccessConditions {
	if k.replace {
		return nil
	}
	any := azcore.ETagAny
	return &blob.AccessConditions{ModifiedAccessConditions: &blob.ModifiedAccessConditions{IfNoneMatch: &any}}
}

// azureExists maps the refusal of IfNoneMatch: * to ErrExists.
func (k *azureSink) azureExists(err error) error {
	if bloberror.HasCode(err, bloberror.BlobAlreadyExists, bloberror.ConditionNotMet) {
		return ErrExists
	}
	return err
}

func (k *azureSink) commit(ctx context.Context, n int) error {
	ids := make([]string, n)
	for i := range ids {
		ids[i] = k.blockID(i)
	}
	ct := octetStream
	return existsErr(k.s.do("write", k.key, func(context.Context) error {
		_, err := k.bb.CommitBlockList(ctx, ids, &blockblob.CommitBlockListOptions{
			HTTPHeaders: &blob.HTTPHeaders{BlobContentType: &ct}, AccessConditions: k.conditions()})
		return k.azureExists(err)
	}))
}

func (k *azureSink) single(ctx context.Context, p []byte) error {
	ct := octetStream
	return existsErr(k.s.do("write", k.key, func(context.Context) error {
		_, err := k.bb.Upload(ctx, streaming.NopCloser(bytes.NewReader(p)), &blockblob.UploadOptions{
			HTTPHeaders: &blob.HTTPHeaders{BlobContentType: &ct}, AccessConditions: k.conditions()})
		return k.azureExists(err)
	}))
}

// abort does nothing: uncommitted blocks are invisible, and the service
// drops them at the blob's next commit or after a week. Deleting them
// would take the blob (an existing object being replaced) with them.
func (k *azureSink) abort(context.Context) {}

// gcsSink writes a body temporary object with a resumable upload and a
// head temporary object, composed into the key at commit.
type gcsSink struct {
	s       *Store
	b       *gcsBackend
	key     string
	replace bool
	retries int
	tmp     string // the temporaries' name, less ".head" or ".body"

	body    *storage.Writer
	hasBody bool // the body object exists (or may)
	hasHead bool
}

// gcsTempInfix marks the temporary objects of a key: KEY + infix +
// random + ".head" or ".body".
const gcsTempInfix = ".ckpt-tmp-"

func newGCSSink(s *Store, b *gcsBackend, key string, replace bool, retries int) *gcsSink {
	return &gcsSink{s: s, b: b, key: key, replace: replace, retries: retries, tmp: key + gcsTempInfix + randomToken()}
}

func (k *gcsSink) parallel() bool { return false }

// obj returns the handle of a temporary object, retried by the client
// (a resumable upload's chunk cannot be replayed from outside).
func (k *gcsSink) obj(name string) *storage.ObjectHandle {
	return k.b.h.Object(name).Retryer(storage.WithPolicy(storage.RetryAlways), storage.WithMaxAttempts(k.retries+1))
}

// begin deletes the temporaries a killed writer of the key left.
func (k *gcsSink) begin(ctx context.Context) error {
	var stale []string
	err := k.s.do("write", k.key, func(context.Context) error {
		stale = stale[:0]
		it := k.b.h.Objects(ctx, &storage.Query{Prefix: k.key + gcsTempInfix})
		for {
			a, err := it.Next()
			if err == iterator.Done {
				return nil
			}
			if err != nil {
				return err
			}
			rest := strings.TrimPrefix(a.Name, k.key+gcsTempInfix)
			if strings.HasSuffix(rest, ".head") || strings.HasSuffix(rest, ".body") {
				stale = append(stale, a.Name)
			}
		}
	})
	if err != nil {
		return err
	}
	for _, name := range stale {
		k.s.do("write", name, func(context.Context) error { return k.b.h.Object(name).Delete(ctx) })
	}
	return nil
}

func (k *gcsSink) put(ctx context.Context, i int, p []byte) error {
	if k.body == nil {
		k.body = k.obj(k.tmp + ".body").NewWriter(ctx)
		k.body.ChunkSize = len(p)
		k.body.ContentType = octetStream
		k.hasBody = true
	}
	if _, err := k.body.Write(p); err != nil {
		return &Error{Op: "write", URL: k.b.url(k.key), Err: k.s.classify(err)}
	}
	return nil
}

// finish ends the body's upload and writes the head.
func (k *gcsSink) finish(ctx context.Context, held [][]byte) error {
	if k.body != nil {
		err := k.body.Close()
		k.body = nil
		if err != nil {
			return &Error{Op: "write", URL: k.b.url(k.key), Err: k.s.classify(err)}
		}
	}
	if len(held) == 0 {
		return nil
	}
	k.hasHead = true
	return k.s.do("write", k.key, func(context.Context) error {
		w := k.obj(k.tmp + ".head").NewWriter(ctx)
		w.ChunkSize = 0 // one request
		w.ContentType = octetStream
		for _, b := range held {
			if _, err := w.Write(b); err != nil {
				w.Close()
				return err
			}
		}
		return w.Close()
	})
}

func (k *gcsSink) commit(ctx context.Context, n int) error {
	var srcs []*storage.ObjectHandle
	if k.hasHead {
		srcs = append(srcs, k.b.h.Object(k.tmp+".head"))
	}
	if k.hasBody {
		srcs = append(srcs, k.b.h.Object(k.tmp+".body"))
	}
	dst := k.b.h.Object(k.key)
	if !k.replace {
		dst = dst.If(storage.Conditions{DoesNotExist: true})
		// The condition is GCS's guard; an emulator may ignore it on a
		// compose, so the key is looked at first too.
		if ok, err := k.s.Exists(ctx, k.key); err != nil || ok {
			if err == nil {
				err = &Error{Op: "write", URL: k.b.url(k.key), Err: ErrExists}
			}
			return err
		}
	}
	err := existsErr(k.s.do("write", k.key, func(context.Context) error {
		c := dst.ComposerFrom(srcs...)
		c.ContentType = octetStream
		_, err := c.Run(ctx)
		return err
	}))
	if err == nil {
		k.removeTemps(context.WithoutCancel(ctx))
	}
	return err
}

func (k *gcsSink) single(ctx context.Context, p []byte) error {
	k.begin(ctx) // best effort: the temporaries a killed writer left
	dst := k.b.h.Object(k.key)
	if !k.replace {
		dst = dst.If(storage.Conditions{DoesNotExist: true})
	}
	return existsErr(k.s.do("write", k.key, func(context.Context) error {
		w := dst.NewWriter(ctx)
		w.ChunkSize = 0
		w.ContentType = octetStream
		if _, err := w.Write(p); err != nil {
			w.Close()
			return err
		}
		return w.Close()
	}))
}

func (k *gcsSink) abort(ctx context.Context) {
	if k.body != nil {
		k.body.Close() // its context is cancelled: the upload stops
		k.body = nil
	}
	k.removeTemps(ctx)
}

// removeTemps deletes the temporary objects (best effort).
func (k *gcsSink) removeTemps(ctx context.Context) {
	for _, t := range []struct {
		ok   bool
		name string
	}{{k.hasHead, k.tmp + ".head"}, {k.hasBody, k.tmp + ".body"}} {
		if t.ok {
			retryAbort(func() error {
				err := k.b.h.Object(t.name).Delete(ctx)
				if errors.Is(err, storage.ErrObjectNotExist) {
					return nil
				}
				return err
			})
		}
	}
	k.hasHead, k.hasBody = false, false
}

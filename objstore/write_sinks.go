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
	"sync"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/streaming"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/blob"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/bloberror"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/blockblob"
	"github.com/minio/minio-go/v7"
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

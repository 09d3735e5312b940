package objstore

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"strings"

	"cloud.google.com/go/storage"
	"golang.org/x/oauth2"
	"golang.org/x/oauth2/google"
	"google.golang.org/api/googleapi"
	"google.golang.org/api/iterator"
	"google.golang.org/api/option"
)

// gcsBackend reads a Google Cloud Storage bucket (or an emulator's, with
// STORAGE_EMULATOR_HOST) through cloud.google.com/go/storage.
type gcsBackend struct {
	bucket string
	h      *storage.BucketHandle
	anon   bool // no credentials were found
}

// newGCS returns the backend of bucket. Credentials come from the
// standard chain (GOOGLE_APPLICATION_CREDENTIALS, gcloud's application
// default credentials, the metadata server on Google Cloud); with
// STORAGE_EMULATOR_HOST set, none are used. Without credentials the
// bucket is read anonymously (public buckets).
func newGCS(ctx context.Context, bucket string, transport http.RoundTripper) (*gcsBackend, error) {
	hc := newClient(transport)
	anon := false
	opts := []option.ClientOption{option.WithHTTPClient(hc)}
	if os.Getenv("STORAGE_EMULATOR_HOST") == "" {
		creds, err := google.FindDefaultCredentials(ctx, storage.ScopeReadOnly)
		if err == nil {
			hc.Transport = &oauth2.Transport{Source: creds.TokenSource, Base: transport}
		} else {
			anon = true
		}
	}
	// The client asks for no credentials itself: hc carries them (or
	// none, for an emulator or a public bucket).
	opts = append(opts, option.WithoutAuthentication())
	c, err := storage.NewClient(ctx, opts...)
	if err != nil {
		return nil, fmt.Errorf("%w: %s", ErrBadURL, oneLine(err))
	}
	// The Store retries, counting and backing off itself.
	c.SetRetry(storage.WithPolicy(storage.RetryNever))
	return &gcsBackend{bucket: bucket, h: c.Bucket(bucket), anon: anon}, nil
}

func (b *gcsBackend) url(key string) string { return "gs://" + b.bucket + "/" + key }

// get reads a range pinned to the generation: the server refuses a
// replaced object (GenerationMatch, HTTP 412), and the generation of the
// answer is checked too (emulators may ignore the condition). A missing
// bucket reads as a missing object (GCS answers both with 404; asking
// which would cost every directory open a request): the listing that
// Store.IsDir makes after a miss tells ErrNoBucket.
func (b *gcsBackend) get(ctx context.Context, key string, off int64, dst dest, ver version) (int, int64, version, error) {
	obj := b.h.Object(key).ReadCompressed(true) // the stored bytes, never transcoded
	if ver.gen != 0 {
		obj = obj.If(storage.Conditions{GenerationMatch: ver.gen})
	}
	r, err := obj.NewRangeReader(ctx, off, dst.n)
	if err != nil {
		if off == 0 && isGCSStatus(err, http.StatusRequestedRangeNotSatisfiable) {
			// An empty object has no byte 0.
			a, aerr := b.h.Object(key).Attrs(ctx)
			if aerr == nil && a.Size == 0 {
				return 0, 0, version{gen: a.Generation}, nil
			}
		}
		return 0, 0, ver, err
	}
	defer r.Close()
	got := version{gen: r.Attrs.Generation}
	if ver.gen != 0 && got.gen != ver.gen {
		return 0, 0, ver, ErrChanged
	}
	if r.Attrs.StartOffset != off {
		return 0, 0, ver, fmt.Errorf("%w: the answer starts at %d, not %d", ErrNoRange, r.Attrs.StartOffset, off)
	}
	size := r.Attrs.Size
	n, err := readBody(ctx, r, dst, min(dst.n, size-off))
	return n, size, got, err
}

func isGCSStatus(err error, code int) bool {
	var ge *googleapi.Error
	return errors.As(err, &ge) && ge.Code == code
}

func (b *gcsBackend) list(ctx context.Context, dir string) ([]string, error) {
	q := &storage.Query{Prefix: dir, Delimiter: "/"}
	if err := q.SetAttrSelection([]string{"Name"}); err != nil {
		return nil, err
	}
	it := b.h.Objects(ctx, q)
	budget := listBudgetOf(ctx)
	var names []string
	for {
		a, err := it.Next()
		if err == iterator.Done {
			return names, nil
		}
		if err != nil {
			return nil, err
		}
		if a.Prefix != "" { // a "subdirectory"
			continue
		}
		if n := strings.TrimPrefix(a.Name, dir); n != "" {
			if names, err = budget.addName(names, n); err != nil {
				return nil, err
			}
		}
	}
}

// classify maps a GCS error; nil when err is not one.
func (b *gcsBackend) classify(err error) error {
	switch {
	case errors.Is(err, storage.ErrObjectNotExist):
		return ErrNotFound
	case errors.Is(err, storage.ErrBucketNotExist):
		return fmt.Errorf("%w %s", ErrNoBucket, b.bucket)
	}
	var ge *googleapi.Error
	if !errors.As(err, &ge) {
		return nil
	}
	switch {
	case ge.Code == http.StatusNotFound:
		if strings.Contains(strings.ToLower(ge.Message), "bucket") {
			return fmt.Errorf("%w %s", ErrNoBucket, b.bucket)
		}
		return ErrNotFound
	case ge.Code == http.StatusUnauthorized:
		if b.anon {
			return fmt.Errorf("%w (%w: set GOOGLE_APPLICATION_CREDENTIALS or run gcloud auth application-default login)", ErrAccessDenied, ErrNoCredentials)
		}
		return fmt.Errorf("%w (HTTP 401)", ErrCredentials)
	case ge.Code == http.StatusForbidden:
		if b.anon {
			return fmt.Errorf("%w (%w: set GOOGLE_APPLICATION_CREDENTIALS or run gcloud auth application-default login)", ErrAccessDenied, ErrNoCredentials)
		}
		return fmt.Errorf("%w (HTTP 403)", ErrAccessDenied)
	case ge.Code == http.StatusPreconditionFailed:
		return ErrChanged
	case ge.Code == http.StatusTooManyRequests || ge.Code == http.StatusRequestTimeout || ge.Code >= 500:
		return &transientError{msg: fmt.Sprintf("server busy or failing (HTTP %d)", ge.Code)}
	}
	return fmt.Errorf("unexpected HTTP status %d", ge.Code)
}

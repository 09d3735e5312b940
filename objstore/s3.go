package objstore

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"strings"

	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"
)

// s3Backend reads a bucket of AWS S3 or an S3-compatible server.
type s3Backend struct {
	bucket   string
	core     *minio.Core
	anon     bool // no credentials were found
	endpoint string
}

// s3Endpoint returns the endpoint from AWS_ENDPOINT_URL_S3 or
// AWS_ENDPOINT_URL: host, TLS, and whether one was set.
func s3Endpoint() (host string, secure, custom bool, err error) {
	raw := os.Getenv("AWS_ENDPOINT_URL_S3")
	if raw == "" {
		raw = os.Getenv("AWS_ENDPOINT_URL")
	}
	if raw == "" {
		return "s3.amazonaws.com", true, false, nil
	}
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" || (u.Scheme != "http" && u.Scheme != "https") {
		return "", false, false, fmt.Errorf("%w: AWS_ENDPOINT_URL must be http(s)://host[:port]", ErrBadURL)
	}
	return u.Host, u.Scheme == "https", true, nil
}

// s3Credentials is the standard chain: the environment, the shared
// credentials file (AWS_PROFILE, AWS_SHARED_CREDENTIALS_FILE), then the
// instance role (unless AWS_EC2_METADATA_DISABLED=true).
func s3Credentials() *credentials.Credentials {
	providers := []credentials.Provider{&credentials.EnvAWS{}, &credentials.FileAWSCredentials{}}
	if !strings.EqualFold(os.Getenv("AWS_EC2_METADATA_DISABLED"), "true") {
		providers = append(providers, &credentials.IAM{Client: &http.Client{Transport: http.DefaultTransport}})
	}
	return credentials.NewChainCredentials(providers)
}

func newS3(bucket string, transport http.RoundTripper) (*s3Backend, error) {
	host, secure, custom, err := s3Endpoint()
	if err != nil {
		return nil, err
	}
	region := os.Getenv("AWS_REGION")
	if region == "" {
		region = os.Getenv("AWS_DEFAULT_REGION")
	}
	if region == "" && custom {
		region = "us-east-1"
	}
	lookup := minio.BucketLookupAuto
	if custom {
		lookup = minio.BucketLookupPath
	}
	creds := s3Credentials()
	v, _ := creds.GetWithContext(nil)
	anon := v.AccessKeyID == "" || v.SignerType == credentials.SignatureAnonymous
	c, err := minio.New(host, &minio.Options{
		Creds:        creds,
		Secure:       secure,
		Transport:    transport,
		Region:       region,
		BucketLookup: lookup,
		MaxRetries:   1, // the Store retries, counting and backing off itself
	})
	if err != nil {
		return nil, fmt.Errorf("%w: %s", ErrBadURL, oneLine(err))
	}
	scheme := "https://"
	if !secure {
		scheme = "http://"
	}
	return &s3Backend{bucket: bucket, core: &minio.Core{Client: c}, anon: anon, endpoint: scheme + host}, nil
}

func (b *s3Backend) url(key string) string { return "s3://" + b.bucket + "/" + key }

func (b *s3Backend) get(ctx context.Context, key string, off int64, dst dest, ver version) (int, int64, version, error) {
	var opts minio.GetObjectOptions
	if err := opts.SetRange(off, off+dst.n-1); err != nil {
		return 0, 0, ver, err
	}
	if ver.etag != "" {
		opts.SetMatchETag(ver.etag)
	}
	body, info, hdr, err := b.core.GetObject(ctx, b.bucket, key, opts)
	if err != nil {
		if off == 0 && minio.ToErrorResponse(err).Code == "InvalidRange" {
			// An empty object has no byte 0.
			st, serr := b.core.StatObject(ctx, b.bucket, key, minio.StatObjectOptions{})
			if serr == nil && st.Size == 0 {
				return 0, 0, version{etag: st.ETag}, nil
			}
		}
		return 0, 0, ver, err
	}
	defer body.Close()
	start, end, size, ok := parseContentRange(hdr.Get("Content-Range"))
	if !ok || start != off {
		return 0, 0, ver, fmt.Errorf("%w: bad Content-Range %q", ErrNoRange, hdr.Get("Content-Range"))
	}
	got := version{etag: info.ETag}
	if ver.etag != "" && got.etag != ver.etag {
		return 0, 0, ver, ErrChanged
	}
	n, err := readBody(ctx, body, dst, end-start+1)
	return n, size, got, err
}

// list lists dir with ListObjectsV2 under ctx (each page a request that
// ctx cancels, counted and capped by guardTransport), skipping the
// "subdirectories" (common prefixes, and objects whose names end in "/").
func (b *s3Backend) list(ctx context.Context, dir string) ([]string, error) {
	budget := listBudgetOf(ctx)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel() // stops the iterator's requests when a limit ends the listing
	noOwner := false
	var names []string
	for o := range b.core.ListObjectsIter(ctx, b.bucket, minio.ListObjectsOptions{Prefix: dir, FetchOwner: &noOwner, MaxKeys: 1000}) {
		if o.Err != nil {
			return nil, o.Err
		}
		n := strings.TrimPrefix(o.Key, dir)
		if n == "" || strings.HasSuffix(n, "/") {
			continue
		}
		var err error
		if names, err = budget.addName(names, n); err != nil {
			return nil, err
		}
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	return names, nil
}

// classify maps an S3 error response; nil when err is not one.
func (b *s3Backend) classify(err error) error {
	var er minio.ErrorResponse
	if !errors.As(err, &er) {
		return nil
	}
	switch er.Code {
	case "NoSuchKey":
		return ErrNotFound
	case "NoSuchBucket":
		return fmt.Errorf("%w %s", ErrNoBucket, b.bucket)
	case "AccessDenied", "AllAccessDisabled", "AccountProblem":
		if b.anon {
			return fmt.Errorf("%w (%w: set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, AWS_PROFILE, or use an instance role)", ErrAccessDenied, ErrNoCredentials)
		}
		return ErrAccessDenied
	case "InvalidAccessKeyId", "SignatureDoesNotMatch", "InvalidToken", "ExpiredToken", "TokenRefreshRequired":
		return fmt.Errorf("%w (%s)", ErrCredentials, er.Code)
	case "PreconditionFailed":
		return ErrChanged
	case "SlowDown", "RequestTimeout", "InternalError", "ServiceUnavailable", "RequestTimeTooSkewed", "XMinioServerNotInitialized":
		return &transientError{msg: fmt.Sprintf("server busy: %s (HTTP %d)", er.Code, er.StatusCode)}
	}
	switch {
	case er.StatusCode == http.StatusNotFound:
		return ErrNotFound
	case er.StatusCode == http.StatusForbidden:
		return ErrAccessDenied
	case er.StatusCode == http.StatusPreconditionFailed:
		return ErrChanged
	case er.StatusCode == http.StatusTooManyRequests || er.StatusCode >= 500:
		return &transientError{msg: fmt.Sprintf("server error: %s (HTTP %d)", er.Code, er.StatusCode)}
	case er.Code == "":
		return nil
	}
	return fmt.Errorf("server error: %s (HTTP %d)", er.Code, er.StatusCode)
}

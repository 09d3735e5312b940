package objstore

import (
	"os"
	"time"
)

// Defaults of the options.
const (
	DefaultConcurrency = 8
	DefaultChunkSize   = 8 << 20
	// DefaultDirectGetSize is the longest ranged GET of a large read
	// straight into the caller's buffer (Object.ReadAtPieces): 32 MiB
	// GETs instead of 8 MiB ones cut MinIO's CPU by about a fifth on a
	// warm 4 GB load (a quarter as many requests; docs/benchmarks.md).
	DefaultDirectGetSize = 32 << 20
	DefaultMetaWindow    = 256 << 10
	DefaultRetries       = 5
	// DefaultIdleTimeout is how long a response body may send nothing
	// before the request is abandoned (and retried).
	DefaultIdleTimeout = 30 * time.Second
)

// EnvIdleTimeout names the environment variable that overrides
// DefaultIdleTimeout: a Go duration ("90s", "2m").
const EnvIdleTimeout = "CKPT_NET_IDLE_TIMEOUT"

// Bounds of a directory listing: every listing of s3://, gs:// and az://
// stops with ErrLimit past any of them.
const (
	maxListPages     = 10000    // requests of one listing
	maxListNames     = 100000   // objects in one directory
	maxListPageBytes = 16 << 20 // one listing response's body
	maxListBytes     = 1 << 30  // all the responses of one listing
	maxKeyBytes      = 4096     // one object name (S3, GCS and Azure allow 1024)
	maxRedirects     = 5
)

// Option configures a Store.
type Option func(*config)

type config struct {
	concurrency int
	chunk       int64
	directGet   int64
	window      int64
	readAhead   int
	retries     int
	backoff     time.Duration
	timeout     time.Duration // per request: until the response headers
	idle        time.Duration // per response body: the longest wait for a byte
	partSize    int64

	listPages     int
	listNames     int
	listPageBytes int64
}

func defaultConfig() config {
	return config{
		concurrency: DefaultConcurrency,
		chunk:       DefaultChunkSize,
		directGet:   DefaultDirectGetSize,
		window:      DefaultMetaWindow,
		readAhead:   DefaultConcurrency,
		retries:     DefaultRetries,
		backoff:     100 * time.Millisecond,
		timeout:     60 * time.Second,
		partSize:    64 << 20,
		idle:        envIdleTimeout(),

		listPages:     maxListPages,
		listNames:     maxListNames,
		listPageBytes: maxListPageBytes,
	}
}

// envIdleTimeout returns $CKPT_NET_IDLE_TIMEOUT, or DefaultIdleTimeout when
// it is unset or not a positive duration.
func envIdleTimeout() time.Duration {
	if d, err := time.ParseDuration(os.Getenv(EnvIdleTimeout)); err == nil && d > 0 {
		return d
	}
	return DefaultIdleTimeout
}

// WithConcurrency bounds the requests in flight per Store (default 8).
func WithConcurrency(n int) Option {
	return func(c *config) {
		if n > 0 {
			c.concurrency = n
		}
	}
}

// WithChunkSize sets the size of one ranged GET of bulk data (default
// 8 MiB).
func WithChunkSize(n int64) Option {
	return func(c *config) {
		if n > 0 {
			c.chunk = n
		}
	}
}

// WithDirectGetSize sets the longest ranged GET of a large read into the
// caller's buffer (Object.ReadAtPieces; default DefaultDirectGetSize),
// rounded down to a multiple of the chunk size and at least one chunk.
// Such GETs start and end at multiples of the chunk size in the object
// (but for the read's own start and end).
func WithDirectGetSize(n int64) Option {
	return func(c *config) {
		if n > 0 {
			c.directGet = n
		}
	}
}

// WithReadAhead sets how many chunks a sequential reader fetches ahead
// (default: the concurrency). Memory held per Object is about
// (read-ahead + 2) chunks.
func WithReadAhead(n int) Option {
	return func(c *config) {
		if n >= 0 {
			c.readAhead = n
		}
	}
}

// WithRetries sets how many times a request failing with a throttling or
// transient error is retried, with exponential backoff (default 5).
func WithRetries(n int, backoff time.Duration) Option {
	return func(c *config) {
		if n >= 0 {
			c.retries = n
		}
		if backoff > 0 {
			c.backoff = backoff
		}
	}
}

// WithTimeout bounds each request's wait for its response headers
// (default 60 s).
func WithTimeout(d time.Duration) Option {
	return func(c *config) {
		if d > 0 {
			c.timeout = d
		}
	}
}

// WithIdleTimeout bounds how long a response body may send nothing while
// the client waits for it: a read that waits longer (it is noticed within
// twice the timeout) is abandoned and retried like a dropped connection
// (default 30 s, or $CKPT_NET_IDLE_TIMEOUT).
func WithIdleTimeout(d time.Duration) Option {
	return func(c *config) {
		if d > 0 {
			c.idle = d
		}
	}
}

// WithPartSize sets the part size of multipart uploads (default 64 MiB;
// at least 5 MiB).
func WithPartSize(n int64) Option {
	return func(c *config) {
		if n >= 5<<20 {
			c.partSize = n
		}
	}
}

package objstore

import "time"

// Defaults of the options.
const (
	DefaultConcurrency = 8
	DefaultChunkSize   = 8 << 20
	DefaultMetaWindow  = 256 << 10
	DefaultRetries     = 5
)

// Option configures a Store.
type Option func(*config)

type config struct {
	concurrency int
	chunk       int64
	window      int64
	readAhead   int
	retries     int
	backoff     time.Duration
	timeout     time.Duration // per request: until the response headers
	partSize    int64
}

func defaultConfig() config {
	return config{
		concurrency: DefaultConcurrency,
		chunk:       DefaultChunkSize,
		window:      DefaultMetaWindow,
		readAhead:   DefaultConcurrency,
		retries:     DefaultRetries,
		backoff:     100 * time.Millisecond,
		timeout:     60 * time.Second,
		partSize:    64 << 20,
	}
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

// WithPartSize sets the part size of multipart uploads (default 64 MiB;
// at least 5 MiB).
func WithPartSize(n int64) Option {
	return func(c *config) {
		if n >= 5<<20 {
			c.partSize = n
		}
	}
}

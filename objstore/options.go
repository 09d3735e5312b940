package objstore

import (
	"os"
	"strconv"
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
	// DefaultSpeedLimit and DefaultSpeedTime are the low-speed rule (as
	// curl's --speed-limit and --speed-time): a response body that
	// arrives at fewer than DefaultSpeedLimit bytes a second over
	// DefaultSpeedTime of waiting for it is abandoned (and retried).
	DefaultSpeedLimit = 1024
	DefaultSpeedTime  = 30 * time.Second
	// DefaultRetryTime bounds a request's retries in time: none starts
	// later than this after the request's first failure.
	DefaultRetryTime = 30 * time.Second
)

// Environment variables that override the defaults of the network
// client: EnvIdleTimeout, EnvSpeedTime and EnvRetryTime a Go duration
// ("90s", "2m"), EnvSpeedLimit a number of bytes a second (0 turns the
// low-speed rule off). A value that does not parse keeps the default.
const (
	EnvIdleTimeout = "CKPT_NET_IDLE_TIMEOUT"
	EnvSpeedLimit  = "CKPT_NET_SPEED_LIMIT"
	EnvSpeedTime   = "CKPT_NET_SPEED_TIME"
	EnvRetryTime   = "CKPT_NET_RETRY_TIME"
)

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
	speedLimit  int64         // per response body: the lowest rate, bytes/s (0: no rule)
	speedTime   time.Duration // ... over this much waiting
	retryTime   time.Duration // no retry starts later after a request's first failure
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
		idle:        envDuration(EnvIdleTimeout, DefaultIdleTimeout),
		speedLimit:  envSpeedLimit(),
		speedTime:   envDuration(EnvSpeedTime, DefaultSpeedTime),
		retryTime:   envDuration(EnvRetryTime, DefaultRetryTime),

		listPages:     maxListPages,
		listNames:     maxListNames,
		listPageBytes: maxListPageBytes,
	}
}

// envDuration returns the duration the environment variable name holds,
// or def when it is unset or not a positive duration.
func envDuration(name string, def time.Duration) time.Duration {
	if d, err := time.ParseDuration(os.Getenv(name)); err == nil && d > 0 {
		return d
	}
	return def
}

// envSpeedLimit returns $CKPT_NET_SPEED_LIMIT (bytes a second, 0 for no
// low-speed rule), or DefaultSpeedLimit when it is unset or not a
// number.
func envSpeedLimit() int64 {
	if n, err := strconv.ParseInt(os.Getenv(EnvSpeedLimit), 10, 64); err == nil && n >= 0 {
		return n
	}
	return DefaultSpeedLimit
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

// WithLowSpeed sets the low-speed rule: a response body that arrives at
// fewer than limit bytes a second, over window of time spent waiting for
// it, is abandoned and retried like a dropped connection (as curl's
// --speed-limit and --speed-time). Only the time a read waits counts (a
// slow consumer is not the server's fault). Default: 1024 bytes a second
// over 30 s, or $CKPT_NET_SPEED_LIMIT and $CKPT_NET_SPEED_TIME; a limit of
// 0 turns the rule off, a window of 0 keeps the default.
func WithLowSpeed(limit int64, window time.Duration) Option {
	return func(c *config) {
		if limit >= 0 {
			c.speedLimit = limit
		}
		if window > 0 {
			c.speedTime = window
		}
	}
}

// WithRetryTime bounds a request's retries in time: none starts later
// than d after the request's first failure (default 30 s, or
// $CKPT_NET_RETRY_TIME), whatever WithRetries allows. A server that
// trickles or stalls every attempt is given up on within the low-speed
// window or idle timeout, then d, then one more attempt.
func WithRetryTime(d time.Duration) Option {
	return func(c *config) {
		if d > 0 {
			c.retryTime = d
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

package objstore

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/ckpt-dev/ckpt/internal/hostileserver"
)

// Issue #34 item 5: a body that trickles (a byte every 10 ms, well inside
// the idle timeout) fails under the low-speed rule, like a dropped
// connection, and its retries stop at the retry time, not the retry
// count. Before the fix, every attempt read the whole trickle.
func TestLowSpeed(t *testing.T) {
	data := make([]byte, 4096)
	for _, c := range objectServers {
		t.Run(c.name, func(t *testing.T) {
			u, s := c.url(t, hostileserver.Trickle(data, 10*time.Millisecond))
			st, key, err := NewStore(context.Background(), u, WithIdleTimeout(10*time.Second),
				WithLowSpeed(1024, 200*time.Millisecond), WithRetries(100, time.Millisecond), WithRetryTime(500*time.Millisecond))
			if err != nil {
				t.Fatal(err)
			}
			start := time.Now()
			_, err = st.Open(key)
			took := time.Since(start)
			if err == nil || !strings.Contains(err.Error(), "under the limit of 1024 bytes/s over 200ms") ||
				!strings.Contains(err.Error(), EnvRetryTime) || strings.Contains(err.Error(), "\n") {
				t.Fatalf("got %v, want the low-speed rule's error", err)
			}
			// Each attempt fails after 200 ms of trickle; retries may
			// start until 500 ms after the first failure: 2 to 4 attempts
			// in about 0.9 s, where 101 were allowed.
			n := len(s.Requests())
			t.Logf("%d requests in %v: %v", n, took.Round(time.Millisecond), err)
			if n < 2 || n > 4 || took > 3*time.Second {
				t.Fatalf("%d requests in %v, want 2 to 4 within 3 s", n, took)
			}
		})
	}
}

// A body faster than the limit is read whole, over several windows; so
// is a fast body read by a slow consumer (only the time a Read waits
// counts); and a limit of 0 turns the rule off. The trickle (a byte a
// millisecond, ~100 a window) is 100 times the limit (one byte a 100 ms
// window), so that a loaded machine starving the server goroutine for
// tens of milliseconds does not fail it (it did at 100 bytes/s over 50 ms).
func TestLowSpeedPasses(t *testing.T) {
	data := []byte(strings.Repeat("abcdefgh", 50))
	s := hostileserver.New(t, hostileserver.Trickle(data, time.Millisecond))
	for _, limit := range []int64{10, 0} {
		_, obj := openObject(t, s.URL+"/m.bin", WithLowSpeed(limit, 100*time.Millisecond), WithRetries(0, time.Millisecond))
		got := make([]byte, len(data))
		if _, err := obj.ReadAt(got, 0); err != nil || !bytes.Equal(got, data) {
			t.Fatalf("limit %d: %q, %v", limit, got, err)
		}
	}

	b := &guardBody{rc: io.NopCloser(bytes.NewReader(data)), cancel: func() {}, speedLimit: 1 << 30, speedTime: 5 * time.Millisecond}
	defer b.Close()
	for i := 0; i < 5; i++ {
		if _, err := b.Read(make([]byte, 1)); err != nil {
			t.Fatalf("read %d by a slow consumer: %v", i, err)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// The settings come from the options, else the environment, else the
// defaults; a value that does not parse keeps the default.
func TestLowSpeedSettings(t *testing.T) {
	for _, k := range []string{EnvSpeedLimit, EnvSpeedTime, EnvRetryTime, EnvIdleTimeout} {
		t.Setenv(k, "")
	}
	if c := defaultConfig(); c.speedLimit != 1024 || c.speedTime != 30*time.Second || c.retryTime != 30*time.Second || c.idle != 30*time.Second {
		t.Fatalf("defaults: %d bytes/s over %v, retries for %v, idle %v", c.speedLimit, c.speedTime, c.retryTime, c.idle)
	}
	t.Setenv(EnvSpeedLimit, "0")
	t.Setenv(EnvSpeedTime, "2m")
	t.Setenv(EnvRetryTime, "90s")
	if c := defaultConfig(); c.speedLimit != 0 || c.speedTime != 2*time.Minute || c.retryTime != 90*time.Second {
		t.Fatalf("from the environment: %d bytes/s over %v, retries for %v", c.speedLimit, c.speedTime, c.retryTime)
	}
	c := defaultConfig()
	WithLowSpeed(10, 0)(&c)
	WithRetryTime(time.Second)(&c)
	if c.speedLimit != 10 || c.speedTime != 2*time.Minute || c.retryTime != time.Second {
		t.Fatalf("options: %d bytes/s over %v, retries for %v", c.speedLimit, c.speedTime, c.retryTime)
	}
	t.Setenv(EnvSpeedLimit, "1KiB")
	t.Setenv(EnvSpeedTime, "-1s")
	t.Setenv(EnvRetryTime, "soon")
	if c := defaultConfig(); c.speedLimit != DefaultSpeedLimit || c.speedTime != DefaultSpeedTime || c.retryTime != DefaultRetryTime {
		t.Fatalf("nonsense: %d bytes/s over %v, retries for %v", c.speedLimit, c.speedTime, c.retryTime)
	}
}

// docs/limits.md states the network client's defaults as they are.
func TestNetDefaultsDocumented(t *testing.T) {
	doc, err := os.ReadFile("../docs/limits.md")
	if err != nil {
		t.Fatal(err)
	}
	row := func(name string) string {
		for _, l := range strings.Split(string(doc), "\n") {
			if strings.HasPrefix(l, "| "+name+" |") {
				return l
			}
		}
		t.Fatalf("docs/limits.md has no row %q", name)
		return ""
	}
	secs := func(d time.Duration) string { return fmt.Sprintf("| %d s |", int(d/time.Second)) }
	for _, c := range []struct{ row, want string }{
		{"idle body", secs(DefaultIdleTimeout)},
		{"low speed", fmt.Sprintf("| %d bytes/s over %d s |", DefaultSpeedLimit, int(DefaultSpeedTime/time.Second))},
		{"retry time", secs(DefaultRetryTime)},
		{"retries", fmt.Sprintf("| %d |", DefaultRetries)},
		{"listing pages", fmt.Sprintf("| %d |", maxListPages)},
		{"listing names", fmt.Sprintf("| %d |", maxListNames)},
	} {
		if r := row(c.row); !strings.Contains(r, c.want) {
			t.Errorf("%s: %q lacks %q", c.row, r, c.want)
		}
	}
	for _, env := range []string{EnvIdleTimeout, EnvSpeedLimit, EnvSpeedTime, EnvRetryTime} {
		if !strings.Contains(string(doc), "`"+env+"`") {
			t.Errorf("docs/limits.md does not name %s", env)
		}
	}
}

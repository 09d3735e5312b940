package main

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ckpt-dev/ckpt/internal/hostileserver"
)

// runBin runs the built CLI with a plain environment and returns its exit
// code, stdout and stderr.
func runBin(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	return runBinWithin(t, time.Hour, args...)
}

// runBinWithin is runBin with the child killed after d (exit -1).
func runBinWithin(t *testing.T, d time.Duration, args ...string) (int, string, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	cmd := exec.CommandContext(ctx, buildCLI(t), args...)
	cmd.Env = append(os.Environ(), "TERM=dumb", "CKPT_NO_PROGRESS=1")
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return code, out.String(), errb.String()
}

// Issue #20 item 12: a server that sends bytes after its response makes
// Go's HTTP client log "Unsolicited response received on idle HTTP
// channel ..." with the server's bytes on stderr; the CLI prints nothing
// of it (before the fix: that line, on a successful inspect).
func TestUnsolicitedBytesNotLogged(t *testing.T) {
	data, err := os.ReadFile("../../testdata/fixtures/model.safetensors")
	if err != nil {
		t.Fatal(err)
	}
	s := hostileserver.New(t, hostileserver.Unsolicited(data, "HTTP/1.1 200 OK\r\nX-Junk: \x1b[31mred\r\n\r\njunk"))
	code, out, stderr := runBin(t, "inspect", s.URL+"/model.safetensors")
	if code != 0 || stderr != "" {
		t.Fatalf("exit %d, stderr %q, want 0 and nothing", code, stderr)
	}
	if !strings.Contains(out, "safetensors") {
		t.Fatalf("stdout: %s", out)
	}
}

// safetensorsNames returns the tensor names of a safetensors file.
func safetensorsNames(t *testing.T, data []byte) []string {
	n := binary.LittleEndian.Uint64(data)
	var h map[string]json.RawMessage
	if err := json.Unmarshal(data[8:8+n], &h); err != nil {
		t.Fatal(err)
	}
	var names []string
	for k := range h {
		if k != "__metadata__" {
			names = append(names, k)
		}
	}
	return names
}

// Issue #20 item 11: shard names of a sharded index read over https are
// object names: "?" and "#" are escaped, and a name that decodes to a path
// is refused with one line naming it, before any request for it.
func TestShardNamesOverHTTP(t *testing.T) {
	shard, err := os.ReadFile("../../testdata/fixtures/model.safetensors")
	if err != nil {
		t.Fatal(err)
	}
	index := func(shardName string) []byte {
		wm := map[string]string{}
		for _, n := range safetensorsNames(t, shard) {
			wm[n] = shardName
		}
		b, _ := json.Marshal(map[string]any{"metadata": map[string]any{}, "weight_map": wm})
		return b
	}
	files := map[string][]byte{
		"/ok/model.safetensors.index.json":  index("x.safetensors?#"),
		"/ok/x.safetensors?#":               shard,
		"/bad/model.safetensors.index.json": index("%2e%2e%2fsecret.safetensors"),
	}
	s := hostileserver.New(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		data, ok := files[r.URL.Path]
		if !ok {
			http.NotFound(w, r)
			return
		}
		hostileserver.RangeFile(data)(w, r)
	}))
	code, _, stderr := runCLI(t, "inspect", s.URL+"/ok/model.safetensors.index.json")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	code, _, stderr = runCLI(t, "inspect", s.URL+"/bad/model.safetensors.index.json")
	if code != 1 || strings.Count(stderr, "\n") != 1 || !strings.Contains(stderr, "%2e%2e%2fsecret.safetensors") {
		t.Fatalf("exit %d, stderr %q: want 1 and one line naming the shard", code, stderr)
	}
	for _, r := range s.Requests() {
		if strings.Contains(r.Path, "secret") {
			t.Fatalf("requested %s", r.URI)
		}
	}
}

// Issue #34 item 6: against a server whose every listing page holds 1000
// names and says "more to come", one inspect of a prefix makes one
// listing, which stops at the client's bound of 100,000 names (page 101),
// and ends with one line naming that bound. Before the fix, every format
// probe listed the prefix again: 1,373 listing requests and counting.
func TestPrefixListedOnce(t *testing.T) {
	for _, c := range []struct {
		url  string
		list func(hostileserver.ListPage) http.HandlerFunc
		env  func(url string) map[string]string
	}{
		{"s3://bucket/dir/", hostileserver.S3List, func(u string) map[string]string { return hostileserver.S3Env(u, t.TempDir()+"/none") }},
		{"s3://bucket/dir", hostileserver.S3List, func(u string) map[string]string { return hostileserver.S3Env(u, t.TempDir()+"/none") }},
		{"gs://bucket/dir/", hostileserver.GCSList, hostileserver.GCSEnv},
		{"az://container/dir/", hostileserver.AzureList, hostileserver.AzureEnv},
	} {
		t.Run(c.url, func(t *testing.T) {
			var lists atomic.Int64
			h := c.list(hostileserver.Endless(1000))
			s := hostileserver.New(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if hostileserver.IsListing(r) {
					lists.Add(1)
				}
				h(w, r)
			}))
			for k, v := range c.env(s.URL) {
				t.Setenv(k, v)
			}
			start := time.Now()
			code, _, stderr := runBinWithin(t, 60*time.Second, "inspect", c.url)
			t.Logf("%v, %d listing requests, %d in all: %s", time.Since(start).Round(time.Millisecond), lists.Load(), len(s.Requests()), strings.TrimSpace(stderr))
			if code != 1 || strings.Count(stderr, "\n") != 1 || !strings.Contains(stderr, "more than 100000 objects") {
				t.Fatalf("exit %d, stderr %q: want 1 and one line naming the bound", code, stderr)
			}
			if n := lists.Load(); n != 101 {
				t.Fatalf("%d listing requests, want 101 (one listing, to its bound)", n)
			}
		})
	}
}

// Issue #34 item 5: a server that trickles every response (a byte every
// 20 ms, well inside the idle timeout) no longer holds inspect for as long
// as it likes: each attempt fails under the low-speed rule, retries stop
// at the retry time, and the command ends with one line naming the rule.
// Short settings from the environment stand for the defaults (1024 bytes/s
// over 30 s, retries within 30 s): about 60 s. Before the fix, inspect
// read every byte of the trickle (12 s for this 621-byte file, exit 0;
// as long as the server likes for a larger one).
func TestTrickleEnds(t *testing.T) {
	data, err := os.ReadFile("../../testdata/fixtures/model.safetensors")
	if err != nil {
		t.Fatal(err)
	}
	s := hostileserver.New(t, hostileserver.Trickle(data, 20*time.Millisecond))
	t.Setenv("CKPT_NET_SPEED_TIME", "300ms")
	t.Setenv("CKPT_NET_RETRY_TIME", "1s")
	buildCLI(t)
	start := time.Now()
	code, _, stderr := runBinWithin(t, 30*time.Second, "inspect", s.URL+"/model.safetensors")
	took := time.Since(start)
	t.Logf("%v, %d requests: %s", took.Round(time.Millisecond), len(s.Requests()), strings.TrimSpace(stderr))
	if code != 1 || strings.Count(stderr, "\n") != 1 || !strings.Contains(stderr, "under the limit of 1024 bytes/s over 300ms") ||
		!strings.Contains(stderr, "CKPT_NET_SPEED_LIMIT") || !strings.Contains(stderr, "/model.safetensors") {
		t.Fatalf("exit %d, stderr %q: want 1 and one line naming the object and the rule", code, stderr)
	}
	// Attempts of 300 ms each, retried within 1 s of the first failure:
	// at most 5 requests, ended in about 1.5 s.
	if n := len(s.Requests()); n < 2 || n > 5 || took > 10*time.Second {
		t.Fatalf("%d requests in %v, want 2 to 5 within 10 s", n, took)
	}
}

package objstore

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"sort"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// writeCloud is one writable backend for the Writer tests.
type writeCloud struct {
	name string
	url  func(key string) string
	// pending counts S3 multipart uploads left pending (0 elsewhere).
	pending func(t *testing.T) int
}

// eachWritable runs f over s3:// (MinIO), gs:// and az://.
func eachWritable(t *testing.T, f func(t *testing.T, c writeCloud)) {
	t.Run("s3", func(t *testing.T) {
		_, bucket := server(t)
		f(t, writeCloud{"s3", func(k string) string { return "s3://" + bucket + "/" + k }, func(t *testing.T) int { return pendingUploads(t, bucket) }})
	})
	t.Run("gs", func(t *testing.T) {
		c := gcsCloud(t)
		f(t, writeCloud{"gs", c.url, func(*testing.T) int { return 0 }})
	})
	t.Run("az", func(t *testing.T) {
		c := azCloud(t)
		f(t, writeCloud{"az", c.url, func(*testing.T) int { return 0 }})
	})
}

// listAll returns the object names under dir ("" or "x/"), from a fresh
// Store.
func listAll(t *testing.T, c writeCloud, dir string) []string {
	t.Helper()
	st, _, err := NewStore(context.Background(), c.url(dir))
	if err != nil {
		t.Fatal(err)
	}
	names, err := st.List(dir)
	if err != nil && !errors.Is(err, ErrNotFound) {
		t.Fatal(err)
	}
	sort.Strings(names)
	return names
}

func readAll(t *testing.T, c writeCloud, key string) []byte {
	t.Helper()
	_, obj := openObject(t, c.url(key))
	b := make([]byte, obj.Size())
	if _, err := obj.ReadAt(b, 0); err != nil && err != io.EOF {
		t.Fatal(err)
	}
	return b
}

// The written object is exactly the bytes written, the head rewritten
// after the body included, whatever the size against the part size; it
// appears only at Commit.
func TestWriterRoundTrip(t *testing.T) {
	eachWritable(t, func(t *testing.T, c writeCloud) {
		const part = 5 << 20
		for _, tc := range []struct {
			name string
			size int
			head int64
		}{{"empty", 0, 0}, {"small", 1000, 0}, {"small-head", 1000, 100}, {"parts", 3*part + 12345, 0},
			{"parts-head", 3*part + 7, 4096}, {"exact", 2 * part, 0}, {"head-over-a-part", part + 100, part + 50}} {
			t.Run(tc.name, func(t *testing.T) {
				data := randomBytes(tc.size, int64(tc.size))
				key := "w/" + tc.name + ".bin"
				st, k, err := NewStore(context.Background(), c.url(key), WithPartSize(part), WithConcurrency(3))
				if err != nil {
					t.Fatal(err)
				}
				w, err := st.Create(context.Background(), k, WithHead(tc.head))
				if err != nil {
					t.Fatal(err)
				}
				want := append([]byte{}, data...)
				if tc.head > 0 {
					copy(data, make([]byte, tc.head)) // written as zeros, then patched
				}
				// Odd write sizes cross part boundaries.
				for off := 0; off < len(data); {
					n := min(len(data)-off, 777777)
					if _, err := w.Write(data[off : off+n]); err != nil {
						t.Fatal(err)
					}
					off += n
				}
				if tc.head > 0 {
					if _, err := w.WriteAt(want[:tc.head], 0); err != nil {
						t.Fatal(err)
					}
					if _, err := w.WriteAt(want[:tc.head+1], 0); err == nil {
						t.Fatal("a rewrite past the head was accepted")
					}
				}
				if err := w.Finish(); err != nil {
					t.Fatal(err)
				}
				// Finish sent everything, a small object too: a
				// conversion keeps every shard's writer until it
				// commits them all.
				w.mu.Lock()
				alive := w.alive
				w.mu.Unlock()
				if alive != 0 {
					t.Fatalf("%d bytes of buffers held after Finish", alive)
				}
				if ok, _ := st.Exists(context.Background(), k); ok {
					t.Fatal("the object exists before Commit")
				}
				if err := w.Commit(context.Background()); err != nil {
					t.Fatal(err)
				}
				w.Abort() // after Commit: nothing
				if got := readAll(t, c, key); !bytes.Equal(got, want) {
					t.Fatalf("read back %d bytes, differing from the %d written", len(got), len(want))
				}
				if names := listAll(t, c, "w/"); len(names) != 1 || names[0] != tc.name+".bin" {
					t.Fatalf("objects %v, want only %s.bin", names, tc.name)
				}
				if n := c.pending(t); n != 0 {
					t.Fatalf("%d pending uploads", n)
				}
				if err := st.Remove(context.Background(), k); err != nil {
					t.Fatal(err)
				}
			})
		}
	})
}

// A cancelled or aborted writer leaves nothing: no object, no temporary
// object, no pending upload; an existing object is left as it was.
func TestWriterAbortLeavesNothing(t *testing.T) {
	eachWritable(t, func(t *testing.T, c writeCloud) {
		const part = 5 << 20
		for _, how := range []string{"cancel", "abort"} {
			ctx, cancel := context.WithCancel(context.Background())
			st, k, err := NewStore(context.Background(), c.url("a/x.bin"), WithPartSize(part), WithConcurrency(2))
			if err != nil {
				t.Fatal(err)
			}
			w, err := st.Create(ctx, k, WithHead(100))
			if err != nil {
				t.Fatal(err)
			}
			if _, err := w.Write(randomBytes(3*part+5, 1)); err != nil {
				t.Fatal(err)
			}
			if how == "cancel" {
				cancel()
				_, werr := w.Write(make([]byte, part))
				cerr := w.Commit(context.Background())
				if !errors.Is(werr, context.Canceled) || !errors.Is(cerr, context.Canceled) {
					t.Fatalf("after cancel: Write %v, Commit %v; want context.Canceled", werr, cerr)
				}
				if strings.Contains(cerr.Error(), "\n") || !strings.Contains(cerr.Error(), c.url("a/x.bin")) {
					t.Fatalf("error %q: want one line naming the URL", cerr)
				}
			}
			w.Abort()
			w.Abort()
			cancel()
			if names := listAll(t, c, "a/"); len(names) != 0 {
				t.Fatalf("%s: objects left: %v", how, names)
			}
			if n := c.pending(t); n != 0 {
				t.Fatalf("%s: %d pending uploads", how, n)
			}
		}
	})
}

// Without WithReplace an object that appeared at the key is not
// replaced (ErrExists); with it, it is.
func TestWriterExists(t *testing.T) {
	eachWritable(t, func(t *testing.T, c writeCloud) {
		for _, size := range []int{10, 11 << 20} {
			st, k, err := NewStore(context.Background(), c.url("e.bin"), WithPartSize(5<<20))
			if err != nil {
				t.Fatal(err)
			}
			write := func(data []byte, replace bool) error {
				w, err := st.Create(context.Background(), k, WithReplace(replace))
				if err != nil {
					return err
				}
				if _, err := w.Write(data); err != nil {
					w.Abort()
					return err
				}
				return w.Commit(context.Background())
			}
			first := randomBytes(size, 1)
			if err := write(first, false); err != nil {
				t.Fatal(err)
			}
			if err := write(randomBytes(size, 2), false); !errors.Is(err, ErrExists) {
				t.Fatalf("%d bytes over an existing object: %v, want ErrExists", size, err)
			}
			if got := readAll(t, c, "e.bin"); !bytes.Equal(got, first) {
				t.Fatal("the existing object changed")
			}
			second := randomBytes(size, 3)
			if err := write(second, true); err != nil {
				t.Fatal(err)
			}
			if got := readAll(t, c, "e.bin"); !bytes.Equal(got, second) {
				t.Fatal("the object was not replaced")
			}
			if n := c.pending(t); n != 0 {
				t.Fatalf("%d pending uploads", n)
			}
			st.Remove(context.Background(), k)
		}
	})
}

// The buffers a writer holds stay within (concurrency + 1 + head parts)
// parts whatever the object's size.
func TestWriterMemoryBounded(t *testing.T) {
	eachWritable(t, func(t *testing.T, c writeCloud) {
		const part, conc = 5 << 20, 2
		st, k, err := NewStore(context.Background(), c.url("m.bin"), WithPartSize(part), WithConcurrency(conc))
		if err != nil {
			t.Fatal(err)
		}
		w, err := st.Create(context.Background(), k, WithHead(10))
		if err != nil {
			t.Fatal(err)
		}
		chunk := randomBytes(1<<20, 5)
		for i := 0; i < 60; i++ { // 60 MiB, 12 parts
			if _, err := w.Write(chunk); err != nil {
				t.Fatal(err)
			}
		}
		if err := w.Commit(context.Background()); err != nil {
			t.Fatal(err)
		}
		if peak, bound := w.MaxBuffered(), int64((conc+1+1)*part); peak > bound || peak == 0 {
			t.Fatalf("peak %d bytes buffered, bound %d", peak, bound)
		}
		t.Logf("peak %d MiB buffered for 60 MiB", w.MaxBuffered()>>20)
	})
}

// Temporary objects a killed gs:// writer left (no Abort ran) are removed
// by the next writer of the same key; another key's are left.
func TestGCSWriterRemovesStale(t *testing.T) {
	c := gcsCloud(t)
	for _, k := range []string{"s/f.bin" + gcsTempInfix + "dead.body", "s/f.bin" + gcsTempInfix + "dead.head", "s/g.bin" + gcsTempInfix + "dead.body"} {
		if err := c.put(k, []byte("x")); err != nil {
			t.Fatal(err)
		}
	}
	st, k, err := NewStore(context.Background(), c.url("s/f.bin"), WithPartSize(5<<20))
	if err != nil {
		t.Fatal(err)
	}
	w, err := st.Create(context.Background(), k, WithHead(8))
	if err != nil {
		t.Fatal(err)
	}
	w.Write(randomBytes(6<<20, 1))
	if err := w.Commit(context.Background()); err != nil {
		t.Fatal(err)
	}
	wc := writeCloud{url: c.url}
	names := listAll(t, wc, "s/")
	if len(names) != 2 || names[0] != "f.bin" || names[1] != "g.bin"+gcsTempInfix+"dead.body" {
		t.Fatalf("objects %v", names)
	}
}

// https:// is read-only.
func TestWriterReadOnly(t *testing.T) {
	st, k, err := NewStore(context.Background(), "https://example.com/x.bin")
	if err != nil {
		t.Fatal(err)
	}
	if st.Writable() {
		t.Fatal("https:// writable")
	}
	if _, err := st.Create(context.Background(), k); !errors.Is(err, ErrReadOnly) {
		t.Fatalf("got %v, want ErrReadOnly", err)
	}
}

// Throttling (503) and dropped connections on the writes of a Writer
// are retried (the Store's retries; the GCS client's own for the
// resumable upload), counted, and the object comes out right.
func TestWriterRetriesThroughFaults(t *testing.T) {
	eachWritable(t, func(t *testing.T, c writeCloud) {
		var target string
		switch c.name {
		case "s3":
			target = srv.Endpoint
		case "gs":
			u, _ := url.Parse("http://" + gcsSrv.Addr)
			rp := httputil.NewSingleHostReverseProxy(u)
			hop := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				r.Host = gcsSrv.Addr
				rp.ServeHTTP(w, r)
			}))
			t.Cleanup(hop.Close)
			target = hop.URL
		case "az":
			target = "http://" + azSrv.Addr
		}
		var writes atomic.Int64
		faults := map[int64]string{1: "slowdown", 3: "drop", 5: "slowdown", 6: "slowdown"}
		p := newFaultProxy(t, target, func(n int64, r *http.Request) string {
			if r.Method != http.MethodPut && r.Method != http.MethodPost {
				return ""
			}
			return faults[writes.Add(1)]
		})
		switch c.name {
		case "s3":
			t.Setenv("AWS_ENDPOINT_URL", p.URL)
		case "gs":
			t.Setenv("STORAGE_EMULATOR_HOST", strings.TrimPrefix(p.URL, "http://"))
		case "az":
			t.Setenv("AZURE_STORAGE_CONNECTION_STRING", strings.Replace(azSrv.ConnectionString(), azSrv.Addr, strings.TrimPrefix(p.URL, "http://"), 1))
		}
		st, k, err := NewStore(context.Background(), c.url("r.bin"), WithPartSize(5<<20), WithConcurrency(2), WithRetries(5, time.Millisecond))
		if err != nil {
			t.Fatal(err)
		}
		w, err := st.Create(context.Background(), k, WithHead(64))
		if err != nil {
			t.Fatal(err)
		}
		data := randomBytes(4*(5<<20)+99, 9)
		if _, err := w.Write(data); err != nil {
			t.Fatal(err)
		}
		if err := w.Commit(context.Background()); err != nil {
			t.Fatal(err)
		}
		if got := readAll(t, c, "r.bin"); !bytes.Equal(got, data) {
			t.Fatal("wrong bytes after retries")
		}
		if writes.Load() < int64(len(faults)) || st.Requests() < writes.Load() {
			t.Fatalf("%d writes reached the proxy, %d requests counted", writes.Load(), st.Requests())
		}
		t.Logf("%d writes through the proxy, %d requests counted", writes.Load(), st.Requests())
	})
}

// The part sizes of an object of unknown size keep S3's 10000-part limit
// past its 5 TiB object limit with ckpt.Convert's 8 MiB parts, and start
// at the base size.
func TestWriterPartSchedule(t *testing.T) {
	w := &Writer{base: 8 << 20}
	var total int64
	for i := 0; i < maxParts; i++ {
		total += w.partLen(i)
	}
	if w.partLen(0) != 8<<20 || w.partLen(partGrowEvery-1) != 8<<20 || total < 5<<40 {
		t.Fatalf("first %d, total %d", w.partLen(0), total)
	}
}

package ckpt_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math/rand"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"

	"github.com/ckpt-dev/ckpt"
	"github.com/ckpt-dev/ckpt/convert"
	"github.com/ckpt-dev/ckpt/internal/cloudemu"
	"github.com/ckpt-dev/ckpt/internal/miniotest"
	"github.com/ckpt-dev/ckpt/objstore"
	"github.com/ckpt-dev/ckpt/statedict"
	"github.com/minio/minio-go/v7"
)

// The servers the URL output tests share, started at first use and
// stopped by TestMain.
var (
	minioOnce sync.Once
	minioSrv  *miniotest.Server
	minioErr  error
	gcsOnce   sync.Once
	gcsSrv    *cloudemu.GCS
	gcsErr    error
	azOnce    sync.Once
	azSrv     *cloudemu.Azure
	azErr     error
)

func TestMain(m *testing.M) {
	os.Setenv("AWS_EC2_METADATA_DISABLED", "true")
	code := m.Run()
	if minioSrv != nil {
		minioSrv.Stop()
	}
	if gcsSrv != nil {
		gcsSrv.Stop()
	}
	if azSrv != nil {
		azSrv.Stop()
	}
	os.Exit(code)
}

// bucketURL is a fresh bucket of one backend: the URL of a key, and what
// is left in it (objects, and S3's pending uploads as "pending:KEY").
type bucketURL struct {
	url  func(key string) string
	left func(t *testing.T) []string
}

// minioBucket makes a fresh bucket in the shared MinIO (started at first
// use), with the environment pointing at it for t, and returns its name.
func minioBucket(t *testing.T) string {
	t.Helper()
	minioOnce.Do(func() { minioSrv, minioErr = miniotest.Start() })
	if errors.Is(minioErr, miniotest.ErrNoBinary) && !miniotest.Required() {
		t.Skip(minioErr.Error())
	}
	if minioErr != nil {
		t.Fatal(minioErr)
	}
	minioSrv.SetEnv(t)
	name := fmt.Sprintf("b%d", rand.Int63())
	if err := minioSrv.MakeBucket(name); err != nil {
		t.Fatal(err)
	}
	return name
}

// eachBackend runs f over a fresh bucket of s3:// (MinIO), gs://
// (fake-gcs-server) and az:// (Azurite).
func eachBackend(t *testing.T, f func(t *testing.T, b bucketURL)) {
	t.Run("s3", func(t *testing.T) {
		name := minioBucket(t)
		f(t, bucketURL{func(k string) string { return "s3://" + name + "/" + k }, func(t *testing.T) []string {
			var left []string
			ctx := context.Background()
			for o := range minioSrv.Client.ListObjects(ctx, name, minio.ListObjectsOptions{Recursive: true}) {
				if o.Err != nil {
					t.Fatal(o.Err)
				}
				left = append(left, o.Key)
			}
			for u := range minioSrv.Client.ListIncompleteUploads(ctx, name, "", true) {
				if u.Err != nil {
					t.Fatal(u.Err)
				}
				left = append(left, "pending:"+u.Key)
			}
			return left
		}})
	})
	t.Run("gs", func(t *testing.T) {
		gcsOnce.Do(func() { gcsSrv, gcsErr = cloudemu.StartGCS() })
		cloudemu.Skip(t, gcsErr)
		gcsSrv.SetEnv(t)
		name := fmt.Sprintf("b%d", rand.Int63())
		if err := gcsSrv.MakeBucket(name); err != nil {
			t.Fatal(err)
		}
		url := func(k string) string { return "gs://" + name + "/" + k }
		f(t, bucketURL{url, func(t *testing.T) []string { return listed(t, url) }})
	})
	t.Run("az", func(t *testing.T) {
		azOnce.Do(func() { azSrv, azErr = cloudemu.StartAzure() })
		cloudemu.Skip(t, azErr)
		azSrv.SetEnv(t)
		name := fmt.Sprintf("c%d", rand.Int63())
		if err := azSrv.MakeContainer(name); err != nil {
			t.Fatal(err)
		}
		url := func(k string) string { return "az://" + name + "/" + k }
		f(t, bucketURL{url, func(t *testing.T) []string { return listed(t, url) }})
	})
}

// listed returns the objects at the root and under "out/" (where the
// tests write; temporaries go beside their key).
func listed(t *testing.T, url func(string) string) []string {
	t.Helper()
	var left []string
	for _, dir := range []string{"", "out/"} {
		st, _, err := objstore.NewStore(context.Background(), url(dir))
		if err != nil {
			t.Fatal(err)
		}
		names, err := st.List(dir)
		if err != nil {
			t.Fatal(err)
		}
		for _, n := range names {
			left = append(left, dir+n)
		}
	}
	sort.Strings(left)
	return left
}

// readURL returns the bytes of an object.
func readURL(t *testing.T, u string) []byte {
	t.Helper()
	st, key, err := objstore.NewStore(context.Background(), u)
	if err != nil {
		t.Fatal(err)
	}
	obj, err := st.Open(key)
	if err != nil {
		t.Fatal(err)
	}
	defer obj.Close()
	b := make([]byte, obj.Size())
	if _, err := obj.ReadAt(b, 0); err != nil && err != io.EOF {
		t.Fatal(err)
	}
	return b
}

// bigSafetensors writes a safetensors file of two float32 tensors, n
// bytes of data in all, past one 64 MiB part.
func bigSafetensors(t *testing.T, n int) string {
	t.Helper()
	half := n / 8 // elements per tensor
	hdr := fmt.Sprintf(`{"a":{"dtype":"F32","shape":[%d],"data_offsets":[0,%d]},"b":{"dtype":"F32","shape":[%d],"data_offsets":[%d,%d]}}`,
		half, 4*half, half, 4*half, 8*half)
	for len(hdr)%8 != 0 {
		hdr += " "
	}
	p := filepath.Join(t.TempDir(), "big.safetensors")
	f, err := os.Create(p)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	binary.Write(f, binary.LittleEndian, uint64(len(hdr)))
	f.WriteString(hdr)
	data := make([]byte, 8*half)
	rand.New(rand.NewSource(1)).Read(data)
	for i := 3; i < len(data); i += 4 {
		data[i] &= 0x3f // finite floats
	}
	if _, err := f.Write(data); err != nil {
		t.Fatal(err)
	}
	return p
}

func openCk(t *testing.T, path string) *statedict.Checkpoint {
	t.Helper()
	ck, err := statedict.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ck.Close() })
	return ck
}

// A conversion to s3://, gs:// and az:// writes exactly the bytes of the
// same conversion to local files: a single safetensors file (one larger
// than a part, its header patched after the data), a .pth file, and
// sharded safetensors with its index under a prefix.
func TestConvertURLRoundTrip(t *testing.T) {
	big := bigSafetensors(t, 70<<20)
	cases := []struct {
		name, src, local, remote string
		opts                     []convert.Option
	}{
		{"safetensors", fixtures + "training.pt", "model.safetensors", "out/model.safetensors", nil},
		{"pth", fixtures + "training.pt", "model.pt", "out/model.pt", nil},
		{"sharded", fixtures + "training.pt", "sh/", "out/", []convert.Option{convert.WithMaxShardSize(100)}},
		{"big", big, "big.safetensors", "out/big.safetensors", nil},
		{"big-pth", big, "big.pt", "out/big.pt", nil},
	}
	eachBackend(t, func(t *testing.T, b bucketURL) {
		for _, c := range cases {
			t.Run(c.name, func(t *testing.T) {
				ctx := context.Background()
				dir := t.TempDir()
				local := filepath.Join(dir, c.local)
				if strings.HasSuffix(c.local, "/") {
					local += "/"
				}
				lsum, err := ckpt.Convert(ctx, openCk(t, c.src), local, c.opts...)
				if err != nil {
					t.Fatal(err)
				}
				rsum, err := ckpt.Convert(ctx, openCk(t, c.src), b.url(c.remote), c.opts...)
				if err != nil {
					t.Fatal(err)
				}
				lfiles, rfiles := append(lsum.Files, lsum.Index), append(rsum.Files, rsum.Index)
				if len(lfiles) != len(rfiles) || (lsum.Index == "") != (rsum.Index == "") {
					t.Fatalf("local wrote %v, remote %v", lfiles, rfiles)
				}
				for i := range lfiles {
					if lfiles[i] == "" {
						continue
					}
					if filepath.Base(lfiles[i]) != filepath.Base(rfiles[i]) || !strings.HasPrefix(rfiles[i], b.url("out/")) {
						t.Fatalf("local %s, remote %s", lfiles[i], rfiles[i])
					}
					want, err := os.ReadFile(lfiles[i])
					if err != nil {
						t.Fatal(err)
					}
					if got := readURL(t, rfiles[i]); !bytes.Equal(got, want) {
						t.Fatalf("%s: %d bytes, differing from the local output's %d", rfiles[i], len(got), len(want))
					}
				}
				if lsum.Bytes != rsum.Bytes || lsum.Tensors != rsum.Tensors {
					t.Fatalf("summaries differ: %+v, %+v", lsum, rsum)
				}
				// Read back as a checkpoint.
				back, err := ckpt.Open(ctx, rsum.Files[0])
				if rsum.Index != "" {
					back, err = ckpt.Open(ctx, rsum.Index)
				}
				if err != nil {
					t.Fatal(err)
				}
				back.Close()
				for _, l := range b.left(t) {
					if strings.HasPrefix(l, "pending:") || strings.Contains(l, ".ckpt-tmp-") {
						t.Fatalf("left behind: %s", l)
					}
				}
				for _, f := range rfiles {
					if f != "" {
						st, key, _ := objstore.NewStore(ctx, f)
						st.Remove(ctx, key)
					}
				}
			})
		}
	})
}

// failAfter fails a writer's writes once n bytes went through.
type failAfter struct {
	w io.Writer
	n *int64
}

var errInjected = errors.New("injected write failure")

func (f failAfter) Write(p []byte) (int, error) {
	if *f.n -= int64(len(p)); *f.n < 0 {
		return 0, errInjected
	}
	return f.w.Write(p)
}

// A conversion failing mid-write (a write error, the context cancelled,
// in the first object or after a shard) leaves nothing: no object, no
// pending multipart upload, no temporary object.
func TestConvertURLFailureLeavesNothing(t *testing.T) {
	big := bigSafetensors(t, 70<<20)
	eachBackend(t, func(t *testing.T, b bucketURL) {
		for _, c := range []struct {
			name, src, out string
			opts           []convert.Option
			cancelAt       int64 // source bytes read, 0: fail a write instead
			failAt         int64 // output bytes written
		}{
			{"write-error", big, "out/big.safetensors", nil, 0, 66 << 20},
			{"cancel", big, "out/big.safetensors", nil, 66 << 20, 0},
			{"cancel-pth", big, "out/big.pt", nil, 66 << 20, 0},
			{"second-shard", big, "out/", []convert.Option{convert.WithMaxShardSize(30 << 20)}, 0, 40 << 20},
		} {
			t.Run(c.name, func(t *testing.T) {
				ctx, cancel := context.WithCancel(context.Background())
				defer cancel()
				opts := append([]convert.Option{}, c.opts...)
				if c.cancelAt > 0 {
					var read int64
					opts = append(opts, convert.WithProgress(func(n int64) {
						if read += n; read >= c.cancelAt {
							cancel()
						}
					}))
				} else {
					// One budget across the outputs: the second shard fails.
					left := c.failAt
					opts = append(opts, convert.WithOutputWrapper(func(w io.Writer) io.Writer { return failAfter{w, &left} }))
				}
				_, err := ckpt.Convert(ctx, openCk(t, c.src), b.url(c.out), opts...)
				if c.cancelAt > 0 && !errors.Is(err, context.Canceled) || c.cancelAt == 0 && !errors.Is(err, errInjected) {
					t.Fatalf("got %v", err)
				}
				if strings.Contains(err.Error(), "\n") {
					t.Fatalf("error of more than one line: %q", err)
				}
				if left := b.left(t); len(left) != 0 {
					t.Fatalf("left behind: %v", left)
				}
			})
		}
	})
}

// An existing object is refused without --force before a byte is read
// or written; with it, it is replaced.
func TestConvertURLExists(t *testing.T) {
	eachBackend(t, func(t *testing.T, b bucketURL) {
		ctx := context.Background()
		u := b.url("out/model.safetensors")
		if _, err := ckpt.Convert(ctx, openCk(t, fixtures+"zip_basic.pt"), u); err != nil {
			t.Fatal(err)
		}
		before := readURL(t, u)
		var read int64
		_, err := ckpt.Convert(ctx, openCk(t, fixtures+"training.pt"), u, convert.WithProgress(func(n int64) { read += n }))
		if !errors.Is(err, convert.ErrExists) || read != 0 || !strings.Contains(err.Error(), u) {
			t.Fatalf("got %v after reading %d bytes, want ErrExists before reading", err, read)
		}
		if !bytes.Equal(readURL(t, u), before) {
			t.Fatal("the existing object changed")
		}
		// A sharded output that exists is refused too.
		for i := 0; i < 2; i++ {
			_, err := ckpt.Convert(ctx, openCk(t, fixtures+"training.pt"), b.url("out/sh/"), convert.WithMaxShardSize(100))
			if i == 0 && err != nil || i == 1 && !errors.Is(err, convert.ErrExists) {
				t.Fatalf("sharded, time %d: %v", i+1, err)
			}
		}
		if _, err := ckpt.Convert(ctx, openCk(t, fixtures+"training.pt"), u, convert.WithForce(true)); err != nil {
			t.Fatal(err)
		}
		local := filepath.Join(t.TempDir(), "model.safetensors")
		if _, err := ckpt.Convert(ctx, openCk(t, fixtures+"training.pt"), local); err != nil {
			t.Fatal(err)
		}
		want, _ := os.ReadFile(local)
		if !bytes.Equal(readURL(t, u), want) {
			t.Fatal("--force did not replace the object")
		}
	})
}

// No local staging: with $TMPDIR unusable (a missing directory) a
// conversion to a URL still works, a large one included; a zstd
// safetensors output (documented as staged) needs it.
func TestConvertURLNoStaging(t *testing.T) {
	big := bigSafetensors(t, 70<<20)
	eachBackend(t, func(t *testing.T, b bucketURL) {
		t.Setenv("TMPDIR", filepath.Join(t.TempDir(), "missing"))
		ctx := context.Background()
		for _, out := range []string{"out/big.safetensors", "out/big.pt.zst"} {
			if !strings.HasSuffix(out, ".zst") {
				if _, err := ckpt.Convert(ctx, openCk(t, big), b.url(out)); err != nil {
					t.Fatalf("%s: %v", out, err)
				}
				continue
			}
			if _, err := ckpt.Convert(ctx, openCk(t, big), b.url(out), convert.WithCompress("zstd")); err != nil {
				t.Fatalf("%s: %v", out, err)
			}
		}
		if _, err := ckpt.Convert(ctx, openCk(t, big), b.url("out/big.safetensors.zst"), convert.WithCompress("zstd")); err == nil {
			t.Fatal("zstd safetensors with no temporary directory succeeded: where did it stage?")
		}
		if left := b.left(t); len(left) != 2 {
			t.Fatalf("objects: %v, want the two outputs", left)
		}
	})
}

package convert

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/ckpt-dev/ckpt/internal/miniotest"
	"github.com/ckpt-dev/ckpt/internal/testenv"
	"github.com/ckpt-dev/ckpt/objstore"
	"github.com/ckpt-dev/ckpt/statedict"
	"github.com/minio/minio-go/v7"
)

// storeFS serves statedict.OpenFS from an objstore.Store, as the root
// package's Open does for URLs.
type storeFS struct{ s *objstore.Store }

func (f storeFS) OpenFile(name string) (statedict.File, error) { return f.s.Open(name) }
func (f storeFS) IsDir(name string) (bool, error)              { return f.s.IsDir(name) }
func (f storeFS) ReadDir(name string) ([]string, error)        { return f.s.List(name) }
func (f storeFS) DisplayName(name string) string               { return f.s.URL(name) }

// streamFixtures writes a zip torch.save (a 9 MiB storage, one of 5 MiB
// with a view, small ones), safetensors, and safetensors in two shards
// with their index into dir, and returns the names to convert.
func streamFixtures(t *testing.T, dir string) []string {
	t.Helper()
	testenv.Require(t, "torch")
	script := `
import sys, torch
g = torch.Generator().manual_seed(3)
sd = {"big": torch.randn(9 * 2**20 // 4, generator=g), "mid": torch.randn(5 * 2**20 // 4 + 3, generator=g),
      "small": torch.randn(1000, generator=g)}
sd["view"] = sd["mid"][1000:2000]
torch.save(sd, sys.argv[1])
`
	if out, err := exec.Command(testenv.Python(), "-c", script, filepath.Join(dir, "model.pt")).CombinedOutput(); err != nil {
		t.Fatalf("torch.save: %v\n%s", err, out)
	}
	rng := rand.New(rand.NewSource(5))
	u8 := func(n int) []byte { b := make([]byte, n); rng.Read(b); return b }
	writeU8(t, filepath.Join(dir, "model.safetensors"), []string{"w0", "w1", "w2"}, [][]byte{u8(6<<20 + 3), u8(700 << 10), u8(4 << 20)})
	writeU8(t, filepath.Join(dir, "sh-1.safetensors"), []string{"s0", "s1"}, [][]byte{u8(4<<20 + 5), u8(3 << 19)})
	writeU8(t, filepath.Join(dir, "sh-2.safetensors"), []string{"s2"}, [][]byte{u8(5 << 20)})
	index, _ := json.Marshal(map[string]any{"metadata": map[string]any{}, "weight_map": map[string]string{
		"s0": "sh-1.safetensors", "s1": "sh-1.safetensors", "s2": "sh-2.safetensors"}})
	if err := os.WriteFile(filepath.Join(dir, "sh.safetensors.index.json"), index, 0o644); err != nil {
		t.Fatal(err)
	}
	return []string{"model.pt", "model.safetensors", "sh.safetensors.index.json"}
}

// writeU8 writes a safetensors file of U8 tensors.
func writeU8(t *testing.T, path string, names []string, data [][]byte) {
	t.Helper()
	header := map[string]any{}
	var off int
	for i, n := range names {
		header[n] = map[string]any{"dtype": "U8", "shape": []int{len(data[i])}, "data_offsets": []int{off, off + len(data[i])}}
		off += len(data[i])
	}
	h, _ := json.Marshal(header)
	out := binary.LittleEndian.AppendUint64(nil, uint64(len(h)))
	out = append(append(out, h...), bytes.Join(data, nil)...)
	if err := os.WriteFile(path, out, 0o644); err != nil {
		t.Fatal(err)
	}
}

// The MinIO server of the streaming tests, started at first use (and
// stopped by TestMain).
var (
	srvOnce sync.Once
	srv     *miniotest.Server
	srvErr  error
)

func TestMain(m *testing.M) {
	code := m.Run()
	if srv != nil {
		srv.Stop()
	}
	os.Exit(code)
}

// streamServer starts MinIO (once), uploads every file of dir to a bucket and
// returns a Store over it (segments of one chunk of 1 MiB, so that the
// tensors' streams take several GETs).
func streamServer(t *testing.T, dir string) *objstore.Store {
	t.Helper()
	srvOnce.Do(func() { srv, srvErr = miniotest.Start() })
	if errors.Is(srvErr, miniotest.ErrNoBinary) && !miniotest.Required() {
		t.Skip(srvErr.Error())
	}
	if srvErr != nil {
		t.Fatal(srvErr)
	}
	srv.SetEnv(t)
	t.Setenv("AWS_EC2_METADATA_DISABLED", "true")
	bucket := fmt.Sprintf("streams%d", rand.Int63())
	if err := srv.MakeBucket(bucket); err != nil {
		t.Fatal(err)
	}
	names, _ := filepath.Glob(filepath.Join(dir, "*"))
	for _, p := range names {
		putFile(t, srv, bucket, filepath.Base(p), p)
	}
	st, _, err := objstore.NewStore(context.Background(), "s3://"+bucket+"/x", objstore.WithChunkSize(1<<20), objstore.WithDirectGetSize(2<<20))
	if err != nil {
		t.Fatal(err)
	}
	return st
}

func putFile(t *testing.T, srv *miniotest.Server, bucket, key, path string) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := srv.Client.PutObject(context.Background(), bucket, key, bytes.NewReader(data), int64(len(data)), minio.PutObjectOptions{}); err != nil {
		t.Fatal(err)
	}
}

// convertTo converts ck to out and returns the output's bytes.
func convertTo(t *testing.T, ck *statedict.Checkpoint, out string) ([]byte, error) {
	t.Helper()
	if _, err := Convert(context.Background(), ck, out, WithForce(true)); err != nil {
		return nil, err
	}
	return os.ReadFile(out)
}

// TestStreamedFromObjectStore converts each fixture from MinIO and from
// the local disk: the outputs are the same bytes, and every tensor of at
// least streamMin bytes was streamed (StreamRange) rather than read
// through the object's cache.
func TestStreamedFromObjectStore(t *testing.T) {
	dir := t.TempDir()
	names := streamFixtures(t, dir)
	st := streamServer(t, dir)
	out := t.TempDir()
	for _, name := range names {
		t.Run(name, func(t *testing.T) {
			lck, err := statedict.Open(filepath.Join(dir, name))
			if err != nil {
				t.Fatal(err)
			}
			defer lck.Close()
			want, err := convertTo(t, lck, filepath.Join(out, "local.safetensors"))
			if err != nil {
				t.Fatal(err)
			}
			var big int64
			for _, tn := range lck.Tensors {
				if tn.NBytes() >= streamMin && tn.IsContiguous() {
					big++
				}
			}
			rck, err := statedict.OpenFS(storeFS{st}, name)
			if err != nil {
				t.Fatal(err)
			}
			defer rck.Close()
			before := streamedTensors.Load()
			got, err := convertTo(t, rck, filepath.Join(out, "remote.safetensors"))
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got, want) {
				t.Errorf("output from MinIO differs from the local file's (%d and %d bytes)", len(got), len(want))
			}
			if n := streamedTensors.Load() - before; n != big || big == 0 {
				t.Errorf("%d tensors streamed, want the %d of at least %d bytes", n, big, streamMin)
			}
		})
	}
}

// TestStreamedDamaged: a damaged object (a byte of a streamed tensor
// flipped: a zip record's CRC32, and a safetensors file's recorded digest)
// fails the conversion with the error of the unstreamed read, and leaves
// no output.
func TestStreamedDamaged(t *testing.T) {
	dir := t.TempDir()
	streamFixtures(t, dir)
	// A safetensors file with recorded digests: convert's own output.
	ck, err := statedict.Open(filepath.Join(dir, "model.safetensors"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Convert(context.Background(), ck, filepath.Join(dir, "digests.safetensors")); err != nil {
		t.Fatal(err)
	}
	ck.Close()
	for _, c := range []struct{ name, tensor string }{{"model.pt", "big"}, {"digests.safetensors", "w0"}} {
		ck, err := statedict.Open(filepath.Join(dir, c.name))
		if err != nil {
			t.Fatal(err)
		}
		tn := ck.Tensor(c.tensor)
		span, ok, err := tn.InPlace()
		ck.Close()
		if !ok || err != nil {
			t.Fatalf("%s: %s not in place: %v", c.name, c.tensor, err)
		}
		data, _ := os.ReadFile(filepath.Join(dir, c.name))
		data[span.Off+span.Len/2+12345] ^= 0x10
		os.WriteFile(filepath.Join(dir, "bad-"+c.name), data, 0o644)
	}
	st := streamServer(t, dir)
	out := t.TempDir()
	for _, c := range []struct{ name, what string }{{"bad-model.pt", "CRC32"}, {"bad-digests.safetensors", "digest"}} {
		t.Run(c.name, func(t *testing.T) {
			var msgs [2]string
			for i, off := range []bool{true, false} {
				noStream = off
				rck, err := statedict.OpenFS(storeFS{st}, c.name)
				if err != nil {
					t.Fatal(err)
				}
				before := streamedTensors.Load()
				o := filepath.Join(out, "o.safetensors")
				_, err = Convert(context.Background(), rck, o)
				rck.Close()
				if !errors.Is(err, ErrDamaged) || !strings.Contains(err.Error(), c.what) {
					t.Fatalf("streamed=%v: got %v, want ErrDamaged over its %s", !off, err, c.what)
				}
				if _, serr := os.Stat(o); !errors.Is(serr, os.ErrNotExist) {
					t.Errorf("streamed=%v: output left behind (%v)", !off, serr)
				}
				if streamed := streamedTensors.Load() > before; streamed == off {
					t.Errorf("streamed=%v: the stream path taken: %v", !off, streamed)
				}
				msgs[i] = err.Error()
			}
			noStream = false
			if msgs[0] != msgs[1] {
				t.Errorf("errors differ:\n unstreamed: %s\n streamed:   %s", msgs[0], msgs[1])
			}
		})
	}
}

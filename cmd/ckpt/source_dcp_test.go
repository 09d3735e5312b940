package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"

	"github.com/ckpt-dev/ckpt/objstore"
	"github.com/ckpt-dev/ckpt/statedict"
	"github.com/minio/minio-go/v7"
)

// uploadDCP puts the basic DCP fixture in bucket fxb under dcp/basic/.
func uploadDCP(t *testing.T) {
	t.Helper()
	s := sharedMinio(t)
	ents, err := os.ReadDir(dcpDir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		if _, err := s.Client.FPutObject(context.Background(), "fxb", "dcp/basic/"+e.Name(), filepath.Join(dcpDir, e.Name()), minio.PutObjectOptions{}); err != nil {
			t.Fatal(err)
		}
	}
}

// sameAs runs a command on a local source and on a URL and checks that the
// JSON reports agree once each side's names (longest first) read "SRC".
func sameAs(t *testing.T, local, url []string, args ...string) {
	t.Helper()
	run := func(names []string) any {
		code, out, errs := runCLI(t, append(append([]string{}, args...), names[0])...)
		if code != exitOK {
			t.Fatalf("%v %s: exit %d: %s", args, names[0], code, errs)
		}
		for _, n := range names {
			out = strings.ReplaceAll(out, n, "SRC")
		}
		return normalize(t, out, "\x00")
	}
	lv, uv := run(local), run(url)
	if !reflect.DeepEqual(lv, uv) {
		lb, _ := json.MarshalIndent(lv, "", " ")
		ub, _ := json.MarshalIndent(uv, "", " ")
		t.Errorf("%v: reports differ:\nlocal %s\nurl   %s", args, lb, ub)
	}
}

// A DCP directory read from the bucket (s3://, as a prefix with or without
// its slash, or by its .metadata) and from a web server (http://, the
// directory with its slash or the .metadata) gives what the local
// directory gives: inspect, load --map-location cpu, load of a rank's
// slice, verify (every chunk's CRC32), and convert's output bytes.
func TestURLDCPRoundTrip(t *testing.T) {
	uploadDCP(t)
	hs := httptest.NewServer(http.FileServer(http.Dir(filepath.Dir(dcpDir))))
	defer hs.Close()
	localDir, _ := filepath.Abs(dcpDir)
	meta := filepath.Join(localDir, ".metadata")
	cases := []struct{ local, url []string }{
		{[]string{localDir}, []string{"s3://fxb/dcp/basic"}},
		{[]string{localDir + "/"}, []string{"s3://fxb/dcp/basic/"}},
		{[]string{meta, localDir}, []string{"s3://fxb/dcp/basic/.metadata", "s3://fxb/dcp/basic"}},
		{[]string{localDir + "/"}, []string{hs.URL + "/basic/"}},
		{[]string{meta, localDir}, []string{hs.URL + "/basic/.metadata", hs.URL + "/basic"}},
	}
	for _, c := range cases {
		t.Run(c.url[0], func(t *testing.T) {
			sameAs(t, c.local, c.url, "inspect", "--json", "--stats")
			sameAs(t, c.local, c.url, "load", "--map-location", "cpu", "--json")
			sameAs(t, c.local, c.url, "load", "--map-location", "cpu", "--json", "--rank", "1", "--world-size", "4",
				"--split", "model.embed.weight=0,model.mlp.weight=1")
			sameAs(t, c.local, c.url, "verify", "--json")
			code, out, errs := runCLI(t, "verify", c.url[0])
			if code != exitOK || !strings.Contains(out, "45 CRC32s") {
				t.Errorf("verify: exit %d: %s%s", code, out, errs)
			}
			dir := t.TempDir()
			lc, _, lerr := runCLI(t, "convert", c.local[0], filepath.Join(dir, "l.safetensors"))
			uc, _, uerr := runCLI(t, "convert", c.url[0], filepath.Join(dir, "u.safetensors"))
			if lc != exitOK || uc != exitOK {
				t.Fatalf("convert: local exit %d (%s), URL exit %d (%s)", lc, lerr, uc, uerr)
			}
			a, _ := os.ReadFile(filepath.Join(dir, "l.safetensors"))
			b, _ := os.ReadFile(filepath.Join(dir, "u.safetensors"))
			if len(a) == 0 || !bytes.Equal(a, b) {
				t.Errorf("convert from %s: output differs from the local directory's", c.url[0])
			}
		})
	}
}

// A chunk file missing from the bucket is a warning, and reading a tensor
// stored in it fails naming the URL, exit 1.
func TestURLDCPMissingFile(t *testing.T) {
	s := sharedMinio(t)
	ents, _ := os.ReadDir(dcpDir)
	for _, e := range ents {
		if e.Name() == "__2_0.distcp" {
			continue
		}
		if _, err := s.Client.FPutObject(context.Background(), "fxb", "dcp/holed/"+e.Name(), filepath.Join(dcpDir, e.Name()), minio.PutObjectOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	code, out, errs := runCLI(t, "convert", "s3://fxb/dcp/holed", filepath.Join(t.TempDir(), "o.safetensors"))
	if code != exitError || !strings.Contains(out+errs, "s3://fxb/dcp/holed") || !strings.Contains(out+errs, "__2_0.distcp") {
		t.Fatalf("exit %d: %s%s", code, out, errs)
	}
	t.Log(out, errs)
}

// countingStoreFS serves statedict.OpenFS from an objstore.Store, noting
// the byte ranges asked of each object.
type countingStoreFS struct {
	s      *objstore.Store
	mu     sync.Mutex
	ranges map[string][][2]int64
}

type countedObject struct {
	*objstore.Object
	fs   *countingStoreFS
	name string
}

func (o countedObject) ReadAt(p []byte, off int64) (int, error) {
	o.fs.mu.Lock()
	o.fs.ranges[o.name] = append(o.fs.ranges[o.name], [2]int64{off, off + int64(len(p))})
	o.fs.mu.Unlock()
	return o.Object.ReadAt(p, off)
}

func (f *countingStoreFS) OpenFile(name string) (statedict.File, error) {
	o, err := f.s.Open(name)
	if err != nil {
		return nil, err
	}
	return countedObject{o, f, name}, nil
}
func (f *countingStoreFS) IsDir(name string) (bool, error)       { return f.s.IsDir(name) }
func (f *countingStoreFS) ReadDir(name string) ([]string, error) { return f.s.List(name) }
func (f *countingStoreFS) DisplayName(name string) string        { return f.s.URL(name) }

// A rank's slice of a DCP checkpoint over s3:// and http:// reads, once
// opened, only the bytes of the chunks that hold its rows: rank r's rows of
// model.embed.weight come from __r_0.distcp alone, within that chunk.
func TestURLDCPRankSliceReadsItsShare(t *testing.T) {
	uploadDCP(t)
	hs := httptest.NewServer(http.FileServer(http.Dir(filepath.Dir(dcpDir))))
	defer hs.Close()
	rules, err := statedict.ParseSplitRules("model.embed.weight=0")
	if err != nil {
		t.Fatal(err)
	}
	for _, src := range []string{"s3://fxb/dcp/basic/", hs.URL + "/basic/"} {
		for rank := range 4 {
			st, key, err := objstore.NewStore(context.Background(), src)
			if err != nil {
				t.Fatal(err)
			}
			fsys := &countingStoreFS{s: st, ranges: map[string][][2]int64{}}
			ck, err := statedict.OpenFS(fsys, key)
			if err != nil {
				t.Fatal(err)
			}
			full := ck.Tensor("model.embed.weight")
			chunk := full.Chunks()[rank]
			rc, err := statedict.RankCheckpoint(ck, rank, 4, rules)
			if err != nil {
				t.Fatal(err)
			}
			fsys.mu.Lock()
			fsys.ranges = map[string][][2]int64{}
			fsys.mu.Unlock()
			before := st.Requests()
			b, err := rc.Tensor("model.embed.weight").ReadAll()
			if err != nil {
				t.Fatal(err)
			}
			own := key + fmt.Sprintf("__%d_0.distcp", rank)
			var n int64
			for name, rs := range fsys.ranges {
				for _, r := range rs {
					n += r[1] - r[0]
					if name != own || r[0] < chunk.Begin || r[1] > chunk.Begin+chunk.Length {
						t.Errorf("%s rank %d: read %s %d:%d, outside %s %d+%d", src, rank, name, r[0], r[1], own, chunk.Begin, chunk.Length)
					}
				}
			}
			want := full.Shape[1] * 4 * (chunk.Sizes[0])
			if int64(len(b)) != want || n == 0 {
				t.Errorf("%s rank %d: %d bytes of the slice (want %d), %d read", src, rank, len(b), want, n)
			}
			t.Logf("%s rank %d: %d bytes of the slice, %d bytes asked of %s, %d new requests", src, rank, len(b), n, own, st.Requests()-before)
			ck.Close()
		}
	}
}

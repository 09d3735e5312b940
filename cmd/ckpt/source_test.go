package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"

	"github.com/ckpt-dev/ckpt/dtype"
	"github.com/ckpt-dev/ckpt/internal/miniotest"
	"github.com/ckpt-dev/ckpt/torchzip"
	"github.com/minio/minio-go/v7"
)

var (
	minioOnce sync.Once
	minioSrv  *miniotest.Server
	minioErr  error
)

// sharedMinio returns a MinIO server shared by this package's tests, with
// the fixtures uploaded to bucket "fxb" (stopped by TestMain's exit: the
// process group dies with the test binary) and the standard AWS
// environment pointing at it.
func sharedMinio(t *testing.T) *miniotest.Server {
	t.Helper()
	minioOnce.Do(func() {
		minioSrv, minioErr = miniotest.Start()
		if minioErr != nil {
			return
		}
		if minioErr = minioSrv.MakeBucket("fxb"); minioErr != nil {
			return
		}
		minioErr = filepath.WalkDir(fx, func(p string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() {
				return err
			}
			rel, _ := filepath.Rel(fx, p)
			_, err = minioSrv.Client.FPutObject(context.Background(), "fxb", filepath.ToSlash(rel), p, minio.PutObjectOptions{})
			return err
		})
	})
	if minioErr == miniotest.ErrNoBinary && !miniotest.Required() {
		t.Skip(minioErr.Error())
	}
	if minioErr != nil {
		t.Fatal(minioErr)
	}
	minioSrv.SetEnv(t)
	t.Setenv("AWS_EC2_METADATA_DISABLED", "true")
	return minioSrv
}

func TestMain(m *testing.M) {
	code := m.Run()
	if minioSrv != nil {
		minioSrv.Stop()
	}
	stopEmulators()
	if cliDir != "" {
		os.RemoveAll(cliDir)
	}
	os.Exit(code)
}

// fixtureNames lists the fixtures: files with an .expected.json, and
// directories.
func fixtureNames(t *testing.T) []string {
	ents, err := os.ReadDir(fx)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range ents {
		n := e.Name()
		if strings.HasSuffix(n, ".expected.json") || n == "README.md" || n == "bad" {
			continue
		}
		names = append(names, n)
	}
	return names
}

// normalize decodes a JSON report, drops what differs between runs
// (timings, request counts) and names the source as "SRC".
func normalize(t *testing.T, out, src string) any {
	t.Helper()
	out = strings.ReplaceAll(out, src, "SRC")
	if i := strings.LastIndex(src, "/"); i > 0 {
		out = strings.ReplaceAll(out, src[:i+1], "DIR/")
	}
	var v any
	if err := json.Unmarshal([]byte(out), &v); err != nil {
		t.Fatalf("not JSON: %v\n%s", err, out)
	}
	var walk func(v any)
	walk = func(v any) {
		switch x := v.(type) {
		case map[string]any:
			for k, e := range x {
				if k == "requests" || k == "free_bytes" || k == "seconds" || k == "gb_per_s" || strings.HasSuffix(k, "_ms") || strings.HasSuffix(k, "_s") || strings.Contains(k, "gbps") || strings.Contains(k, "time") {
					delete(x, k)
					continue
				}
				walk(e)
			}
		case []any:
			for _, e := range x {
				walk(e)
			}
		}
	}
	walk(v)
	return v
}

// same runs a command on the local fixture and on its URL and checks the
// reports agree.
func same(t *testing.T, local, url string, args ...string) {
	t.Helper()
	run := func(src string) (int, any, string) {
		code, out, errs := runCLI(t, append(append([]string{}, args...), src)...)
		if code != exitOK {
			return code, nil, errs
		}
		return code, normalize(t, out, src), errs
	}
	lc, lv, lerr := run(local)
	uc, uv, uerr := run(url)
	if lc != uc {
		t.Fatalf("%v: local exit %d (%s), URL exit %d (%s)", args, lc, lerr, uc, uerr)
	}
	if lc != exitOK {
		if strings.ReplaceAll(lerr, local, "SRC") != strings.ReplaceAll(uerr, url, "SRC") {
			t.Errorf("%v: errors differ:\n local %s\n url   %s", args, lerr, uerr)
		}
		return
	}
	if !reflect.DeepEqual(lv, uv) {
		lb, _ := json.MarshalIndent(lv, "", " ")
		ub, _ := json.MarshalIndent(uv, "", " ")
		t.Errorf("%v: reports differ:\nlocal %s\nurl   %s", args, lb, ub)
	}
}

// Every fixture read from the bucket (s3://) and from a web server
// (https:// through net/http's file server) gives exactly what it gives
// from the local file: inspect, load --map-location cpu, verify, and
// convert's output bytes.
func TestURLFixturesRoundTrip(t *testing.T) {
	sharedMinio(t)
	hs := httptest.NewServer(http.FileServer(http.Dir(fx)))
	defer hs.Close()
	for _, name := range fixtureNames(t) {
		t.Run(name, func(t *testing.T) {
			local := fx + name
			fi, _ := os.Stat(local)
			urls := []string{"s3://fxb/" + name}
			if !fi.IsDir() {
				urls = append(urls, hs.URL+"/"+name)
			} else if m, _ := filepath.Glob(filepath.Join(local, "*.index.json")); len(m) == 1 {
				urls = append(urls, hs.URL+"/"+name+"/"+filepath.Base(m[0]))
				local = m[0]
			}
			for _, u := range urls {
				src := local
				if strings.HasPrefix(u, "s3://") {
					src = fx + name
				}
				same(t, src, u, "inspect", "--json", "--stats")
				same(t, src, u, "load", "--map-location", "cpu", "--no-mmap", "--json")
				same(t, src, u, "verify", "--json")
				dir := t.TempDir()
				lc, _, lerr := runCLI(t, "convert", src, filepath.Join(dir, "l.safetensors"))
				uc, _, uerr := runCLI(t, "convert", u, filepath.Join(dir, "u.safetensors"))
				if lc != uc {
					t.Fatalf("convert: local exit %d (%s), URL exit %d (%s)", lc, lerr, uc, uerr)
				}
				if lc == exitOK {
					a, _ := os.ReadFile(filepath.Join(dir, "l.safetensors"))
					b, _ := os.ReadFile(filepath.Join(dir, "u.safetensors"))
					if !bytes.Equal(a, b) {
						t.Errorf("convert from %s: output differs from the local file's", u)
					}
				}
			}
		})
	}
}

// inspect over s3:// answers in a few requests, reported in --json.
func TestInspectRequests(t *testing.T) {
	s := sharedMinio(t)
	// A 48 MiB torch zip of 48 records: the local headers are spread over
	// the file, and inspect must not read them.
	many := filepath.Join(t.TempDir(), "many.pt")
	manyRecords(t, many, 48, 1<<20)
	if _, err := s.Client.FPutObject(context.Background(), "fxb", "many.pt", many, minio.PutObjectOptions{}); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name string
		max  int64
	}{{"model.safetensors", 1}, {"training.pt", 1}, {"zip_basic.pt", 1}, {"sharded_st", 5}, {"dir_checkpoint", 3}, {"many.pt", 2}} {
		code, out, errs := runCLI(t, "inspect", "--json", "s3://fxb/"+c.name)
		if code != exitOK {
			t.Fatalf("%s: exit %d: %s", c.name, code, errs)
		}
		var rep inspectReport
		if err := json.Unmarshal([]byte(out), &rep); err != nil {
			t.Fatal(err)
		}
		if rep.Requests == nil {
			t.Errorf("%s: no request count", c.name)
		} else if *rep.Requests < 1 || *rep.Requests > c.max {
			t.Errorf("%s: %d requests, want 1..%d", c.name, *rep.Requests, c.max)
		} else {
			t.Logf("%s: %d requests", c.name, *rep.Requests)
		}
	}
	// A local file reports no request count.
	_, out, _ := runCLI(t, "inspect", "--json", fx+"model.safetensors")
	if strings.Contains(out, `"requests"`) {
		t.Error("a local inspect reports requests")
	}
}

// Failing commands name the cause in one line, and no secret appears in
// any output, text or JSON.
func TestURLErrorsShowNoSecret(t *testing.T) {
	s := sharedMinio(t)
	const secret = "sekr3t-DO-NOT-PRINT-0123456789"
	for _, c := range []struct {
		env  map[string]string
		args []string
		want string
	}{
		{map[string]string{"AWS_SECRET_ACCESS_KEY": secret}, []string{"inspect", "--json", "s3://fxb/model.safetensors"}, "credentials were refused"},
		{map[string]string{"AWS_SECRET_ACCESS_KEY": secret, "AWS_SESSION_TOKEN": secret}, []string{"load", "--map-location", "cpu", "--json", "s3://fxb/model.safetensors"}, "s3://fxb/model.safetensors"},
		{map[string]string{"AWS_SECRET_ACCESS_KEY": secret}, []string{"convert", "s3://fxb/model.safetensors", "/nonexistent/out.safetensors"}, "credentials were refused"},
		{map[string]string{"AWS_SECRET_ACCESS_KEY": secret}, []string{"verify", "s3://fxb/model.safetensors"}, "credentials were refused"},
		{map[string]string{"AWS_ACCESS_KEY_ID": "", "AWS_SECRET_ACCESS_KEY": ""}, []string{"inspect", "s3://fxb/model.safetensors"}, "no credentials"},
		{nil, []string{"inspect", "s3://fxb/nothing-here.pt"}, "no such object"},
		{nil, []string{"inspect", "s3://no-such-bucket/x.pt"}, "no such bucket"},
		{map[string]string{"AWS_ENDPOINT_URL": "http://127.0.0.1:1"}, []string{"inspect", "s3://fxb/model.safetensors"}, "endpoint unreachable"},
		{nil, []string{"inspect", "abfs://container/model.pt"}, "unsupported URL scheme"},
	} {
		s.SetEnv(t)
		for k, v := range c.env {
			t.Setenv(k, v)
		}
		code, out, errs := runCLI(t, c.args...)
		if code != exitError {
			t.Errorf("%v: exit %d, want 1 (%s)", c.args, code, errs)
		}
		all := out + errs
		if strings.Contains(all, secret) || strings.Contains(all, s.SecretKey) {
			t.Errorf("%v: a secret in the output: %s", c.args, all)
		}
		if !strings.Contains(errs, c.want) || strings.Count(strings.TrimSpace(errs), "\n") > 0 {
			t.Errorf("%v: stderr %q, want one line with %q", c.args, errs, c.want)
		}
		for _, bad := range []string{"&{", "0xc0", "map[", "*minio", "*objstore"} {
			if strings.Contains(all, bad) {
				t.Errorf("%v: Go syntax %q in %q", c.args, bad, all)
			}
		}
	}
}

// manyRecords writes a torch zip of n float32 tensors of size bytes each,
// one storage each.
func manyRecords(t *testing.T, path string, n int, size int64) {
	t.Helper()
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var entries []torchzip.Entry
	for i := 0; i < n; i++ {
		st := &torchzip.StorageRef{Key: fmt.Sprint(i), DType: dtype.Float32, Location: "cpu", NumEl: size / 4}
		entries = append(entries, torchzip.Entry{Name: fmt.Sprintf("w%d", i), Tensor: &torchzip.TensorRef{Storage: st, Shape: []int64{size / 4}, Strides: []int64{1}}})
	}
	pkl, err := torchzip.EncodeStateDict(entries)
	if err != nil {
		t.Fatal(err)
	}
	zw := torchzip.NewWriter(f)
	if err := zw.WriteRecord("data.pkl", int64(len(pkl)), bytes.NewReader(pkl)); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < n; i++ {
		if err := zw.WriteRecord(fmt.Sprintf("data/%d", i), size, io.LimitReader(zeros{}, size)); err != nil {
			t.Fatal(err)
		}
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
}

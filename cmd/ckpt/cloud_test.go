package main

import (
	"encoding/base64"
	"encoding/json"
	"io/fs"
	"math/rand"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/ckpt-dev/ckpt/internal/cloudemu"
)

// The emulators this package's tests share, with every fixture in bucket
// (container) "fxb"; stopped by TestMain.
var (
	gcsOnce sync.Once
	gcsSrv  *cloudemu.GCS
	gcsErr  error
	azOnce  sync.Once
	azSrv   *cloudemu.Azure
	azErr   error
)

func stopEmulators() {
	if gcsSrv != nil {
		gcsSrv.Stop()
	}
	if azSrv != nil {
		azSrv.Stop()
	}
}

// putFixtures calls put for every fixture file, named by its path
// relative to the fixtures directory.
func putFixtures(put func(key string, data []byte) error) error {
	return filepath.WalkDir(fx, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, _ := filepath.Rel(fx, p)
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		return put(filepath.ToSlash(rel), data)
	})
}

func sharedGCS(t *testing.T) *cloudemu.GCS {
	t.Helper()
	gcsOnce.Do(func() {
		if gcsSrv, gcsErr = cloudemu.StartGCS(); gcsErr != nil {
			return
		}
		if gcsErr = gcsSrv.MakeBucket("fxb"); gcsErr != nil {
			return
		}
		gcsErr = putFixtures(func(k string, d []byte) error { return gcsSrv.Put("fxb", k, d) })
	})
	cloudemu.Skip(t, gcsErr)
	gcsSrv.SetEnv(t)
	return gcsSrv
}

func sharedAzure(t *testing.T) *cloudemu.Azure {
	t.Helper()
	azOnce.Do(func() {
		if azSrv, azErr = cloudemu.StartAzure(); azErr != nil {
			return
		}
		if azErr = azSrv.MakeContainer("fxb"); azErr != nil {
			return
		}
		azErr = putFixtures(func(k string, d []byte) error { return azSrv.Put("fxb", k, d) })
	})
	cloudemu.Skip(t, azErr)
	azSrv.SetEnv(t)
	return azSrv
}

// Every fixture read from gs:// (fake-gcs-server) and az:// (Azurite)
// gives exactly what it gives from the local file: inspect and load
// --map-location cpu.
func TestCloudFixturesRoundTrip(t *testing.T) {
	for _, scheme := range []string{"gs", "az"} {
		t.Run(scheme, func(t *testing.T) {
			if scheme == "gs" {
				sharedGCS(t)
			} else {
				sharedAzure(t)
			}
			for _, name := range fixtureNames(t) {
				u := scheme + "://fxb/" + name
				same(t, fx+name, u, "inspect", "--json", "--stats")
				same(t, fx+name, u, "load", "--map-location", "cpu", "--no-mmap", "--json")
			}
		})
	}
}

// Failing gs:// and az:// commands name the cause in one line, exit 1,
// and show no secret.
func TestCloudErrorsShowNoSecret(t *testing.T) {
	gcs := sharedGCS(t)
	az := sharedAzure(t)
	wrong := base64.StdEncoding.EncodeToString([]byte(strings.Repeat("k", 32) + string(rune('a'+rand.Intn(26)))))
	for _, c := range []struct {
		env  map[string]string
		args []string
		want string
	}{
		{nil, []string{"inspect", "gs://fxb/nothing-here.pt"}, "ckpt: open gs://fxb/nothing-here.pt: no such object"},
		{nil, []string{"load", "--map-location", "cpu", "az://fxb/nothing-here.pt"}, "no such object"},
		{nil, []string{"inspect", "--json", "az://no-such-container/x.pt"}, "no such bucket"},
		{map[string]string{"AZURE_STORAGE_CONNECTION_STRING": strings.Replace(az.ConnectionString(), az.Key, wrong, 1)},
			// Azure answers a bad key with 403 AuthenticationFailed (the
			// credentials were refused), Azurite with AuthorizationFailure
			// (access denied): either is a clear cause.
			[]string{"inspect", "--json", "az://fxb/model.safetensors"}, "ckpt: open az://fxb/model.safetensors: "},
		{map[string]string{"STORAGE_EMULATOR_HOST": "127.0.0.1:1"}, []string{"inspect", "gs://fxb/model.safetensors"}, "unreachable"},
		{map[string]string{"AZURE_STORAGE_CONNECTION_STRING": strings.Replace(az.ConnectionString(), az.Addr, "127.0.0.1:1", 1)},
			[]string{"inspect", "az://fxb/model.safetensors"}, "unreachable"},
		{nil, []string{"inspect", "gs://no-such-bucket/x.pt"}, "no such bucket"},
	} {
		gcs.SetEnv(t)
		az.SetEnv(t)
		for k, v := range c.env {
			t.Setenv(k, v)
		}
		code, out, errs := runCLI(t, c.args...)
		if code != exitError {
			t.Errorf("%v: exit %d, want 1 (%s)", c.args, code, errs)
		}
		all := out + errs
		if strings.HasPrefix(c.want, "ckpt: open az://") && !strings.Contains(errs, "credentials were refused") && !strings.Contains(errs, "access denied") {
			t.Errorf("%v: stderr %q, want the credentials refused or access denied", c.args, errs)
		}
		if strings.Contains(all, az.Key) || strings.Contains(all, wrong) {
			t.Errorf("%v: a secret in the output: %s", c.args, all)
		}
		if !strings.Contains(errs, c.want) || strings.Count(strings.TrimSpace(errs), "\n") > 0 {
			t.Errorf("%v: stderr %q, want one line with %q", c.args, errs, c.want)
		}
		for _, bad := range []string{"&{", "0xc0", "map[", "*azcore", "*googleapi", "*objstore", "RESPONSE", "REQUEST"} {
			if strings.Contains(all, bad) {
				t.Errorf("%v: Go syntax or an SDK dump %q in %q", c.args, bad, all)
			}
		}
	}
}

// convert to gs:// and az:// streams the output to the bucket: a single
// file and a sharded output, verified against the source from the
// bucket; an existing object needs --force.
func TestConvertToCloud(t *testing.T) {
	sharedGCS(t)
	sharedAzure(t)
	for _, scheme := range []string{"gs", "az"} {
		t.Run(scheme, func(t *testing.T) {
			if scheme == "gs" {
				sharedGCS(t)
			} else {
				sharedAzure(t)
			}
			out := scheme + "://fxb/converted/model.safetensors"
			code, stdout, errs := runCLI(t, "convert", "--json", fx+"training.pt", out)
			if code != exitOK {
				t.Fatalf("exit %d: %s", code, errs)
			}
			var rep convertReport
			if err := json.Unmarshal([]byte(stdout), &rep); err != nil || len(rep.Files) != 1 || rep.Files[0] != out {
				t.Fatalf("report %s (%v)", stdout, err)
			}
			if code, stdout, errs = runCLI(t, "verify", fx+"training.pt", out); code != exitOK || !strings.Contains(stdout, "OK") {
				t.Fatalf("verify: %d %s %s", code, stdout, errs)
			}
			code, _, errs = runCLI(t, "convert", fx+"training.pt", out)
			if code != exitError || !strings.Contains(errs, "--force") || strings.Count(strings.TrimSpace(errs), "\n") != 0 {
				t.Fatalf("existing object: exit %d %q", code, errs)
			}
			if code, _, errs = runCLI(t, "convert", "--force", fx+"training.pt", out); code != exitOK {
				t.Fatalf("--force: exit %d %s", code, errs)
			}
			idx := scheme + "://fxb/converted/sharded/model.safetensors.index.json"
			if code, _, errs = runCLI(t, "convert", "--max-shard-size", "100B", fx+"training.pt", idx); code != exitOK {
				t.Fatalf("sharded: exit %d %s", code, errs)
			}
			if code, stdout, errs = runCLI(t, "verify", fx+"training.pt", idx); code != exitOK || !strings.Contains(stdout, "OK") {
				t.Fatalf("verify sharded: %d %s %s", code, stdout, errs)
			}
		})
	}
}

// Converting to https:// (read-only) fails at once, before any
// conversion, with a one-line error naming the output: quantized.pt,
// which has nothing safetensors can hold, would fail later and otherwise.
func TestConvertHTTPSOutputRefused(t *testing.T) {
	out := "https://127.0.0.1:1/out.safetensors"
	code, _, errs := runCLI(t, "convert", fx+"quantized.pt", out)
	want := "upload " + out + ": this kind of URL can only be read"
	if code != exitError || !strings.Contains(errs, want) || strings.Count(strings.TrimSpace(errs), "\n") > 0 {
		t.Errorf("convert to %s: exit %d, stderr %q; want 1 and one line with %q", out, code, errs, want)
	}
}

// inspect over gs:// and az:// answers in as few requests as over s3://,
// reported in --json.
func TestCloudInspectRequests(t *testing.T) {
	sharedGCS(t)
	sharedAzure(t)
	for _, scheme := range []string{"gs", "az"} {
		for _, c := range []struct {
			name string
			max  int64
		}{{"model.safetensors", 1}, {"training.pt", 1}, {"zip_basic.pt", 1}, {"sharded_st", 5}, {"dir_checkpoint", 3}} {
			u := scheme + "://fxb/" + c.name
			code, out, errs := runCLI(t, "inspect", "--json", u)
			if code != exitOK {
				t.Fatalf("%s: exit %d: %s", u, code, errs)
			}
			var rep inspectReport
			if err := json.Unmarshal([]byte(out), &rep); err != nil {
				t.Fatal(err)
			}
			if rep.Requests == nil || *rep.Requests < 1 || *rep.Requests > c.max {
				t.Errorf("%s: requests %d, want 1..%d", u, deref(rep.Requests), c.max)
			}
		}
	}
}

func deref(p *int64) int64 {
	if p == nil {
		return -1
	}
	return *p
}

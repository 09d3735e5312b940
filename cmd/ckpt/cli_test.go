package main

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"runtime/debug"
	"strings"
	"testing"
	"time"

	"github.com/ckpt-dev/ckpt/convert"
)

// cli runs the whole command line as main does and returns stdout, the
// exit code and stderr.
func cli(args ...string) (string, int, string) {
	var out, errb bytes.Buffer
	code := run(context.Background(), args, newStreams(strings.NewReader(""), &out, &errb))
	return out.String(), code, errb.String()
}

func TestVersion(t *testing.T) {
	defer func(f func() (*debug.BuildInfo, bool)) { buildInfo = f }(buildInfo)
	buildInfo = func() (*debug.BuildInfo, bool) {
		return &debug.BuildInfo{Main: debug.Module{Path: "github.com/ckpt-dev/ckpt", Version: "v1.2.3"},
			Settings: []debug.BuildSetting{{Key: "vcs.revision", Value: "0123456789abcdef0123"}, {Key: "vcs.modified", Value: "true"},
				{Key: "vcs.time", Value: "2026-11-23T10:00:00Z"}}}, true
	}
	want := "ckpt v1.2.3, revision 0123456789ab (modified), 2026-11-23T10:00:00Z, go"
	for _, args := range [][]string{{"--version"}, {"version"}} {
		out, code, errs := cli(args...)
		if code != exitOK || !strings.HasPrefix(out, want) || strings.Count(out, "\n") != 1 {
			t.Errorf("%v: exit %d, %q, stderr %q", args, code, out, errs)
		}
	}
	out, code, _ := cli("version", "--json")
	var v versionInfo
	if err := json.Unmarshal([]byte(out), &v); code != exitOK || err != nil || v.Version != "v1.2.3" ||
		v.Revision != "0123456789abcdef0123" || !v.Modified || v.Time != "2026-11-23T10:00:00Z" || !strings.HasPrefix(v.Go, "go") {
		t.Errorf("--json: exit %d, %v, %+v", code, err, v)
	}
	buildInfo = func() (*debug.BuildInfo, bool) { return &debug.BuildInfo{Main: debug.Module{Version: "(devel)"}}, true }
	if out, _, _ := cli("version"); !strings.HasPrefix(out, "ckpt (devel), no VCS revision recorded (built outside a git clone, or with -buildvcs=false), go") {
		t.Errorf("devel build: %q", out)
	}
	if _, code, _ := cli("version", "extra"); code != exitUsage {
		t.Errorf("version extra: exit %d", code)
	}
}

func TestMapLocationSuggestions(t *testing.T) {
	for in, want := range map[string]string{
		"cuda1": "cuda:1", "gpu:0": "cuda:0", "CUDA:0": "cuda:0", "gpu": "cuda", "cuda:01": "cuda:1",
		"cuda:1=gpu0": "cuda:1=cuda:0", "Cpu": "cpu", "xyz": "", "cuda:1": "", "cuda:0=": "",
	} {
		if got := suggestMapLocation(in); got != want {
			t.Errorf("suggest(%q) = %q, want %q", in, got, want)
		}
	}
	for _, c := range []struct{ cmd, flag, want string }{
		{"load", "cuda1", `did you mean cuda:1?`},
		{"load", "gpu:0", `did you mean cuda:0?`},
		{"convert", "CUDA:0", `did you mean cuda:0?`},
		{"load", "", `--map-location "": empty rules; want a device`},
		{"convert", "", `--map-location "": empty rules; want a device`},
	} {
		args := []string{c.cmd, cudaTagged, "--map-location", c.flag}
		if c.cmd == "convert" {
			args = []string{c.cmd, cudaTagged, filepath.Join(t.TempDir(), "o.pth"), "--map-location", c.flag}
		}
		_, code, errs := cli(args...)
		if code != exitUsage || !strings.Contains(errs, c.want) || !strings.Contains(errs, "(see 'ckpt "+c.cmd+" --help')") ||
			strings.Count(errs, "\n") != 1 || len(errs) > 160 {
			t.Errorf("%v: exit %d, stderr (%d chars) %q", args, code, len(errs), errs)
		}
	}
}

func TestConvertUsageErrors(t *testing.T) {
	dir := t.TempDir()
	for _, args := range [][]string{
		{"convert", cudaTagged, filepath.Join(dir, "out.txt")},
		{"convert", cudaTagged, filepath.Join(dir, "o.safetensors"), "--map-location", "cpu"},
		{"convert", cudaTagged, filepath.Join(dir, "o.bin"), "--to", "safetensors", "--map-location", "cpu"},
		{"convert", cudaTagged, filepath.Join(dir, "o.safetensors"), "--drop-floats"},
	} {
		_, code, errs := cli(args...)
		if code != exitUsage || strings.Count(errs, "\n") != 1 {
			t.Errorf("%v: exit %d, stderr %q", args[2:], code, errs)
		}
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 0 {
		t.Errorf("usage errors wrote %d files", len(entries))
	}
	// A directory's format is found by convert: the flag is reported after.
	out := filepath.Join(dir, "st")
	if err := os.Mkdir(out, 0o755); err != nil {
		t.Fatal(err)
	}
	if _, code, errs := cli("convert", cudaTagged, out, "--to", "pth", "--map-location", "cpu"); code != exitOK || errs != "" {
		t.Errorf("pth with --map-location: exit %d, %q", code, errs)
	}
}

func TestInspectFilterNothing(t *testing.T) {
	out, code, _ := cli("inspect", cudaTagged, "--filter", "nomatch.*")
	if code != exitOK || !strings.Contains(out, `No tensor matches --filter "nomatch.*" (of 5 tensors).`) {
		t.Errorf("exit %d:\n%s", code, out)
	}
	if out, _, _ := cli("inspect", cudaTagged, "--filter", "gpu0.*"); strings.Contains(out, "No tensor matches") {
		t.Errorf("a matching filter says nothing matches:\n%s", out)
	}
}

func TestWantBar(t *testing.T) {
	tty := barEnv{TTY: true, Term: "xterm-256color"}
	cases := []struct {
		name string
		mod  func(*barEnv)
		want bool
	}{
		{"terminal", func(*barEnv) {}, true},
		{"pipe", func(e *barEnv) { e.TTY = false }, false},
		{"json", func(e *barEnv) { e.JSON = true }, false},
		{"quiet", func(e *barEnv) { e.Quiet = true }, false},
		{"TERM=dumb", func(e *barEnv) { e.Term = "dumb" }, false},
		{"TERM unset", func(e *barEnv) { e.Term = "" }, false},
		{"CKPT_NO_PROGRESS", func(e *barEnv) { e.NoProgress = true }, false},
	}
	for _, c := range cases {
		e := tty
		c.mod(&e)
		if got := wantBar(e); got != c.want {
			t.Errorf("%s: wantBar = %v", c.name, got)
		}
	}
}

// The bar itself, drawn into a buffer standing for a terminal: IEC sizes
// and rate, cleared at the end; nothing at all with --json or --quiet.
func TestProgressDraws(t *testing.T) {
	var errb bytes.Buffer
	s := &streams{Err: &errb, ErrIsTTY: true, Term: "xterm"}
	p := newProgress(s, "verifying", 8<<20, false)
	p.start = time.Now().Add(-2 * time.Second)
	p.Add(4 << 20)
	p.Done()
	got := errb.String()
	if !strings.HasPrefix(got, "\rverifying [===============               ]  50% 4.00 MiB/8.00 MiB ") ||
		!strings.Contains(got, " MiB/s ") || !strings.HasSuffix(got, "\r\033[K") {
		t.Errorf("bar: %q", got)
	}
	for _, quiet := range []bool{true, false} {
		errb.Reset()
		s := &streams{Err: &errb, ErrIsTTY: true, Term: "xterm", Quiet: !quiet}
		p := newProgress(s, "x", 100, quiet)
		p.start = time.Now().Add(-2 * time.Second)
		p.Add(50)
		p.Done()
		if errb.Len() != 0 {
			t.Errorf("quiet=%v: %q", quiet, errb.String())
		}
	}
	// Through the whole command: --quiet is accepted everywhere.
	if _, code, errs := cli("--quiet", "inspect", cudaTagged, "--stats"); code != exitOK {
		t.Errorf("--quiet: exit %d %s", code, errs)
	}
}

func TestUnits(t *testing.T) {
	for _, c := range []struct {
		n    int64
		d    time.Duration
		want string
	}{
		{56, 40 * time.Microsecond, "in 0.04 ms"},
		{5 << 30, 2 * time.Second, "in 2.0 s (2.50 GiB/s)"},
		{300 << 20, 250 * time.Millisecond, "in 250 ms (1.17 GiB/s)"},
		{1 << 40, 125 * time.Second, "in 2m05s (8.19 GiB/s)"},
		{2 << 20, 5 * time.Millisecond, "in 5 ms"},
	} {
		if got := timeAndRate(c.n, c.d); got != c.want {
			t.Errorf("timeAndRate(%d, %v) = %q, want %q", c.n, c.d, got, c.want)
		}
	}
	out, _, _ := cli("load", cudaTagged, "--map-location", "cpu")
	if strings.Contains(out, "GB/s") || strings.Contains(out, "0.00") {
		t.Errorf("tiny load prints a rate:\n%s", out)
	}
}

func TestConvertRootName(t *testing.T) {
	var b bytes.Buffer
	printConvert(&b, &convertReport{In: "in.pt", Out: "out.safetensors", ConvertSummary: &convert.Summary{Format: convert.Safetensors,
		Dropped: []convert.Dropped{{Name: "", Type: "__main__.Net", Reason: "not a plain value; never executed"}}}})
	if !strings.Contains(b.String(), "  (root)  __main__.Net") {
		t.Errorf("root not named (root):\n%s", b.String())
	}
}

// writeSafetensors writes a one-tensor safetensors file whose header is
// the JSON given.
func writeSafetensors(t *testing.T, header string, data []byte) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "evil.safetensors")
	var buf bytes.Buffer
	binary.Write(&buf, binary.LittleEndian, uint64(len(header)))
	buf.WriteString(header)
	buf.Write(data)
	if err := os.WriteFile(p, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// A tensor name holding an ESC sequence (clear screen), a newline and a
// bidi override reaches text output escaped; JSON escapes it its own way.
func TestControlCharactersEscaped(t *testing.T) {
	p := writeSafetensors(t, `{"__metadata__":{"note\u001b]0;title\u0007":"x\u009b2J"},"evil\u001b[2J\nfake\u202e":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}}`,
		[]byte{0, 0, 128, 63})
	const want = `evil\x1b[2J\nfake\u202e`
	for _, args := range [][]string{
		{"inspect", p}, {"inspect", p, "--stats"}, {"load", p, "--map-location", "cpu"}, {"load", p, "--dry-run"},
	} {
		out, code, errs := cli(args...)
		all := out + errs
		if code != exitOK || strings.ContainsAny(all, "\x1b\x07\u009b\u202e") || !strings.Contains(all, want) {
			t.Errorf("%v: exit %d, raw control characters or no escaped name:\n%q", args, code, all)
		}
	}
	q := writeSafetensors(t, `{"evil\u001b[2J\nfake\u202e":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}}`, []byte{0, 0, 0, 64})
	out, code, errs := cli("verify", p, q)
	if code != exitError || strings.ContainsAny(out+errs, "\x1b\u202e") || !strings.Contains(out, want) {
		t.Errorf("verify A B: exit %d: %q %q", code, out, errs)
	}
	out, _, _ = cli("inspect", p)
	if !strings.Contains(out, `note\x1b]0;title\a = x\u009b2J`) {
		t.Errorf("metadata not escaped:\n%q", out)
	}
	out, _, _ = cli("inspect", p, "--json")
	if strings.ContainsRune(out, 0x1b) || !strings.Contains(out, `evil\u001b[2J\nfake`) {
		t.Errorf("json: %q", out)
	}
	// Errors that quote a name are escaped too, and stay one line.
	var eb bytes.Buffer
	if code := reportError(&eb, errors.New("tensor \"a\x1b[2J\nb\" is damaged")); code != exitError || eb.String() != `ckpt: tensor "a\x1b[2J\nb" is damaged`+"\n" {
		t.Errorf("error: %q", eb.String())
	}
	if got := clean("ok name.weight"); got != "ok name.weight" {
		t.Errorf("clean changed plain text: %q", got)
	}
	if got := clean("a\xffb\x7f"); got != `a\xffb\x7f` {
		t.Errorf("clean invalid UTF-8: %q", got)
	}
}

// verify draws a bar on a terminal (one check and one comparison), and
// none with --json.
func TestVerifyBar(t *testing.T) {
	defer func(d time.Duration) { barDelay = d }(barDelay)
	barDelay = 0
	for _, o := range []*verifyOptions{
		{A: fx + "training.pt"}, {A: fx + "training.pt", B: fx + "training.pt"}, {A: fx + "training.pt", JSON: true},
	} {
		var out, errb bytes.Buffer
		s := &streams{Out: &out, Err: &errb, ErrIsTTY: true, Term: "xterm"}
		if err := runVerify(context.Background(), s, o, false); err != nil {
			t.Fatal(err)
		}
		drew := strings.Contains(errb.String(), "\rverifying [")
		if drew == o.JSON || (drew && !strings.HasSuffix(errb.String(), "\r\033[K")) {
			t.Errorf("%+v: stderr %q", o, errb.String())
		}
	}
}

// --no-verify acts only on GPU targets: with none it is reported, not
// silently ignored.
func TestLoadNoVerifyWithoutGPU(t *testing.T) {
	_, code, errs := cli("load", cudaTagged, "--map-location", "cpu", "--no-verify")
	if code != exitOK || !strings.Contains(errs, "warning: --no-verify has no effect: no tensor goes to a GPU") {
		t.Errorf("exit %d, stderr %q", code, errs)
	}
	if _, _, errs := cli("load", cudaTagged, "--map-location", "cpu"); errs != "" {
		t.Errorf("stderr without the flag: %q", errs)
	}
}

// A byte flipped in a safetensors file that ckpt convert wrote fails the
// host load against the saved digest: exit 1, the report names the tensor.
func TestLoadHostSavedDigestMismatch(t *testing.T) {
	out := filepath.Join(t.TempDir(), "m.safetensors")
	if _, code, errs := cli("convert", fx+"zip_basic.pt", out); code != exitOK {
		t.Fatalf("convert: %d %s", code, errs)
	}
	if _, code, errs := cli("load", out, "--map-location", "cpu"); code != exitOK {
		t.Fatalf("clean file: %d %s", code, errs)
	}
	data, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	data[len(data)-1] ^= 1 // the last tensor's last byte
	if err := os.WriteFile(out, data, 0o644); err != nil {
		t.Fatal(err)
	}
	text, code, errs := cli("load", out, "--map-location", "cpu")
	if code != exitError || !strings.Contains(text, "Verification FAILED: 1 mismatch(es) with the digests saved in the file") ||
		!strings.Contains(errs, "1 storage(s) failed verification") {
		t.Errorf("exit %d:\n%s\n%s", code, text, errs)
	}
	js, code, _ := cli("load", out, "--map-location", "cpu", "--json")
	var rep loadReport
	if err := json.Unmarshal([]byte(js), &rep); err != nil || code != exitError || rep.Loaded == nil ||
		len(rep.Loaded.Mismatches) != 1 || rep.Loaded.Mismatches[0].Kind != "saved" || rep.Uploaded != nil {
		t.Errorf("json: exit %d, %v, %s", code, err, js)
	}
}

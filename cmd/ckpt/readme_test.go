package main

import (
	"errors"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/ckpt-dev/ckpt/cuda"
)

// TestREADMEInspectExample keeps the README's opening example equal to what
// ckpt prints.
func TestREADMEInspectExample(t *testing.T) {
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	const cmdLine = "$ ckpt inspect testdata/fixtures/cuda_tagged.pt\n"
	text := string(readme)
	i := strings.Index(text, cmdLine)
	j := strings.Index(text, "$ ckpt load ")
	if i < 0 || j < i {
		t.Fatal("README lost its inspect example")
	}
	want := text[i+len(cmdLine) : j]
	t.Chdir("../..")
	got, code, errs := cli("inspect", "testdata/fixtures/cuda_tagged.pt")
	if code != exitOK {
		t.Fatalf("exit %d: %s", code, errs)
	}
	if trimLines(got) != trimLines(want) {
		t.Errorf("README example differs from the output:\n--- README\n%s\n--- ckpt\n%s", want, got)
	}
}

func trimLines(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	for i, l := range lines {
		lines[i] = strings.TrimRight(l, " ")
	}
	return strings.Join(lines, "\n")
}

// readmeExample says what the README's command example of the same text
// needs: a setup that creates the files it names (in a fresh directory,
// the working directory while it runs), or why it is not run here.
type readmeExample struct {
	setup func(t *testing.T, repo string) // files the command names; nil: run from the repository root
	skip  string                          // why the example is not run (network, GPU, a make target)
	check func(t *testing.T, out string, code int, errs string)
}

// readmeExamples lists every command example of README.md, by its text
// (spaces collapsed, a trailing "# comment" removed). A README example
// missing here fails TestREADMECommands: say how to run it, or why not.
var readmeExamples = map[string]readmeExample{
	"ckpt inspect testdata/fixtures/cuda_tagged.pt":                    {}, // its output: TestREADMEInspectExample
	"ckpt load --map-location cuda:1 testdata/fixtures/cuda_tagged.pt": {check: checkREADMENoGPU},
	"ckpt --version": {},
	"ckpt convert model.gguf model.safetensors": {setup: func(t *testing.T, repo string) {
		os.Rename(ggufFixture(t, "."), "model.gguf")
	}},
	"ckpt convert model.safetensors out.gguf --gguf-type q8_0 --gguf-meta general.architecture=llama": {setup: func(t *testing.T, repo string) {
		writeSafetensorsF32(t, "model.safetensors", map[string][]float32{"w": randFloats(64, 1), "norm": randFloats(32, 2)},
			map[string][]int64{"w": {2, 32}, "norm": {32}})
	}},
	"ckpt convert DeepSeek-V3/ bf16/ --to safetensors": {setup: func(t *testing.T, repo string) {
		os.Rename(fp8Dir(t, []int64{1, 1}, fp8Conf), "DeepSeek-V3")
	}},
	"ckpt convert bf16/ fp8/ --to safetensors --quantize fp8-block": {setup: func(t *testing.T, repo string) {
		os.Mkdir("bf16", 0o755)
		writeSafetensorsF32(t, "bf16/model.safetensors", map[string][]float32{"model.layers.0.mlp.up_proj.weight": randFloats(128*128, 3)},
			map[string][]int64{"model.layers.0.mlp.up_proj.weight": {128, 128}})
	}},
	"ckpt convert ./step_1000/ model.safetensors": {setup: func(t *testing.T, repo string) {
		copyREADMEFiles(t, filepath.Join(repo, "testdata/dcp/basic"), "step_1000")
	}},
	"ckpt convert --map-location cpu run/last.pt last-cpu.pt": {setup: func(t *testing.T, repo string) {
		copyREADMEFiles(t, filepath.Join(repo, "testdata/fixtures/cuda_tagged.pt"), "run/last.pt")
	}},
	"AWS_ENDPOINT_URL=http://127.0.0.1:9000 AWS_ACCESS_KEY_ID=... AWS_SECRET_ACCESS_KEY=... ckpt inspect s3://models/run7/last.pt": {
		skip: "needs an S3 endpoint with that bucket (s3:// reads are tested against MinIO in cloud_test.go)"},
	"ckpt convert s3://models/run7/last.pt s3://models/run7/model.safetensors": {
		skip: "needs an S3 endpoint with that bucket (s3:// conversion is tested against MinIO in cloud_test.go)"},
	"make demo":             {skip: "a make target (it runs ckpt inspect on a bundled fixture)"},
	"make test":             {skip: "a make target: the test suite this test is part of"},
	"cd ckpt":               {skip: "a shell step, not a command of ckpt"},
	"go install ./cmd/ckpt": {skip: "installs into $(go env GOPATH)/bin; the build itself is go build ./cmd/ckpt, which every test run does"},
}

// TestREADMECommands runs every command example README.md shows, as
// printed: the lines of code blocks that run something ("$ ckpt ...",
// "ckpt ...", make, go, cd) and the inline `ckpt SUB ARGS...` examples.
// Synopsis lines (with placeholders such as PATH or [--flag]) are checked
// flag by flag against the command's --help instead.
func TestREADMECommands(t *testing.T) {
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	repo, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	examples, synopses := readmeCommands(string(readme))
	if len(examples) < len(readmeExamples) || len(synopses) < 8 {
		t.Fatalf("found %d examples and %d synopsis lines in README.md: the extraction is broken", len(examples), len(synopses))
	}
	for _, ex := range examples {
		spec, ok := readmeExamples[ex]
		if !ok {
			t.Errorf("README.md shows %q, which readmeExamples does not list: add how to run it (or why it cannot run here)", ex)
			continue
		}
		t.Run(ex, func(t *testing.T) {
			if spec.skip != "" {
				t.Skip(spec.skip)
			}
			if spec.setup != nil {
				t.Chdir(t.TempDir())
				spec.setup(t, repo)
			} else {
				t.Chdir(repo)
			}
			args := shellWords(t, strings.TrimPrefix(ex, "ckpt "))
			out, code, errs := cli(args...)
			if spec.check != nil {
				spec.check(t, out, code, errs)
			} else if code != exitOK {
				t.Errorf("exit %d: %s", code, errs)
			}
		})
	}
	for _, syn := range synopses {
		checkSynopsis(t, syn)
	}
}

// checkREADMENoGPU compares the load example with the error README shows
// ("..." standing for the driver's words) on a machine without the NVIDIA
// driver. Where a driver is installed, the same arguments run again with
// an inventory that answers as a machine without one does.
func checkREADMENoGPU(t *testing.T, out string, code int, errs string) {
	if _, err := cuda.Open(); !errors.Is(err, cuda.ErrNoDriver) {
		t.Logf("a driver is installed here (%v): the example runs with a no-driver inventory", err)
		noDriver := loadFakeInventory{err: &cuda.LoadError{Library: "libcuda.so.1", Err: cuda.ErrNoDriver, Reason: "not found"}}
		out, code, errs = loadExec(t, noDriver, nil, "--map-location", "cuda:1", "testdata/fixtures/cuda_tagged.pt")
	}
	readme, err := os.ReadFile("README.md") // the test runs from the repository root
	if err != nil {
		t.Fatal(err)
	}
	const cmdLine = "$ ckpt load --map-location cuda:1 testdata/fixtures/cuda_tagged.pt"
	text := string(readme)
	i := strings.Index(text, cmdLine)
	if i < 0 {
		t.Fatal("README lost its load example")
	}
	rest := text[i:]
	rest = rest[strings.Index(rest, "\n")+1:]
	want := rest[:strings.Index(rest, "\n")]
	prefix, suffix, _ := strings.Cut(want, " ... ")
	got := strings.TrimSuffix(errs, "\n")
	if code != exitError || out != "" || !strings.HasPrefix(got, prefix) || !strings.HasSuffix(got, suffix) {
		t.Errorf("exit %d, stdout %q, stderr\n%s\nREADME shows\n%s", code, out, got, want)
	}
}

// readmeCommands returns the command examples and the synopsis lines of
// a README.
func readmeCommands(text string) (examples, synopses []string) {
	norm := func(s string) string {
		if i := strings.Index(s, " #"); i >= 0 {
			s = s[:i]
		}
		return strings.Join(strings.Fields(s), " ")
	}
	isCommand := regexp.MustCompile(`^(\$ )?([A-Z_]+=\S+ )*(ckpt|make|go|cd)( |$)`)
	placeholder := regexp.MustCompile(`\b[A-Z]{1,}\b|\[|\.\.\.$`)
	lines := strings.Split(text, "\n")
	fenced := false
	for i := 0; i < len(lines); i++ {
		line := lines[i]
		if strings.HasPrefix(line, "```") {
			fenced = !fenced
			continue
		}
		indented := strings.HasPrefix(line, "    ") && i > 0 && (lines[i-1] == "" || strings.HasPrefix(lines[i-1], "    "))
		if !fenced && !indented {
			// Inline: a command with an argument; `ckpt load --json`
			// names a mode of the command, it is no example.
			for _, m := range regexp.MustCompile("`(ckpt [a-z]+ [^`]+)`").FindAllStringSubmatch(line, -1) {
				if slices.ContainsFunc(strings.Fields(m[1])[2:], func(w string) bool { return !strings.HasPrefix(w, "-") }) {
					examples = append(examples, norm(m[1]))
				}
			}
			continue
		}
		cmd := strings.TrimSpace(line)
		for strings.HasSuffix(cmd, `\`) && i+1 < len(lines) {
			i++
			cmd = strings.TrimSpace(strings.TrimSuffix(cmd, `\`)) + " " + strings.TrimSpace(lines[i])
		}
		if !isCommand.MatchString(cmd) {
			continue
		}
		cmd = strings.TrimPrefix(cmd, "$ ")
		if i := strings.Index(cmd, " #"); i >= 0 {
			cmd = strings.TrimSpace(cmd[:i]) // a comment
		}
		// A synopsis: "ckpt SUB PLACEHOLDERS [--flags]  description",
		// continued on lines that start with "[".
		if syn, desc, _ := strings.Cut(cmd, "  "); strings.HasPrefix(cmd, "ckpt ") && (desc != "" || placeholder.MatchString(syn)) {
			for i+1 < len(lines) && strings.HasPrefix(strings.TrimSpace(lines[i+1]), "[") {
				i++
				more, _, _ := strings.Cut(strings.TrimSpace(lines[i]), "  ")
				syn += " " + more
			}
			synopses = append(synopses, syn)
			continue
		}
		examples = append(examples, norm(cmd))
	}
	return examples, synopses
}

// checkSynopsis checks that the subcommand of a synopsis line exists and
// takes every --flag it shows.
func checkSynopsis(t *testing.T, syn string) {
	t.Helper()
	fields := strings.Fields(syn)
	help, code, errs := cli(fields[1], "--help")
	if code != exitOK {
		t.Errorf("README synopsis %q: ckpt %s --help: exit %d, %s", syn, fields[1], code, errs)
		return
	}
	for _, m := range regexp.MustCompile(`--[a-z][a-z-]*`).FindAllString(syn, -1) {
		if !strings.Contains(help, m+" ") && !strings.Contains(help, m+"\n") {
			if root, _, _ := cli("--help"); !strings.Contains(root, m) {
				t.Errorf("README synopsis %q shows %s, which ckpt %s does not take", syn, m, fields[1])
			}
		}
	}
}

// shellWords splits a command line as a POSIX shell would for the
// examples' quoting: words separated by spaces, single quotes kept whole.
func shellWords(t *testing.T, s string) []string {
	var words []string
	var cur strings.Builder
	inWord, quoted := false, false
	for _, r := range s {
		switch {
		case r == '\'':
			quoted, inWord = !quoted, true
		case r == ' ' && !quoted:
			if inWord {
				words = append(words, cur.String())
				cur.Reset()
			}
			inWord = false
		default:
			cur.WriteRune(r)
			inWord = true
		}
	}
	if quoted {
		t.Fatalf("unbalanced quote in %q", s)
	}
	if inWord {
		words = append(words, cur.String())
	}
	return words
}

// copyREADMEFiles copies the file or directory src to dst (relative to
// the working directory), creating dst's parents.
func copyREADMEFiles(t *testing.T, src, dst string) {
	t.Helper()
	err := filepath.WalkDir(src, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		to := filepath.Join(dst, rel)
		if d.IsDir() {
			return os.MkdirAll(to, 0o755)
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		if err := os.MkdirAll(filepath.Dir(to), 0o755); err != nil {
			return err
		}
		return os.WriteFile(to, data, 0o644)
	})
	if err != nil {
		t.Fatal(err)
	}
}

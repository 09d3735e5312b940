package scan

import (
	"archive/zip"
	"bytes"
	"context"
	"encoding/binary"
	"os"
	"path/filepath"
	"testing"

	"github.com/ckpt-dev/ckpt/internal/hostile"

	"github.com/ckpt-dev/ckpt/gguf"
	"github.com/ckpt-dev/ckpt/pickle"
	"github.com/ckpt-dev/ckpt/statedict"
)

// Bypasses found by hostile testing (issue 20 items 1-3, 5): each file
// makes a torch loader run os.system, and each must scan unsafe, alone and
// in a directory.

// polyglotSafetensors is a pickle whose first bytes are also a safetensors
// header length that fits the file, followed by '{': Python's pickle runs
// it (SHORT_BINSTRING swallows the length's zeros and the brace, POP drops
// it), while a sniffer that looks for safetensors first sees a safetensors
// file.
func polyglotSafetensors() []byte {
	str := make([]byte, 20)
	str[6] = '{' // file offset 8
	p := append([]byte{'U', byte(len(str))}, str...)
	p = append(p, "0cos\nsystem\n(S'true'\ntR."...)
	n := int(binary.LittleEndian.Uint64(p[:8]))
	return append(p, bytes.Repeat([]byte(" "), n+8-len(p))...)
}

func v7Tar(t *testing.T, b []byte) []byte {
	t.Helper()
	b = hostile.V7Tar(b)
	if !statedict.IsTarHeader(b) || bytes.Contains(b[:512], []byte("ustar")) {
		t.Fatal("not a v7 tar header")
	}
	return b
}

func concat(parts ...[]byte) []byte { return bytes.Join(parts, nil) }

func TestBypassesFound(t *testing.T) {
	evilZip := zipOf(t, map[string][]byte{"archive/data.pkl": []byte(osSystem), "archive/data/0": make([]byte, 16)}, zip.Store)
	benignZip := zipOf(t, map[string][]byte{"archive/data.pkl": []byte("\x80\x02}q\x00."), "archive/version": []byte("3\n")}, zip.Store)
	cases := []struct {
		name, file string
		data       []byte
	}{
		{"pickle that parses as a safetensors header too", "model.safetensors", polyglotSafetensors()},
		{"upper-case data.PKL (torch looks records up without regard to case)", "model.pt",
			zipOf(t, map[string][]byte{"archive/data.PKL": []byte(osSystem), "archive/version": []byte("3\n")}, zip.Store)},
		{"v7 tar (no ustar magic)", "old.pt", v7Tar(t, tarOf(t, map[string][]byte{"pickle": []byte(osSystem), "sys_info": []byte("\x80\x02}.")}))},
		{"one-member zip torch.hub loads whatever its member is called", "weights.zip",
			zipOf(t, map[string][]byte{"weights": []byte(osSystem)}, zip.Deflate)},
		{"one-member zip after junk, found by its end record", "weights.bin",
			concat([]byte("JUNK\n"), zipOf(t, map[string][]byte{"w": []byte(osSystem)}, zip.Store))},
		{"first item of a DCP data file", "__0_0.distcp", concat(evilZip, benignZip)},
		{"middle item of a DCP data file", "__1_0.distcp", concat(benignZip, evilZip, benignZip)},
	}
	for _, c := range cases {
		dir := t.TempDir()
		p := filepath.Join(dir, c.file)
		if err := os.WriteFile(p, c.data, 0o644); err != nil {
			t.Fatal(err)
		}
		for _, arg := range []string{p, dir} {
			rep, err := Paths(context.Background(), []string{arg})
			if err != nil {
				t.Fatalf("%s: %v", c.name, err)
			}
			if rep.Worst() != pickle.VerdictUnsafe || rep.Files != 1 {
				t.Errorf("%s (scan %s): %s, %d files; findings %+v problems %+v", c.name, filepath.Base(arg), rep.Worst(), rep.Files, rep.Findings, rep.Problems)
			}
		}
	}
}

// TestPolyglotScannedBothWays: a real safetensors file scans clean (its
// first bytes are no pickle with a global), and the polyglot is listed
// under the pickle route's record.
func TestPolyglotScannedBothWays(t *testing.T) {
	rep, err := Paths(context.Background(), []string{filepath.Join(fixtures, "model.safetensors")})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Worst() != pickle.VerdictAllowed || rep.Files != 1 || len(rep.Problems) != 0 {
		t.Errorf("safetensors: %s, %d files, problems %+v", rep.Worst(), rep.Files, rep.Problems)
	}
	d := polyglotSafetensors()
	if r := statedict.Routes(d[:512], int64(len(d))); len(r) != 2 || r[0] != statedict.RouteSafetensors || r[1] != statedict.RoutePickle {
		t.Fatalf("routes %v", r)
	}
	rep, _ = Reader(context.Background(), bytes.NewReader(d), int64(len(d)), "x")
	if len(rep.Findings) != 1 || rep.Findings[0].Global != "os.system" || rep.Findings[0].Record != "as a pickle" {
		t.Errorf("findings %+v", rep.Findings)
	}
}

// TestGGUFChatTemplate: a GGUF whose chat template walks to os.popen is
// unsafe; a shipped-style template passes.
func TestGGUFChatTemplate(t *testing.T) {
	write := func(tmpl string) []byte {
		var b bytes.Buffer
		w, err := gguf.NewWriter(&b, []gguf.KV{{Key: "general.architecture", Type: gguf.TypeString, Value: "llama"},
			{Key: "tokenizer.chat_template", Type: gguf.TypeString, Value: tmpl}}, nil)
		if err != nil {
			t.Fatal(err)
		}
		w.Close()
		return b.Bytes()
	}
	evil := write(`{{ self.__init__.__globals__.__builtins__.__import__('os').popen('id').read() }}`)
	rep, _ := Reader(context.Background(), bytes.NewReader(evil), int64(len(evil)), "evil.gguf")
	if rep.Worst() != pickle.VerdictUnsafe || rep.Findings[0].Record != "metadata tokenizer.chat_template" {
		t.Errorf("evil template: %s %+v", rep.Worst(), rep.Findings)
	}
	good := write(`{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] | trim }}<|im_end|>\n{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}`)
	rep, _ = Reader(context.Background(), bytes.NewReader(good), int64(len(good)), "good.gguf")
	if rep.Worst() != pickle.VerdictAllowed || rep.Files != 1 {
		t.Errorf("good template: %s %+v %+v", rep.Worst(), rep.Findings, rep.Problems)
	}
}

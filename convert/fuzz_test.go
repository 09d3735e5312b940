package convert

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/ckpt-dev/ckpt/statedict"
	"github.com/ckpt-dev/ckpt/verify"
)

func FuzzParseSize(f *testing.F) {
	for _, s := range []string{"5GB", "1.5 gb", "10", "2KiB", "-1", "1e400TB", "0x10MB"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		n, err := ParseSize(s)
		if err == nil && (n < 1 || n >= 1<<62) {
			t.Errorf("ParseSize(%q) = %d", s, n)
		}
	})
}

func FuzzParseRename(f *testing.F) {
	for _, s := range []string{`^module\.=`, `(\w+)\.weight=$1.w`, "a=b=c", "=x", "(=y"} {
		f.Add(s, "module.layer.weight")
	}
	f.Fuzz(func(t *testing.T, rule, name string) {
		r, err := ParseRename(rule)
		if err != nil {
			return
		}
		c := &config{options: options{renames: []Rename{r}}}
		_ = c.newName(name)
	})
}

// FuzzConvert converts whatever statedict accepts to safetensors and to
// .pth: no panic, and every successful output reads back equal to the
// input.
func FuzzConvert(f *testing.F) {
	for _, name := range []string{"tied.pt", "zip_basic.pt", "legacy.pt", "tar.pt", "model.safetensors", "zip_bigendian.pt", "training.pt"} {
		b, err := os.ReadFile(fixtures + name)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		ck, err := statedict.NewReader(bytes.NewReader(b), int64(len(b)), statedict.WithTempDir(t.TempDir()))
		if err != nil {
			return
		}
		defer ck.Close()
		dir := t.TempDir()
		for _, out := range []string{"o.safetensors", "o.pt"} {
			p := filepath.Join(dir, out)
			if _, err := Convert(context.Background(), ck, p, WithBufferSize(4096)); err != nil {
				continue
			}
			back, err := statedict.Open(p)
			if err != nil {
				t.Fatalf("%s does not read back: %v", out, err)
			}
			rep, err := verify.Compare(context.Background(), ck, back, verify.CompareOptions{})
			back.Close()
			if err == nil && len(rep.Differences) > 0 && out == "o.pt" {
				t.Fatalf("%s differs: %+v", out, rep.Differences)
			}
		}
	})
}

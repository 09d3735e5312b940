package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestDiffGGUFLlama: a GGUF file ckpt convert wrote from a Hugging Face
// Llama directory compares with its source without flags: llama.cpp's
// names mapped back and the q/k rows permuted back (which differ from the
// source's order: without the permutation the values would not match),
// for diff and for verify; --no-gguf-names shows what matching by name
// alone gives (every tensor on one side only). A q8_0 file differs within
// q8_0's error.
func TestDiffGGUFLlama(t *testing.T) {
	dir := t.TempDir()
	writeTinyHF(t, dir)
	f32 := filepath.Join(t.TempDir(), "f32.gguf")
	q8 := filepath.Join(t.TempDir(), "q8.gguf")
	for _, c := range [][]string{{"convert", dir, f32}, {"convert", dir, q8, "--gguf-type", "q8_0"}} {
		if code, out, errs := runCLI(t, c...); code != exitOK {
			t.Fatalf("%v: exit %d %s %s", c, code, out, errs)
		}
	}
	code, rep := runDiffJSON(t, dir, f32, "--atol", "0")
	if code != exitOK || len(rep.OnlyInA)+len(rep.OnlyInB) != 0 || len(rep.Tensors) != 5 {
		t.Fatalf("diff llama/ f32.gguf: exit %d, only %v %v, %d tensors", code, rep.OnlyInA, rep.OnlyInB, len(rep.Tensors))
	}
	for _, td := range rep.Tensors {
		if !td.BitwiseEqual {
			t.Errorf("%s: not bitwise equal: %s", td.Name, show(td.torchStats))
		}
	}
	if len(rep.Notes) != 1 || !strings.Contains(rep.Notes[0], "architecture llama") || !strings.Contains(rep.Notes[0], "2 q/k tensors") {
		t.Errorf("notes %q", rep.Notes)
	}
	if code, out, errs := runCLI(t, "verify", dir, f32); code != exitOK || !strings.Contains(out, "5 tensors compared") {
		t.Errorf("verify llama/ f32.gguf: exit %d\n%s%s", code, out, errs)
	}
	code, rep = runDiffJSON(t, dir, f32, "--no-gguf-names", "--min-cosine", "0.9")
	if code != exitError || len(rep.OnlyInA) != 5 || len(rep.OnlyInB) != 5 || rep.Failed != 10 {
		t.Errorf("--no-gguf-names: exit %d, only %v %v, failed %d", code, rep.OnlyInA, rep.OnlyInB, rep.Failed)
	}
	// The same names without the q/k permutation: a plain rename rule
	// pairs the tensors, and q/k then differ.
	code, rep = runDiffJSON(t, dir, f32, "--no-gguf-names", "--a-rename", `^model\.layers\.0\.self_attn\.([qk])_proj\.weight$=blk.0.attn_$1.weight`, "--atol", "0")
	if code != exitError || rep.Failed != 2+3+3 {
		t.Errorf("q/k without permutation: exit %d, failed %d (want 2 value failures and 3+3 unmatched)", code, rep.Failed)
	}
	code, rep = runDiffJSON(t, dir, q8, "--min-cosine", "0.999")
	if code != exitOK || len(rep.Tensors) != 5 {
		t.Fatalf("diff llama/ q8.gguf: exit %d, %d tensors", code, len(rep.Tensors))
	}
	quantized := 0
	for _, td := range rep.Tensors {
		if !td.BitwiseEqual {
			quantized++
			// q8_0: 8-bit values scaled per block of 32 by max|x|/127.
			if *td.RelFrobenius > 0.01 || *td.RelFrobenius == 0 {
				t.Errorf("%s: relative error %v for q8_0", td.Name, *td.RelFrobenius)
			}
		}
	}
	if quantized == 0 {
		t.Error("q8_0 file bitwise equal to its source")
	}
}

// TestDiffHostile: a file that is no checkpoint, a truncated one, bad
// flags: one line on stderr, exit 1 (input) or 2 (usage), no report.
func TestDiffHostile(t *testing.T) {
	dir := t.TempDir()
	writeTinyHF(t, dir)
	st := filepath.Join(dir, "model.safetensors")
	junk := filepath.Join(t.TempDir(), "junk\x1b[31m.bin")
	if err := os.WriteFile(junk, []byte("not a checkpoint\x00\x01"), 0o644); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(st)
	if err != nil {
		t.Fatal(err)
	}
	short := filepath.Join(t.TempDir(), "short.safetensors")
	if err := os.WriteFile(short, b[:len(b)-100], 0o644); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{st, junk}, exitError, "junk"},
		{[]string{st, short}, exitError, "short.safetensors"},
		{[]string{st, st, "--rename", "(="}, exitUsage, "--rename"},
		{[]string{st, st, "--atol", "-1"}, exitUsage, "--atol"},
		{[]string{st, st, "--min-cosine", "2"}, exitUsage, "--min-cosine"},
		{[]string{st, st, "--tensor", "nope"}, exitUsage, "nope"},
		{[]string{st}, exitUsage, "accepts 2 arg"},
	} {
		code, out, errs := runCLI(t, append([]string{"diff"}, c.args...)...)
		if code != c.code || strings.Count(errs, "\n") != 1 || !strings.Contains(errs, c.want) || strings.Contains(errs, "\x1b") || strings.Contains(errs, "goroutine") {
			t.Errorf("diff %q: exit %d, stdout %q, stderr %q", c.args, code, out, errs)
		}
	}
}

package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ckpt-dev/ckpt/convert"
)

// TestPartFromEnv: --part auto reads torchrun's, then Slurm's, then an
// Indexed Job's environment, and says which it used; broken values and a
// missing environment are usage errors.
func TestPartFromEnv(t *testing.T) {
	for _, tc := range []struct {
		env   map[string]string
		count int
		want  convert.Part
		from  string // "" for an error
	}{
		{map[string]string{"RANK": "1", "WORLD_SIZE": "4", "SLURM_PROCID": "3", "SLURM_NTASKS": "5"}, 0, convert.Part{Index: 1, Count: 4}, "torchrun"},
		{map[string]string{"SLURM_PROCID": "3", "SLURM_NTASKS": "5", "JOB_COMPLETION_INDEX": "0"}, 2, convert.Part{Index: 3, Count: 5}, "Slurm"},
		{map[string]string{"JOB_COMPLETION_INDEX": "2"}, 3, convert.Part{Index: 2, Count: 3}, "Indexed Job"},
		{map[string]string{"JOB_COMPLETION_INDEX": "2"}, 0, convert.Part{}, ""},
		{map[string]string{"JOB_COMPLETION_INDEX": "3"}, 3, convert.Part{}, ""},
		{map[string]string{"RANK": "4", "WORLD_SIZE": "4"}, 0, convert.Part{}, ""},
		{map[string]string{"RANK": "x", "WORLD_SIZE": "4"}, 0, convert.Part{}, ""},
		{map[string]string{}, 0, convert.Part{}, ""},
	} {
		p, from, err := parsePart("auto", tc.count, func(k string) string { return tc.env[k] })
		if tc.from == "" {
			if err == nil {
				t.Errorf("%v: got %v from %q, want an error", tc.env, p, from)
			}
			continue
		}
		if err != nil || p != tc.want || !strings.Contains(from, tc.from) {
			t.Errorf("%v: got %v from %q (%v), want %v from %s", tc.env, p, from, err, tc.want, tc.from)
		}
	}
	for spec, ok := range map[string]bool{"0/1": true, "2/3": true, "3/3": false, "-1/2": false, "1": false, "a/b": false} {
		if _, _, err := parsePart(spec, 0, os.Getenv); (err == nil) != ok {
			t.Errorf("--part %s: %v", spec, err)
		}
	}
}

// TestConvertDCPCommand: convert --to dcp --dcp-ranks 2 --split writes a
// DCP directory inspect reads; two --part runs (torchrun's environment
// for one) give the same files; flags that need --to dcp are usage
// errors.
func TestConvertDCPCommand(t *testing.T) {
	dir := t.TempDir()
	one := filepath.Join(dir, "one")
	if out, code, errs := cli("convert", cudaTagged, one, "--to", "dcp", "--dcp-ranks", "2", "--split", "*=0"); code != exitOK {
		t.Fatalf("exit %d: %s%s", code, out, errs)
	}
	out, code, _ := cli("inspect", one)
	if code != exitOK || !strings.Contains(out, "dcp") {
		t.Fatalf("inspect: exit %d\n%s", code, out)
	}
	parts := filepath.Join(dir, "parts")
	_, code, errs := cli("convert", cudaTagged, parts, "--to", "dcp", "--dcp-ranks", "2", "--split", "*=0", "--part", "1/2")
	if code != exitOK || !strings.Contains(errs, "part 1 of 2 (--part 1/2)") {
		t.Fatalf("part 1: exit %d, %q", code, errs)
	}
	t.Setenv("RANK", "0")
	t.Setenv("WORLD_SIZE", "2")
	_, code, errs = cli("convert", cudaTagged, parts, "--to", "dcp", "--dcp-ranks", "2", "--split", "*=0", "--part", "auto")
	if code != exitOK || !strings.Contains(errs, "part 0 of 2 (torchrun: RANK=0 WORLD_SIZE=2)") {
		t.Fatalf("part 0: exit %d, %q", code, errs)
	}
	for _, name := range []string{".metadata", "__0_0.distcp", "__1_0.distcp"} {
		a, err1 := os.ReadFile(filepath.Join(one, name))
		b, err2 := os.ReadFile(filepath.Join(parts, name))
		if err1 != nil || err2 != nil || !bytes.Equal(a, b) {
			t.Errorf("%s differs between one process and two parts (%v, %v)", name, err1, err2)
		}
	}
	for _, args := range [][]string{
		{"--dcp-ranks", "2"},
		{"--to", "dcp", "--dcp-ranks", "0x"},
		{"--to", "dcp", "--part", "2/2"},
		{"--to", "dcp", "--part-wait", "soon"},
		{"--to", "dcp", "--split", "*=0", "--tensor-parallel", "2"},
	} {
		_, code, errs := cli(append([]string{"convert", cudaTagged, filepath.Join(dir, "bad")}, args...)...)
		if code != exitUsage {
			t.Errorf("%v: exit %d, %q", args, code, errs)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "bad")); err == nil {
		t.Error("a usage error wrote output")
	}
}

// TestConvertDCPEmptyTensor: a tensor with no elements, which --split
// cuts into no chunk at all (torch.chunk's placement gives none), is
// listed with no chunks, and verify reads the output back equal (torch
// 2.6 loads it too: scripts/dcp_write_check.py, checked by hand).
func TestConvertDCPEmptyTensor(t *testing.T) {
	in := writeSafetensors(t, `{"e":{"dtype":"F32","shape":[0,4],"data_offsets":[0,0]},"w":{"dtype":"F32","shape":[2,2],"data_offsets":[0,16]}}`, make([]byte, 16))
	out := filepath.Join(t.TempDir(), "dcp")
	if o, code, errs := cli("convert", in, out, "--to", "dcp", "--dcp-ranks", "2", "--split", "*=0"); code != exitOK {
		t.Fatalf("exit %d: %s%s", code, o, errs)
	}
	if o, code, errs := cli("verify", in, out); code != exitOK {
		t.Fatalf("verify: exit %d: %s%s", code, o, errs)
	}
}

// TestConvertDCPSafetensorsCommand: --dcp-format safetensors writes torch
// >= 2.8's per-rank safetensors files, which inspect reads as a DCP
// checkpoint and verify finds equal to the input; --dcp-format needs
// --to dcp and a known layout.
func TestConvertDCPSafetensorsCommand(t *testing.T) {
	dir := t.TempDir()
	out := filepath.Join(dir, "hf")
	if o, code, errs := cli("convert", cudaTagged, out, "--to", "dcp", "--dcp-format", "safetensors", "--dcp-ranks", "2", "--split", "*=0"); code != exitOK {
		t.Fatalf("exit %d: %s%s", code, o, errs)
	}
	for _, name := range []string{"shard-00001-model-00001-of-00001.safetensors", "shard-00002-model-00001-of-00001.safetensors"} {
		if _, err := os.Stat(filepath.Join(out, name)); err != nil {
			t.Error(err)
		}
	}
	if o, code, _ := cli("inspect", out); code != exitOK || !strings.Contains(o, "dcp") || !strings.Contains(o, "chunks on ranks 0,1") {
		t.Errorf("inspect: exit %d\n%s", code, o)
	}
	if o, code, errs := cli("verify", cudaTagged, out); code != exitOK {
		t.Errorf("verify: exit %d: %s%s", code, o, errs)
	}
	for _, args := range [][]string{{"--dcp-format", "safetensors"}, {"--to", "dcp", "--dcp-format", "json"}} {
		if _, code, errs := cli(append([]string{"convert", cudaTagged, filepath.Join(dir, "bad")}, args...)...); code != exitUsage {
			t.Errorf("%v: exit %d, %q", args, code, errs)
		}
	}
}

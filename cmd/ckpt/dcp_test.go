package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ckpt-dev/ckpt/statedict"
)

const dcpDir = "../../testdata/dcp/basic"

func TestInspectDCP(t *testing.T) {
	code, out, errs := runCLI(t, "inspect", dcpDir)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	for _, want := range []string{"Format:    dcp", "Shards:    4 (__0_0.distcp", "model.mlp.weight          float32   [8, 9]", "4 chunks on ranks 0-3", "2 chunks on ranks 1,3", "run ", "fixture-run"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	code, out, errs = runCLI(t, "inspect", "--json", dcpDir)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	var rep inspectReport
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatal(err)
	}
	for _, tt := range rep.Tensors {
		if tt.Name == "model.mlp.weight" {
			if len(tt.Chunks) != 4 || tt.Chunks[3].Rank != 3 || tt.Chunks[3].Offsets[1] != 5 || tt.Problem != "" {
				t.Errorf("chunks %+v problem %q", tt.Chunks, tt.Problem)
			}
			return
		}
	}
	t.Error("no model.mlp.weight")
}

// A DCP directory missing a rank's file: inspect flags the tensors that
// need it (exit 0); convert fails naming the tensor (exit 1).
func TestInspectDCPMissingFile(t *testing.T) {
	dir := t.TempDir()
	ents, _ := os.ReadDir(dcpDir)
	for _, e := range ents {
		if e.Name() == "__3_0.distcp" {
			continue
		}
		b, err := os.ReadFile(filepath.Join(dcpDir, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		os.WriteFile(filepath.Join(dir, e.Name()), b, 0o644)
	}
	code, out, errs := runCLI(t, "inspect", dir)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	if !strings.Contains(out, "BAD-CHUNKS") || !strings.Contains(out, "__3_0.distcp") {
		t.Errorf("no flag:\n%s", out)
	}
	code, _, errs = runCLI(t, "convert", dir, filepath.Join(t.TempDir(), "o.safetensors"))
	if code != 1 || !strings.Contains(errs, `tensor "model.`) || !strings.Contains(errs, "__3_0.distcp") || strings.Contains(errs, "goroutine") {
		t.Errorf("exit %d: %s", code, errs)
	}
}

// convert --tensor-parallel writes W files whose tensors are torch.chunk's
// parts of the input's (split ones) or the whole tensor (others).
func TestConvertTensorParallel(t *testing.T) {
	out := t.TempDir()
	split := "*.embed.weight=0,*.proj.weight=1,model.mlp.weight=-1,*.conv.weight=2"
	code, stdout, errs := runCLI(t, "convert", dcpDir, out, "--tensor-parallel", "3", "--split", split)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	if !strings.Contains(stdout, "rank-00002-of-00003.safetensors") {
		t.Errorf("output: %s", stdout)
	}
	src, err := statedict.Open(dcpDir)
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	rules, _ := statedict.ParseSplitRules(split)
	for r := range 3 {
		ck, err := statedict.Open(filepath.Join(out, "rank-0000"+string(rune('0'+r))+"-of-00003.safetensors"))
		if err != nil {
			t.Fatal(err)
		}
		if len(ck.Tensors) != len(src.Tensors) {
			t.Errorf("rank %d: %d tensors", r, len(ck.Tensors))
		}
		for _, st := range src.Tensors {
			d, _ := statedict.SplitDim(rules, st)
			want := st
			if d >= 0 {
				rs := make([]statedict.Range, d+1)
				for i := range d {
					rs[i] = statedict.Range{Start: 0, Stop: st.Shape[i]}
				}
				rs[d] = statedict.ChunkRange(st.Shape[d], r, 3)
				want, _ = st.Slice(rs...)
			}
			got := ck.Tensor(st.Name)
			if got == nil {
				t.Errorf("rank %d lacks %s", r, st.Name)
				continue
			}
			a, err1 := want.ReadAll()
			b, err2 := got.ReadAll()
			if err1 != nil || err2 != nil || !bytes.Equal(a, b) || !equalShape(want.Shape, got.Shape) {
				t.Errorf("rank %d %s: %v vs %v (%v %v)", r, st.Name, got.Shape, want.Shape, err1, err2)
			}
		}
		ck.Close()
	}
	for _, bad := range [][]string{
		{"--tensor-parallel", "0", "--split", "*=0"},
		{"--tensor-parallel", "2", "--split", "x"},
		{"--tensor-parallel", "2", "--max-shard-size", "1MB"},
	} {
		code, _, _ := runCLI(t, append([]string{"convert", dcpDir, t.TempDir() + "/x"}, bad...)...)
		if code != 2 {
			t.Errorf("%v: exit %d, want 2", bad, code)
		}
	}
	// A rule naming a dimension a tensor lacks is bad input.
	code, _, errs = runCLI(t, "convert", dcpDir, t.TempDir()+"/y", "--tensor-parallel", "2", "--split", "model.scale=0")
	if code != 1 || !strings.Contains(errs, "model.scale") {
		t.Errorf("exit %d: %s", code, errs)
	}
}

func equalShape(a, b []int64) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// load --rank R --world-size W loads only rank R's bytes.
func TestLoadRank(t *testing.T) {
	code, out, errs := runCLI(t, "load", dcpDir, "--rank", "3", "--world-size", "4", "--split", "model.embed.weight=0,model.mlp.weight=1", "--map-location", "cpu", "--json")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	var rep loadReport
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatal(err)
	}
	got := map[string]int64{}
	for _, e := range rep.Plan.Tensors {
		got[e.Name] = e.NBytes
	}
	// embed: rows 9:10 of [10, 6] float32; mlp: 9 columns over 4 ranks
	// are 3, 3, 3 and none for rank 3 (torch.chunk).
	if got["model.embed.weight"] != 6*4 || got["model.mlp.weight"] != 0 || got["model.proj.weight"] != 70 {
		t.Errorf("plan %v", got)
	}
	if rep.Loaded == nil {
		t.Error("nothing loaded")
	}
	for _, bad := range [][]string{{"--rank", "4", "--world-size", "4"}, {"--split", "*=0"}, {"--world-size", "2", "--split", "=1"}} {
		code, _, _ := runCLI(t, append([]string{"load", dcpDir, "--map-location", "cpu"}, bad...)...)
		if code != 2 {
			t.Errorf("%v: exit %d, want 2", bad, code)
		}
	}
}

// verify DIR recomputes every chunk's CRC32; a flipped bit is a mismatch
// naming the tensor, exit 1.
func TestVerifyDCP(t *testing.T) {
	code, out, errs := runCLI(t, "verify", dcpDir)
	if code != 0 || !strings.Contains(out, "45 CRC32s") {
		t.Fatalf("exit %d: %s%s", code, out, errs)
	}
	ck, err := statedict.Open(dcpDir)
	if err != nil {
		t.Fatal(err)
	}
	good, err := ck.Tensor("model.embed.weight").ReadAll()
	ck.Close()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	ents, _ := os.ReadDir(dcpDir)
	for _, e := range ents {
		b, _ := os.ReadFile(filepath.Join(dcpDir, e.Name()))
		if e.Name() == "__0_0.distcp" {
			at := bytes.Index(b, good[:72]) // rank 0's rows of model.embed.weight
			if at < 0 {
				t.Fatal("chunk data not found")
			}
			b[at+5] ^= 1
		}
		os.WriteFile(filepath.Join(dir, e.Name()), b, 0o644)
	}
	code, out, errs = runCLI(t, "verify", dir)
	if code != 1 || !strings.Contains(out+errs, "model.embed.weight") || !strings.Contains(out+errs, "CRC32") {
		t.Fatalf("exit %d: %s%s", code, out, errs)
	}
	t.Log(out, errs)
}

// load --rank auto reads the rank from the launcher's environment, as
// convert --part auto does, and loads what --rank R --world-size W loads.
func TestLoadRankAuto(t *testing.T) {
	split := "model.embed.weight=0,model.mlp.weight=1"
	_, want, _ := runCLI(t, "load", dcpDir, "--rank", "3", "--world-size", "4", "--split", split, "--map-location", "cpu", "--dry-run", "--json")
	for _, env := range []map[string]string{
		{"RANK": "3", "WORLD_SIZE": "4"},
		{"SLURM_PROCID": "3", "SLURM_NTASKS": "4"},
	} {
		for k, v := range env {
			t.Setenv(k, v)
		}
		code, out, errs := runCLI(t, "load", dcpDir, "--rank", "auto", "--split", split, "--map-location", "cpu", "--dry-run", "--json")
		if code != exitOK || out != want || !strings.Contains(errs, "rank 3 of 4") {
			t.Errorf("%v: exit %d, stderr %q, same output %v", env, code, errs, out == want)
		}
		for k := range env {
			os.Unsetenv(k)
		}
	}
	t.Setenv("JOB_COMPLETION_INDEX", "1")
	if code, _, errs := runCLI(t, "load", dcpDir, "--rank", "auto", "--split", split, "--map-location", "cpu", "--dry-run"); code != exitUsage || !strings.Contains(errs, "--world-size") && !strings.Contains(errs, "--part-count") {
		t.Errorf("indexed job without a world size: exit %d %q", code, errs)
	}
	if code, _, errs := runCLI(t, "load", dcpDir, "--rank", "1", "--world-size", "4", "--split", split, "--map-location", "cpu", "--dry-run"); code != exitOK {
		t.Errorf("--rank 1: exit %d %q", code, errs)
	}
}

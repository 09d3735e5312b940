package main

import (
	"context"
	"fmt"
	"io"
	"math/rand"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/ckpt-dev/ckpt/internal/cloudemu"
	"github.com/ckpt-dev/ckpt/internal/miniotest"
	"github.com/ckpt-dev/ckpt/objstore"
)

// destMode is one output mode of convert: the runs that make it (several
// for --part, each its own process in real use) and the names it writes
// under its prefix.
type destMode struct {
	name string
	file string     // OUT under the mode's prefix: "" for the prefix itself
	runs [][]string // the flags of each run, in order
	want []string   // the names written under the prefix
}

func shardNames(n int, stem, ext string) []string {
	var s []string
	for i := 1; i <= n; i++ {
		s = append(s, fmt.Sprintf("%s-%05d-of-%05d%s", stem, i, n, ext))
	}
	return append(s, stem+ext+".index.json")
}

var destModes = func() []destMode {
	dcp := []string{"--to", "dcp", "--dcp-ranks", "2", "--split", "*=0"}
	dcpNames := []string{".metadata", "__0_0.distcp", "__1_0.distcp"}
	// cuda_tagged.pt's four storages of 4 to 24 bytes give four shards
	// of at most 20 bytes.
	shard := []string{"--max-shard-size", "20B"}
	return []destMode{
		{"plain", "", [][]string{{"--to", "safetensors"}}, []string{"model.safetensors"}},
		{"sharded", "", [][]string{shard}, shardNames(4, "model", ".safetensors")},
		{"compress", "model.safetensors.zst", [][]string{{"--compress", "zstd"}}, []string{"model.safetensors.zst"}},
		{"pth", "", [][]string{{"--to", "pth"}}, []string{"pytorch_model.bin"}},
		{"gguf", "model.gguf", [][]string{{"--gguf-hf-dir", "none", "--gguf-meta", "general.architecture=llama"}}, []string{"model.gguf"}},
		{"dcp", "", [][]string{dcp}, dcpNames},
		{"tensor-parallel", "", [][]string{{"--tensor-parallel", "2", "--split", "*=0"}},
			[]string{"rank-00000-of-00002.safetensors", "rank-00001-of-00002.safetensors"}},
		{"tensor-parallel-pth", "", [][]string{{"--tensor-parallel", "2", "--split", "*=0", "--to", "pth"}},
			[]string{"rank-00000-of-00002.pth", "rank-00001-of-00002.pth"}},
		{"part", "", [][]string{append([]string{"--part", "1/2"}, shard...), append([]string{"--part", "0/2", "--part-wait", "1m"}, shard...)},
			shardNames(4, "model", ".safetensors")},
		{"dcp-safetensors", "", [][]string{append([]string{"--dcp-format", "safetensors"}, dcp...)},
			[]string{"shard-00001-model-00001-of-00001.safetensors", "shard-00002-model-00001-of-00001.safetensors"}},
		{"dcp-part", "", [][]string{append([]string{"--part", "1/2"}, dcp...), append([]string{"--part", "0/2", "--part-wait", "1m"}, dcp...)}, dcpNames},
	}
}()

// destKind is where a test writes: root is the prefix of every mode's
// outputs (a local directory or a bucket URL, ending in "/"), and read
// returns what is under one mode's prefix, by name.
type destKind struct {
	root string
	read func(t *testing.T, prefix string) map[string][]byte
}

func localDest(t *testing.T) destKind {
	root := t.TempDir() + string(os.PathSeparator)
	return destKind{root, func(t *testing.T, prefix string) map[string][]byte {
		t.Helper()
		got := map[string][]byte{}
		entries, err := os.ReadDir(prefix)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range entries {
			b, err := os.ReadFile(filepath.Join(prefix, e.Name()))
			if err != nil {
				t.Fatal(err)
			}
			got[e.Name()] = b
		}
		return got
	}}
}

// bucketDest reads what is under a prefix of a bucket URL.
func bucketDest(root string) destKind {
	return destKind{root, func(t *testing.T, prefix string) map[string][]byte {
		t.Helper()
		st, key, err := objstore.NewStore(context.Background(), prefix)
		if err != nil {
			t.Fatal(err)
		}
		names, err := st.List(key)
		if err != nil {
			t.Fatal(err)
		}
		got := map[string][]byte{}
		for _, n := range names {
			obj, err := st.Open(key + n)
			if err != nil {
				t.Fatal(err)
			}
			b := make([]byte, obj.Size())
			if _, err := obj.ReadAt(b, 0); err != nil && err != io.EOF {
				t.Fatal(err)
			}
			obj.Close()
			got[n] = b
		}
		return got
	}}
}

// TestConvertEveryModeEveryDestination: every output mode of convert
// (plain, sharded, --compress, --to pth, gguf and dcp, --tensor-parallel,
// --part of a sharded and of a DCP output) writes to a local directory,
// an s3:// prefix (MinIO), a gs:// prefix (fake-gcs-server) and an az://
// prefix (Azurite) the same names with the same bytes, names them so on
// stdout, and leaves nothing in the working directory (no "s3:"
// directory, the bug of issue #31); a URL of a scheme it cannot write
// (ftp://, https://) is refused in every mode before anything is written.
func TestConvertEveryModeEveryDestination(t *testing.T) {
	in, err := filepath.Abs(cudaTagged)
	if err != nil {
		t.Fatal(err)
	}
	orig, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	cwd := t.TempDir()
	t.Chdir(cwd)
	// inOrig runs start in the package directory (the servers upload the
	// fixtures by relative paths), back in cwd after it, even a skip.
	inOrig := func(start func()) {
		defer os.Chdir(cwd)
		os.Chdir(orig)
		start()
	}
	// run writes every mode under d and returns what each wrote.
	run := func(t *testing.T, d destKind, local bool) map[string]map[string][]byte {
		got := map[string]map[string][]byte{}
		for _, m := range destModes {
			prefix := d.root + m.name + "/"
			if local && m.file != "" {
				os.Mkdir(prefix, 0o755) // a file's directory must exist, as for cp
			}
			var stdout string
			for _, flags := range m.runs {
				out, code, errs := cli(append([]string{"convert", in, prefix + m.file}, flags...)...)
				if code != exitOK {
					t.Fatalf("%s %v: exit %d: %s%s", m.name, flags, code, out, errs)
				}
				stdout += out
			}
			got[m.name] = d.read(t, prefix)
			var names []string
			for n := range got[m.name] {
				names = append(names, n)
			}
			sort.Strings(names)
			want := append([]string{}, m.want...)
			sort.Strings(want)
			if strings.Join(names, " ") != strings.Join(want, " ") {
				t.Errorf("%s: wrote %v, want %v", m.name, names, want)
			}
			for _, n := range m.want {
				if !strings.Contains(stdout, prefix+n) {
					t.Errorf("%s: stdout does not name %s:\n%s", m.name, prefix+n, stdout)
				}
			}
			if entries, _ := os.ReadDir(cwd); len(entries) > 0 {
				t.Fatalf("%s: the working directory got %s", m.name, entries[0].Name())
			}
		}
		return got
	}
	local := localDest(t)
	ref := run(t, local, true)
	// The local outputs read back as the input, tensor by tensor: the
	// bytes the URLs are held to below are a conversion.
	for _, f := range []string{"plain/model.safetensors", "pth/pytorch_model.bin", "compress/model.safetensors.zst"} {
		if out, code, errs := cli("verify", in, local.root+f); code != exitOK {
			t.Errorf("verify %s: exit %d: %s%s", f, code, out, errs)
		}
	}
	kinds := map[string]func(t *testing.T) destKind{
		"s3": func(t *testing.T) destKind {
			var s *miniotest.Server
			inOrig(func() { s = sharedMinio(t) })
			b := fmt.Sprintf("dest%d", rand.Int63())
			if err := s.MakeBucket(b); err != nil {
				t.Fatal(err)
			}
			return bucketDest("s3://" + b + "/")
		},
		"gs": func(t *testing.T) destKind {
			var g *cloudemu.GCS
			inOrig(func() { g = sharedGCS(t) })
			b := fmt.Sprintf("dest%d", rand.Int63())
			if err := g.MakeBucket(b); err != nil {
				t.Fatal(err)
			}
			return bucketDest("gs://" + b + "/")
		},
		"az": func(t *testing.T) destKind {
			var a *cloudemu.Azure
			inOrig(func() { a = sharedAzure(t) })
			c := fmt.Sprintf("dest%d", rand.Int63())
			if err := a.MakeContainer(c); err != nil {
				t.Fatal(err)
			}
			return bucketDest("az://" + c + "/")
		},
	}
	for _, k := range []string{"s3", "gs", "az"} {
		t.Run(k, func(t *testing.T) {
			got := run(t, kinds[k](t), false)
			for _, m := range destModes {
				for n, b := range ref[m.name] {
					if string(got[m.name][n]) != string(b) {
						t.Errorf("%s: %s: %d bytes, want the local output's %d", m.name, n, len(got[m.name][n]), len(b))
					}
				}
			}
		})
	}
	t.Run("unsupported", func(t *testing.T) {
		for _, root := range []string{"ftp://host/x/", "https://127.0.0.1:1/x/"} {
			for _, m := range destModes {
				flags := m.runs[len(m.runs)-1]
				out, code, errs := cli(append([]string{"convert", in, root + m.name + "/" + m.file}, flags...)...)
				if _, after, ok := strings.Cut(errs, "(--part 0/2)\n"); ok {
					errs = after // which part this is, then the refusal
				}
				if code == exitOK || !strings.HasPrefix(errs, "ckpt: ") || strings.Count(errs, "\n") != 1 {
					t.Errorf("%s to %s: exit %d, want a one-line refusal: %s%s", m.name, root, code, out, errs)
				}
				if entries, _ := os.ReadDir(cwd); len(entries) > 0 {
					t.Fatalf("%s to %s: the working directory got %s", m.name, root, entries[0].Name())
				}
			}
		}
	})
}

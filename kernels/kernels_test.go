package kernels_test

import (
	"bufio"
	"bytes"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/ckpt-dev/ckpt/digest"
	"github.com/ckpt-dev/ckpt/kernels"
)

func TestPTXEmbedded(t *testing.T) {
	for _, want := range []string{".version 6.3", ".target sm_75", ".address_size 64", ".visible .entry " + kernels.XXH64CChunks + "("} {
		if !bytes.Contains(kernels.XXH64CPTX, []byte(want)) {
			t.Errorf("embedded PTX lacks %q", want)
		}
	}
}

func TestChunkSize(t *testing.T) {
	if kernels.ChunkSize != digest.ChunkSize || !bytes.Contains(source(t), []byte("#define XXH_CHUNK 65536ULL")) {
		t.Errorf("kernel chunk size %d, digest's %d", kernels.ChunkSize, digest.ChunkSize)
	}
}

func source(t *testing.T) []byte {
	t.Helper()
	b, err := os.ReadFile("xxh64c.cu")
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestGrid(t *testing.T) {
	for _, c := range []struct {
		size uint64
		want uint32
	}{{0, 0}, {1, 1}, {digest.ChunkSize, 1}, {256 * digest.ChunkSize, 1}, {256*digest.ChunkSize + 1, 2}, {1 << 40, 1 << 16}} {
		if got := kernels.XXH64CGrid(c.size); got != c.want {
			t.Errorf("XXH64CGrid(%d) = %d, want %d", c.size, got, c.want)
		}
	}
}

// harness builds testdata/harness.cc, which includes xxh64c.cu, with the
// host C++ compiler. Without one the test skips, unless CKPT_REQUIRE_CC=1.
func harness(t *testing.T) string {
	t.Helper()
	var cxx string
	for _, c := range []string{"clang++", "c++", "g++"} {
		if p, err := exec.LookPath(c); err == nil {
			cxx = p
			break
		}
	}
	if cxx == "" {
		if os.Getenv("CKPT_REQUIRE_CC") == "1" {
			t.Fatal("no C++ compiler (clang++, c++, g++) and CKPT_REQUIRE_CC=1")
		}
		t.Skip("no C++ compiler; set CKPT_REQUIRE_CC=1 to make this a failure")
	}
	bin := filepath.Join(t.TempDir(), "harness")
	out, err := exec.Command(cxx, "-O2", "-Wall", "-Wextra", "-Werror", "-o", bin, "testdata/harness.cc").CombinedOutput()
	if err != nil {
		t.Fatalf("%s: %v\n%s", cxx, err, out)
	}
	return bin
}

// kernelSums runs the kernel's core over data on the host.
func kernelSums(t *testing.T, bin string, data []byte) []uint64 {
	t.Helper()
	in := filepath.Join(t.TempDir(), "in")
	if err := os.WriteFile(in, data, 0o600); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(bin, in).Output()
	if err != nil {
		t.Fatalf("harness: %v", err)
	}
	var sums []uint64
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		v, err := strconv.ParseUint(sc.Text(), 16, 64)
		if err != nil {
			t.Fatalf("harness output %q: %v", sc.Text(), err)
		}
		sums = append(sums, v)
	}
	return sums
}

// TestHostParity checks that the kernel source, compiled for the host,
// computes the digests of package digest bit for bit: chunk by chunk and,
// combined, the whole xxh64c.
func TestHostParity(t *testing.T) {
	bin := harness(t)
	rng := rand.New(rand.NewPCG(1, 2))
	const c = digest.ChunkSize
	sizes := []int{0, 1, 3, 4, 7, 8, 9, 31, 32, 33, 63, 64, 100, c - 1, c, c + 1, c + 31, 2*c + 7, 3<<20 + 12345, 5 << 20}
	for _, n := range sizes {
		data := make([]byte, n)
		for i := range data {
			data[i] = byte(rng.Uint32())
		}
		sums := kernelSums(t, bin, data)
		if int64(len(sums)) != digest.ChunkCount(int64(n)) {
			t.Fatalf("size %d: %d chunk digests, want %d", n, len(sums), digest.ChunkCount(int64(n)))
		}
		for i, s := range sums {
			chunk := data[i*c : min((i+1)*c, n)]
			if want := digest.ChunkSum(chunk, uint64(i)); s != want {
				t.Errorf("size %d chunk %d: kernel %016x, digest.ChunkSum %016x", n, i, s, want)
			}
		}
		got, err := digest.Combine(int64(n), sums)
		if err != nil {
			t.Fatal(err)
		}
		if want := digest.SumBytes(data); got != want {
			t.Errorf("size %d: kernel-combined %v, digest.SumBytes %v", n, got, want)
		}
	}
}

// TestGolden checks the golden values of docs/checksum.md, computed by an
// independent implementation, through the kernel source.
func TestGolden(t *testing.T) {
	bin := harness(t)
	for _, g := range []struct {
		n    int
		want string
	}{
		{0, "xxh64c:ef46db3751d8e999"},
		{1, "xxh64c:2bd61d69b2d5b113"},
		{65536, "xxh64c:7990f12df5a54be3"},
		{65537, "xxh64c:dec45b7769639697"},
		{196708, "xxh64c:2c955a3f3ce9a7ea"},
		{1048576, "xxh64c:429de818f75f00f4"},
	} {
		data := make([]byte, g.n)
		for j := range data {
			data[j] = byte(j % 251)
		}
		got, err := digest.Combine(int64(g.n), kernelSums(t, bin, data))
		if err != nil {
			t.Fatal(err)
		}
		if got.String() != g.want {
			t.Errorf("pattern(%d): %v, want %s", g.n, got, g.want)
		}
	}
}

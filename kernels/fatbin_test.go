package kernels_test

import (
	"bytes"
	"debug/elf"
	"encoding/binary"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/ckpt-dev/ckpt/kernels"
)

// fatImage is one image of a CUDA fat binary.
type fatImage struct {
	kind    uint16 // 1: PTX, 2: ELF (cubin)
	arch    int    // compute capability as major*10+minor
	flags   uint64
	payload []byte
}

const (
	fatbinMagic = 0xBA55ED50
	fatKindPTX  = 1
	fatKindELF  = 2
	emCUDA      = 190 // ELF e_machine of NVIDIA cubins
)

// parseFatbin splits a fat binary as fatbinary writes it: a 16-byte header
// (magic, version, header size, size of the rest), then images, each a
// header (kind, version, header size, payload size, ..., arch at offset 28,
// flags at 32) and its payload. Only the fields these tests read are named.
func parseFatbin(b []byte) ([]fatImage, error) {
	le := binary.LittleEndian
	if len(b) < 16 || le.Uint32(b) != fatbinMagic {
		return nil, fmt.Errorf("no fat binary magic")
	}
	hs, size := int(le.Uint16(b[6:])), le.Uint64(b[8:])
	if hs != 16 || uint64(len(b)) != uint64(hs)+size {
		return nil, fmt.Errorf("header size %d, body %d, file %d", hs, size, len(b))
	}
	var out []fatImage
	for off := hs; off < len(b); {
		if len(b)-off < 48 {
			return nil, fmt.Errorf("truncated image header at %d", off)
		}
		h := b[off:]
		ehs, n := int(le.Uint32(h[4:])), le.Uint64(h[8:])
		if ehs < 48 || uint64(len(b)-off-ehs) < n {
			return nil, fmt.Errorf("image at %d: header %d, payload %d", off, ehs, n)
		}
		out = append(out, fatImage{kind: le.Uint16(h), arch: int(le.Uint32(h[28:])), flags: le.Uint64(h[32:]),
			payload: b[off+ehs : off+ehs+int(n)]})
		off += ehs + int(n)
	}
	return out, nil
}

// ptxTokens is PTX without comments, as whitespace-separated tokens:
// fatbinary stores the PTX with comments and indentation removed.
func ptxTokens(b []byte) []string {
	var toks []string
	for _, line := range strings.Split(string(bytes.TrimRight(b, "\x00")), "\n") {
		line, _, _ = strings.Cut(line, "//")
		toks = append(toks, strings.Fields(line)...)
	}
	return toks
}

// TestFatbin checks the committed fat binary against the committed PTX
// without NVIDIA's tools: one cubin per kernels.XXH64CArchs, each an
// EM_CUDA ELF for that architecture defining the kernel, and the PTX for
// sm_75 equal (up to comments and spacing) to XXH64CPTX, so the cubins
// cannot be left behind by a PTX change (make kernels rebuilds both; CI's
// staleness check rebuilds them with ptxas).
func TestFatbin(t *testing.T) {
	imgs, err := parseFatbin(kernels.XXH64CFatbin)
	if err != nil {
		t.Fatal(err)
	}
	var cubins []int
	var ptx [][]byte
	for _, im := range imgs {
		switch im.kind {
		case fatKindELF:
			cubins = append(cubins, im.arch)
			// debug/elf refuses cubins (e_version is CUDA's, not 1):
			// read the ELF64 header fields directly.
			h := im.payload
			le := binary.LittleEndian
			if len(h) < 64 || string(h[:4]) != elf.ELFMAG || elf.Class(h[elf.EI_CLASS]) != elf.ELFCLASS64 ||
				le.Uint16(h[18:]) != emCUDA || int(le.Uint32(h[48:])&0xff) != im.arch {
				t.Errorf("sm_%d cubin: not an ELF64 EM_CUDA image for sm_%d (header % x)", im.arch, im.arch, h[:min(len(h), 64)])
			}
			if !bytes.Contains(h, []byte("\x00.text."+kernels.XXH64CChunks+"\x00")) {
				t.Errorf("sm_%d cubin has no code section for %s", im.arch, kernels.XXH64CChunks)
			}
		case fatKindPTX:
			if im.arch != 75 {
				t.Errorf("PTX image for sm_%d, want sm_75", im.arch)
			}
			ptx = append(ptx, im.payload)
		default:
			t.Errorf("image of kind %d", im.kind)
		}
		if im.flags&0x2000 != 0 { // compressed
			t.Errorf("image kind %d sm_%d is compressed (make kernels passes --compress=false)", im.kind, im.arch)
		}
	}
	if !slices.Equal(cubins, kernels.XXH64CArchs[:]) {
		t.Errorf("cubins for %v, want %v", cubins, kernels.XXH64CArchs)
	}
	if len(ptx) != 1 {
		t.Fatalf("%d PTX images, want 1", len(ptx))
	}
	if got, want := ptxTokens(ptx[0]), ptxTokens(kernels.XXH64CPTX); !slices.Equal(got, want) {
		t.Errorf("the fat binary's PTX (%d tokens) is not xxh64c.ptx (%d tokens): run make kernels", len(got), len(want))
	}
}

// TestParseFatbinRejects: the test's own parser fails on what is not a
// well-formed fat binary, so TestFatbin cannot pass on garbage.
func TestParseFatbinRejects(t *testing.T) {
	good := kernels.XXH64CFatbin
	for name, b := range map[string][]byte{
		"empty":     nil,
		"PTX":       kernels.XXH64CPTX,
		"truncated": good[:len(good)-1],
		"longer":    append(slices.Clip(good), 0),
	} {
		if _, err := parseFatbin(b); err == nil {
			t.Errorf("%s: parsed", name)
		}
	}
}

// cudaTool finds one of NVIDIA's command-line tools. Without it the test
// skips, unless CKPT_REQUIRE_CUDA_TOOLS=1 (CI installs them: docs/gpu.md).
func cudaTool(t *testing.T, name string) string {
	t.Helper()
	p, err := exec.LookPath(name)
	if err != nil {
		if os.Getenv("CKPT_REQUIRE_CUDA_TOOLS") == "1" {
			t.Fatalf("%s not found and CKPT_REQUIRE_CUDA_TOOLS=1", name)
		}
		t.Skipf("%s not found (NVIDIA's CUDA tools: docs/gpu.md); CKPT_REQUIRE_CUDA_TOOLS=1 makes this a failure", name)
	}
	return p
}

// TestFatbinPTXAS assembles xxh64c.ptx with NVIDIA's ptxas for every
// architecture, warnings as errors, and compares each cubin byte for byte
// with the one in the committed fat binary when it is the ptxas that built
// them (the build named in xxh64c.ptxas.txt; another release assembles
// other bytes, so there only the clean assembly is checked); cuobjdump,
// NVIDIA's reader, must list exactly those images.
func TestFatbinPTXAS(t *testing.T) {
	ptxas := cudaTool(t, "ptxas")
	imgs, err := parseFatbin(kernels.XXH64CFatbin)
	if err != nil {
		t.Fatal(err)
	}
	out, _ := exec.Command(ptxas, "--version").Output()
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	ver := lines[len(lines)-1]
	t.Logf("ptxas: %s", ver)
	notes, err := os.ReadFile("xxh64c.ptxas.txt")
	if err != nil {
		t.Fatal(err)
	}
	built := regexp.MustCompile(`Build cuda_[0-9.]+\.r[0-9.]+/compiler\.[0-9_]+`).Find(notes)
	if built == nil {
		t.Fatal("xxh64c.ptxas.txt names no ptxas build")
	}
	same := strings.Contains(ver, string(built))
	dir := t.TempDir()
	for _, im := range imgs {
		if im.kind != fatKindELF {
			continue
		}
		out := filepath.Join(dir, fmt.Sprintf("sm_%d.cubin", im.arch))
		log, err := exec.Command(ptxas, fmt.Sprintf("-arch=sm_%d", im.arch), "-O3", "-v", "-Werror", "--warn-on-spills",
			"--warn-on-local-memory-usage", "-o", out, "xxh64c.ptx").CombinedOutput()
		if err != nil {
			t.Fatalf("ptxas sm_%d: %v\n%s", im.arch, err, log)
		}
		t.Logf("sm_%d: %s", im.arch, strings.Join(strings.Fields(string(log)), " "))
		b, err := os.ReadFile(out)
		if err != nil {
			t.Fatal(err)
		}
		if !same {
			if !bytes.Equal(b, im.payload) {
				t.Logf("sm_%d: %d bytes from this ptxas, %d committed (from %s): not compared", im.arch, len(b), len(im.payload), built)
			}
			continue
		}
		if !bytes.Equal(b, im.payload) {
			t.Errorf("sm_%d: ptxas output (%d bytes) differs from the committed cubin (%d bytes): run make kernels (the same %s)",
				im.arch, len(b), len(im.payload), built)
		}
	}
	cuobjdump := cudaTool(t, "cuobjdump")
	list, err := exec.Command(cuobjdump, "-lelf", "-lptx", "xxh64c.fatbin").CombinedOutput()
	if err != nil {
		t.Fatalf("cuobjdump: %v\n%s", err, list)
	}
	var want []string
	for i, a := range kernels.XXH64CArchs {
		want = append(want, fmt.Sprintf("ELF file    %d: xxh64c.%d.sm_%d.cubin", i+1, i+1, a))
	}
	want = append(want, "PTX file    1: xxh64c.1.sm_75.ptx")
	if got := strings.Split(strings.TrimSpace(string(list)), "\n"); !slices.Equal(got, want) {
		t.Errorf("cuobjdump lists\n%s\nwant\n%s", list, strings.Join(want, "\n"))
	}
	// NVIDIA's disassembler reads each cubin's machine code (SASS).
	sass, err := exec.Command(cuobjdump, "-sass", "xxh64c.fatbin").CombinedOutput()
	if err != nil {
		t.Fatalf("cuobjdump -sass: %v\n%s", err, sass)
	}
	for _, a := range kernels.XXH64CArchs {
		_, rest, ok := strings.Cut(string(sass), fmt.Sprintf("arch = sm_%d\n", a))
		if !ok || !strings.Contains(rest, "Function : "+kernels.XXH64CChunks) || !strings.Contains(rest, "EXIT") {
			t.Errorf("cuobjdump -sass: no code for %s on sm_%d", kernels.XXH64CChunks, a)
		}
	}
}

// TestNVCC builds xxh64c.cu with NVIDIA's own compiler driver as well
// (nvcc 11.8 needs a host compiler it supports: Debian's clang 14), then
// assembles that PTX with ptxas for every architecture, warnings as
// errors: the kernel source is CUDA that NVIDIA's front end accepts, not
// only clang's, with the same entry point and parameters. It skips
// without nvcc (CI unpacks only ptxas, fatbinary and cuobjdump) unless
// CKPT_REQUIRE_NVCC=1.
func TestNVCC(t *testing.T) {
	nvcc, err := exec.LookPath("nvcc")
	if err != nil {
		if os.Getenv("CKPT_REQUIRE_NVCC") == "1" {
			t.Fatal("nvcc not found and CKPT_REQUIRE_NVCC=1")
		}
		t.Skip("nvcc not found (apt-get install nvidia-cuda-toolkit: docs/gpu.md); CKPT_REQUIRE_NVCC=1 makes this a failure")
	}
	ptxas := cudaTool(t, "ptxas")
	dir := t.TempDir()
	ptx := filepath.Join(dir, "nvcc.ptx")
	args := []string{"-arch=sm_75", "-ptx", "-o", ptx, "xxh64c.cu"}
	out, err := exec.Command(nvcc, args...).CombinedOutput()
	if err != nil {
		if cc, lerr := exec.LookPath("clang-14"); lerr == nil {
			out, err = exec.Command(nvcc, append([]string{"-ccbin", cc}, args...)...).CombinedOutput()
		}
	}
	if err != nil {
		t.Fatalf("nvcc: %v\n%s", err, out)
	}
	b, err := os.ReadFile(ptx)
	if err != nil {
		t.Fatal(err)
	}
	entry := func(p []byte) string {
		s := string(p)
		i := strings.Index(s, ".visible .entry "+kernels.XXH64CChunks+"(")
		if i < 0 {
			return ""
		}
		j := strings.Index(s[i:], ")")
		return strings.Join(strings.Fields(s[i:i+j+1]), " ")
	}
	if got, want := entry(b), entry(kernels.XXH64CPTX); got == "" || got != want {
		t.Errorf("nvcc's entry point\n%s\nclang's\n%s", got, want)
	}
	for _, a := range kernels.XXH64CArchs {
		log, err := exec.Command(ptxas, fmt.Sprintf("-arch=sm_%d", a), "-O3", "-v", "-Werror", "--warn-on-spills",
			"--warn-on-local-memory-usage", "-o", filepath.Join(dir, "nvcc.cubin"), ptx).CombinedOutput()
		if err != nil {
			t.Errorf("ptxas sm_%d of nvcc's PTX: %v\n%s", a, err, log)
			continue
		}
		t.Logf("nvcc sm_%d: %s", a, strings.Join(strings.Fields(string(log)), " "))
	}
}

package main

import (
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// Start-up budget (issue 35): what ckpt's own packages may allocate while
// the program initialises, before main runs. Every command pays it, and on
// a machine where a first touch of memory is slow most of it is page
// faults. A regexp compiled at package level costs 40 to 250 allocations
// (3 to 25 KB); a table of a few dozen entries a few KB.
const (
	initAllocsMax     = 64       // allocations of any one ckpt package's init
	initBytesMax      = 8 << 10  // bytes of any one ckpt package's init
	initBytesTotalMax = 48 << 10 // bytes of all of them together
	// lazyBytesMax bounds the packages whose regexps and tables are built
	// on first use (lazyPackages): they keep nothing larger at init.
	lazyBytesMax = 4 << 10
)

// lazyPackages compile their regexps and build their tables on first use.
var lazyPackages = []string{"dcp", "scan", "statedict", "internal/llamacpp", "lora", "pickle", "cuda"}

// TestInitBudget runs this test binary again with GODEBUG=inittrace=1 (it
// links every package the ckpt command does, so their initialisation is
// the command's) and holds ckpt's packages to the budget above. The main
// package is left out (here cmd/ckpt: its init includes the tests'
// variables), and so is internal/testenv, which only tests link.
func TestInitBudget(t *testing.T) {
	if os.Getenv("CKPT_INITTRACE_CHILD") != "" {
		return
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestInitBudget$", "-test.count=1")
	cmd.Env = append(os.Environ(), "GODEBUG=inittrace=1", "CKPT_INITTRACE_CHILD=1")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	type cost struct{ bytes, allocs int }
	inits := map[string]cost{}
	for _, line := range strings.Split(string(out), "\n") {
		// init github.com/ckpt-dev/ckpt/pickle @25 ms, 0.19 ms clock, 2968 bytes, 37 allocs
		f := strings.Fields(line)
		if len(f) != 11 || f[0] != "init" || f[8] != "bytes," || f[10] != "allocs" {
			continue
		}
		pkg, ok := strings.CutPrefix(f[1], "github.com/ckpt-dev/ckpt")
		if !ok || pkg == "/cmd/ckpt" || strings.HasPrefix(pkg, "/internal/testenv") {
			continue
		}
		b, err1 := strconv.Atoi(f[7])
		a, err2 := strconv.Atoi(f[9])
		if err1 != nil || err2 != nil {
			t.Fatalf("cannot read %q", line)
		}
		if pkg = strings.TrimPrefix(pkg, "/"); pkg == "" {
			pkg = "ckpt"
		}
		inits[pkg] = cost{b, a}
	}
	for _, p := range append(lazyPackages, "ckpt", "convert", "safetensors") {
		if _, ok := inits[p]; !ok {
			t.Fatalf("no inittrace line for %q in:\n%s", p, out)
		}
	}
	total := 0
	var report []string
	for p, c := range inits {
		total += c.bytes
		report = append(report, fmt.Sprintf("%s %d B %d allocs", p, c.bytes, c.allocs))
		if c.allocs > initAllocsMax || c.bytes > initBytesMax {
			t.Errorf("package %q allocates %d bytes in %d allocations at init (at most %d bytes, %d allocations): build its regexps and tables on first use",
				p, c.bytes, c.allocs, initBytesMax, initAllocsMax)
		}
	}
	for _, p := range lazyPackages {
		if c := inits[p]; c.bytes > lazyBytesMax {
			t.Errorf("package %q allocates %d bytes at init (at most %d): it builds its regexps and tables on first use", p, c.bytes, lazyBytesMax)
		}
	}
	if total > initBytesTotalMax {
		t.Errorf("ckpt's packages allocate %d bytes at init (at most %d)", total, initBytesTotalMax)
	}
	slices.Sort(report)
	t.Logf("%d packages, %d bytes: %s", len(inits), total, strings.Join(report, "; "))
}

package testenv

import (
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
)

// DefaultPython is the interpreter the interop tests run when CKPT_PYTHON
// is not set.
const DefaultPython = "/usr/bin/python3"

// Python returns the Python interpreter for interop tests: $CKPT_PYTHON,
// or DefaultPython.
func Python() string {
	if p := os.Getenv("CKPT_PYTHON"); p != "" {
		return p
	}
	return DefaultPython
}

// baseModules are the modules Debian bookworm's python3-torch and
// python3-numpy provide, which CKPT_REQUIRE_INTEROP=1 requires.
var baseModules = map[string]bool{"torch": true, "numpy": true, "json": true, "pickle": true}

// Require skips t unless Python() can import every one of modules. It
// fails t instead when CKPT_REQUIRE_INTEROP says these modules must be
// there: "1" for torch, numpy and the standard library (as in CI),
// "all" for any module (CI's torch 2.x stage, whose interpreter has
// safetensors as well).
func Require(t testing.TB, modules ...string) {
	t.Helper()
	names := strings.Join(modules, ", ")
	require(t, "import "+names, "cannot import "+names, base(modules))
}

func base(modules []string) bool {
	for _, m := range modules {
		if !baseModules[m] {
			return false
		}
	}
	return true
}

// RequireFeature skips t unless Python() runs code without an error (say,
// a torch recent enough to have a dtype). Only CKPT_REQUIRE_INTEROP=all
// (CI's torch 2.x stage) makes a missing feature fail t.
func RequireFeature(t testing.TB, what, code string) {
	t.Helper()
	require(t, code, "lacks "+what, false)
}

// require runs code in Python(); when it fails, t fails under
// CKPT_REQUIRE_INTEROP=all, or =1 when base says the CI machine must have
// it, and is skipped otherwise.
func require(t testing.TB, code, lack string, base bool) {
	t.Helper()
	out, err := exec.Command(Python(), "-c", code).CombinedOutput()
	if err == nil {
		return
	}
	msg := fmt.Sprintf("%s %s: %v\n%s", Python(), lack, err, out)
	if req := os.Getenv("CKPT_REQUIRE_INTEROP"); req == "all" || req == "1" && base {
		t.Fatalf("CKPT_REQUIRE_INTEROP=%s but %s", req, msg)
	}
	t.Skip(msg)
}

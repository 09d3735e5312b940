// Command testsummary reads `go test -json` on stdin and prints what a
// person wants to see while tests run and after: one line per package as it
// finishes (tests passed, skipped, failed), the output of every failed
// test, the distinct reasons tests were skipped, and a closing tally of the
// tests that ran. It exits 1 when a test or a package failed.
//
//	go test -json ./... | go run ./internal/testsummary -label unit
package main

import (
	"bufio"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"
)

// event is one line of `go test -json` (cmd/test2json).
type event struct {
	Action  string
	Package string
	Test    string
	Elapsed float64
	Output  string
}

type pkgState struct {
	passed, skipped, failed int
	output                  map[string][]string // per test, kept until it passes or skips
	pkgOutput               []string
}

// tally is the result of reading a stream.
type tally struct {
	packages, failedPackages int
	passed, skipped, failed  int
	skipReasons              map[string]int
}

func main() {
	label := flag.String("label", "tests", "what the closing line counts (unit, torch 2.x interop)")
	flag.Parse()
	t, err := summarize(os.Stdin, os.Stdout)
	if err != nil {
		fmt.Fprintln(os.Stderr, "testsummary:", err)
		os.Exit(2)
	}
	fmt.Printf("%s: %d tests passed, %d skipped, %d failed, in %d packages (%d failed)\n",
		*label, t.passed, t.skipped, t.failed, t.packages, t.failedPackages)
	if t.packages == 0 {
		fmt.Fprintln(os.Stderr, "testsummary: no test results were read (did go test run?)")
		os.Exit(1)
	}
	if t.failed > 0 || t.failedPackages > 0 {
		os.Exit(1)
	}
}

// summarize reads the event stream from r and writes the per-package lines
// and details to w.
func summarize(r io.Reader, w io.Writer) (*tally, error) {
	t := &tally{skipReasons: map[string]int{}}
	pkgs := map[string]*pkgState{}
	state := func(p string) *pkgState {
		s := pkgs[p]
		if s == nil {
			s = &pkgState{output: map[string][]string{}}
			pkgs[p] = s
		}
		return s
	}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	for sc.Scan() {
		line := sc.Bytes()
		var e event
		if err := json.Unmarshal(line, &e); err != nil || e.Action == "" {
			// Not an event (a build error printed by go test): show it.
			fmt.Fprintln(w, string(line))
			continue
		}
		s := state(e.Package)
		switch e.Action {
		case "output":
			if e.Test != "" {
				s.output[e.Test] = append(s.output[e.Test], e.Output)
			} else {
				s.pkgOutput = append(s.pkgOutput, e.Output)
			}
		case "pass", "skip", "fail":
			if e.Test == "" {
				finishPackage(w, t, e, s)
				continue
			}
			switch e.Action {
			case "pass":
				s.passed++
				t.passed++
			case "skip":
				s.skipped++
				t.skipped++
				if reason := skipReason(s.output[e.Test]); reason != "" {
					t.skipReasons[reason]++
				}
			case "fail":
				s.failed++
				t.failed++
				fmt.Fprintf(w, "--- FAIL: %s (%s)\n%s", e.Test, e.Package, strings.Join(s.output[e.Test], ""))
			}
			delete(s.output, e.Test)
		}
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	if len(t.skipReasons) > 0 {
		reasons := make([]string, 0, len(t.skipReasons))
		for r := range t.skipReasons {
			reasons = append(reasons, r)
		}
		sort.Strings(reasons)
		fmt.Fprintln(w, "skipped, by reason:")
		for _, r := range reasons {
			fmt.Fprintf(w, "  %4d  %s\n", t.skipReasons[r], r)
		}
	}
	return t, nil
}

func finishPackage(w io.Writer, t *tally, e event, s *pkgState) {
	t.packages++
	status := "ok  "
	if e.Action == "fail" {
		status = "FAIL"
		t.failedPackages++
		if s.failed == 0 {
			// A failure outside any test (build error, panic in TestMain).
			fmt.Fprint(w, strings.Join(s.pkgOutput, ""))
		}
	}
	if s.passed+s.skipped+s.failed == 0 {
		fmt.Fprintf(w, "%s %s (no tests)\n", status, e.Package)
		return
	}
	fmt.Fprintf(w, "%s %s  %d passed, %d skipped, %d failed  %.1fs\n", status, e.Package, s.passed, s.skipped, s.failed, e.Elapsed)
}

// skipReason is the message of t.Skip: the output line after "--- SKIP",
// trimmed of its file:line prefix.
func skipReason(lines []string) string {
	for i := len(lines) - 1; i >= 0; i-- {
		l := strings.TrimSpace(lines[i])
		if l == "" || strings.HasPrefix(l, "--- SKIP") || strings.HasPrefix(l, "=== ") {
			continue
		}
		if _, msg, ok := strings.Cut(l, ": "); ok && strings.Contains(l[:len(l)-len(msg)], ".go:") {
			l = msg
		}
		if len(l) > 140 {
			l = l[:140] + "..."
		}
		return l
	}
	return ""
}

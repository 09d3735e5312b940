package main

import (
	"bytes"
	"strings"
	"testing"
)

const stream = `{"Action":"start","Package":"example.com/a"}
{"Action":"run","Package":"example.com/a","Test":"TestOK"}
{"Action":"output","Package":"example.com/a","Test":"TestOK","Output":"=== RUN   TestOK\n"}
{"Action":"pass","Package":"example.com/a","Test":"TestOK","Elapsed":0.01}
{"Action":"run","Package":"example.com/a","Test":"TestInterop"}
{"Action":"output","Package":"example.com/a","Test":"TestInterop","Output":"    a_test.go:12: /usr/bin/python3 has no torch\n"}
{"Action":"output","Package":"example.com/a","Test":"TestInterop","Output":"--- SKIP: TestInterop (0.00s)\n"}
{"Action":"skip","Package":"example.com/a","Test":"TestInterop","Elapsed":0}
{"Action":"run","Package":"example.com/a","Test":"TestBad"}
{"Action":"output","Package":"example.com/a","Test":"TestBad","Output":"    a_test.go:20: got 1, want 2\n"}
{"Action":"fail","Package":"example.com/a","Test":"TestBad","Elapsed":0}
{"Action":"fail","Package":"example.com/a","Elapsed":0.2}
{"Action":"output","Package":"example.com/b","Output":"?   \texample.com/b\t[no test files]\n"}
{"Action":"skip","Package":"example.com/b","Elapsed":0}
# example.com/c
{"Action":"pass","Package":"example.com/d","Elapsed":0.1}
`

func TestSummarize(t *testing.T) {
	var out bytes.Buffer
	tl, err := summarize(strings.NewReader(stream), &out)
	if err != nil {
		t.Fatal(err)
	}
	if tl.passed != 1 || tl.skipped != 1 || tl.failed != 1 || tl.packages != 3 || tl.failedPackages != 1 {
		t.Errorf("tally %+v", tl)
	}
	for _, want := range []string{
		"FAIL example.com/a  1 passed, 1 skipped, 1 failed  0.2s",
		"--- FAIL: TestBad (example.com/a)\n    a_test.go:20: got 1, want 2",
		"ok   example.com/b (no tests)",
		"# example.com/c",
		"   1  /usr/bin/python3 has no torch",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}
}

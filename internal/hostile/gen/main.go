// Command gen writes the small cases of the hostile corpus to
// testdata/hostile (run from the module root: go run ./internal/hostile/gen)
// with their expectations in testdata/hostile/expect.tsv. Large cases are
// built by the tests themselves; -all writes them too (to another
// directory: go run ./internal/hostile/gen -all DIR).
package main

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"

	"github.com/ckpt-dev/ckpt/internal/hostile"
)

func main() {
	all := flag.Bool("all", false, "also write the large cases")
	flag.Parse()
	dir := filepath.Join("testdata", "hostile")
	if flag.NArg() > 0 {
		dir = flag.Arg(0)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	cases := hostile.Cases()
	for _, c := range cases {
		if c.Big && !*all {
			continue
		}
		if c.Dir != nil {
			sub := filepath.Join(dir, c.Name)
			if err := os.MkdirAll(sub, 0o755); err != nil {
				fmt.Fprintln(os.Stderr, err)
				os.Exit(1)
			}
			for name, data := range c.Dir() {
				if err := os.WriteFile(filepath.Join(sub, name), data, 0o644); err != nil {
					fmt.Fprintln(os.Stderr, err)
					os.Exit(1)
				}
			}
			continue
		}
		if err := os.WriteFile(filepath.Join(dir, c.Name), c.Data(), 0o644); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
	}
	if err := os.WriteFile(filepath.Join(dir, "expect.tsv"), []byte(hostile.Expectations(cases)), 0o644); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}

// Command guardcmp is the regression guard's bookkeeping (bench/guard.sh):
// it puts a new guard block (markdown: a dated paragraph and tables whose
// first column names a benchmark) in place of the previous one in the
// "Latest guard run" section of docs/benchmarks.md, between the markers
// <!-- guard:begin --> and <!-- guard:end -->, and compares every ratio
// column (a header containing "ratio", cells such as "1.07x") of the new
// block with the same benchmark's in the previous one. A ratio more than
// the threshold (default 15%) above the previous is a regression: a line
// "REGRESSION: ..." goes into the doc under the new block and to stdout,
// and the exit status is 3.
//
//	guardcmp [-threshold 0.15] DOC NEW_BLOCK
package main

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"sort"
	"strconv"
	"strings"
)

const (
	beginMark = "<!-- guard:begin -->"
	endMark   = "<!-- guard:end -->"
)

// errNoMarkers: the doc has no guard section to replace.
var errNoMarkers = errors.New("no " + beginMark + " ... " + endMark + " section")

func main() {
	threshold := flag.Float64("threshold", 0.15, "a ratio more than this fraction above the previous one is a regression")
	flag.Parse()
	if flag.NArg() != 2 {
		fmt.Fprintln(os.Stderr, "usage: guardcmp [-threshold 0.15] DOC NEW_BLOCK")
		os.Exit(2)
	}
	doc, err := os.ReadFile(flag.Arg(0))
	if err == nil {
		var block []byte
		if block, err = os.ReadFile(flag.Arg(1)); err == nil {
			var out string
			var regs []string
			if out, regs, err = update(string(doc), string(block), *threshold); err == nil {
				if err = os.WriteFile(flag.Arg(0), []byte(out), 0o644); err == nil {
					for _, r := range regs {
						fmt.Println(r)
					}
					if len(regs) > 0 {
						os.Exit(3)
					}
					return
				}
			}
		}
	}
	fmt.Fprintln(os.Stderr, "guardcmp:", err)
	os.Exit(1)
}

// update returns doc with its guard section holding block and the
// verdict of comparing it with the block it replaces, and the
// regressions found.
func update(doc, block string, threshold float64) (string, []string, error) {
	i := strings.Index(doc, beginMark)
	j := strings.Index(doc, endMark)
	if i < 0 || j < i {
		return "", nil, errNoMarkers
	}
	prev := doc[i+len(beginMark) : j]
	before := ratios(prev)
	regs := compare(before, ratios(block), threshold)
	var b strings.Builder
	b.WriteString(doc[:i+len(beginMark)])
	b.WriteString("\n")
	b.WriteString(strings.TrimSpace(block))
	b.WriteString("\n\n")
	if len(before) == 0 {
		b.WriteString("No previous guard figures to compare with.\n")
	} else if len(regs) == 0 {
		fmt.Fprintf(&b, "No ratio more than %.0f%% above the previous guard run's.\n", threshold*100)
	}
	for _, r := range regs {
		b.WriteString(r + "\n\n")
	}
	b.WriteString(doc[j:])
	return b.String(), regs, nil
}

// ratios reads the ratio cells of a block's tables: benchmark (first
// cell) and column header -> value.
func ratios(block string) map[string]map[string]float64 {
	out := map[string]map[string]float64{}
	var header []string
	for _, line := range strings.Split(block, "\n") {
		line = strings.TrimSpace(line)
		if !strings.HasPrefix(line, "|") {
			header = nil
			continue
		}
		cells := strings.Split(strings.Trim(line, "|"), "|")
		for k := range cells {
			cells[k] = strings.TrimSpace(cells[k])
		}
		switch {
		case header == nil:
			header = cells
			continue
		case strings.HasPrefix(cells[0], "---"):
			continue
		}
		for k := 1; k < len(cells) && k < len(header); k++ {
			if !strings.Contains(strings.ToLower(header[k]), "ratio") {
				continue
			}
			v, err := strconv.ParseFloat(strings.TrimSuffix(strings.Trim(cells[k], "*"), "x"), 64)
			if err != nil || v <= 0 {
				continue
			}
			if out[cells[0]] == nil {
				out[cells[0]] = map[string]float64{}
			}
			out[cells[0]][header[k]] = v
		}
	}
	return out
}

// compare returns a "REGRESSION: ..." line for every ratio of cur more
// than threshold above the same one in prev, in a stable order.
func compare(prev, cur map[string]map[string]float64, threshold float64) []string {
	var regs []string
	for name, cols := range cur {
		for col, v := range cols {
			p, ok := prev[name][col]
			if ok && v > p*(1+threshold) {
				regs = append(regs, fmt.Sprintf("REGRESSION: %s: %s %.2fx, was %.2fx (+%.0f%%)", name, col, v, p, (v/p-1)*100))
			}
		}
	}
	sort.Strings(regs)
	return regs
}

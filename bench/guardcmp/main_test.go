package main

import (
	"strings"
	"testing"
)

const prevBlock = `2026-11-27, previous run.

| benchmark | ckpt s | peer s | wall ratio | ckpt CPU-s | peer CPU-s | CPU ratio |
|---|---|---|---|---|---|---|
| convert pth 1 GB, idle after sync | 0.60 | 0.50 | 1.20x | 0.40 | 0.30 | 1.33x |
| load s3:// 1 GB | 1.00 | 1.00 | **1.00x** | 1.00 | 1.00 | 1.00x |
| gone 1 GB | 1.00 | 1.00 | 1.00x | 1.00 | 1.00 | 1.00x |
`

// TestCompare: a ratio 20% above the previous one is a regression, 10%
// is not, whatever column it is in; a benchmark without a previous
// figure is not compared.
func TestCompare(t *testing.T) {
	cur := `2026-11-28, this run.

| benchmark | ckpt s | peer s | wall ratio | ckpt CPU-s | peer CPU-s | CPU ratio |
|---|---|---|---|---|---|---|
| convert pth 1 GB, idle after sync | 0.66 | 0.50 | 1.32x | 0.40 | 0.30 | 1.33x |
| load s3:// 1 GB | 1.00 | 1.00 | 1.10x | 1.20 | 1.00 | 1.20x |
| new 1 GB | 9.00 | 1.00 | 9.00x | 9.00 | 1.00 | 9.00x |
`
	regs := compare(ratios(prevBlock), ratios(cur), 0.15)
	want := []string{
		"REGRESSION: load s3:// 1 GB: CPU ratio 1.20x, was 1.00x (+20%)",
	}
	if strings.Join(regs, "\n") != strings.Join(want, "\n") {
		t.Errorf("got\n%s\nwant\n%s", strings.Join(regs, "\n"), strings.Join(want, "\n"))
	}
	// 1.20 -> 1.32 is exactly 10%: not flagged. 1.20 -> 1.44 (20%) is.
	cur = strings.Replace(cur, "1.32x", "1.44x", 1)
	regs = compare(ratios(prevBlock), ratios(cur), 0.15)
	if len(regs) != 2 || !strings.HasPrefix(regs[0], "REGRESSION: convert pth 1 GB, idle after sync: wall ratio 1.44x, was 1.20x (+20%)") {
		t.Errorf("a 20%% slower wall ratio not flagged: %q", regs)
	}
}

// TestUpdate: the new block replaces the previous one between the
// markers, the rest of the doc is kept, and the verdict is written.
func TestUpdate(t *testing.T) {
	doc := "# Benchmarks\n\n## Latest guard run\n\n" + beginMark + "\n" + prevBlock + "\n" + endMark + "\n\n## Current figures\nkept\n"
	slower := strings.Replace(prevBlock, "1.20x", "1.50x", 1)
	out, regs, err := update(doc, slower, 0.15)
	if err != nil {
		t.Fatal(err)
	}
	if len(regs) != 1 || !strings.Contains(out, regs[0]) {
		t.Errorf("regression %q not in the doc:\n%s", regs, out)
	}
	if strings.Count(out, beginMark) != 1 || strings.Contains(out, "| 0.50 | 1.20x |") || !strings.HasSuffix(out, endMark+"\n\n## Current figures\nkept\n") {
		t.Errorf("the section was not replaced cleanly:\n%s", out)
	}
	out2, regs, err := update(out, slower, 0.15)
	if err != nil || len(regs) != 0 || !strings.Contains(out2, "No ratio more than 15% above") {
		t.Errorf("same figures again: %q, %v\n%s", regs, err, out2)
	}
	first := "x\n" + beginMark + "\n(no run yet)\n" + endMark + "\n"
	if out, regs, err := update(first, slower, 0.15); err != nil || len(regs) != 0 || !strings.Contains(out, "No previous guard figures") {
		t.Errorf("first run: %q, %v\n%s", regs, err, out)
	}
	if _, _, err := update("# no section\n", prevBlock, 0.15); err != errNoMarkers {
		t.Errorf("doc without markers: %v", err)
	}
}

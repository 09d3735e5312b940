package main

import (
	"bytes"
	"context"
	"image/png"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// chromium returns Debian's chromium, skipping t without it unless
// CKPT_REQUIRE_CHROMIUM=1.
func chromium(t *testing.T) string {
	for _, name := range []string{"chromium", "chromium-browser"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	if os.Getenv("CKPT_REQUIRE_CHROMIUM") == "1" {
		t.Fatal("CKPT_REQUIRE_CHROMIUM=1 but no chromium on PATH")
	}
	t.Skip("no chromium (apt-get install chromium)")
	return ""
}

func headless(t *testing.T, bin string, args ...string) []byte {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, append([]string{"--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
		"--user-data-dir=" + t.TempDir(), "--window-size=1400,1100"}, args...)...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		t.Fatalf("chromium %v: %v\n%s", args, err, errb.String())
	}
	return out.Bytes()
}

// TestDiffHTMLChromium: the --html page, opened in headless Chromium
// with no network, draws a table row per tensor pair, a point per layer in
// both plots and a bar per histogram bin of --tensor's differences (the
// DOM after its script ran); the screenshot has the plots' colours in it.
func TestDiffHTMLChromium(t *testing.T) {
	bin := chromium(t)
	dir := t.TempDir()
	writeTinyHF(t, dir)
	q8 := filepath.Join(t.TempDir(), "q8.gguf")
	if code, out, errs := runCLI(t, "convert", dir, q8, "--gguf-type", "q8_0"); code != exitOK {
		t.Fatalf("convert: %d %s %s", code, out, errs)
	}
	page := filepath.Join(t.TempDir(), "r<&>.html")
	const sel = "model.layers.0.self_attn.k_proj.weight"
	code, rep := runDiffJSON(t, dir, q8, "--html", page, "--tensor", sel)
	if code != exitOK {
		t.Fatalf("diff --html: exit %d", code)
	}
	var hist int
	for _, td := range rep.Tensors {
		if td.Name == "blk.0.attn_k.weight" {
			for _, n := range append(td.Histogram.Neg, td.Histogram.Pos...) {
				if n > 0 {
					hist++
				}
			}
			if td.Histogram.Zero > 0 {
				hist++
			}
		}
	}
	html, err := os.ReadFile(page)
	if err != nil {
		t.Fatal(err)
	}
	if regexp.MustCompile(`(?i)(src|href)=["']?(https?:)?//`).Match(html) {
		t.Error("the page refers to the network")
	}
	dom := string(headless(t, bin, "--dump-dom", "file://"+page))
	count := func(re string) int { return len(regexp.MustCompile(re).FindAllString(dom, -1)) }
	if n := count(`<tr class="[^"]*" data-name=`); n != len(rep.Tensors) {
		t.Errorf("%d table rows, want %d", n, len(rep.Tensors))
	}
	if n := count(`<circle [^>]*class="pt-rel"`); n != 1 {
		t.Errorf("%d points in the relative error plot, want 1 (one layer)", n)
	}
	if n := count(`<circle [^>]*class="pt-cos"`); n != 1 {
		t.Errorf("%d points in the cosine plot, want 1", n)
	}
	if n := count(`<rect [^>]*class="bar-(neg|pos|zero)"`); n < hist || hist < 3 {
		t.Errorf("%d histogram bars, want %d non-empty bins of blk.0.attn_k.weight", n, hist)
	}
	if !strings.Contains(dom, "Differences A−B of blk.0.attn_k.weight") || !strings.Contains(dom, `class="sel " data-name="blk.0.attn_k.weight"`) {
		t.Error("--tensor's histogram not the one shown")
	}
	shot := filepath.Join(t.TempDir(), "shot.png")
	headless(t, bin, "--screenshot="+shot, "file://"+page)
	f, err := os.Open(shot)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	img, err := png.Decode(f)
	if err != nil {
		t.Fatal(err)
	}
	// The plots' fills: red points (#d62728), blue points (#1f77b4), and
	// the histogram's green (#2ca02c) or purple (#9467bd) bars.
	colours := map[string][3]uint32{"red": {0xd6, 0x27, 0x28}, "blue": {0x1f, 0x77, 0xb4}, "green": {0x2c, 0xa0, 0x2c}, "purple": {0x94, 0x67, 0xbd}}
	found := map[string]int{}
	bounds := img.Bounds()
	for y := bounds.Min.Y; y < bounds.Max.Y; y++ {
		for x := bounds.Min.X; x < bounds.Max.X; x++ {
			r, g, b, _ := img.At(x, y).RGBA()
			for name, c := range colours {
				if near(r>>8, c[0]) && near(g>>8, c[1]) && near(b>>8, c[2]) {
					found[name]++
				}
			}
		}
	}
	if found["red"] == 0 || found["blue"] == 0 || found["green"]+found["purple"] < 50 {
		t.Errorf("screenshot colours %v: plots not drawn", found)
	}
}

func near(a, b uint32) bool { return a+6 >= b && b+6 >= a }

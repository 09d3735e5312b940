package scan

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/ckpt-dev/ckpt/pickle"
)

// corpora holds the public scanner corpora rebuilt by
// scripts/gen_scan_corpora.py (picklescan, fickling, modelscan).
const corpora = "../testdata/scan-corpora"

type corpusEntry struct {
	File         string `json:"file"`
	Corpus       string `json:"corpus"`
	Upstream     string `json:"upstream"`
	Expected     string `json:"expected"` // malicious or benign
	Does         string `json:"does"`
	UpstreamSays string `json:"upstream_says"`
	SHA256       string `json:"sha256"`
}

// TestPublicCorpora scans every file of the public corpora nobody here
// wrote, and of ckpt's own corpus of the 2025-26 advisories: a malicious file must be unsafe; a benign one must not be, and
// when it is unknown the report must say why (an unknown finding with a
// reason, or a problem). Every misjudged file is listed in one error, with
// what scan reported, so that one run shows the whole gap.
func TestPublicCorpora(t *testing.T) {
	var m struct{ Files []corpusEntry }
	m.Files = readManifest[corpusEntry](t, filepath.Join(corpora, "manifest.json"))
	if len(m.Files) < 150 {
		t.Fatalf("manifest lists %d files, want the whole corpora (about 200)", len(m.Files))
	}
	// ckpt's own corpus (advisories_test.go proves each payload runs).
	n := len(m.Files)
	m.Files = append(m.Files, readManifest[corpusEntry](t, filepath.Join(advisories, "manifest.json"))...)
	type tally struct{ mal, malOK, ben, benOK int }
	per := map[string]*tally{}
	var failures []string
	for k, e := range m.Files {
		path := filepath.Join(corpora, filepath.FromSlash(e.File))
		if k >= n {
			path = filepath.Join(advisories, filepath.FromSlash(e.File))
		}
		data, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		if sum := sha256.Sum256(data); hex.EncodeToString(sum[:]) != e.SHA256 {
			t.Errorf("%s: content differs from manifest.json (rerun scripts/gen_scan_corpora.py)", e.File)
		}
		rep, err := Paths(context.Background(), []string{path})
		if err != nil {
			t.Fatalf("%s: %v", e.File, err)
		}
		tl := per[e.Corpus]
		if tl == nil {
			tl = &tally{}
			per[e.Corpus] = tl
		}
		w := rep.Worst()
		var why string
		switch e.Expected {
		case "malicious":
			tl.mal++
			if w != pickle.VerdictUnsafe {
				why = fmt.Sprintf("malicious, got %s", w)
			} else {
				tl.malOK++
			}
		case "benign":
			tl.ben++
			switch {
			case w == pickle.VerdictUnsafe:
				why = "benign, got unsafe"
			case w == pickle.VerdictUnknown && !explainsUnknown(rep):
				why = "benign, got unknown without a reason"
			default:
				tl.benOK++
			}
		default:
			t.Fatalf("%s: expected %q, want malicious or benign", e.File, e.Expected)
		}
		if why != "" {
			failures = append(failures, fmt.Sprintf("%s (%s; %s): %s\n    %s", e.File, e.Upstream, e.Does, why, summarize(rep)))
		}
	}
	var names []string
	for c := range per {
		names = append(names, c)
	}
	sort.Strings(names)
	for _, c := range names {
		tl := per[c]
		t.Logf("%-10s malicious caught %d/%d, benign passed %d/%d", c, tl.malOK, tl.mal, tl.benOK, tl.ben)
	}
	if len(failures) > 0 {
		t.Errorf("%d of %d corpus files misjudged:\n%s", len(failures), len(m.Files), strings.Join(failures, "\n"))
	}
}

// explainsUnknown reports whether an unknown verdict comes with a reason.
func explainsUnknown(rep *Report) bool {
	for _, p := range rep.Problems {
		if p.Error != "" {
			return true
		}
	}
	for _, f := range rep.Findings {
		if f.Verdict == pickle.VerdictUnknown && f.Reason != "" {
			return true
		}
	}
	return false
}

// summarize lists what a report says beyond allowed globals, on one line.
func summarize(rep *Report) string {
	var parts []string
	for _, f := range rep.Findings {
		if f.Verdict != pickle.VerdictAllowed {
			parts = append(parts, fmt.Sprintf("%s %s@%s:%d", f.Verdict, f.Global, f.Record, f.Offset))
		}
	}
	for _, p := range rep.Problems {
		parts = append(parts, fmt.Sprintf("problem %s: %s", p.Record, p.Error))
	}
	if len(parts) == 0 {
		return fmt.Sprintf("%d pickles, only allowed globals", rep.Pickles)
	}
	return fmt.Sprintf("%d pickles: %s", rep.Pickles, strings.Join(parts, "; "))
}

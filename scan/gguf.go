package scan

import (
	"io"
	"regexp"
	"strings"
	"sync"

	"github.com/ckpt-dev/ckpt/gguf"
	"github.com/ckpt-dev/ckpt/pickle"
)

// A GGUF file holds no pickle, but its chat templates are Jinja2 source
// that llama-cpp-python and other runtimes render with Python's jinja2
// (CVE-2024-34359: a template walking __class__, __globals__ or
// __subclasses__ reaches os.popen). ggufTemplates flags a template that
// names a dunder attribute or a Python module a template has no use for:
// none of the templates models ship does.

// ggufTemplate finds what a sandbox escape in a Jinja2 template needs
// (compiled on first use, not at start-up).
var ggufTemplate = sync.OnceValue(func() *regexp.Regexp {
	return regexp.MustCompile(`__[A-Za-z_]+__|\b(?:os|subprocess|sys|builtins|importlib)\s*\.|\bpopen\b|\beval\s*\(|\bexec\s*\(|\bimport_module\b`)
})

// ggufTemplates scans the chat templates of a GGUF file's metadata.
func (s *scanner) ggufTemplates(r io.ReaderAt, size int64, file, record string) error {
	f, err := gguf.Parse(r, size)
	if err != nil {
		return err
	}
	for _, kv := range f.KV {
		tmpl, ok := kv.String()
		if !ok || !strings.HasPrefix(kv.Key, "tokenizer.chat_template") {
			continue
		}
		rec := join(record, "metadata "+kv.Key)
		for _, loc := range ggufTemplate().FindAllStringIndex(tmpl, 16) {
			s.rep.Findings = append(s.rep.Findings, Finding{File: file, Record: rec, Offset: int64(loc[0]), Op: "JINJA",
				Global: tmpl[loc[0]:loc[1]], Verdict: pickle.VerdictUnsafe,
				Reason: "a chat template reaching Python internals (a Jinja2 sandbox escape, CVE-2024-34359); shipped templates never do"})
		}
	}
	return nil
}

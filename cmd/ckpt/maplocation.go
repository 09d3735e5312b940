package main

import (
	"errors"
	"fmt"
	"regexp"
	"strings"
	"sync"

	"github.com/ckpt-dev/ckpt"
)

// mapLocationError is the one-line usage error for a --map-location value
// that does not parse: what is wrong, a "did you mean" for near misses, and
// the subcommand's help.
func mapLocationError(command, value string, err error) error {
	reason := err.Error()
	var re *ckpt.RuleError
	if errors.As(err, &re) {
		reason = re.Reason
	}
	msg := fmt.Sprintf("--map-location %q: %s", value, reason)
	if s := suggestMapLocation(value); s != "" {
		msg += "; did you mean " + s + "?"
	} else {
		msg += "; want a device (cpu, cuda, cuda:1) or SRC=DST pairs (cuda:1=cuda:0)"
	}
	return usageError{err: errors.New(msg), help: "ckpt " + command}
}

// typeIndex is a device type run into its index: cuda1, gpu0 (compiled on
// first use, not at start-up).
var typeIndex = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^([a-z]+)([0-9]+)$`) })

// deviceAliases are names people type for torch's device types.
var deviceAliases = map[string]string{"gpu": "cuda", "nvidia": "cuda", "host": "cpu", "cuda_": "cuda"}

// suggestMapLocation returns a corrected form of rules that parses, for
// near misses (cuda1, gpu:0, CUDA:0, cuda:01, "cuda : 1"), or "".
func suggestMapLocation(rules string) string {
	var b strings.Builder
	start := 0
	for i := 0; i <= len(rules); i++ {
		if i == len(rules) || rules[i] == ',' || rules[i] == '=' {
			b.WriteString(fixDevice(rules[start:i]))
			if i < len(rules) {
				b.WriteByte(rules[i])
			}
			start = i + 1
		}
	}
	s := b.String()
	if s == rules {
		return ""
	}
	if _, err := ckpt.ParseMapLocation(s); err != nil {
		return ""
	}
	return s
}

// fixDevice corrects one device: case, spaces, aliases, a missing colon,
// leading zeros of the index.
func fixDevice(d string) string {
	d = strings.ToLower(strings.Join(strings.Fields(d), ""))
	typ, idx, hasIdx := strings.Cut(d, ":")
	if !hasIdx {
		if m := typeIndex().FindStringSubmatch(d); m != nil {
			typ, idx, hasIdx = m[1], m[2], true
		}
	}
	if a, ok := deviceAliases[typ]; ok {
		typ = a
	}
	if !hasIdx {
		return typ
	}
	if t := strings.TrimLeft(idx, "0"); t != idx {
		idx = t
		if idx == "" {
			idx = "0"
		}
	}
	return typ + ":" + idx
}

package remap

import (
	"math"
	"strings"

	"github.com/ckpt-dev/ckpt/statedict"
)

// Stray is a tensor saved on another device than the rest of its checkpoint.
type Stray struct {
	Name     string `json:"name"`     // the tensor's name
	Tag      string `json:"tag"`      // its location tag as saved
	Dominant string `json:"dominant"` // the tag the checkpoint is dominated by
	NBytes   int64  `json:"nbytes"`   // bytes of the tensor's own elements (-1 when they overflow)
}

// DetectStrays reports the tensors whose saved location tag differs from
// the checkpoint's dominant tag, in the order given.
//
// The dominant tag is the one holding more than half of the bytes (each
// distinct storage counted once); when no tensor has bytes, the one holding
// more than half of the tensors. A checkpoint with no such tag (evenly
// spread over several devices on purpose) has no strays, nor does one saved
// on a single device. The dominant tag may be "cpu": a cuda tensor in a
// CPU checkpoint is reported too, since it alone makes torch.load fail on a
// machine without a GPU.
//
// Optimizer step counters are expected on the CPU in a GPU checkpoint
// (torch keeps state[k]['step'] there unless capturable or fused) and are
// neither counted nor reported: CPU tensors of one element whose name ends
// in "state.<k>.step". Nil tensors are skipped.
func DetectStrays(tensors []*statedict.Tensor) []Stray {
	type census struct {
		bytes int64
		count int
	}
	byTag := map[string]*census{}
	seen := map[*statedict.Storage]bool{}
	var totalBytes int64
	var totalCount int
	for _, t := range tensors {
		if t == nil || isStepCounter(t) {
			continue
		}
		tag := sourceTag(t)
		c := byTag[tag]
		if c == nil {
			c = &census{}
			byTag[tag] = c
		}
		c.count++
		totalCount++
		if s := t.Storage; s != nil && !seen[s] && s.NBytes > 0 {
			seen[s] = true
			c.bytes = satAdd(c.bytes, s.NBytes)
			totalBytes = satAdd(totalBytes, s.NBytes)
		}
	}
	if len(byTag) < 2 {
		return nil
	}
	dominant := ""
	for tag, c := range byTag {
		if totalBytes > 0 && c.bytes > totalBytes-c.bytes ||
			totalBytes == 0 && c.count > totalCount-c.count {
			dominant = tag
		}
	}
	if dominant == "" {
		return nil
	}
	var strays []Stray
	for _, t := range tensors {
		if t == nil || isStepCounter(t) {
			continue
		}
		if tag := sourceTag(t); tag != dominant {
			strays = append(strays, Stray{Name: t.Name, Tag: tag, Dominant: dominant, NBytes: t.NBytes()})
		}
	}
	return strays
}

// isStepCounter reports whether t is an optimizer step counter kept on the
// CPU: one element, saved on "cpu", named "....state.<k>.step".
func isStepCounter(t *statedict.Tensor) bool {
	if sourceTag(t) != "cpu" || t.NumEl() != 1 {
		return false
	}
	parts := strings.Split(t.Name, ".")
	n := len(parts)
	return n >= 3 && parts[n-1] == "step" && parts[n-3] == "state" && parts[n-2] != ""
}

// satAdd adds non-negative a and b, stopping at math.MaxInt64.
func satAdd(a, b int64) int64 {
	if a > math.MaxInt64-b {
		return math.MaxInt64
	}
	return a + b
}

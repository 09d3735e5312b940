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
	Dominant string `json:"dominant"` // the checkpoint's home tag, holding the most bytes
	NBytes   int64  `json:"nbytes"`   // bytes of the tensor's own elements (-1 when they overflow)
}

// Thresholds of DetectStrays: a device tag other than the checkpoint's home
// is a stray when it holds less than minorShare of the bytes, or a single
// tensor while the home holds at least loneAmong.
const (
	minorShare = 0.10
	loneAmong  = 4
)

// DetectStrays reports the tensors saved on another device than the rest of
// their checkpoint, in the order given.
//
// The home tag is the one holding the most bytes (each distinct storage
// counted once; by tensor count when no tensor has bytes). Then:
//   - in a checkpoint at home on the CPU, every tensor saved elsewhere is a
//     stray: it alone makes torch.load fail on a machine without that device;
//   - in a checkpoint at home on an accelerator, every CPU tensor is a stray,
//     and so is every tensor of another accelerator tag that is a small
//     minority (under 10% of the bytes, or a lone tensor among many): a stray
//     cuda:1 tensor in a cuda:0 checkpoint. Substantial shares on several
//     devices (model-parallel checkpoints) are deliberate and not reported.
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
	weight := func(c *census) float64 {
		if totalBytes > 0 {
			return float64(c.bytes) / float64(totalBytes)
		}
		return float64(c.count) / float64(totalCount)
	}
	home := ""
	for tag, c := range byTag {
		if h := byTag[home]; h == nil || weight(c) > weight(h) || weight(c) == weight(h) && tag < home {
			home = tag
		}
	}
	stray := map[string]bool{}
	for tag, c := range byTag {
		switch {
		case tag == home:
		case home == "cpu" || tag == "cpu":
			stray[tag] = true
		default:
			stray[tag] = weight(c) < minorShare || c.count == 1 && byTag[home].count >= loneAmong
		}
	}
	var strays []Stray
	for _, t := range tensors {
		if t == nil || isStepCounter(t) {
			continue
		}
		if tag := sourceTag(t); stray[tag] {
			strays = append(strays, Stray{Name: t.Name, Tag: tag, Dominant: home, NBytes: t.NBytes()})
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

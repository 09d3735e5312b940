package main

import (
	"fmt"
	"sort"
	"strings"

	"github.com/ckpt-dev/ckpt/statedict"
)

// inspectChunk is one chunk of a DCP tensor in `inspect --json`.
type inspectChunk struct {
	Offsets []int64 `json:"offsets"`
	Sizes   []int64 `json:"sizes"`
	File    string  `json:"file"`
	Rank    int     `json:"rank"` // -1 when the file name does not say
	Offset  int64   `json:"byte_offset"`
	Length  int64   `json:"byte_length"`
}

// dcpInfo lists a DCP tensor's chunks and its problem ("" when readable).
func dcpInfo(t *statedict.Tensor) ([]inspectChunk, string) {
	var out []inspectChunk
	for _, c := range t.Chunks() {
		out = append(out, inspectChunk{Offsets: nonNil(c.Offsets), Sizes: nonNil(c.Sizes), File: c.File, Rank: c.Rank, Offset: c.Begin, Length: c.Length})
	}
	problem := ""
	if err := t.Problem(); err != nil {
		problem = strings.TrimPrefix(err.Error(), "statedict: ")
	}
	return out, problem
}

// chunkFlags is "N chunks", the ranks holding them, and BAD-CHUNKS.
func chunkFlags(t inspectTensor) []string {
	var f []string
	if len(t.Chunks) > 0 {
		ranks := map[int]bool{}
		for _, c := range t.Chunks {
			ranks[c.Rank] = true
		}
		var rs []int
		for r := range ranks {
			rs = append(rs, r)
		}
		sort.Ints(rs)
		noun := "chunks"
		if len(t.Chunks) == 1 {
			noun = "chunk"
		}
		who := "rank"
		if len(rs) > 1 {
			who = "ranks"
		}
		f = append(f, fmt.Sprintf("%d %s on %s %s", len(t.Chunks), noun, who, rankList(rs)))
	}
	if t.Problem != "" {
		f = append(f, "BAD-CHUNKS")
	}
	return f
}

// rankList writes 0,1,2,3 as 0-3 and unknown ranks (-1) as "?".
func rankList(rs []int) string {
	var parts []string
	for i := 0; i < len(rs); {
		j := i
		for j+1 < len(rs) && rs[j+1] == rs[j]+1 && rs[i] >= 0 {
			j++
		}
		switch {
		case rs[i] < 0:
			parts = append(parts, "?")
		case j > i+1:
			parts = append(parts, fmt.Sprintf("%d-%d", rs[i], rs[j]))
		case j == i+1:
			parts = append(parts, fmt.Sprintf("%d,%d", rs[i], rs[j]))
		default:
			parts = append(parts, fmt.Sprint(rs[i]))
		}
		i = j + 1
	}
	return strings.Join(parts, ",")
}

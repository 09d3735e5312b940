package main

import (
	"fmt"
	"sort"
	"strings"
)

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

package main

import (
	"fmt"
	"strconv"
	"strings"
)

// humanBytes renders a byte count in IEC units: 512 B, 1.5 KiB, 3.2 GiB.
func humanBytes(n int64) string {
	if n < 0 {
		return "?"
	}
	if n < 1024 {
		return strconv.FormatInt(n, 10) + " B"
	}
	f := float64(n)
	for _, u := range []string{"KiB", "MiB", "GiB", "TiB", "PiB"} {
		f /= 1024
		if f < 1024 || u == "PiB" {
			if f < 10 {
				return fmt.Sprintf("%.2f %s", f, u)
			}
			return fmt.Sprintf("%.1f %s", f, u)
		}
	}
	return ""
}

// humanCount renders an integer with thousands separators: 1,234,567.
func humanCount(n int64) string {
	s := strconv.FormatInt(n, 10)
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	var b strings.Builder
	for i, c := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	if neg {
		return "-" + b.String()
	}
	return b.String()
}

// shapeString renders a shape the way torch prints torch.Size: [2, 3].
func shapeString(shape []int64) string {
	parts := make([]string, len(shape))
	for i, s := range shape {
		parts[i] = strconv.FormatInt(s, 10)
	}
	return "[" + strings.Join(parts, ", ") + "]"
}

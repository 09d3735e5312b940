package main

import (
	"fmt"
	"io"
	"strings"
	"sync"
	"time"
)

// progress draws a one-line progress bar on a terminal; on anything else
// (a pipe, a file) it draws nothing.
type progress struct {
	mu     sync.Mutex
	w      io.Writer
	on     bool
	label  string
	total  int64
	done   int64
	start  time.Time
	last   time.Time
	drawn  bool
	minGap time.Duration
}

func newProgress(s *streams, label string, total int64) *progress {
	return &progress{w: s.Err, on: s.ErrIsTTY, label: label, total: total, start: time.Now(), minGap: 100 * time.Millisecond}
}

// Add records n more bytes done and redraws at most ten times a second.
func (p *progress) Add(n int64) {
	if p == nil || !p.on {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.done += n
	now := time.Now()
	// Draw only for work that lasts: nothing in the first half second.
	if now.Sub(p.start) < 500*time.Millisecond || now.Sub(p.last) < p.minGap {
		return
	}
	p.last = now
	p.draw(now)
}

func (p *progress) draw(now time.Time) {
	frac := 0.0
	if p.total > 0 {
		frac = min(float64(p.done)/float64(p.total), 1)
	}
	const width = 30
	fill := int(frac * width)
	rate := float64(p.done) / max(now.Sub(p.start).Seconds(), 1e-9)
	fmt.Fprintf(p.w, "\r%s [%s%s] %3.0f%% %s/%s %s/s ", p.label, strings.Repeat("=", fill), strings.Repeat(" ", width-fill),
		frac*100, humanBytes(p.done), humanBytes(p.total), humanBytes(int64(rate)))
	p.drawn = true
}

// Done clears the bar.
func (p *progress) Done() {
	if p == nil || !p.on {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.drawn {
		fmt.Fprint(p.w, "\r\033[K")
	}
}

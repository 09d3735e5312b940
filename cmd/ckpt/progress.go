package main

import (
	"fmt"
	"github.com/ckpt-dev/ckpt/internal/human"
	"io"
	"strings"
	"sync"
	"time"

	"github.com/ckpt-dev/ckpt"
)

// Progress bars follow these conventions (see wantBar): a bar is drawn only
// on a terminal (stderr is a character device), never with --json or
// --quiet, never when TERM is "dumb" or unset, and never when CKPT_NO_PROGRESS
// is set to anything. NO_COLOR does not hide the bar: the bar has no
// colours (no-color.org asks only that colour be left out).

// barDelay is how long work runs before its bar appears.
var barDelay = 500 * time.Millisecond

// barEnv is what decides whether a bar is drawn.
type barEnv struct {
	TTY        bool   // stderr is a terminal
	Term       string // $TERM
	NoProgress bool   // $CKPT_NO_PROGRESS is set
	JSON       bool   // --json
	Quiet      bool   // --quiet
}

// wantBar is the one decision whether progress is drawn.
func wantBar(e barEnv) bool {
	switch {
	case !e.TTY, e.JSON, e.Quiet, e.NoProgress:
		return false
	case e.Term == "" || e.Term == "dumb":
		return false
	}
	return true
}

// progress draws a one-line progress bar on a terminal; otherwise it draws
// nothing.
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

// newProgress returns a bar for label; quiet is --json or --quiet.
func newProgress(s *streams, label string, total int64, quiet bool) *progress {
	on := wantBar(barEnv{TTY: s.ErrIsTTY, Term: s.Term, NoProgress: s.NoProgress, JSON: quiet, Quiet: s.Quiet})
	return &progress{w: s.Err, on: on, label: label, total: total, start: time.Now(), minGap: 100 * time.Millisecond}
}

// Add records n more bytes done and redraws at most ten times a second.
func (p *progress) Add(n int64) {
	if p == nil || !p.on {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.done += n
	p.maybeDraw()
}

// Set records that done bytes are done in all.
func (p *progress) Set(done int64) {
	if p == nil || !p.on {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.done = done
	p.maybeDraw()
}

// maybeDraw draws when the work has lasted and the last draw is old enough.
// p.mu is held.
func (p *progress) maybeDraw() {
	now := time.Now()
	// Draw only for work that lasts: nothing in the first half second.
	if now.Sub(p.start) < barDelay || now.Sub(p.last) < p.minGap {
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
	fmt.Fprintf(p.w, "\r%s [%s%s] %3.0f%% %s/%s %s ", p.label, strings.Repeat("=", fill), strings.Repeat(" ", width-fill),
		frac*100, human.Bytes(p.done), human.Bytes(p.total), humanRate(p.done, now.Sub(p.start)))
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

// stageBars draws one bar per stage of ckpt.Load, from its progress
// callback.
type stageBars struct {
	s     *streams
	quiet bool
	mu    sync.Mutex
	cur   ckpt.Stage
	bar   *progress
}

func newStageBars(s *streams, quiet bool) *stageBars { return &stageBars{s: s, quiet: quiet} }

var stageLabels = map[ckpt.Stage]string{ckpt.StageHost: "loading", ckpt.StageUpload: "uploading", "verify": "verifying", ckpt.StageDiff: "comparing"}

func (b *stageBars) update(p ckpt.Progress) {
	b.mu.Lock()
	if b.bar == nil || b.cur != p.Stage {
		b.bar.Done()
		b.cur, b.bar = p.Stage, newProgress(b.s, stageLabels[p.Stage], p.Total, b.quiet)
	}
	bar := b.bar
	b.mu.Unlock()
	bar.Set(p.Done)
}

func (b *stageBars) done() {
	if b == nil {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.bar.Done()
}

// minRateBytes and minRateTime: below either, a rate is noise (a few KiB
// in microseconds) and is not printed.
const (
	minRateBytes = 1 << 20
	minRateTime  = 10 * time.Millisecond
)

// humanRate is n bytes per d in the units of human.Bytes ("1.52 GiB/s"), or
// "" when the amount or the time is too small to mean anything.
func humanRate(n int64, d time.Duration) string {
	if n < minRateBytes || d < minRateTime {
		return ""
	}
	return human.Bytes(int64(float64(n)/d.Seconds())) + "/s"
}

// humanDuration prints every duration one way: "850 ms" below a second,
// "12.3 s" below a minute, "4m05s" above.
func humanDuration(d time.Duration) string {
	switch {
	case d < time.Millisecond:
		return fmt.Sprintf("%.2f ms", float64(d)/float64(time.Millisecond))
	case d < time.Second:
		return fmt.Sprintf("%d ms", d.Milliseconds())
	case d < time.Minute:
		return fmt.Sprintf("%.1f s", d.Seconds())
	}
	d = d.Round(time.Second)
	return fmt.Sprintf("%dm%02ds", int(d.Minutes()), int(d.Seconds())%60)
}

// timeAndRate prints "in 1.2 s (850 MiB/s)", the rate left out when it
// would be noise.
func timeAndRate(n int64, d time.Duration) string { return "in " + durationAndRate(n, d) }

// durationAndRate prints "1.2 s (850 MiB/s)", the rate left out when it
// would be noise.
func durationAndRate(n int64, d time.Duration) string {
	s := humanDuration(d)
	if r := humanRate(n, d); r != "" {
		s += " (" + r + ")"
	}
	return s
}

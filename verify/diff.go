package verify

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"

	"github.com/ckpt-dev/ckpt/statedict"
)

// TensorDiff is what Diff measured of one tensor present on both sides.
// Values are compared as float64; the statistics (max errors, RMSE,
// cosine similarity, relative Frobenius norm) are over the elements
// finite on both sides, relative ones to B as in torch.allclose(A, B):
// MaxRel is max |A-B|/|B| (+Inf where B is 0 and A is not), RelFrobenius
// ||A-B||/||B||. Counts, maxima and the histogram are exact; the sums
// behind RMSE, cosine and RelFrobenius are float64 sums of exact
// products (for float32-valued dtypes) in a few partial sums, each within
// k*2^-53 of the sum of its k terms' magnitudes.
type TensorDiff struct {
	Name   string  `json:"name"`             // the matched name (A's after its rules)
	NameA  string  `json:"name_a,omitempty"` // A's own name, when not Name
	NameB  string  `json:"name_b,omitempty"` // B's own name, when not Name
	Via    string  `json:"via,omitempty"`    // how a side was read to pair with a GGUF file's tensor (Matching)
	Layer  int     `json:"layer"`            // the layers.N / h.N / blocks.N / blk.N index, -1 for none
	DTypeA string  `json:"dtype_a"`
	DTypeB string  `json:"dtype_b"`
	ShapeA []int64 `json:"shape_a"`
	ShapeB []int64 `json:"shape_b"`
	// Problem says why values were not compared: shapes differ, a dtype
	// without numeric values that differ in bits, a permutation that does
	// not apply. Empty when they were.
	Problem  string `json:"problem,omitempty"`
	Elements int64  `json:"elements"`
	Bytes    int64  `json:"bytes"` // A's tensor data
	// BitwiseEqual: same dtype and the same bytes.
	BitwiseEqual bool `json:"bitwise_equal"`
	// Differing counts the elements whose values differ (NaN equal to NaN).
	Differing    int64 `json:"differing"`
	MaxAbs       Stat  `json:"max_abs"`
	MaxRel       Stat  `json:"max_rel"`
	RMSE         Stat  `json:"rmse"`
	Cosine       Stat  `json:"cosine"`
	RelFrobenius Stat  `json:"rel_frobenius"`
	// NaNMismatch counts the elements NaN on one side only, InfMismatch
	// those infinite on a side and not equal.
	NaNMismatch int64 `json:"nan_mismatch"`
	InfMismatch int64 `json:"inf_mismatch"`
	// OverTolerance counts the elements past the check's atol/rtol.
	OverTolerance int64 `json:"over_tolerance"`
	// Failed lists the limits this tensor broke ("atol/rtol",
	// "min_cosine", "problem" for a Problem): only with limits set.
	Failed []string `json:"failed,omitempty"`
	// Histogram bins the differences A-B (nil without a value compared).
	Histogram *Histogram `json:"histogram,omitempty"`

	acc acc
}

// LayerDiff aggregates the tensors of one layer: MaxRel and MinCosine are
// the worst of its tensors, RelFrobenius and Cosine those of all its
// compared values taken as one vector.
type LayerDiff struct {
	Layer        int  `json:"layer"`
	Tensors      int  `json:"tensors"`
	Differing    int  `json:"differing"` // tensors not bitwise equal
	MaxRel       Stat `json:"max_rel"`
	RelFrobenius Stat `json:"rel_frobenius"`
	Cosine       Stat `json:"cosine"`
	MinCosine    Stat `json:"min_cosine"`
}

// Limits make Diff a check: a tensor fails when an element is past
// |A-B| <= Atol + Rtol*|B| (Tolerance set; NaN against a number and
// unequal infinities always are), when its cosine similarity is below
// MinCosine (MinCosineSet), or when its shape, or its bits in a dtype
// without numeric values, differ; a tensor on one side only fails too.
type Limits struct {
	Tolerance    bool    `json:"-"`
	Atol         float64 `json:"atol"`
	Rtol         float64 `json:"rtol"`
	MinCosineSet bool    `json:"-"`
	MinCosine    float64 `json:"min_cosine"`
}

func (l *Limits) any() bool { return l != nil && (l.Tolerance || l.MinCosineSet) }

// DiffReport is the result of Diff.
type DiffReport struct {
	Compared     int      `json:"compared"`      // tensors present on both sides
	BitwiseEqual int      `json:"bitwise_equal"` // of those, equal in dtype and bytes
	Differing    int      `json:"differing"`     // with a value, shape or dtype difference
	OnlyInA      []string `json:"only_in_a"`
	OnlyInB      []string `json:"only_in_b"`
	// Notes say how names were matched when not as they are.
	Notes   []string      `json:"notes"`
	Tensors []*TensorDiff `json:"tensors"` // in A's order
	// Worst names the tensors with the largest relative Frobenius error
	// (NaN/Inf mismatches and problems first), worst first.
	Worst  []string    `json:"worst"`
	Layers []LayerDiff `json:"layers"`
	// Limits are the check's limits (nil without); Failed counts the
	// tensors that broke them, only-in-A/B ones included.
	Limits *Limits `json:"limits,omitempty"`
	Failed int     `json:"failed"`
}

// OK reports whether no tensor broke the limits (always, without limits).
func (r *DiffReport) OK() bool { return r.Failed == 0 }

// DiffOption configures Diff.
type DiffOption func(*diffConfig)

type diffConfig struct {
	match    Matching
	limits   Limits
	worst    int
	chunk    int64
	split    int64 // splitBytes
	progress func(done, total int64)
}

// WithStripPrefix strips prefix p from the names of side (SideA, SideB
// or Both) before matching; rules apply in the order given.
func WithStripPrefix(side Side, p string) DiffOption {
	return func(c *diffConfig) { c.match.add(side, p, nil) }
}

// WithRename replaces every match of re in the names of side by repl
// (regexp.ReplaceAllString syntax) before matching, after the prefixes
// are stripped.
func WithRename(side Side, re *regexp.Regexp, repl string) DiffOption {
	return func(c *diffConfig) { c.match.add(side, "", &Rename{Pattern: re, Replacement: repl}) }
}

// WithoutGGUFNames compares a GGUF file by its own names, without
// llama.cpp's map (names, splits, expert layout, q/k permutation).
func WithoutGGUFNames() DiffOption { return func(c *diffConfig) { c.match.NoGGUFNames = true } }

// WithLimits makes Diff a check (see Limits).
func WithLimits(l Limits) DiffOption { return func(c *diffConfig) { c.limits = l } }

// WithWorst sets how many tensors DiffReport.Worst names (10 by default).
func WithWorst(n int) DiffOption { return func(c *diffConfig) { c.worst = max(n, 0) } }

// WithChunkElements sets how many elements of a pair are decoded at a time
// (65536 by default; at least 1 MiB of a dequantized side, which its
// reader then decodes straight into the buffer): each comparing goroutine
// holds this many elements of both sides, raw, and as float32 or float64
// where a dtype needs decoding first.
func WithChunkElements(n int64) DiffOption { return func(c *diffConfig) { c.chunk = max(n, 1) } }

// WithDiffProgress has fn called with the bytes of A compared so far and
// the total, from the comparing goroutines one call at a time.
func WithDiffProgress(fn func(done, total int64)) DiffOption {
	return func(c *diffConfig) { c.progress = fn }
}

// Diff compares every tensor of a and b and measures how their values
// differ (TensorDiff), with a summary: the worst tensors and per-layer
// aggregates. Tensors are paired as Matching says (WithStripPrefix,
// WithRename; a Llama-family GGUF file as ckpt convert wrote it). Pairs
// are read one at a time per CPU, in chunks (WithChunkElements), a pair
// of more than 64 MiB read in place split into pieces for all CPUs:
// memory is bounded by those buffers, not by the tensors' sizes. The error is for
// failures to read, not for differences; with WithLimits the report says
// which tensors broke them.
func Diff(ctx context.Context, a, b *statedict.Checkpoint, opts ...DiffOption) (*DiffReport, error) {
	cfg := diffConfig{worst: 10, chunk: 1 << 16, split: splitBytes}
	for _, o := range opts {
		o(&cfg)
	}
	m := match(a, b, cfg.match)
	rep := &DiffReport{OnlyInA: []string{}, OnlyInB: []string{}, Notes: m.notes, Tensors: []*TensorDiff{}, Worst: []string{}, Layers: []LayerDiff{}}
	if rep.Notes == nil {
		rep.Notes = []string{}
	}
	if cfg.limits.any() {
		l := cfg.limits
		rep.Limits = &l
	}
	var todo []*TensorDiff
	pairs := map[*TensorDiff]*pair{}
	var total int64
	for _, r := range m.rows {
		ta, p := r.a, r.p
		if p == nil {
			rep.OnlyInA = append(rep.OnlyInA, r.name())
			continue
		}
		td := newTensorDiff(p, ta)
		rep.Tensors = append(rep.Tensors, td)
		if td.Problem == "" {
			todo = append(todo, td)
			pairs[td] = p
			total += max(p.a.NBytes(), 0)
		}
	}
	for _, tb := range m.onlyB {
		rep.OnlyInB = append(rep.OnlyInB, tb.Name)
	}
	report := func(int64) {}
	if fn := cfg.progress; fn != nil {
		var mu sync.Mutex
		var done int64
		report = func(n int64) {
			mu.Lock()
			defer mu.Unlock()
			done += n
			fn(done, total)
		}
	}
	jobs, byPair := splitJobs(todo, pairs, cfg.chunk, cfg.split)
	work, cancel := context.WithCancel(ctx)
	defer cancel()
	errs := make([]error, len(jobs))
	var next atomic.Int64
	var wg sync.WaitGroup
	for range min(runtime.GOMAXPROCS(0), len(jobs)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			buf := newDiffBuffers(cfg.chunk)
			for k := next.Add(1) - 1; k < int64(len(jobs)); k = next.Add(1) - 1 {
				if err := diffRange(work, jobs[k], buf, cfg.limits, report); err != nil {
					errs[k] = err
					cancel() // the others stop; the first real error is returned
				}
			}
		}()
	}
	wg.Wait()
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	for _, err := range errs {
		if err != nil && !errors.Is(err, context.Canceled) {
			return nil, err
		}
	}
	for _, td := range todo {
		finishPair(td, pairs[td], byPair[td])
	}
	summarize(rep, cfg)
	return rep, nil
}

// layerName finds the block index in a tensor name.
var layerName = regexp.MustCompile(`(?:^|\.)(?:layers|h|blocks|blk|layer)\.(\d+)\.`)

func layerOf(name string) int {
	m := layerName.FindStringSubmatch(name)
	if m == nil {
		return -1
	}
	n, err := strconv.Atoi(m[1])
	if err != nil {
		return -1
	}
	return n
}

func newTensorDiff(p *pair, ta *statedict.Tensor) *TensorDiff {
	a, tb := p.a, p.b
	td := &TensorDiff{Name: p.key, Layer: layerOf(p.key), DTypeA: a.DType.String(), DTypeB: tb.DType.String(),
		ShapeA: p.shapeA, ShapeB: p.shapeB, Elements: a.NumEl(), Bytes: a.NBytes(), Via: p.via}
	if ta.Name != p.key {
		td.NameA = ta.Name
	}
	if tb.Name != p.key {
		td.NameB = tb.Name
	}
	_, okA := decoder(a.DType)
	_, okB := decoder(tb.DType)
	switch {
	case !sameShape(p.shapeA, p.shapeB):
		td.Problem = fmt.Sprintf("shape: A %v, B %v", p.shapeA, p.shapeB)
	case p.problem != "":
		td.Problem = p.problem
	case (!okA || !okB) && a.DType != tb.DType:
		td.Problem = fmt.Sprintf("dtype: A %s, B %s: no numeric comparison between them", a.DType, tb.DType)
	}
	return td
}

// diffBuffers are one comparing goroutine's chunk buffers, each grown
// when a pair first needs it and reused for the next pairs.
type diffBuffers struct {
	chunk      int64
	rawA, rawB []byte
	valA, valB []float64
	mid        []float32
	midB       []float32 // B's float32 values (addF32)
	kern       f32Kernel
}

func newDiffBuffers(chunk int64) *diffBuffers { return &diffBuffers{chunk: chunk} }

func grow[E any](b []E, n int64) []E {
	if int64(cap(b)) < n {
		return make([]E, n)
	}
	return b[:n]
}

// quantRead is the least read of a quantized weight's values that its
// reader decodes straight into the caller's buffer (statedict's
// quantDirect) rather than through a window of its own.
const quantRead = 1 << 20

// pairChunk is how many elements of the pair diffPair reads at a time:
// the configured chunk, or enough for quantRead bytes of a quantized side
// read as a stream (one read at any offset, quantRaw, decodes straight
// into the buffer whatever its size: the chunk stays cache-sized).
func pairChunk(chunk int64, a, b *statedict.Tensor) int64 {
	for _, t := range []*statedict.Tensor{a, b} {
		if t.QuantStored != nil && !quantRaw(t) && t.DType.Size() > 0 {
			chunk = max(chunk, quantRead/int64(t.DType.Size()))
		}
	}
	return chunk
}

// diffRange reads elements [j.lo, j.hi) of a pair chunk by chunk into
// j's statistics.
func diffRange(ctx context.Context, j *diffJob, buf *diffBuffers, lim Limits, report func(int64)) error {
	a, b, _ := dropCommonBroadcast(j.p.a, j.p.b)
	ra, err := openSide(a, j.lo, j.hi)
	if err != nil {
		return err
	}
	defer ra.Close()
	rb, err := openSide(b, j.lo, j.hi)
	if err != nil {
		return err
	}
	defer rb.Close()
	decA, okA := decoder(a.DType)
	decB, okB := decoder(b.DType)
	numeric := okA && okB
	f32 := exactF32(a.DType) && exactF32(b.DType)
	sa, sb := int64(a.DType.Size()), int64(b.DType.Size())
	chunk := pairChunk(buf.chunk, a, b)
	buf.rawA, buf.rawB = grow(buf.rawA, chunk*sa), grow(buf.rawB, chunk*sb)
	buf.mid, buf.midB = grow(buf.mid, chunk), grow(buf.midB, chunk)
	if !f32 && numeric {
		buf.valA, buf.valB = grow(buf.valA, chunk), grow(buf.valB, chunk)
	}
	tol := tolerance{on: lim.Tolerance, atol: lim.Atol, rtol: lim.Rtol}
	s := &j.part
	bitwise := a.DType == b.DType
	n := j.hi - j.lo
	for done := int64(0); done < n; {
		if err := ctx.Err(); err != nil {
			return err
		}
		k := min(n-done, chunk)
		ca, cb := buf.rawA[:k*sa], buf.rawB[:k*sb]
		if err := ra.next(ca); err != nil {
			return err
		}
		if err := rb.next(cb); err != nil {
			return err
		}
		report(k * sa)
		same := a.DType == b.DType && bytes.Equal(ca, cb)
		bitwise = bitwise && same
		switch {
		case !numeric: // one dtype without numeric values: bits only
			s.n += k
			if !same {
				for i := range k {
					if !bytes.Equal(ca[i*sa:(i+1)*sa], cb[i*sb:(i+1)*sb]) {
						s.differing++
					}
				}
				if tol.on {
					s.over = s.differing
				}
			}
		case f32 && same:
			s.addEqualRaw(a.DType, ca, buf.mid)
		case f32:
			s.addRaw(a.DType, b.DType, ca, cb, int(k), tol, &buf.kern, buf.mid, buf.midB)
		case same:
			decodeChunk(a.DType, decA, buf.valA[:k], buf.mid, ca)
			s.addEqual(buf.valA[:k])
		default:
			decodeChunk(a.DType, decA, buf.valA[:k], buf.mid, ca)
			decodeChunk(b.DType, decB, buf.valB[:k], buf.mid, cb)
			s.add(buf.valA[:k], buf.valB[:k], tol)
		}
		done += k
	}
	s.flush(&buf.kern)
	j.bitwise = bitwise
	return nil
}

// finishPair merges the statistics of a pair's jobs, in element order,
// and fills td's.
func finishPair(td *TensorDiff, p *pair, jobs []*diffJob) {
	a, b, repeat := dropCommonBroadcast(p.a, p.b)
	_, okA := decoder(a.DType)
	_, okB := decoder(b.DType)
	numeric := okA && okB
	s := &td.acc
	bitwise := true
	for _, j := range jobs {
		s.merge(&j.part)
		bitwise = bitwise && j.bitwise
	}
	s.scale(repeat)
	td.BitwiseEqual = bitwise
	td.Differing = s.differing
	td.NaNMismatch, td.InfMismatch, td.OverTolerance = s.nanMis, s.infMis, s.over
	if !numeric {
		if s.differing > 0 {
			td.Problem = fmt.Sprintf("dtype %s has no numeric values: %d of %d elements differ in bits", a.DType, s.differing, s.n)
		}
		return
	}
	td.MaxAbs, td.MaxRel, td.RMSE = Stat(s.maxAbs), Stat(s.maxRel), Stat(s.rmse())
	td.Cosine = Stat(cosine(s.sumD2, s.sumA2, s.sumB2, s.sumDS))
	td.RelFrobenius = Stat(relFrobenius(s.sumD2, s.sumB2))
	td.Histogram = s.histogram()
}

// summarize fills the report's counts, failures, worst tensors and layers.
func summarize(rep *DiffReport, cfg diffConfig) {
	lim := rep.Limits
	for _, td := range rep.Tensors {
		rep.Compared++
		if td.BitwiseEqual {
			rep.BitwiseEqual++
		}
		if td.Problem != "" || td.Differing > 0 || td.DTypeA != td.DTypeB {
			rep.Differing++
		}
		if lim == nil {
			continue
		}
		if td.Problem != "" {
			td.Failed = append(td.Failed, "problem")
		}
		if lim.Tolerance && td.OverTolerance > 0 {
			td.Failed = append(td.Failed, "atol/rtol")
		}
		if lim.MinCosineSet && td.Problem == "" && float64(td.Cosine) < lim.MinCosine {
			td.Failed = append(td.Failed, "min_cosine")
		}
		if len(td.Failed) > 0 {
			rep.Failed++
		}
	}
	if lim != nil {
		rep.Failed += len(rep.OnlyInA) + len(rep.OnlyInB)
	}
	worst := slices.Clone(rep.Tensors)
	rank := func(t *TensorDiff) (int, float64) {
		bad := 0
		if t.Problem != "" || t.NaNMismatch+t.InfMismatch > 0 {
			bad = 1
		}
		return bad, float64(t.RelFrobenius)
	}
	slices.SortStableFunc(worst, func(x, y *TensorDiff) int {
		bx, fx := rank(x)
		by, fy := rank(y)
		if c := cmp.Compare(by, bx); c != 0 {
			return c
		}
		return cmp.Compare(fy, fx)
	})
	for _, t := range worst[:min(cfg.worst, len(worst))] {
		if t.Problem == "" && t.Differing == 0 {
			break
		}
		rep.Worst = append(rep.Worst, t.Name)
	}
	rep.Layers = layers(rep.Tensors)
}

// layers aggregates the tensors of each layer index, in index order.
func layers(ts []*TensorDiff) []LayerDiff {
	type agg struct {
		LayerDiff
		sum acc
	}
	by := map[int]*agg{}
	for _, t := range ts {
		if t.Layer < 0 {
			continue
		}
		g := by[t.Layer]
		if g == nil {
			g = &agg{LayerDiff: LayerDiff{Layer: t.Layer, MinCosine: 1}}
			by[t.Layer] = g
		}
		g.Tensors++
		if !t.BitwiseEqual {
			g.Differing++
		}
		if t.Problem != "" {
			continue
		}
		g.MaxRel = max(g.MaxRel, t.MaxRel)
		g.MinCosine = min(g.MinCosine, t.Cosine)
		g.sum.sumD2 += t.acc.sumD2
		g.sum.sumA2 += t.acc.sumA2
		g.sum.sumB2 += t.acc.sumB2
		g.sum.sumDS += t.acc.sumDS
	}
	out := make([]LayerDiff, 0, len(by))
	for _, g := range by {
		g.Cosine = Stat(cosine(g.sum.sumD2, g.sum.sumA2, g.sum.sumB2, g.sum.sumDS))
		g.RelFrobenius = Stat(relFrobenius(g.sum.sumD2, g.sum.sumB2))
		out = append(out, g.LayerDiff)
	}
	slices.SortFunc(out, func(x, y LayerDiff) int { return cmp.Compare(x.Layer, y.Layer) })
	return out
}

package verify

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"runtime"
	"sync"
	"sync/atomic"

	"fmt"
	"io"
	"math"

	"github.com/ckpt-dev/ckpt/digest"
	"github.com/ckpt-dev/ckpt/dtype"
	"github.com/ckpt-dev/ckpt/internal/ieeecrc"
	"github.com/ckpt-dev/ckpt/statedict"
)

// Mismatch is one failed check or one difference, about Name.
type Mismatch struct {
	Name   string `json:"name"`
	Kind   string `json:"kind"` // crc32, digest, missing_in_a, missing_in_b, dtype, shape, value
	Detail string `json:"detail"`
}

// CheckReport is the result of Check.
type CheckReport struct {
	CRC32s     int        `json:"crc32s"`     // records whose CRC32 was recomputed
	Digests    int        `json:"digests"`    // tensors whose recorded digest was recomputed
	Unverified []string   `json:"unverified"` // tensors no checksum covers
	Mismatches []Mismatch `json:"mismatches"`
}

// FileDigests returns the digests recorded (digest.MetadataKey) in the
// safetensors file that holds s, by tensor name: nil for a storage of
// another format, or of a file that records none. cache holds each
// file's digests once parsed; pass the same map for the storages of one
// checkpoint.
func FileDigests(ck *statedict.Checkpoint, s *statedict.Storage, cache map[string]map[string]digest.Value) (map[string]digest.Value, error) {
	if ck.Format == statedict.FormatSafetensors && ck.Metadata != nil {
		if d, ok := cache[""]; ok {
			return d, nil
		}
		d, err := digest.ParseMetadata(ck.Metadata)
		cache[""] = d
		return d, err
	}
	if s.File == "" || ck.Format != statedict.FormatSharded || ck.ShardFormat != statedict.FormatSafetensors {
		return nil, nil
	}
	if d, ok := cache[s.File]; ok {
		return d, nil
	}
	md, ok := ck.ShardMetadata[s.File]
	if !ok {
		return nil, nil
	}
	d, err := digest.ParseMetadata(md)
	cache[s.File] = d
	return d, err
}

// Check recomputes every checksum the checkpoint carries: the CRC32 of
// each zip record holding a storage (when the zip recorded one; for a DCP
// directory, the record of each chunk), and the
// xxh64c digest ckpt records for each tensor of a safetensors file. A
// mismatch is reported by tensor name; tensors no checksum covers are
// listed as unverified. A weight of a quantized release, read as its
// dequantized values, is checked by the tensors it is stored as
// (statedict.QuantStored.StoredTensors: codes, scales), whose bytes the
// checksums are of, and reported under their stored names. The error is
// for failures to read, not for mismatches.
func Check(ctx context.Context, ck *statedict.Checkpoint, opts ...CheckOption) (*CheckReport, error) {
	var cfg checkConfig
	for _, o := range opts {
		o(&cfg)
	}
	rep := &CheckReport{Unverified: []string{}, Mismatches: []Mismatch{}}
	tensors, storages := storedUnits(ck)
	report, err := checkProgress(ck, tensors, storages, cfg.progress)
	if err != nil {
		return nil, err
	}
	users := map[*statedict.Storage][]string{}
	for _, t := range tensors {
		if t.Storage != nil {
			users[t.Storage] = append(users[t.Storage], t.Name)
		}
	}
	covered := map[string]bool{}
	cache := map[string]map[string]digest.Value{}
	for _, s := range storages {
		if !s.HasCRC {
			continue
		}
		got, err := StorageCRC(ctx, s, report)
		if err != nil {
			return nil, err
		}
		rep.CRC32s++
		for _, n := range users[s] {
			covered[n] = true
		}
		if got != s.CRC32 {
			for _, n := range users[s] {
				rep.Mismatches = append(rep.Mismatches, Mismatch{Name: n, Kind: "crc32",
					Detail: fmt.Sprintf("record %s: stored %08x, computed %08x", s.Record, s.CRC32, got)})
			}
		}
	}
	for _, t := range tensors {
		if t.Storage == nil {
			continue
		}
		ds, err := FileDigests(ck, t.Storage, cache)
		if err != nil {
			return nil, err
		}
		want, ok := ds[t.Name]
		if !ok {
			continue
		}
		raw, err := t.Raw()
		if err != nil {
			return nil, err
		}
		got, err := digest.Sum(ctx, raw, raw.Size())
		if err != nil {
			return nil, &statedict.Error{Tensor: t.Name, Err: err}
		}
		report(raw.Size())
		rep.Digests++
		covered[t.Name] = true
		if got != want {
			rep.Mismatches = append(rep.Mismatches, Mismatch{Name: t.Name, Kind: "digest",
				Detail: fmt.Sprintf("recorded %s, computed %s", want, got)})
		}
	}
	if err := checkChunks(ctx, tensors, rep, covered); err != nil {
		return nil, err
	}
	for _, t := range tensors {
		if !covered[t.Name] {
			rep.Unverified = append(rep.Unverified, t.Name)
		}
	}
	return rep, nil
}

// CheckOption configures Check.
type CheckOption func(*checkConfig)

type checkConfig struct {
	progress func(done, total int64)
}

// WithCheckProgress has fn called with the bytes checked so far and the
// total Check will read, as it reads (every piece of a CRC32'd record,
// every digested tensor).
func WithCheckProgress(fn func(done, total int64)) CheckOption {
	return func(c *checkConfig) { c.progress = fn }
}

// checkProgress returns the function Check reports bytes read to: a no-op
// without fn, otherwise one that adds to a running count of the total
// Check will read.
func checkProgress(ck *statedict.Checkpoint, tensors []*statedict.Tensor, storages []*statedict.Storage, fn func(done, total int64)) (func(int64), error) {
	if fn == nil {
		return func(int64) {}, nil
	}
	var total int64
	for _, s := range storages {
		if s.HasCRC {
			total += max(s.NBytes, 0)
		}
	}
	cache := map[string]map[string]digest.Value{}
	for _, t := range tensors {
		if t.Storage == nil {
			continue
		}
		ds, err := FileDigests(ck, t.Storage, cache)
		if err != nil {
			return nil, err
		}
		if _, ok := ds[t.Name]; ok {
			total += max(t.NBytes(), 0)
		}
	}
	var done int64
	return func(n int64) {
		done += n
		fn(done, total)
	}, nil
}

// StorageCRC computes the CRC32 of a storage's record as stored,
// reporting the bytes read to report (nil: none); errors name the record.
func StorageCRC(ctx context.Context, s *statedict.Storage, report func(int64)) (uint32, error) {
	rc, err := s.Open()
	if err != nil {
		return 0, &statedict.Error{Tensor: s.Record, Err: err}
	}
	defer rc.Close()
	h := ieeecrc.New()
	buf := make([]byte, 64<<10)
	var n int64
	for {
		if err := ctx.Err(); err != nil {
			return 0, &statedict.Error{Tensor: s.Record, Err: err}
		}
		k, err := rc.Read(buf)
		h.Write(buf[:k])
		n += int64(k)
		if report != nil && k > 0 {
			report(int64(k))
		}
		if err == io.EOF {
			break
		}
		if err != nil {
			return 0, &statedict.Error{Tensor: s.Record, Err: err}
		}
	}
	if n != s.NBytes {
		return 0, &statedict.Error{Tensor: s.Record, Err: fmt.Errorf("%w: record holds %d of %d bytes", statedict.ErrTruncated, n, s.NBytes)}
	}
	return h.Sum32(), nil
}

// CompareOptions sets how Compare compares values.
type CompareOptions struct {
	// Tolerance compares values as float64 with |a-b| <= Atol + Rtol*|b|
	// (NaN equal to NaN, infinities equal when of the same sign), and
	// allows different dtypes; without it values must be bitwise equal
	// and dtypes the same.
	Tolerance  bool
	Atol, Rtol float64
	// Progress, when set, is called with the bytes of A compared so far
	// and the bytes of A's tensors present in B, from the comparing
	// goroutines one call at a time.
	Progress func(done, total int64)
	// Matching is how A's and B's tensors are paired (names as they are,
	// and a Llama-family GGUF file as ckpt convert wrote it, by default).
	Matching Matching

	report func(n int64) // Compare's running count behind Progress
}

// CompareReport is the result of Compare.
type CompareReport struct {
	Compared    int        `json:"compared"` // tensors present on both sides
	Differences []Mismatch `json:"differences"`
	// Notes say how names were matched when not as they are (a GGUF
	// file's llama.cpp names).
	Notes []string `json:"notes,omitempty"`
}

// Aliases returns the tied tensors a safetensors conversion dropped and
// recorded in ck's __metadata__: the alias -> kept entries whose kept
// name is a tensor of ck and whose alias is not.
func Aliases(ck *statedict.Checkpoint) map[string]string {
	out := map[string]string{}
	if len(ck.Metadata) == 0 {
		return out
	}
	names := make(map[string]bool, len(ck.Tensors))
	for _, t := range ck.Tensors {
		names[t.Name] = true
	}
	for k, v := range ck.Metadata {
		if !names[k] && names[v] {
			out[k] = v
		}
	}
	return out
}

// Compare compares every tensor of a and b by name, dtype, shape and
// value. Names dropped as aliases by a safetensors conversion (recorded
// in __metadata__) are resolved to the tensor kept in their place. The
// error is for failures to read, not for differences.
func Compare(ctx context.Context, a, b *statedict.Checkpoint, opts CompareOptions) (*CompareReport, error) {
	rep := &CompareReport{Differences: []Mismatch{}}
	m := match(a, b, opts.Matching)
	rep.Notes = m.notes
	// Pairs are compared by one goroutine per CPU; the report keeps A's
	// order.
	type result struct {
		d   *Mismatch
		err error
	}
	results := make([]result, len(m.rows))
	var pairs []int
	// A pair of views is compared once: a tensor named many times (tied
	// weights, or a shared tree naming one tensor from every path) costs
	// its storage once, not once per name. dups[i] is the pair i repeats.
	type viewPair struct{ a, b statedict.View }
	first := map[viewPair]int{}
	dups := map[int]int{}
	for i, r := range m.rows {
		p := r.p
		if p == nil {
			results[i].d = &Mismatch{Name: r.name(), Kind: "missing_in_b", Detail: "only in A"}
			continue
		}
		rep.Compared++
		k := viewPair{p.a.View(), p.b.View()}
		if j, ok := first[k]; ok {
			dups[i] = j
			continue
		}
		first[k] = i
		pairs = append(pairs, i)
	}
	if fn := opts.Progress; fn != nil {
		var total, done int64
		for _, i := range pairs {
			total += max(m.rows[i].p.a.NBytes(), 0)
		}
		var mu sync.Mutex
		opts.Progress = nil
		opts.report = func(n int64) {
			mu.Lock()
			defer mu.Unlock()
			done += n
			fn(done, total)
		}
	}
	work, cancel := context.WithCancel(ctx)
	defer cancel()
	var next atomic.Int64
	var wg sync.WaitGroup
	for range min(runtime.GOMAXPROCS(0), len(pairs)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for k := next.Add(1) - 1; k < int64(len(pairs)); k = next.Add(1) - 1 {
				i := pairs[k]
				d, err := compareTensor(work, m.rows[i].name(), m.rows[i].p, opts)
				results[i] = result{d, err}
				if err != nil {
					cancel() // the others stop; the first real error is returned
				}
			}
		}()
	}
	wg.Wait()
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	for i, j := range dups {
		results[i] = results[j]
		if d := results[j].d; d != nil {
			c := *d
			c.Name = m.rows[i].name()
			results[i].d = &c
		}
	}
	for _, r := range results {
		if r.err != nil && !errors.Is(r.err, context.Canceled) {
			return nil, r.err
		}
	}
	for _, r := range results {
		if r.d != nil {
			rep.Differences = append(rep.Differences, *r.d)
		}
	}
	for _, tb := range m.onlyB {
		rep.Differences = append(rep.Differences, Mismatch{Name: tb.Name, Kind: "missing_in_a", Detail: "only in B"})
	}
	return rep, nil
}

func compareTensor(ctx context.Context, name string, p *pair, opts CompareOptions) (*Mismatch, error) {
	a, b := p.a, p.b
	if !sameShape(p.shapeA, p.shapeB) {
		return &Mismatch{Name: name, Kind: "shape", Detail: fmt.Sprintf("A %v, B %v", p.shapeA, p.shapeB)}, nil
	}
	if p.problem != "" {
		return &Mismatch{Name: name, Kind: "shape", Detail: p.problem}, nil
	}
	if a.DType != b.DType && !opts.Tolerance && !p.widened {
		return &Mismatch{Name: name, Kind: "dtype", Detail: fmt.Sprintf("A %s, B %s", a.DType, b.DType)}, nil
	}
	decA, okA := decoder(a.DType)
	decB, okB := decoder(b.DType)
	if opts.Tolerance && (!okA || !okB) && a.DType != b.DType {
		return &Mismatch{Name: name, Kind: "dtype", Detail: fmt.Sprintf("A %s, B %s: no numeric comparison between them", a.DType, b.DType)}, nil
	}
	// Dimensions both sides broadcast (stride 0) hold the same elements
	// along them: compare one slice, so that the cost is what the
	// storages hold, not what the shapes claim.
	fullShape := a.Shape
	a, b, repeat := dropCommonBroadcast(a, b)
	ra, err := a.Open()
	if err != nil {
		return nil, err
	}
	defer ra.Close()
	rb, err := b.Open()
	if err != nil {
		return nil, err
	}
	defer rb.Close()
	const chunk = 1 << 16
	sa, sb := a.DType.Size(), b.DType.Size()
	bufA, bufB := make([]byte, chunk*sa), make([]byte, chunk*sb)
	n := a.NumEl()
	var diff, first int64 = 0, -1
	var maxAbs float64
	// A GGUF file's wider float dtype (p.widened) is compared by value,
	// exactly without a tolerance.
	numeric := (opts.Tolerance || p.widened) && okA && okB
	var valA, valB []float64
	var mid []float32
	if numeric {
		valA, valB, mid = make([]float64, chunk), make([]float64, chunk), make([]float32, chunk)
	}
	for done := int64(0); done < n; {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		k := min(n-done, chunk)
		if _, err := io.ReadFull(ra, bufA[:k*int64(sa)]); err != nil {
			return nil, &statedict.Error{Tensor: a.Name, Err: err}
		}
		if _, err := io.ReadFull(rb, bufB[:k*int64(sb)]); err != nil {
			return nil, &statedict.Error{Tensor: b.Name, Err: err}
		}
		if opts.report != nil {
			opts.report(k * int64(sa))
		}
		if (!numeric || a.DType == b.DType) && bytes.Equal(bufA[:k*int64(sa)], bufB[:k*int64(sb)]) {
			done += k // the common case, at memcmp speed (equal bits are equal values, NaN too)
			continue
		}
		if numeric {
			decodeChunk(a.DType, decA, valA[:k], mid, bufA)
			decodeChunk(b.DType, decB, valB[:k], mid, bufB)
		}
		for i := range k {
			var same bool
			if numeric {
				x, y := valA[i], valB[i]
				if quickClose(x, y, opts.Atol, opts.Rtol) {
					continue
				}
				same = closeEnough(x, y, opts.Atol, opts.Rtol)
				if !same && !math.IsNaN(x-y) {
					maxAbs = max(maxAbs, math.Abs(x-y))
				}
			} else {
				ea, eb := bufA[i*int64(sa):(i+1)*int64(sa)], bufB[i*int64(sb):(i+1)*int64(sb)]
				same = bytes.Equal(ea, eb)
				if !same && okA {
					if d := math.Abs(decA(ea) - decA(eb)); !math.IsNaN(d) {
						maxAbs = max(maxAbs, d)
					}
				}
			}
			if !same {
				diff++
				if first < 0 {
					first = done + i
				}
			}
		}
		done += k
	}
	if diff == 0 {
		return nil, nil
	}
	if repeat > 1 {
		diff, n, first = diff*repeat, n*repeat, fullIndex(first, a.Shape, fullShape)
	}
	detail := fmt.Sprintf("%d of %d elements differ, first at flat index %d", diff, n, first)
	if okA {
		detail += fmt.Sprintf(", max |A-B| %g", maxAbs)
	}
	return &Mismatch{Name: name, Kind: "value", Detail: detail}, nil
}

// quickClose is closeEnough's common case, finite and close, without its
// branches: a NaN fails it, infinities are left to closeEnough. When
// it says true, closeEnough says true.
func quickClose(x, y, atol, rtol float64) bool {
	d := math.Abs(x - y)
	return d <= atol+rtol*math.Abs(y) && !math.IsInf(d, 0) && !math.IsInf(y, 0)
}

func closeEnough(x, y, atol, rtol float64) bool {
	switch {
	case math.IsNaN(x) || math.IsNaN(y):
		return math.IsNaN(x) && math.IsNaN(y)
	case math.IsInf(x, 0) || math.IsInf(y, 0):
		return x == y
	}
	return math.Abs(x-y) <= atol+rtol*math.Abs(y)
}

// decodeChunk decodes len(dst) little-endian elements of d from src as
// float64: the common floating dtypes through cast.go's per-dtype loops,
// the others element by element with dec (d's decoder).
func decodeChunk(d dtype.DType, dec func([]byte) float64, dst []float64, mid []float32, src []byte) {
	switch d {
	case dtype.Float32, dtype.Float16, dtype.BFloat16:
		dtype.DecodeFloat32(d, mid[:len(dst)], src)
		for i, f := range mid[:len(dst)] {
			dst[i] = float64(f)
		}
	default:
		n := d.Size()
		for i := range dst {
			dst[i] = dec(src[i*n:])
		}
	}
}

// decoder returns a function decoding one little-endian element of d as
// float64, for real numeric dtypes.
func decoder(d dtype.DType) (func([]byte) float64, bool) {
	le := binary.LittleEndian
	switch d {
	case dtype.Float64:
		return func(b []byte) float64 { return math.Float64frombits(le.Uint64(b)) }, true
	case dtype.Float32, dtype.Float16, dtype.BFloat16,
		dtype.Float8E5M2, dtype.Float8E4M3FN, dtype.Float8E5M2FNUZ, dtype.Float8E4M3FNUZ, dtype.Float8E8M0FNU:
		return func(b []byte) float64 { return float64(dtype.ToFloat32(d, b)) }, true
	case dtype.Int64:
		return func(b []byte) float64 { return float64(int64(le.Uint64(b))) }, true
	case dtype.Int32:
		return func(b []byte) float64 { return float64(int32(le.Uint32(b))) }, true
	case dtype.Int16:
		return func(b []byte) float64 { return float64(int16(le.Uint16(b))) }, true
	case dtype.Int8:
		return func(b []byte) float64 { return float64(int8(b[0])) }, true
	case dtype.Uint8, dtype.Bool:
		return func(b []byte) float64 { return float64(b[0]) }, true
	case dtype.Uint16:
		return func(b []byte) float64 { return float64(le.Uint16(b)) }, true
	case dtype.Uint32:
		return func(b []byte) float64 { return float64(le.Uint32(b)) }, true
	case dtype.Uint64:
		return func(b []byte) float64 { return float64(le.Uint64(b)) }, true
	}
	return nil, false
}

// dropCommonBroadcast reduces to size 1 the dimensions that a and b (of
// one shape) both broadcast (stride 0, size > 1), returning the reduced
// views and how many times each of their elements appears in the full
// tensors.
func dropCommonBroadcast(a, b *statedict.Tensor) (*statedict.Tensor, *statedict.Tensor, int64) {
	if a.NumEl() < 0 || len(a.Strides) != len(a.Shape) || len(b.Strides) != len(b.Shape) || len(a.Shape) != len(b.Shape) {
		return a, b, 1
	}
	var shape []int64
	repeat := int64(1)
	for d, s := range a.Shape {
		if s > 1 && a.Strides[d] == 0 && b.Strides[d] == 0 {
			if shape == nil {
				shape = append([]int64(nil), a.Shape...)
			}
			shape[d] = 1
			repeat *= s
		}
	}
	if shape == nil {
		return a, b, 1
	}
	ra, rb := *a, *b
	ra.Shape, rb.Shape = shape, shape
	return &ra, &rb, repeat
}

// fullIndex maps a flat C-order index of a reduced shape to the flat index
// of the same element, with the reduced dimensions at 0, in the full
// shape: the first element of the full tensor that the reduced one stands
// for.
func fullIndex(i int64, reduced, full []int64) int64 {
	coords := make([]int64, len(reduced))
	for d := len(reduced) - 1; d >= 0; d-- {
		if reduced[d] > 0 {
			coords[d] = i % reduced[d]
			i /= reduced[d]
		}
	}
	var out int64
	for d, s := range full {
		out = out*s + coords[d]
	}
	return out
}

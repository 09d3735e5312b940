package verify

import (
	"io"

	"github.com/ckpt-dev/ckpt/internal/fadvise"
	"github.com/ckpt-dev/ckpt/statedict"
)

// diffJob is one comparing goroutine's piece of work: elements [lo, hi)
// of a pair (after dropCommonBroadcast), the whole pair unless it was
// split; its statistics are merged into the pair's by finishPair.
type diffJob struct {
	p       *pair
	lo, hi  int64
	part    acc
	bitwise bool
}

// splitBytes is the size (of A's data) above which a pair is split into
// pieces of about this many bytes, so that one large tensor keeps every
// CPU busy (diffConfig.split, which tests lower).
const splitBytes = 32 << 20

// splitJobs makes the jobs for the pairs todo: a pair of more than
// 2*split bytes whose sides are both read in place (random access into the
// file: no decompression, dequantization or byte swap between file and
// values) is split into pieces of whole chunks; any other is one job.
// byPair lists each pair's jobs in element order.
func splitJobs(todo []*TensorDiff, pairs map[*TensorDiff]*pair, chunk, split int64) (jobs []*diffJob, byPair map[*TensorDiff][]*diffJob) {
	byPair = make(map[*TensorDiff][]*diffJob, len(todo))
	for _, td := range todo {
		p := pairs[td]
		a, b, repeat := dropCommonBroadcast(p.a, p.b)
		n := max(a.NumEl(), 0)
		piece := n
		if es := int64(a.DType.Size()); es > 0 && repeat == 1 && n*es > 2*split && inPlace(a) && inPlace(b) {
			piece = max(split/es/chunk, 1) * chunk
		}
		for lo := int64(0); lo < n || lo == 0; lo += piece {
			j := &diffJob{p: p, lo: lo, hi: min(lo+piece, n)}
			jobs = append(jobs, j)
			byPair[td] = append(byPair[td], j)
			if piece == 0 {
				break
			}
		}
	}
	return jobs, byPair
}

// inPlace reports whether t can be read at any offset without reading
// what comes before: its bytes lie in a file (Tensor.InPlace), its
// reader offers io.ReaderAt (Tensor.Open's readers of uncompressed,
// little-endian, contiguous data do), or it is a quantized weight whose
// elements decode from any offset (quantRaw).
func inPlace(t *statedict.Tensor) bool {
	if _, ok, err := t.InPlace(); ok && err == nil || quantRaw(t) {
		return true
	}
	r, err := t.Open()
	if err != nil {
		return false
	}
	defer r.Close()
	_, ok := r.(io.ReaderAt)
	return ok
}

// quantRaw reports whether t is a quantized weight dequantized on the fly
// whose Raw bytes are its logical elements (contiguous, no byte swap):
// Raw then decodes any range of them straight into the caller's buffer.
func quantRaw(t *statedict.Tensor) bool {
	return t.QuantStored != nil && t.Storage != nil && t.IsContiguous() && !(t.Storage.BigEndian && t.DType.SwapUnit() > 1)
}

// sideReader reads one side of a job chunk by chunk: at its offset where
// the tensor offers random access (its file, with the kernel told to
// read the job's range ahead; a quantized weight's decoder), else in
// order from the start (a job of a pair not split starts at element 0).
type sideReader struct {
	t   *statedict.Tensor
	r   io.ReadCloser // nil with at
	at  io.ReaderAt
	off int64
}

// openSide opens t for reading elements [first, last).
func openSide(t *statedict.Tensor, first, last int64) (*sideReader, error) {
	es := int64(t.DType.Size())
	s := &sideReader{t: t, off: first * es}
	if span, ok, err := t.InPlace(); err != nil {
		return nil, err
	} else if ok {
		s.at, s.off = span.File, span.Off+first*es
		fadvise.WillNeed(span.File, s.off, (last-first)*es)
		return s, nil
	}
	if quantRaw(t) {
		r, err := t.Raw()
		if err != nil {
			return nil, err
		}
		s.at = r
		willNeedCodes(t, first, last)
		return s, nil
	}
	r, err := t.Open()
	if err != nil {
		return nil, err
	}
	s.r = r
	if first > 0 {
		at, ok := r.(io.ReaderAt)
		if !ok {
			r.Close()
			return nil, &statedict.Error{Tensor: t.Name, Err: statedict.ErrUnsupported}
		}
		s.at = at
	}
	return s, nil
}

// willNeedCodes gives the kernel the part of a quantized weight's stored
// codes that elements [first, last) decode from (in proportion: a hint),
// when the codes lie in a local file.
func willNeedCodes(t *statedict.Tensor, first, last int64) {
	st := t.QuantStored.StoredTensors()
	n := t.NumEl()
	if len(st) == 0 || n <= 0 {
		return
	}
	if span, ok, err := st[0].InPlace(); ok && err == nil {
		per := float64(span.Len) / float64(n)
		fadvise.WillNeed(span.File, span.Off+int64(per*float64(first)), int64(per*float64(last-first))+1)
	}
}

// next fills buf with the next len(buf) bytes.
func (s *sideReader) next(buf []byte) error {
	var err error
	if s.at != nil {
		var n int
		n, err = s.at.ReadAt(buf, s.off)
		s.off += int64(n)
		if n == len(buf) {
			err = nil
		} else if err == nil || err == io.EOF {
			err = io.ErrUnexpectedEOF
		}
	} else {
		_, err = io.ReadFull(s.r, buf)
	}
	if err != nil {
		return &statedict.Error{Tensor: s.t.Name, Err: err}
	}
	return nil
}

// Close closes the reader Open gave (the checkpoint's file stays open).
func (s *sideReader) Close() {
	if s.r != nil {
		s.r.Close()
	}
}

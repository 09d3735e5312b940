package verify

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"sync"
	"unsafe"

	"github.com/ckpt-dev/ckpt/dtype"
	"github.com/ckpt-dev/ckpt/internal/llamacpp"
	"github.com/ckpt-dev/ckpt/internal/par"
	"github.com/ckpt-dev/ckpt/statedict"
)

// A stacked expert weight in transformers' layout [E, in, out] compared
// with llama.cpp's [E, out, in] (llamacpp.ExpertView, gpt-oss's gate/up
// halves included) is read one expert at a time: the expert's [in, out]
// slab through Tensor.Open, the one path into tensor data (a quantized
// release's slab decoded by statedict's quantized reading, with its
// checks), into a reused buffer, and the view applied in memory. A strided
// view streamed as is would read a whole slab row per element for a
// transposition, and an MXFP4 weight's logical rows cannot be decoded
// apart from their expert's codes. Memory: one slab per pair being read
// (gpt-oss-120b: 2880 x 5760 bfloat16, 33 MB), at most maxExpertSlab.

// maxExpertSlab bounds the bytes of one expert's slab a view reads at a
// time: a larger one is a problem of the pair, not a read.
const maxExpertSlab = 1 << 30

// slabs holds the slab buffers: the same few reused from pair to pair (a
// fresh page is a page fault; on some VMs ~10 us).
var slabs = &par.FreeList[byte]{Max: 4}

// expertTensor returns t, a stacked expert weight [E, in, out], read as
// llama.cpp's [E, out, in] (parity -1) or as its even or odd outputs
// (parity 0 or 1, [E, out/2, in]): a contiguous tensor named as t whose
// bytes expertSource serves. With widen, t's bfloat16 values are read
// as float32 (exact: every bfloat16 is a float32).
func expertTensor(t *statedict.Tensor, parity int, widen bool) (*statedict.Tensor, error) {
	shape, _, _, err := llamacpp.ExpertView(t.Shape, t.Strides, parity)
	if err != nil {
		return nil, err
	}
	in, out := t.Shape[1], t.Shape[2]
	es := int64(t.DType.Size())
	if es <= 0 || in <= 0 || out <= 0 || in > maxExpertSlab/out/es {
		return nil, fmt.Errorf("an expert of shape %v is over %d bytes: not read as llama.cpp's layout", t.Shape[1:], int64(maxExpertSlab))
	}
	// The view over one expert's slab held contiguously in memory.
	_, st, off, err := llamacpp.ExpertView([]int64{1, in, out}, []int64{in * out, out, 1}, parity)
	if err != nil {
		return nil, err
	}
	dt := t.DType
	if widen {
		if t.DType != dtype.BFloat16 {
			return nil, fmt.Errorf("%s expert weight cannot be read as float32 bit for bit", t.DType)
		}
		dt = dtype.Float32
	}
	src := &expertSource{t: t, in: in, out: out, rows: shape[1], rowStride: st[1], first: off,
		es: es, oes: int64(dt.Size()), widen: widen, cur: -1}
	if shape[0] > (1<<62)/(shape[1]*in*src.oes) {
		return nil, fmt.Errorf("shape %v: over 2^62 bytes as llama.cpp's layout", t.Shape)
	}
	src.size = shape[0] * shape[1] * in * src.oes
	return statedict.NewDerivedTensor(t.Name, dt, shape, src, src.size, t), nil
}

// expertSource serves the bytes of an expert view, in C order: element
// (e, o, i) is t[e, i, first + o*rowStride] (rowStride 1 for the whole
// transposition, 2 for a half), from expert e's slab read whole.
type expertSource struct {
	t         *statedict.Tensor
	in, out   int64 // the slab's shape [in, out]
	rows      int64 // the view's rows per expert
	rowStride int64 // in the slab's columns
	first     int64 // the first row's column
	es, oes   int64 // bytes of an element read, and served
	widen     bool
	size      int64
	mu        sync.Mutex
	cur       int64 // the expert the slab holds (-1: none)
	slab      *[]byte
	served    int64
}

// ReadAt fills p with the view's bytes at off. Reads in order (a diff's
// or a verify's) decode each expert's slab once; the slab goes back to
// the free list once every byte of the view has been served.
func (s *expertSource) ReadAt(p []byte, off int64) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if off < 0 {
		return 0, errors.New("negative offset")
	}
	if off >= s.size {
		return 0, io.EOF
	}
	want := len(p)
	p = p[:min(int64(len(p)), s.size-off)]
	per := s.rows * s.in * s.oes // bytes of one expert's view
	done := 0
	for done < len(p) {
		pos := off + int64(done)
		e := pos / per
		if err := s.load(e); err != nil {
			return done, err
		}
		n := min(int64(len(p)-done), (e+1)*per-pos)
		if pos%s.oes != 0 || n%s.oes != 0 {
			// A read that cuts an element: through a whole-element copy.
			b, m := (pos-e*per)/s.oes, (pos-e*per+n+s.oes-1)/s.oes
			tmp := make([]byte, (m-b)*s.oes)
			s.gather(tmp, b, m)
			copy(p[done:], tmp[pos-e*per-b*s.oes:])
		} else {
			s.gather(p[done:done+int(n)], (pos-e*per)/s.oes, (pos-e*per+n)/s.oes)
		}
		done += int(n)
	}
	s.served += int64(done)
	if s.served >= s.size {
		slabs.Put(s.slab)
		s.slab, s.cur, s.served = nil, -1, 0
	}
	if done < want {
		return done, io.EOF
	}
	return done, nil
}

// load reads expert e's [in, out] slab, unless the slab holds it.
func (s *expertSource) load(e int64) error {
	if s.cur == e {
		return nil
	}
	n := s.in * s.out * s.es
	if s.slab == nil {
		s.slab = slabs.Get(int(n))
	}
	t := *s.t
	t.Shape, t.Strides, t.Offset = s.t.Shape[1:], s.t.Strides[1:], s.t.Offset+e*s.t.Strides[0]
	rc, err := t.Open()
	if err != nil {
		return err
	}
	defer rc.Close()
	s.cur = -1
	if _, err := io.ReadFull(rc, (*s.slab)[:n]); err != nil {
		var se *statedict.Error
		if errors.As(err, &se) {
			return err
		}
		if err == io.EOF || err == io.ErrUnexpectedEOF {
			err = fmt.Errorf("%w: expert %d: %v", statedict.ErrTruncated, e, err)
		}
		return &statedict.Error{Tensor: s.t.Name, Err: err}
	}
	s.cur = e
	return nil
}

// gatherTile is the side of the square of elements gathered at a time:
// its rows of the slab and of the output stay in cache.
const gatherTile = 32

// gather writes elements [b, m) of the current expert's view (row-major
// [rows, in]) into dst: as machine words where dst is aligned, else
// byte by byte.
func (s *expertSource) gather(dst []byte, b, m int64) {
	slab := *s.slab
	g := tileGeom{in: s.in, out: s.out, first: s.first, step: s.rowStride, b: b, m: m}
	switch {
	case s.widen && hostLE && aligned(dst, 4):
		d, src := asSlice[uint32](dst), asSlice[uint16](slab)
		g.segments(func(o, i0, i1 int64) {
			base, sb := o*g.in-b, g.first+o*g.step
			for i := i0; i < i1; i++ {
				d[base+i] = uint32(src[sb+i*g.out]) << 16
			}
		})
	case !s.widen && s.es == 2 && aligned(dst, 2):
		g.segments(copySeg(asSlice[uint16](dst), asSlice[uint16](slab), g))
	case !s.widen && s.es == 4 && aligned(dst, 4):
		g.segments(copySeg(asSlice[uint32](dst), asSlice[uint32](slab), g))
	case !s.widen && s.es == 8 && aligned(dst, 8):
		g.segments(copySeg(asSlice[uint64](dst), asSlice[uint64](slab), g))
	default:
		es, oes := s.es, s.oes
		g.segments(func(o, i0, i1 int64) {
			for i := i0; i < i1; i++ {
				d, src := (o*g.in+i-b)*oes, (g.first+o*g.step+i*g.out)*es
				if s.widen {
					binary.LittleEndian.PutUint32(dst[d:], uint32(binary.LittleEndian.Uint16(slab[src:]))<<16)
				} else {
					copy(dst[d:d+es], slab[src:src+es])
				}
			}
		})
	}
}

// tileGeom is where elements [b, m) of an expert's view (row-major
// [rows, in]) are in its slab: row o, column i is slab element
// first + o*step + i*out.
type tileGeom struct{ in, out, first, step, b, m int64 }

// segments calls fn for runs of elements [b, m) in tiles of gatherTile
// rows by gatherTile columns: fn(o, i0, i1) is row o's columns [i0, i1).
func (g tileGeom) segments(fn func(o, i0, i1 int64)) {
	if g.b >= g.m {
		return
	}
	first, last := g.b/g.in, (g.m-1)/g.in
	for o0 := first; o0 <= last; o0 += gatherTile {
		o1 := min(o0+gatherTile, last+1)
		for c0 := int64(0); c0 < g.in; c0 += gatherTile {
			c1 := min(c0+gatherTile, g.in)
			for o := o0; o < o1; o++ {
				i0, i1 := max(c0, g.b-o*g.in), min(c1, g.m-o*g.in)
				if i0 < i1 {
					fn(o, i0, i1)
				}
			}
		}
	}
}

// copySeg returns segments' fn copying view elements from slab to dst
// (dst holding elements [g.b, g.m)).
func copySeg[T uint16 | uint32 | uint64](dst, slab []T, g tileGeom) func(o, i0, i1 int64) {
	return func(o, i0, i1 int64) {
		base, sb := o*g.in-g.b, g.first+o*g.step
		for i := i0; i < i1; i++ {
			dst[base+i] = slab[sb+i*g.out]
		}
	}
}

// hostLE: the host is little-endian, as the slab's bytes are.
var hostLE = binary.NativeEndian.Uint16([]byte{1, 0}) == 1

// aligned reports whether b starts at a multiple of n bytes and holds
// whole n-byte elements.
func aligned(b []byte, n int) bool {
	return len(b)%n == 0 && (len(b) == 0 || uintptr(unsafe.Pointer(unsafe.SliceData(b)))%uintptr(n) == 0)
}

// asSlice views b (aligned, whole elements; little-endian host) as
// elements of T.
func asSlice[T uint16 | uint32 | uint64](b []byte) []T {
	if len(b) == 0 {
		return nil
	}
	var z T
	return unsafe.Slice((*T)(unsafe.Pointer(unsafe.SliceData(b))), len(b)/int(unsafe.Sizeof(z)))
}

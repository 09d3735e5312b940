package scan

import (
	"archive/tar"
	"encoding/binary"
	"fmt"
	"io"
	"math/bits"

	"github.com/ckpt-dev/ckpt/dtype"
	"github.com/ckpt-dev/ckpt/pickle"
)

// tar scans torch < 0.3's tar members: sys_info and pickle whole, and the
// header pickles of storages and tensors, skipping the raw data between
// them by the layout torch wrote.
func (s *scanner) tar(r io.ReaderAt, size int64, file, record string) error {
	sr := io.NewSectionReader(r, 0, size)
	tr := tar.NewReader(sr)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return fmt.Errorf("tar: %w", err)
		}
		pos, _ := sr.Seek(0, io.SeekCurrent)
		rec := join(record, h.Name)
		if h.Size < 0 || pos+h.Size > size {
			return fmt.Errorf("tar member %s runs past the end of the file", h.Name)
		}
		m := io.NewSectionReader(r, pos, h.Size) // offsets relative to the member
		switch h.Name {
		case "storages":
			err = s.tarStorages(m, 0, h.Size, file, rec)
		case "tensors":
			err = s.tarTensors(m, 0, h.Size, file, rec)
		default:
			err = s.stream(m, 0, h.Size, file, rec, true)
		}
		if err != nil {
			s.problem(file, rec, err)
		}
	}
}

func (s *scanner) one(r io.ReaderAt, pos *int64, end int64, file, rec string) ([]pickle.GlobalUse, error) {
	n, gs, err := s.pickleAt(r, *pos, end)
	s.add(file, rec, shift(gs, *pos))
	*pos += n
	return gs, err
}

// shift makes offsets relative to the member, which holds several pickles.
func shift(gs []pickle.GlobalUse, off int64) []pickle.GlobalUse {
	for i := range gs {
		gs[i].Offset += off
	}
	return gs
}

func readCount(r io.ReaderAt, pos int64, end int64) (uint64, error) {
	var b [8]byte
	if pos > end-8 {
		return 0, fmt.Errorf("truncated at %d", pos)
	}
	if _, err := r.ReadAt(b[:], pos); err != nil {
		return 0, err
	}
	return binary.LittleEndian.Uint64(b[:]), nil
}

// tarStorages: pickle(count), then per storage pickle((key, location,
// storage_type)), int64 element count, the bytes; then pickle(views).
func (s *scanner) tarStorages(r io.ReaderAt, pos, end int64, file, rec string) error {
	base := pos
	if _, err := s.one(r, &pos, end, file, rec); err != nil {
		return err
	}
	cnt, err := s.countAt(r, base, pos)
	if err != nil {
		return err
	}
	for i := int64(0); i < cnt; i++ {
		gs, err := s.one(r, &pos, end, file, rec)
		if err != nil {
			return err
		}
		elem := int64(0)
		for _, g := range gs {
			if dt, ok := pickle.StorageClassDType(g.Module, g.Name); ok {
				d, _ := dtype.Parse(dt)
				elem = int64(max(d.Size(), 1))
			}
		}
		if elem == 0 {
			return fmt.Errorf("storage %d has no storage class; the rest of the member cannot be located", i)
		}
		numel, err := readCount(r, pos, end)
		if err != nil {
			return err
		}
		hi, nb := bits.Mul64(numel, uint64(elem))
		if hi != 0 || nb > uint64(end-pos-8) {
			return fmt.Errorf("storage %d runs past the end of the member", i)
		}
		pos += 8 + int64(nb)
	}
	_, err = s.one(r, &pos, end, file, rec)
	return err
}

// tarTensors: pickle(count), then per tensor pickle((key, storage, type)),
// int32 ndim, 4 bytes, ndim sizes, ndim strides, offset (int64 each).
func (s *scanner) tarTensors(r io.ReaderAt, pos, end int64, file, rec string) error {
	base := pos
	if _, err := s.one(r, &pos, end, file, rec); err != nil {
		return err
	}
	cnt, err := s.countAt(r, base, pos)
	if err != nil {
		return err
	}
	for i := int64(0); i < cnt; i++ {
		if _, err := s.one(r, &pos, end, file, rec); err != nil {
			return err
		}
		hdr, err := readCount(r, pos, end)
		if err != nil {
			return err
		}
		ndim := int64(int32(uint32(hdr)))
		if ndim < 0 || ndim > 64 || pos+8+(2*ndim+1)*8 > end {
			return fmt.Errorf("tensor %d has %d dimensions", i, ndim)
		}
		pos += 8 + (2*ndim+1)*8
	}
	return nil
}

// countAt unpickles the count pickle at [from, to): a small int.
func (s *scanner) countAt(r io.ReaderAt, from, to int64) (int64, error) {
	b := make([]byte, to-from)
	if _, err := r.ReadAt(b, from); err != nil {
		return 0, err
	}
	v, err := pickle.Unpickle(b)
	n, ok := v.(int64)
	if err != nil || !ok || n < 0 || n > (1<<40) {
		return 0, fmt.Errorf("count is not a small integer")
	}
	return n, nil
}

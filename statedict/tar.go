package statedict

import (
	"archive/tar"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math/bits"

	"github.com/ckpt-dev/ckpt/dtype"
	"github.com/ckpt-dev/ckpt/pickle"
)

// posReader reads a section sequentially and tells its position; it seeks
// so that archive/tar skips member bodies without reading them.
type posReader struct {
	r   io.ReaderAt
	pos int64
	end int64
}

func (p *posReader) Read(b []byte) (int, error) {
	if p.pos >= p.end {
		return 0, io.EOF
	}
	if int64(len(b)) > p.end-p.pos {
		b = b[:p.end-p.pos]
	}
	n, err := p.r.ReadAt(b, p.pos)
	p.pos += int64(n)
	if err == io.EOF && n > 0 {
		err = nil
	}
	return n, err
}

func (p *posReader) Seek(off int64, whence int) (int64, error) {
	switch whence {
	case io.SeekStart:
	case io.SeekCurrent:
		off += p.pos
	case io.SeekEnd:
		off += p.end
	}
	if off < 0 {
		return 0, errors.New("negative seek")
	}
	p.pos = off
	return off, nil
}

type tarMember struct{ off, size int64 }

// readTar reads torch's oldest format (torch < 0.3): a tar holding
// sys_info, storages, tensors and pickle members.
func readTar(r io.ReaderAt, size int64, cfg *config) (*Checkpoint, error) {
	pr := &posReader{r: r, end: size}
	tr := tar.NewReader(pr)
	members := make(map[string]tarMember)
	for {
		if err := cfg.canceled(); err != nil {
			return nil, err
		}
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("%w: tar: %v", ErrTruncated, err)
		}
		if h.Typeflag != tar.TypeReg || h.Size < 0 || h.Size > size-pr.pos {
			continue
		}
		members[h.Name] = tarMember{off: pr.pos, size: h.Size}
	}
	for _, m := range []string{"storages", "tensors", "pickle"} {
		if _, ok := members[m]; !ok {
			return nil, &Error{Record: m, Err: fmt.Errorf("%w: tar checkpoint has no %q member", ErrMissingRecord, m)}
		}
	}
	ck := &Checkpoint{Format: FormatTorchTar, ByteOrder: "little"}
	if m, ok := members["sys_info"]; ok {
		if v, _, err := pickleAt(r, m.off, m.off+m.size, "sys_info", cfg); err == nil {
			if d, ok := v.(*pickle.Dict); ok {
				if le, ok := d.Get("little_endian"); ok && le == false {
					ck.ByteOrder = "big"
				}
			}
		}
	}
	storages, err := readTarStorages(r, members["storages"], ck.ByteOrder == "big", cfg)
	if err != nil {
		return nil, err
	}
	tensors, err := readTarTensors(r, members["tensors"], storages, cfg)
	if err != nil {
		return nil, err
	}
	load := func(pid any) (any, error) {
		if t, ok := pid.(*pickle.Tuple); ok && len(*t) > 0 {
			return (*t)[0], nil
		}
		key := pickle.KeyName(pid)
		if t, ok := tensors[key]; ok {
			return t, nil
		}
		return nil, &Error{Record: "pickle", Err: fmt.Errorf("%w: the pickle refers to tensor %s that the tensors member lacks", ErrMissingRecord, key)}
	}
	pm := members["pickle"]
	root, n, err := pickleAt(r, pm.off, pm.off+pm.size, "pickle", cfg, pickle.WithPersistentLoad(load))
	if err != nil {
		return nil, err
	}
	ck.Root = root
	if err := newBuilder(ck, "pickle", cfg, n).walk(root, "", false); err != nil {
		return nil, err
	}
	return ck, nil
}

// readTarStorages reads the storages member: pickle(count), then per storage
// pickle((key, location, storage_type)), int64 element count, raw bytes;
// then pickle(list of views (target, root, offset, numel)).
func readTarStorages(r io.ReaderAt, m tarMember, bigEndian bool, cfg *config) (map[string]*Storage, error) {
	const rec = "storages"
	end := m.off + m.size
	pos := m.off
	next := func() (any, error) {
		v, n, err := pickleAt(r, pos, end, rec, cfg)
		pos += n
		return v, err
	}
	cv, err := next()
	if err != nil {
		return nil, err
	}
	count, ok := cv.(int64)
	if !ok || count < 0 || count > m.size/8 {
		return nil, &Error{Record: rec, Err: fmt.Errorf("%w: storage count %v", ErrMalformed, cv)}
	}
	out := make(map[string]*Storage, count)
	for i := int64(0); i < count; i++ {
		if err := cfg.canceled(); err != nil {
			return nil, err
		}
		av, err := next()
		if err != nil {
			return nil, err
		}
		args, ok := av.(*pickle.Tuple)
		if !ok || len(*args) != 3 {
			return nil, &Error{Record: rec, Err: fmt.Errorf("%w: storage header %d is not (key, location, type)", ErrMalformed, i)}
		}
		key := pickle.KeyName((*args)[0])
		loc, _ := (*args)[1].(string)
		dt, err := storageTypeDType((*args)[2])
		if err != nil {
			return nil, &Error{Record: rec, Err: fmt.Errorf("storage %s: %w", key, err)}
		}
		var cnt [8]byte
		if pos > end-8 {
			return nil, &Error{Record: rec, Err: fmt.Errorf("%w: storage %s has no element count", ErrTruncated, key)}
		}
		if _, err := r.ReadAt(cnt[:], pos); err != nil {
			return nil, &Error{Record: rec, Err: fmt.Errorf("%w: %v", ErrTruncated, err)}
		}
		pos += 8
		hi, nbytes := bits.Mul64(binary.LittleEndian.Uint64(cnt[:]), uint64(dt.Size()))
		if hi != 0 || nbytes > uint64(end-pos) {
			return nil, &Error{Record: rec, Err: fmt.Errorf("%w: storage %s runs past the end of the member", ErrShortStorage, key)}
		}
		out[key] = &Storage{Key: key, Location: loc, DType: dt, NBytes: int64(nbytes), Record: rec, BigEndian: bigEndian,
			src: &sectionSource{r: r, off: pos, n: int64(nbytes)}}
		pos += int64(nbytes)
	}
	vv, err := next()
	if err != nil {
		return nil, err
	}
	views, ok := vv.(*pickle.List)
	if !ok {
		return nil, &Error{Record: rec, Err: fmt.Errorf("%w: storage view list is %T", ErrMalformed, vv)}
	}
	for _, v := range *views {
		t, ok := v.(*pickle.Tuple)
		if !ok || len(*t) != 4 {
			return nil, &Error{Record: rec, Err: fmt.Errorf("%w: storage view is not (target, root, offset, numel)", ErrMalformed)}
		}
		target, root := pickle.KeyName((*t)[0]), pickle.KeyName((*t)[1])
		off, ok1 := (*t)[2].(int64)
		numel, ok2 := (*t)[3].(int64)
		rs, ok := out[root]
		if !ok || !ok1 || !ok2 || off < 0 || numel < 0 {
			return nil, &Error{Record: rec, Err: fmt.Errorf("%w: storage view %s of %s", ErrMalformed, target, root)}
		}
		es := int64(rs.DType.Size())
		if off > rs.NBytes/es || numel > rs.NBytes/es-off {
			return nil, &Error{Record: rec, Err: fmt.Errorf("%w: storage view %s reaches past storage %s", ErrShortStorage, target, root)}
		}
		src := rs.src.(*sectionSource)
		out[target] = &Storage{Key: target, Location: rs.Location, DType: rs.DType, NBytes: numel * es, Record: rec, BigEndian: bigEndian,
			src: &sectionSource{r: r, off: src.off + off*es, n: numel * es}}
	}
	return out, nil
}

// readTarTensors reads the tensors member: pickle(count), then per tensor
// pickle((key, storage_id, type)), int32 ndim, 4 pad bytes, ndim int64
// sizes, ndim int64 strides, int64 storage offset.
func readTarTensors(r io.ReaderAt, m tarMember, storages map[string]*Storage, cfg *config) (map[string]*pickle.Tensor, error) {
	const rec = "tensors"
	end := m.off + m.size
	pos := m.off
	cv, n, err := pickleAt(r, pos, end, rec, cfg)
	if err != nil {
		return nil, err
	}
	pos += n
	count, ok := cv.(int64)
	if !ok || count < 0 || count > m.size/16 {
		return nil, &Error{Record: rec, Err: fmt.Errorf("%w: tensor count %v", ErrMalformed, cv)}
	}
	out := make(map[string]*pickle.Tensor, count)
	for i := int64(0); i < count; i++ {
		if err := cfg.canceled(); err != nil {
			return nil, err
		}
		av, n, err := pickleAt(r, pos, end, rec, cfg)
		if err != nil {
			return nil, err
		}
		pos += n
		args, ok := av.(*pickle.Tuple)
		if !ok || len(*args) != 3 {
			return nil, &Error{Record: rec, Err: fmt.Errorf("%w: tensor header %d is not (key, storage, type)", ErrMalformed, i)}
		}
		key, sid := pickle.KeyName((*args)[0]), pickle.KeyName((*args)[1])
		s, ok := storages[sid]
		if !ok {
			return nil, &Error{Record: rec, Err: fmt.Errorf("%w: tensor %s uses storage %s that the storages member lacks", ErrMissingRecord, key, sid)}
		}
		var hdr [8]byte
		if pos > end-8 {
			return nil, &Error{Record: rec, Err: fmt.Errorf("%w: tensor %s header", ErrTruncated, key)}
		}
		if _, err := r.ReadAt(hdr[:], pos); err != nil {
			return nil, &Error{Record: rec, Err: fmt.Errorf("%w: %v", ErrTruncated, err)}
		}
		pos += 8
		ndim := int64(int32(binary.LittleEndian.Uint32(hdr[:4])))
		if ndim < 0 || ndim > 64 || (2*ndim+1)*8 > end-pos {
			return nil, &Error{Record: rec, Err: fmt.Errorf("%w: tensor %s has %d dimensions", ErrMalformed, key, ndim)}
		}
		body := make([]byte, (2*ndim+1)*8)
		if _, err := r.ReadAt(body, pos); err != nil {
			return nil, &Error{Record: rec, Err: fmt.Errorf("%w: %v", ErrTruncated, err)}
		}
		pos += int64(len(body))
		t := &pickle.Tensor{
			Storage: &pickle.StorageRef{Key: s.Key, Location: s.Location, Ref: s},
			DType:   s.DType.String(), Rebuild: "tar", Layout: "strided",
			Shape: make([]int64, ndim), Stride: make([]int64, ndim),
		}
		for d := int64(0); d < ndim; d++ {
			t.Shape[d] = int64(binary.LittleEndian.Uint64(body[d*8:]))
			t.Stride[d] = int64(binary.LittleEndian.Uint64(body[(ndim+d)*8:]))
		}
		t.Offset = int64(binary.LittleEndian.Uint64(body[2*ndim*8:]))
		out[key] = t
	}
	return out, nil
}

// storageTypeDType maps a pickled storage class (torch.FloatStorage) to its dtype.
func storageTypeDType(v any) (dtype.DType, error) {
	g, ok := v.(pickle.Global)
	if ok {
		if dt, ok := dtype.FromStorageClass(g.Name); ok {
			return dt, nil
		}
		return dtype.Invalid, fmt.Errorf("%w: storage type %s.%s", ErrMalformed, g.Module, g.Name)
	}
	return dtype.Invalid, fmt.Errorf("%w: storage type %T", ErrMalformed, v)
}

package statedict

import (
	"encoding/binary"
	"fmt"
	"io"
	"math/big"
	"math/bits"

	"github.com/ckpt-dev/ckpt/pickle"
)

// legacyProtocol is the protocol version torch's legacy writer records.
const legacyProtocol = 1001

// readLegacy reads the magic-number format (torch < 1.6, or
// _use_new_zipfile_serialization=False): pickles back to back (magic,
// protocol, sys_info, the object, the storage keys), then for each key an
// int64 element count and the raw bytes.
func readLegacy(r io.ReaderAt, size int64, cfg *config) (*Checkpoint, error) {
	pos := int64(0)
	next := func(what string, opts ...pickle.Option) (any, error) {
		v, n, err := pickleAt(r, pos, size, what, cfg, opts...)
		pos += n
		return v, err
	}
	magic, err := next("magic number")
	if err != nil {
		return nil, err
	}
	if m, ok := magic.(*big.Int); !ok || m.Text(16) != "1950a86a20f9469cfc6c" {
		return nil, &Error{Record: "magic number", Err: fmt.Errorf("%w: not torch's legacy magic number", ErrFormat)}
	}
	proto, err := next("protocol version")
	if err != nil {
		return nil, err
	}
	ck := &Checkpoint{Format: FormatTorchLegacy, ByteOrder: "little"}
	if p, ok := proto.(int64); !ok || p != legacyProtocol {
		return nil, &Error{Record: "protocol version", Err: fmt.Errorf("%w: legacy protocol %v (want %d)", ErrUnsupported, proto, legacyProtocol)}
	}
	ck.Version = fmt.Sprint(legacyProtocol)
	sysInfo, err := next("sys_info")
	if err != nil {
		return nil, err
	}
	if d, ok := sysInfo.(*pickle.Dict); ok {
		if le, ok := d.Get("little_endian"); ok && le == false {
			ck.ByteOrder = "big"
		}
	}
	storages := make(map[string]*Storage)
	views := make(map[string]*legacyView)
	var order []*Storage
	load := func(pid any) (any, error) {
		ref, err := pickle.ParseStoragePID(pid)
		if err != nil {
			return nil, err
		}
		s, ok := storages[ref.Key]
		if !ok {
			if s, err = newStorage(ref, "storage "+ref.Key, 1<<62); err != nil {
				return nil, err
			}
			s.BigEndian = ck.ByteOrder == "big"
			storages[ref.Key] = s
			order = append(order, s)
		}
		ref.Ref = s
		if v := ref.View; v != nil {
			// A slice of the root storage (torch < 0.4): a storage of its
			// own whose bytes are read from the root's once it is laid out.
			vs, ok := views[v.Key]
			if !ok {
				elem := int64(max(s.DType.Size(), 1))
				vs = &legacyView{root: s, off: v.Offset * elem,
					s: &Storage{Key: v.Key, Location: s.Location, DType: s.DType, NBytes: v.Numel * elem,
						Record: "storage " + ref.Key, BigEndian: s.BigEndian}}
				views[v.Key] = vs
			} else if vs.root != s || vs.off != v.Offset*int64(max(s.DType.Size(), 1)) {
				return nil, &Error{Record: "main pickle", Err: fmt.Errorf("%w: storage view %s is described twice differently", ErrMalformed, v.Key)}
			}
			ref.Ref = vs.s
		}
		return ref, nil
	}
	rootAt := pos
	root, err := next("main pickle", pickle.WithPersistentLoad(load))
	rootLen := pos - rootAt
	if err != nil {
		return nil, err
	}
	keysV, err := next("storage keys")
	if err != nil {
		return nil, err
	}
	keys, ok := keysV.(*pickle.List)
	if !ok {
		return nil, &Error{Record: "storage keys", Err: fmt.Errorf("%w: storage key list is %T", ErrMalformed, keysV)}
	}
	// Lay out the storages in key order, checking each count against the pickle.
	off := pos
	for _, kv := range *keys {
		key := pickle.KeyName(kv)
		s, ok := storages[key]
		if !ok {
			return nil, &Error{Record: "storage " + key, Err: fmt.Errorf("%w: key list names storage %s that no tensor uses", ErrMalformed, key)}
		}
		var cnt [8]byte
		if off > size-8 {
			return nil, &Error{Record: "storage " + key, Err: fmt.Errorf("%w: storage %s header at %d past the end of the %d-byte file", ErrTruncated, key, off, size)}
		}
		if _, err := r.ReadAt(cnt[:], off); err != nil {
			return nil, &Error{Record: "storage " + key, Err: fmt.Errorf("%w: %v", ErrTruncated, err)}
		}
		numel := binary.LittleEndian.Uint64(cnt[:])
		hi, lo := bits.Mul64(numel, uint64(max(s.DType.Size(), 1)))
		if hi != 0 || lo != uint64(s.NBytes) {
			return nil, &Error{Record: "storage " + key, Err: fmt.Errorf("%w: storage %s holds %d elements, the pickle says %d bytes", ErrMalformed, key, numel, s.NBytes)}
		}
		off += 8
		if s.NBytes > size-off {
			return nil, &Error{Record: "storage " + key, Err: fmt.Errorf("%w: storage %s needs %d bytes at offset %d, the file has %d", ErrShortStorage, key, s.NBytes, off, size)}
		}
		s.src = &sectionSource{r: r, off: off, n: s.NBytes}
		off += s.NBytes
		delete(storages, key)
	}
	for _, s := range order {
		if s.src == nil {
			return nil, &Error{Record: "storage " + s.Key, Err: fmt.Errorf("%w: storage %s is not in the key list", ErrMissingRecord, s.Key)}
		}
	}
	for _, v := range views {
		src, ok := v.root.src.(*sectionSource)
		if !ok || v.off+v.s.NBytes > src.n {
			return nil, &Error{Record: v.s.Record, Err: fmt.Errorf("%w: storage view %s runs past storage %s", ErrShortStorage, v.s.Key, v.root.Key)}
		}
		v.s.src = &sectionSource{r: src.r, off: src.off + v.off, n: v.s.NBytes}
	}
	if off != size {
		ck.Warnings = append(ck.Warnings, fmt.Sprintf("%d trailing bytes after the last storage", size-off))
	}
	ck.Root = root
	if err := newBuilder(ck, "main pickle", cfg, rootLen).walk(root, "", false); err != nil {
		return nil, err
	}
	return ck, nil
}

// legacyView is a storage that is a slice of a root storage (torch < 0.4's
// view metadata), off bytes into it.
type legacyView struct {
	root *Storage
	off  int64
	s    *Storage
}

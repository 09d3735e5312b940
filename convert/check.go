package convert

import (
	"context"
	"errors"
	"fmt"
	"hash"
	"io"
	"sync"

	"github.com/ckpt-dev/ckpt/digest"
	"github.com/ckpt-dev/ckpt/internal/ieeecrc"
	"github.com/ckpt-dev/ckpt/statedict"
	"github.com/ckpt-dev/ckpt/verify"
)

// ErrDamaged: the input's bytes do not match a checksum the input carries
// (a zip record's CRC32, a tensor's recorded xxh64c digest). Convert fails
// with it, writing nothing, rather than pass damaged bytes on under fresh
// digests.
var ErrDamaged = errors.New("convert: input is damaged")

// sourceChecks holds what Convert has verified of its input. Its
// readers may be opened from several goroutines (shards written at once:
// shardwrite.go); mu guards its maps while one is set up.
type sourceChecks struct {
	mu      sync.Mutex
	ck      *statedict.Checkpoint
	crcDone map[*statedict.Storage]bool
	digests map[string]map[string]digest.Value // fileDigests' cache
	users   map[*statedict.Storage][]*statedict.Tensor
	reads   readAheads // the read-ahead hints given for the source's files
}

func newSourceChecks(ck *statedict.Checkpoint) *sourceChecks {
	sc := &sourceChecks{ck: ck, crcDone: map[*statedict.Storage]bool{}, digests: map[string]map[string]digest.Value{},
		users: map[*statedict.Storage][]*statedict.Tensor{}}
	for _, t := range ck.Tensors {
		if t.Storage != nil {
			sc.users[t.Storage] = append(sc.users[t.Storage], t)
		}
	}
	return sc
}

// checkDigestApart verifies t's recorded digest by reading its bytes.
func checkDigestApart(ctx context.Context, t *statedict.Tensor, want digest.Value) error {
	raw, err := t.Raw()
	if err != nil {
		return err
	}
	got, err := digest.Sum(ctx, raw, raw.Size())
	if err != nil {
		return &TensorError{Name: t.Name, Err: err}
	}
	if got != want {
		return &TensorError{Name: t.Name, Err: fmt.Errorf("%w: its bytes have digest %s, the file recorded %s", ErrDamaged, got, want)}
	}
	return nil
}

// checkedReader passes the input's bytes on, in file order, computing the
// checksums that cover them; verify compares them once the bytes are read.
type checkedReader struct {
	r    io.Reader
	name string // tensor or record, for messages
	n    int64  // bytes read
	want int64  // bytes expected

	record  string
	crc     hash.Hash32 // nil: no CRC32 to check
	wantCRC uint32

	dg       *digest.Digest // nil: no digest to compute here
	wantDg   digest.Value
	hasDg    bool
	outputDg bool // the output's digest is the input's (no cast): compare that
}

func (c *checkedReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	if n > 0 {
		c.n += int64(n)
		if c.crc != nil {
			c.crc.Write(p[:n])
		}
		if c.dg != nil {
			if _, werr := c.dg.Write(p[:n]); werr != nil && err == nil {
				err = werr
			}
		}
	}
	return n, err
}

// verify checks what was read against the checksums; output is the
// digest of the bytes written, used when the input's digest is the
// output's.
func (c *checkedReader) verify(output digest.Value) error {
	if c.crc == nil && !c.hasDg {
		return nil
	}
	if c.n != c.want {
		return &TensorError{Name: c.name, Err: fmt.Errorf("%w: read %d of %d bytes", statedict.ErrTruncated, c.n, c.want)}
	}
	if c.crc != nil {
		if got := c.crc.Sum32(); got != c.wantCRC {
			return &TensorError{Name: c.name, Err: fmt.Errorf("%w: record %s has CRC32 %08x, the archive recorded %08x", ErrDamaged, c.record, got, c.wantCRC)}
		}
	}
	if c.hasDg {
		got := output
		if !c.outputDg {
			var err error
			if got, err = c.dg.Sum(); err != nil {
				return &TensorError{Name: c.name, Err: err}
			}
		}
		if got != c.wantDg {
			return &TensorError{Name: c.name, Err: fmt.Errorf("%w: its bytes have digest %s, the file recorded %s", ErrDamaged, got, c.wantDg)}
		}
	}
	return nil
}

// checkStorageCRC verifies a storage's CRC32 by reading it whole, once:
// for storages whose bytes do not stream to the output in file order in
// one piece (views, big-endian records).
func (sc *sourceChecks) checkStorageCRC(ctx context.Context, s *statedict.Storage, name string) error {
	if !s.HasCRC || sc.crcDone[s] {
		return nil
	}
	got, err := verify.StorageCRC(ctx, s, nil)
	if err != nil {
		return err
	}
	if got != s.CRC32 {
		return &TensorError{Name: name, Err: fmt.Errorf("%w: record %s has CRC32 %08x, the archive recorded %08x", ErrDamaged, s.Record, got, s.CRC32)}
	}
	sc.crcDone[s] = true
	return nil
}

// tensorReader returns t's logical bytes (Tensor.Open), checked against
// the storage's CRC32 and the tensor's recorded digest. Both are computed
// on the bytes as they stream when the tensor's bytes are its storage's
// file bytes in order (the usual case); otherwise the storage's CRC32 is
// checked first by a separate read. cast tells whether the output's bytes
// differ from the input's.
func (sc *sourceChecks) tensorReader(ctx context.Context, t *statedict.Tensor, cast bool) (io.ReadCloser, *checkedReader, error) {
	sc.mu.Lock()
	defer sc.mu.Unlock()
	s := t.Storage
	inOrder := t.IsContiguous() && !(s.BigEndian && t.DType.SwapUnit() > 1)
	whole := inOrder && t.Offset == 0 && t.NBytes() == s.NBytes
	streamCRC := s.HasCRC && !sc.crcDone[s] && whole
	if !streamCRC {
		if err := sc.checkStorageCRC(ctx, s, t.Name); err != nil {
			return nil, nil, err
		}
	}
	ds, err := verify.FileDigests(sc.ck, s, sc.digests)
	if err != nil {
		return nil, nil, &TensorError{Name: t.Name, Err: err}
	}
	want, hasDg := ds[t.Name]
	if t.QuantStored != nil || s.Derived() {
		// A dequantized weight: the recorded digest is of its stored
		// codes, under the same name, not of the values read. Codes
		// --quantize computes: the recorded digest is of the input's
		// values, under the same name.
		hasDg = false
	}
	if err := sc.checkStored(ctx, t); err != nil {
		return nil, nil, err
	}
	if hasDg && !inOrder {
		// Not a layout ckpt writes digests for; check it apart.
		if err := checkDigestApart(ctx, t, want); err != nil {
			return nil, nil, err
		}
		hasDg = false
	}
	rc, err := t.Open()
	if err != nil {
		return nil, nil, err
	}
	cr := &checkedReader{r: rc, name: t.Name, want: t.NBytes(), record: s.Record, wantDg: want, hasDg: hasDg, outputDg: hasDg && !cast}
	if streamCRC {
		cr.crc, cr.wantCRC = ieeecrc.New(), s.CRC32
		sc.crcDone[s] = true // verified by cr.verify, or the conversion fails
	}
	if hasDg && cast {
		if cr.dg, err = digest.New(t.NBytes()); err != nil {
			rc.Close()
			return nil, nil, err
		}
	}
	return struct {
		io.Reader
		io.Closer
	}{cr, rc}, cr, nil
}

// checkStored verifies the stored tensors a dequantized weight is read
// from (codes, scales: QuantStored.StoredTensors) against their CRC32s
// and recorded digests, by reading them apart before the weight's values
// are read: the dequantizer reads the codes by ranges, not in one stream.
func (sc *sourceChecks) checkStored(ctx context.Context, t *statedict.Tensor) error {
	for _, st := range t.QuantStored.StoredTensors() {
		if st.Storage == nil {
			continue
		}
		if err := sc.checkStorageCRC(ctx, st.Storage, st.Name); err != nil {
			return err
		}
		ds, err := verify.FileDigests(sc.ck, st.Storage, sc.digests)
		if err != nil {
			return &TensorError{Name: st.Name, Err: err}
		}
		if want, ok := ds[st.Name]; ok {
			if err := checkDigestApart(ctx, st, want); err != nil {
				return err
			}
		}
	}
	return nil
}

// storageReader returns a storage's bytes little-endian
// (Storage.OpenLittleEndian), checked against its CRC32 as they stream,
// or, for a big-endian storage that is swapped on the way, by a separate
// read first.
func (sc *sourceChecks) storageReader(ctx context.Context, s *statedict.Storage) (io.ReadCloser, *checkedReader, error) {
	sc.mu.Lock()
	defer sc.mu.Unlock()
	swapped := s.BigEndian && s.DType.SwapUnit() > 1
	streamCRC := s.HasCRC && !sc.crcDone[s] && !swapped
	if !streamCRC {
		if err := sc.checkStorageCRC(ctx, s, s.Record); err != nil {
			return nil, nil, err
		}
	}
	rc, err := s.OpenLittleEndian()
	if err != nil {
		return nil, nil, &TensorError{Name: s.Record, Err: err}
	}
	cr := &checkedReader{r: rc, name: s.Record, want: s.NBytes, record: s.Record}
	if streamCRC {
		cr.crc, cr.wantCRC = ieeecrc.New(), s.CRC32
		sc.crcDone[s] = true
	}
	// The recorded digests of the tensors over this storage (safetensors
	// input): computed as the bytes stream when one tensor is the whole
	// storage in file order, as in every safetensors file, apart otherwise.
	ds, err := verify.FileDigests(sc.ck, s, sc.digests)
	if err != nil {
		rc.Close()
		return nil, nil, &TensorError{Name: s.Record, Err: err}
	}
	if s.Derived() {
		// Computed (--quantize's codes and scales): a digest the file
		// recorded under the same name is of the input's values.
		ds = nil
	}
	for _, t := range sc.users[s] {
		if t.QuantStored != nil {
			// A dequantized weight: the digest recorded under its name
			// is of its codes; those are checked apart.
			if err := sc.checkStored(ctx, t); err != nil {
				rc.Close()
				return nil, nil, err
			}
			continue
		}
		want, ok := ds[t.Name]
		if !ok {
			continue
		}
		if !swapped && t.IsContiguous() && t.Offset == 0 && t.NBytes() == s.NBytes && !cr.hasDg {
			if cr.dg, err = digest.New(s.NBytes); err != nil {
				rc.Close()
				return nil, nil, err
			}
			cr.name, cr.wantDg, cr.hasDg = t.Name, want, true
			continue
		}
		if err := checkDigestApart(ctx, t, want); err != nil {
			rc.Close()
			return nil, nil, err
		}
	}
	return struct {
		io.Reader
		io.Closer
	}{cr, rc}, cr, nil
}

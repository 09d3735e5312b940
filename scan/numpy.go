package scan

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"io"
)

// numpy scans a .npy file: the header (magic, version, header length, a
// Python dict literal), then the data, which numpy.load with
// allow_pickle=True unpickles when the array's dtype is object ('|O').
// The data of any other dtype is raw numbers and not read.
func (s *scanner) numpy(r io.ReaderAt, size int64, file, record string) error {
	var pre [12]byte
	if n, _ := r.ReadAt(pre[:], 0); n < 10 {
		return fmt.Errorf("npy: truncated header")
	}
	var hlen, at int64
	switch pre[6] {
	case 1:
		hlen, at = int64(binary.LittleEndian.Uint16(pre[8:])), 10
	case 2, 3:
		hlen, at = int64(binary.LittleEndian.Uint32(pre[8:])), 12
	default:
		return fmt.Errorf("npy: format version %d.%d", pre[6], pre[7])
	}
	if hlen > 1<<20 || at+hlen > size {
		return fmt.Errorf("npy: header of %d bytes does not fit", hlen)
	}
	h := make([]byte, hlen)
	if _, err := r.ReadAt(h, at); err != nil {
		return fmt.Errorf("npy: %v", err)
	}
	i := bytes.Index(h, []byte("'descr'"))
	if i < 0 {
		return fmt.Errorf("npy: header has no 'descr'")
	}
	// The descr value is a quoted dtype string ('|O', '<f4') or, for
	// structured arrays, a list whose fields may be objects: any 'O' in
	// a quoted type code means Python objects, pickled.
	if !bytes.Contains(h[i:], []byte("O'")) {
		return nil
	}
	return s.stream(r, at+hlen, size, file, join(record, "object array"), true)
}

package statedict

import (
	"bytes"
	"strings"

	"github.com/ckpt-dev/ckpt/gguf"
)

// How torch's loaders take a file apart. This file is the one description
// of it: Open reads a file along the first route, and package scan walks
// every route a file can be taken along and every pickle record each
// would unpickle, so that a scan can never see less than a loader.
//
// torch.load (serialization.py, torch 1.6 to 2.x):
//  1. If the first four bytes are a zip local file header ("PK\x03\x04"),
//     the zip path: torch's zip reader (miniz) finds records under the
//     top folder named by the first record, comparing names without regard
//     to ASCII case, and unpickles data.pkl. torch.jit.load reads the same
//     zips and unpickles constants.pkl and data.pkl too.
//  2. Otherwise the legacy path: tarfile.open first; a file whose first
//     header block has a valid checksum (ustar or pre-POSIX v7: Python's
//     tarfile takes both) goes the tar way (torch < 0.3), unpickling its
//     storages, tensors and pickle members.
//  3. Otherwise it unpickles from offset 0 whatever the file is, and only
//     then compares the first pickle with the magic number: any file that
//     is neither a zip nor a tar reaches the unpickler.
//
// torch.hub.load_state_dict_from_url also takes a zip of exactly one
// member (found by its end record, wherever the zip starts) and
// torch.loads that member. ckpt itself unwraps gzip and zstd and reads
// safetensors; neither is a torch route, and neither stops a torch loader
// from taking the pickle route on the same bytes.

// Route is one way a loader can take a file apart.
type Route string

// The routes.
const (
	// RouteZip: torch's zip format (torch.save since 1.6, TorchScript),
	// chosen by the first four bytes alone.
	RouteZip Route = "zip"
	// RouteTar: torch < 0.3's tar, chosen when the first 512-byte block is
	// a tar header by Python's tarfile rules (IsTarHeader).
	RouteTar Route = "tar"
	// RoutePickle: pickles unpickled from offset 0, torch's legacy
	// magic-number stream or anything else torch.load is pointed at.
	RoutePickle Route = "pickle"
	// RouteCompressed: a gzip or zstd wrapper, which ckpt unwraps.
	RouteCompressed Route = "compressed"
	// RouteSafetensors: a safetensors file, which no torch loader reads.
	RouteSafetensors Route = "safetensors"
	// RouteGGUF: a GGUF file (llama.cpp, ggml), which no torch loader reads.
	RouteGGUF Route = "gguf"
	// RouteNumpy: a .npy array; numpy.load(allow_pickle=True) unpickles
	// the data of an object array (scan reads it; Open does not).
	RouteNumpy Route = "npy"
)

// Routes returns every route a file whose first bytes are head (up to 512
// of them) and whose size is size can be taken along. The first is the one
// Open reads: torch's own choice where torch reads the file, else ckpt's
// (gzip, zstd, safetensors). RoutePickle is in the list of every file but a
// zip: torch.load unpickles from offset 0 whatever it does not take for a
// zip or a tar.
func Routes(head []byte, size int64) []Route {
	switch {
	case size == 0:
		return nil
	case bytes.HasPrefix(head, zipMagic):
		return []Route{RouteZip}
	case IsTarHeader(head):
		return []Route{RouteTar, RoutePickle}
	case isLegacyMagic(head):
		return []Route{RoutePickle}
	case bytes.HasPrefix(head, zipEmpty):
		return []Route{RouteZip, RoutePickle}
	case bytes.HasPrefix(head, gzipMagic), bytes.HasPrefix(head, zstdMagic):
		return []Route{RouteCompressed, RoutePickle}
	case looksLikeSafetensors(head, size):
		return []Route{RouteSafetensors, RoutePickle}
	case gguf.Sniff(head):
		return []Route{RouteGGUF, RoutePickle}
	case bytes.HasPrefix(head, []byte("\x93NUMPY")):
		return []Route{RouteNumpy, RoutePickle}
	}
	return []Route{RoutePickle}
}

// IsTarHeader reports whether block (the first 512 bytes of a file) is a
// tar header as Python's tarfile reads one: not all zeros, and a checksum
// field (octal text, or base-256) equal to the unsigned or signed byte sum
// of the block with the field counted as spaces. The ustar magic is not
// needed: tarfile reads pre-POSIX (v7) headers too.
func IsTarHeader(block []byte) bool {
	if len(block) < 512 {
		return false
	}
	block = block[:512]
	zero := true
	for _, b := range block {
		if b != 0 {
			zero = false
			break
		}
	}
	if zero {
		return false
	}
	sum, ok := tarNumber(block[148:156])
	if !ok {
		return false
	}
	var unsigned, signed int64 = 256, 256 // the field itself counted as 8 spaces
	for i, b := range block {
		if i >= 148 && i < 156 {
			continue
		}
		unsigned += int64(b)
		signed += int64(int8(b))
	}
	return sum == unsigned || sum == signed
}

// tarNumber parses a numeric header field as tarfile's nti does: base-256
// when the first byte is 0x80 or 0xff, else the text up to the first NUL,
// stripped of whitespace, read by Python's int(s, 8) (an empty field is 0;
// a sign, a 0o prefix and underscores between digits are accepted).
func tarNumber(f []byte) (int64, bool) {
	if f[0] == 0x80 || f[0] == 0xff {
		var n int64
		for _, b := range f[1:] {
			n = n<<8 | int64(b)
		}
		if f[0] == 0xff {
			n -= 1 << (8 * (len(f) - 1))
		}
		return n, true
	}
	if i := bytes.IndexByte(f, 0); i >= 0 {
		f = f[:i]
	}
	s := strings.TrimSpace(string(f))
	if s == "" {
		return 0, true
	}
	neg := false
	if s[0] == '+' || s[0] == '-' {
		neg, s = s[0] == '-', s[1:]
	}
	if len(s) > 2 && s[0] == '0' && (s[1] == 'o' || s[1] == 'O') {
		s = s[2:]
		if s[0] == '_' {
			s = s[1:] // int("0o_7", 8) is 7
		}
	}
	var n int64
	prevDigit := false
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c >= '0' && c <= '7':
			n, prevDigit = n*8+int64(c-'0'), true
		case c == '_' && prevDigit && i+1 < len(s):
			prevDigit = false
		default:
			return 0, false
		}
	}
	if !prevDigit {
		return 0, false
	}
	if neg {
		n = -n
	}
	return n, true
}

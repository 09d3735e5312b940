// Package hostile generates the hostile-input corpus: small crafted files
// that try to make ckpt use unbounded time or memory (reference bombs,
// huge claimed and real sizes, deep nesting, stack and memo floods,
// decompression bombs, container lies). Tests build the large cases at
// test time; `go run ./internal/hostile/gen` writes the small ones to
// testdata/hostile with their expectations (testdata/hostile/expect.tsv).
//
// Nothing here is a fixture of real PyTorch output: every file is built
// byte by byte to break a rule.
package hostile

import (
	"archive/zip"
	"bytes"
	"compress/flate"
	"compress/gzip"
	"encoding/binary"
	"fmt"
	"io"
	"strings"

	"github.com/klauspost/compress/zstd"
)

// Case is one hostile input.
type Case struct {
	Name string // file name under testdata/hostile
	// Want is a substring of the one-line error every command must fail
	// with; "" means the input is valid and must load (in bounded time
	// and memory).
	Want string
	// Big cases are generated at test time only and never committed.
	Big bool
	// Pending says why the current code does not yet meet Want (a
	// container-level defect owned elsewhere); tests skip such cases.
	Pending string
	Data    func() []byte
	// Dir, when set instead of Data, makes the case a directory (Name)
	// holding these files, opened by path.
	Dir func() map[string][]byte
}

// Cases returns the corpus, small cases first.
func Cases() []Case {
	return []Case{
		// Reference (DAG) bombs: Lk = [L(k-1), L(k-1)] through the memo.
		{Name: "dag_list_24.pt", Want: "statedict.WithMaxNames", Data: func() []byte { return TorchZip(DAG(24, listLeaf, ListPair), nil, false) }},
		{Name: "dag_list_30.pt", Want: "statedict.WithMaxNames", Data: func() []byte { return TorchZip(DAG(30, listLeaf, ListPair), nil, false) }},
		{Name: "dag_empty_40.pt", Want: "statedict.WithMaxNames", Data: func() []byte { return TorchZip(DAG(40, []byte{']'}, ListPair), nil, false) }},
		{Name: "dag_dict_28.pt", Want: "statedict.WithMaxNames", Data: func() []byte { return TorchZip(DAG(28, listLeaf, DictPair), nil, false) }},
		{Name: "dag_tensor_22.pt", Want: "statedict.WithMaxNames", Data: func() []byte {
			return TorchZip(DAG(22, Tensor("0"), ListPair), map[string][]byte{"data/0": make([]byte, 4)}, false)
		}},
		{Name: "dag_tuple_key_40.pt", Want: "", Data: func() []byte { return TorchZip(TupleKeyDAG(40), nil, false) }},
		{Name: "long_names.pt", Want: "statedict.WithMaxNameBytes", Data: func() []byte { return TorchZip(LongNames(900, 60_000), nil, true) }},
		{Name: "legacy_dag_30.pt", Want: "statedict.WithMaxNames", Data: func() []byte { return Legacy(DAG(30, listLeaf, ListPair)) }},
		{Name: "legacy_dup_flood.pt", Big: true, Want: "MaxStack", Data: func() []byte { return Legacy(Proto(Flood('N', '2', 4<<20))) }},
		// Integers, strings and bytes: claimed and real sizes.
		{Name: "long4_real_8k.pt", Want: "MaxIntBytes", Data: func() []byte { return TorchZip(Proto(Long4(8192)), nil, false) }},
		{Name: "long4_claimed.pt", Want: "exceeds the", Data: func() []byte { return TorchZip(Proto(Claim(0x8b, 4, 1<<31-1)), nil, false) }},
		{Name: "binunicode8_claimed.pt", Want: "exceeds the", Data: func() []byte { return TorchZip(Proto(Claim(0x8d, 8, 1<<62)), nil, false) }},
		{Name: "binbytes8_claimed.pt", Want: "exceeds the", Data: func() []byte { return TorchZip(Proto(Claim(0x8e, 8, 1<<63-1)), nil, false) }},
		{Name: "frame_claimed.pt", Want: "exceeds the", Data: func() []byte { return TorchZip(Proto(Claim(0x95, 8, 1<<40)), nil, false) }},
		{Name: "long4_real_20m.pt", Big: true, Want: "MaxIntBytes", Data: func() []byte { return TorchZip(Proto(Long4(20<<20)), nil, false) }},
		{Name: "int_text_huge.pt", Want: "longer than", Data: func() []byte {
			return TorchZip(Proto(append(append([]byte{'L'}, bytes.Repeat([]byte{'9'}, 100_000)...), 'L', '\n')), nil, true)
		}},
		// Nesting.
		{Name: "deep_marks.pt", Want: "MaxDepth", Data: func() []byte { return TorchZip(Proto(bytes.Repeat([]byte{'('}, 100_000)), nil, true) }},
		{Name: "deep_lists.pt", Want: "MaxDepth", Data: func() []byte { return TorchZip(DeepLists(100_000), nil, true) }},
		// Stack and memo floods, deflated in data.pkl (deflate bombs).
		{Name: "dup_flood_deflated.pt", Want: "MaxStack", Data: func() []byte { return TorchZip(Proto(Flood('N', '2', 16<<20)), nil, true) }},
		{Name: "dup_flood_100m.pt", Big: true, Want: "MaxStack", Data: func() []byte { return TorchZip(Proto(Flood('N', '2', 100<<20)), nil, true) }},
		{Name: "memo_flood_deflated.pt", Want: "", Data: func() []byte { return TorchZip(Proto(Flood('N', 0x94, 4<<20)), nil, true) }},
		// Opcode floods that leave nothing behind: every opcode is read
		// and checked, at a bounded cost each (docs/benchmarks.md).
		{Name: "none_pop_flood_200m.pt", Big: true, Want: "", Data: func() []byte { return TorchZip(Proto(Pairs('N', '0', 100_000_000)), nil, true) }},
		{Name: "memo_flood_16m.pt", Big: true, Want: "", Data: func() []byte { return TorchZip(Proto(Flood('N', 0x94, 16<<20)), nil, true) }},
		{Name: "memo_index_huge.pt", Want: "MaxMemo", Data: func() []byte { return TorchZip(Proto([]byte{'N', 'r', 0xff, 0xff, 0xff, 0x7f}), nil, false) }},
		{Name: "none_list_16m.pt", Big: true, Want: "statedict.WithMaxNames", Data: func() []byte { return TorchZip(Proto(NoneList(16<<20)), nil, true) }},
		{Name: "zero_padded_pkl.pt", Big: true, Want: "", Data: func() []byte { return TorchZip(append(Proto([]byte{'N'}), make([]byte, 256<<20)...), nil, true) }},
		// Containers.
		{Name: "zip_dup_data_pkl.pt", Want: "duplicate zip entry", Data: ZipDuplicateName},
		{Name: "zip_count_lie.pt", Want: "zip", Data: ZipCountLie},
		{Name: "zip64_size_lie.pt", Want: "more than deflate can produce", Data: Zip64SizeLie},
		{Name: "safetensors_header_lie.safetensors", Want: "unknown checkpoint format", Data: SafetensorsHeaderLie},
		{Name: "safetensors_offsets_lie.safetensors", Want: "w", Data: SafetensorsOffsetsLie},
		// 16 MiB of zeros: refused on its first decompressed bytes.
		{Name: "gzip_bomb.pt.gz", Want: "unknown checkpoint format", Data: func() []byte { return Gzip(make([]byte, 16<<20)) }},
		{Name: "zstd_bomb.pt.zst", Want: "unknown checkpoint format", Data: func() []byte { return Zstd(make([]byte, 16<<20)) }},
		// A zip's first bytes, then 256 MiB of zeros (a few KB compressed):
		// the format sniff passes, the expansion limit (64x the compressed
		// size, at least 64 MiB) stops the spooling.
		{Name: "zstd_bomb_zip_head.pt.zst", Want: "WithMaxDecompressedSize", Data: func() []byte {
			return Zstd(append([]byte("PK\x03\x04"), make([]byte, 256<<20)...))
		}},
		{Name: "zstd_concat.pt.zst", Want: "format", Data: func() []byte { return append(Zstd([]byte("not a checkpoint")), Zstd([]byte("still not"))...) }},
		{Name: "index_escape", Want: "plain file name", Dir: func() map[string][]byte {
			return map[string][]byte{"model.safetensors.index.json": []byte(`{"metadata":{},"weight_map":{"w":"../../../etc/passwd"}}`)}
		}},
		{Name: "index_loop", Want: "a shard is itself an index", Dir: func() map[string][]byte {
			return map[string][]byte{"model.safetensors.index.json": []byte(`{"metadata":{},"weight_map":{"w":"model.safetensors.index.json"}}`)}
		}},
		{Name: "gzip_concat.pt.gz", Want: "format", Data: func() []byte { return append(Gzip([]byte("not a checkpoint")), Gzip([]byte("still not"))...) }},
		// GGUF: counts, lengths and offsets that lie.
		{Name: "gguf_kv_count.gguf", Want: "Limits.MaxKV", Data: func() []byte { return GGUF(0, 1<<40, nil) }},
		{Name: "gguf_string_claim.gguf", Want: "Limits.MaxStringLen", Data: func() []byte { return GGUF(0, 1, append(u64(nil, 1<<50), make([]byte, 16)...)) }},
		{Name: "gguf_array_claim.gguf", Want: "cannot fit", Data: func() []byte {
			return GGUF(0, 1, u64(u32(u32(ggufStr(nil, "tokens"), 9), 8), 1<<25))
		}},
		{Name: "gguf_nested.gguf", Want: "nested deeper", Data: func() []byte {
			b := u32(ggufStr(nil, "deep"), 9)
			for i := 0; i < 100; i++ {
				b = u64(u32(b, 9), 1)
			}
			return GGUF(0, 1, u64(u32(b, 0), 0))
		}},
		{Name: "gguf_overlap.gguf", Want: "overlaps", Data: func() []byte {
			return ggufPad(GGUF(2, 0, append(ggufTensor("a", 8, 0), ggufTensor("b", 8, 0)...)), 64)
		}},
		{Name: "gguf_past_end.gguf", Want: "past the end", Data: func() []byte { return ggufPad(GGUF(1, 0, ggufTensor("a", 1<<40, 0)), 16) }},
		{Name: "gguf_dims_overflow.gguf", Want: "overflow", Data: func() []byte { return ggufPad(GGUF(1, 0, ggufTensor("a", 1<<62, 0)), 16) }},
	}
}

// GGUF is a version-3 GGUF header claiming nt tensors and nkv metadata
// entries, followed by body.
func GGUF(nt, nkv uint64, body []byte) []byte {
	b := u32([]byte("GGUF"), 3)
	return append(u64(u64(b, nt), nkv), body...)
}

func u32(b []byte, v uint32) []byte     { return binary.LittleEndian.AppendUint32(b, v) }
func u64(b []byte, v uint64) []byte     { return binary.LittleEndian.AppendUint64(b, v) }
func ggufStr(b []byte, s string) []byte { return append(u64(b, uint64(len(s))), s...) }

// ggufTensor is a 1-D F32 tensor info of n elements at offset off.
func ggufTensor(name string, n, off uint64) []byte {
	return u64(u32(u64(u32(ggufStr(nil, name), 1), n), 0), off)
}

// ggufPad pads to the 32-byte data section and adds n bytes of data.
func ggufPad(b []byte, n int) []byte {
	for len(b)%32 != 0 {
		b = append(b, 0)
	}
	return append(b, make([]byte, n)...)
}

var listLeaf = []byte{']', '(', 'K', 1, 'K', 1, 'e'}

// Proto wraps pickle opcodes in PROTO 2 ... STOP.
func Proto(body []byte) []byte {
	return append(append([]byte{0x80, 2}, body...), '.')
}

// ListPair builds [memo[k], memo[k]]; DictPair {'a': memo[k], 'b': memo[k]}.
func ListPair(k uint32) []byte {
	b := []byte{']', '('}
	b = get(b, k)
	b = get(b, k)
	return append(b, 'e')
}

// DictPair is the dict form of ListPair.
func DictPair(k uint32) []byte {
	b := []byte{'}', '(', 0x8c, 1, 'a'}
	b = get(b, k)
	b = append(b, 0x8c, 1, 'b')
	b = get(b, k)
	return append(b, 'u')
}

func get(b []byte, k uint32) []byte { return binary.LittleEndian.AppendUint32(append(b, 'j'), k) }
func put(b []byte, k uint32) []byte { return binary.LittleEndian.AppendUint32(append(b, 'r'), k) }

// DAG is a pickle of levels containers, each made by pair from two memo
// references to the one before, over leaf: a few hundred bytes whose
// unshared tree has 2^levels leaves.
func DAG(levels int, leaf []byte, pair func(uint32) []byte) []byte {
	b := append([]byte{0x80, 2}, leaf...)
	b = put(b, 0)
	for k := 0; k < levels; k++ {
		b = append(b, pair(uint32(k))...)
		b = put(b, uint32(k+1))
	}
	return append(b, '.')
}

// TupleKeyDAG is {Tk: 1} where Tk = (T(k-1), T(k-1)): str(key) is 2^k long.
func TupleKeyDAG(levels int) []byte {
	b := []byte{0x80, 2, '}', 'K', 7}
	b = put(b, 0)
	b = append(b, '0')
	for k := 0; k < levels; k++ {
		b = get(b, uint32(k))
		b = get(b, uint32(k))
		b = append(b, 0x86)
		b = put(b, uint32(k+1))
		b = append(b, '0')
	}
	b = get(b, uint32(levels))
	return append(b, 'K', 1, 's', '.')
}

// LongNames nests depth dicts under one memoized key of keyLen bytes and
// puts a 1000-item list at the bottom: every name is depth*keyLen long.
func LongNames(depth, keyLen int) []byte {
	b := []byte{0x80, 2}
	b = append(b, 0x8d)
	b = binary.LittleEndian.AppendUint64(b, uint64(keyLen))
	b = append(b, bytes.Repeat([]byte{'k'}, keyLen)...)
	b = put(b, 0)
	b = append(b, '0')
	for i := 0; i < depth; i++ {
		b = append(b, '}')
		b = get(b, 0)
	}
	b = append(b, ']', '(')
	b = append(b, bytes.Repeat([]byte{'N'}, 1000)...)
	b = append(b, 'e')
	b = append(b, bytes.Repeat([]byte{'s'}, depth)...)
	return append(b, '.')
}

// DeepLists is n lists nested in one another by APPEND.
func DeepLists(n int) []byte {
	b := []byte{0x80, 2}
	b = append(b, bytes.Repeat([]byte{']'}, n)...)
	b = append(b, bytes.Repeat([]byte{'a'}, n-1)...)
	return append(b, '.')
}

// NoneList is one list of n None appended in batches of 1000, as
// Python's pickler writes lists: one byte per item.
func NoneList(n int) []byte {
	b := []byte{']'}
	for ; n > 0; n -= 1000 {
		b = append(b, '(')
		b = append(b, bytes.Repeat([]byte{'N'}, min(n, 1000))...)
		b = append(b, 'e')
	}
	return b
}

// Flood is first followed by n copies of op (DUP, MEMOIZE, ...).
func Flood(first, op byte, n int) []byte {
	return append([]byte{first}, bytes.Repeat([]byte{op}, n)...)
}

// Pairs is n copies of the two opcodes a, b, then a: NONE, POP, NONE, ...,
// NONE with a NONE and b POP.
func Pairs(a, b byte, n int) []byte {
	return append(bytes.Repeat([]byte{a, b}, n), a)
}

// Long4 is a LONG4 integer of n real bytes.
func Long4(n int) []byte {
	b := binary.LittleEndian.AppendUint32([]byte{0x8b}, uint32(n))
	return append(b, bytes.Repeat([]byte{0x5a}, n)...)
}

// Claim is an opcode whose width-byte length claims n bytes that are not there.
func Claim(op byte, width int, n uint64) []byte {
	b := []byte{op}
	if width == 4 {
		return binary.LittleEndian.AppendUint32(b, uint32(n))
	}
	return append(binary.LittleEndian.AppendUint64(b, n), "short"...)
}

// Tensor is torch._utils._rebuild_tensor_v2 of a 1-element float tensor over storage key.
func Tensor(key string) []byte { return TensorN(key, 1) }

// TensorN is a float tensor of n elements over a storage of n elements.
func TensorN(key string, n int32) []byte {
	var b bytes.Buffer
	b.WriteString("ctorch._utils\n_rebuild_tensor_v2\n(")
	b.WriteString("(X\x07\x00\x00\x00storagectorch\nFloatStorage\nX")
	b.Write(binary.LittleEndian.AppendUint32(nil, uint32(len(key))))
	b.WriteString(key)
	b.WriteString("X\x03\x00\x00\x00cpuJ")
	b.Write(binary.LittleEndian.AppendUint32(nil, uint32(n)))
	b.WriteString("tQK\x00J")
	b.Write(binary.LittleEndian.AppendUint32(nil, uint32(n)))
	b.WriteString("\x85K\x01\x85\x89ccollections\nOrderedDict\n)RtR")
	return b.Bytes()
}

// TiedDAG is a torch zip whose pickle names one tensor of n floats from
// every path of a DAG of levels shared lists: 2^levels names of one view.
// fill is the storage's byte value.
func TiedDAG(levels int, n int32, fill byte) []byte {
	return TorchZip(DAG(levels, TensorN("0", n), ListPair), map[string][]byte{"data/0": bytes.Repeat([]byte{fill}, 4*int(n))}, false)
}

// TorchZip is a torch zip checkpoint: archive/data.pkl (deflated when
// deflate is set), archive/version and the given records under archive/.
func TorchZip(pkl []byte, records map[string][]byte, deflate bool) []byte {
	var buf bytes.Buffer
	w := zip.NewWriter(&buf)
	add := func(name string, data []byte, method uint16) {
		f, err := w.CreateHeader(&zip.FileHeader{Name: "archive/" + name, Method: method})
		if err != nil {
			panic(err)
		}
		f.Write(data)
	}
	if deflate {
		w.RegisterCompressor(zip.Deflate, func(out io.Writer) (io.WriteCloser, error) {
			return flate.NewWriter(out, flate.BestCompression)
		})
		add("data.pkl", pkl, zip.Deflate)
	} else {
		add("data.pkl", pkl, zip.Store)
	}
	add("version", []byte("3\n"), zip.Store)
	for name, data := range records {
		add(name, data, zip.Store)
	}
	if err := w.Close(); err != nil {
		panic(err)
	}
	return buf.Bytes()
}

// Legacy is torch's legacy format (torch < 1.6) around the main pickle
// pkl: magic number, protocol 1001, sys_info, pkl, an empty key list.
func Legacy(pkl []byte) []byte {
	b := []byte{0x80, 2, 0x8a, 0x0a, 0x6c, 0xfc, 0x9c, 0x46, 0xf9, 0x20, 0x6a, 0xa8, 0x50, 0x19, '.'}
	b = append(b, 0x80, 2, 'M', 0xe9, 0x03, '.')
	b = append(b, 0x80, 2, '}', '.')
	b = append(b, pkl...)
	return append(b, 0x80, 2, ']', '.')
}

// smallState is a valid one-tensor state dict {'w': tensor}.
func smallState() []byte {
	b := []byte{0x80, 2, '}', 0x8c, 1, 'w'}
	b = append(b, Tensor("0")...)
	return append(b, 's', '.')
}

// ZipDuplicateName holds two archive/data.pkl entries: a benign one and one
// that names a tensor the archive lacks.
func ZipDuplicateName() []byte {
	var buf bytes.Buffer
	w := zip.NewWriter(&buf)
	for i, pkl := range [][]byte{smallState(), Proto([]byte{'N'})} {
		f, _ := w.CreateHeader(&zip.FileHeader{Name: "archive/data.pkl", Method: zip.Store})
		f.Write(pkl)
		if i == 0 {
			f, _ = w.CreateHeader(&zip.FileHeader{Name: "archive/data/0", Method: zip.Store})
			f.Write(make([]byte, 4))
		}
	}
	w.Close()
	return buf.Bytes()
}

// ZipCountLie is a valid checkpoint whose end record claims 65535 entries.
func ZipCountLie() []byte {
	b := TorchZip(smallState(), map[string][]byte{"data/0": make([]byte, 4)}, false)
	i := bytes.LastIndex(b, []byte("PK\x05\x06"))
	binary.LittleEndian.PutUint16(b[i+8:], 0xffff)
	binary.LittleEndian.PutUint16(b[i+10:], 0xffff)
	return b
}

// Zip64SizeLie is a checkpoint whose deflated data/0 record claims, in a
// ZIP64 extra field, 8 GiB of uncompressed data.
func Zip64SizeLie() []byte {
	var buf bytes.Buffer
	w := zip.NewWriter(&buf)
	f, _ := w.CreateHeader(&zip.FileHeader{Name: "archive/data.pkl", Method: zip.Store})
	f.Write(Proto(append(append([]byte{'}', 0x8c, 1, 'w'}, TensorN("0", 1<<31-1)...), 's')))
	f, _ = w.CreateHeader(&zip.FileHeader{Name: "archive/version", Method: zip.Store})
	f.Write([]byte("3\n"))
	fh := &zip.FileHeader{Name: "archive/data/0", Method: zip.Deflate}
	raw, _ := w.CreateRaw(&zip.FileHeader{Name: fh.Name, Method: zip.Deflate,
		CompressedSize64: uint64(len(deflated(make([]byte, 4)))), UncompressedSize64: 8 << 30, CRC32: 0x2144df1c})
	raw.Write(deflated(make([]byte, 4)))
	w.Close()
	return buf.Bytes()
}

func deflated(b []byte) []byte {
	var buf bytes.Buffer
	fw, _ := flate.NewWriter(&buf, flate.BestCompression)
	fw.Write(b)
	fw.Close()
	return buf.Bytes()
}

// SafetensorsHeaderLie claims a header longer than the file.
func SafetensorsHeaderLie() []byte {
	b := binary.LittleEndian.AppendUint64(nil, 1<<40)
	return append(b, `{"w":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}}`...)
}

// SafetensorsOffsetsLie claims a tensor of 2^40 elements over 4 bytes.
func SafetensorsOffsetsLie() []byte {
	h := `{"w":{"dtype":"F32","shape":[1099511627776],"data_offsets":[0,4]}}`
	h += strings.Repeat(" ", (8-len(h)%8)%8)
	b := binary.LittleEndian.AppendUint64(nil, uint64(len(h)))
	b = append(b, h...)
	return append(b, 0, 0, 0, 0)
}

// Gzip compresses b.
func Gzip(b []byte) []byte {
	var buf bytes.Buffer
	zw, _ := gzip.NewWriterLevel(&buf, gzip.BestCompression)
	zw.Write(b)
	zw.Close()
	return buf.Bytes()
}

// Zstd compresses b as one zstd frame at the best ratio.
func Zstd(b []byte) []byte {
	zw, _ := zstd.NewWriter(nil, zstd.WithEncoderLevel(zstd.SpeedBestCompression))
	defer zw.Close()
	return zw.EncodeAll(b, nil)
}

// Expectations renders the expectations file: name, tab, wanted error
// substring ("ok" when the input must load), one case a line.
func Expectations(cases []Case) string {
	var sb strings.Builder
	sb.WriteString("# file\texpected error substring (ok: must load); pending cases are marked\n")
	for _, c := range cases {
		if c.Big {
			continue
		}
		want := c.Want
		if want == "" {
			want = "ok"
		}
		fmt.Fprintf(&sb, "%s\t%s", c.Name, want)
		if c.Pending != "" {
			fmt.Fprintf(&sb, "\tpending: %s", c.Pending)
		}
		sb.WriteString("\n")
	}
	return sb.String()
}

// Unpacked is the size of in with its compressed parts counted
// uncompressed: the zip records' declared sizes (at least their stored
// size) for a zip, else len(in).
func Unpacked(in []byte) int64 {
	zr, err := zip.NewReader(bytes.NewReader(in), int64(len(in)))
	if err != nil {
		return int64(len(in))
	}
	n := int64(len(in))
	for _, f := range zr.File {
		if f.UncompressedSize64 < 1<<32 {
			n += int64(f.UncompressedSize64)
		}
	}
	return n
}

// V7Tar rewrites every header of a ustar archive as a pre-POSIX (v7)
// header: no magic and version, checksum recomputed. Python's tarfile
// reads it, so torch's legacy loader takes it for a torch < 0.3 tar.
func V7Tar(b []byte) []byte {
	b = bytes.Clone(b)
	for off := 0; off+512 <= len(b); {
		h := b[off : off+512]
		if bytes.Count(h, []byte{0}) == 512 {
			break
		}
		copy(h[257:265], make([]byte, 8))
		copy(h[148:156], "        ")
		sum := 0
		for _, c := range h {
			sum += int(c)
		}
		copy(h[148:156], fmt.Sprintf("%06o\x00 ", sum))
		var size int64
		fmt.Sscanf(strings.Trim(string(h[124:136]), "\x00 "), "%o", &size)
		off += 512 + int((size+511)/512*512)
	}
	return b
}

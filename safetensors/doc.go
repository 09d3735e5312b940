// Package safetensors reads and writes the safetensors file format.
//
// It owns the format and nothing else: the 8-byte little-endian header
// length, the JSON header, the validation rules the reference (Rust)
// reader applies to it, the format's dtype codes ("F32", "BF16", ...) and
// their element widths, and a streaming writer. It knows nothing of torch;
// package statedict adapts it.
//
// A file is laid out as
//
//	u64 N (little endian) | N bytes of UTF-8 JSON | data buffer
//
// and the JSON maps each tensor name to {"dtype", "shape", "data_offsets"},
// with offsets relative to the start of the data buffer, plus an optional
// "__metadata__" object of string values.
//
// Parse validates a header at least as strictly as the reference reader
// (header size limit, offsets that tile the data buffer from 0 with no hole
// or overlap, byte sizes that match shape times element width with
// overflow-checked arithmetic, a file that ends where the data ends) and, in
// addition, refuses duplicate keys, which a JSON object decoder would
// otherwise silently resolve to the last one.
//
// Sub-byte dtypes (F4, F6_E2M3, F6_E3M2) are handled in bits, like the
// reference: a tensor of such a dtype is valid only when its element count
// times its bit width is a whole number of bytes. ElementSize reports them
// as having no whole-byte size; ElementBits and ByteSize handle them.
//
// Writer streams tensor data without holding it in memory: the header is
// computed up front from names, dtypes and shapes, and each tensor's bytes
// are then copied from an io.Reader in the order Writer.Order returns.
package safetensors

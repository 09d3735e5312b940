// Reads each GGUF file named on the command line with Hugging Face's
// @huggingface/gguf and prints one JSON object per file on its own line:
// {"file", "little_endian", "tensor_data_offset", "metadata": {KEY:
// {"type", "sub_type", "value"}}, "tensors": [{"name", "shape", "dtype",
// "offset"}]}. 64-bit integers (BigInt) are printed as decimal strings,
// other numbers as JSON numbers; value types are GGUF's numbers.
// internal/ggufcheck's Go test runs it and compares with what ckpt wrote.
import { gguf } from "@huggingface/gguf";
import path from "node:path";

function plain(v) {
  if (typeof v === "bigint") return v.toString();
  if (Array.isArray(v)) return v.map(plain);
  if (typeof v === "number" && !Number.isFinite(v)) return String(v);
  return v;
}

for (const f of process.argv.slice(2)) {
  const out = await gguf(path.resolve(f), { allowLocalFile: true, typedMetadata: true });
  const md = {};
  for (const [k, e] of Object.entries(out.typedMetadata)) {
    md[k] = { type: e.type, sub_type: e.subType ?? null, value: plain(e.value) };
  }
  const tensors = out.tensorInfos.map((t) => ({
    name: t.name,
    shape: t.shape.map(String),
    dtype: t.dtype,
    offset: t.offset.toString(),
  }));
  console.log(JSON.stringify({
    file: f,
    little_endian: out.littleEndian,
    tensor_data_offset: out.tensorDataOffset.toString(),
    metadata: md,
    tensors,
  }));
}

// The byte-level BPE reference: OpenAI's tiktoken (its Rust core compiled to WebAssembly, the
// npm package `tiktoken`, pinned in package-lock.json) with the encoding shipped inside it.
//   node tiktoken_reference.cjs ENCODING CORPUS.jsonl IDS.u32 RANKS.tiktoken
// Writes the encoding's ranks as a tiktoken file (BASE64 RANK per line, what Llama 3's
// tokenizer.model holds), then encodes the "text" of every JSONL line with encode_ordinary,
// the end-of-text token after each document, into IDS.u32 (little-endian uint32). Prints one
// JSON line: the text's megabytes and the seconds the encoding took.
const fs = require("fs");
const { Tiktoken } = require("tiktoken/lite");

const [encodingName, corpusPath, idsPath, ranksPath] = process.argv.slice(2);
const data = require(`tiktoken/encoders/${encodingName}.json`);

// The package's compact form: lines "! OFFSET BASE64 BASE64 ..." with consecutive ranks.
const lines = [];
for (const row of data.bpe_ranks.split("\n")) {
  if (!row) continue;
  const [mark, offset, ...tokens] = row.split(" ");
  if (mark !== "!") throw new Error(`unexpected bpe_ranks row starting ${row.slice(0, 20)}`);
  tokens.forEach((t, i) => lines.push(`${t} ${Number(offset) + i}`));
}
fs.writeFileSync(ranksPath, lines.join("\n") + "\n");

const enc = new Tiktoken(data.bpe_ranks, data.special_tokens, data.pat_str);
const eos = data.special_tokens["<|endoftext|>"];
const texts = fs.readFileSync(corpusPath, "utf8").split("\n").filter((l) => l.length > 0).map((l) => JSON.parse(l).text);
const encoder = new TextEncoder();
let bytes = 0;
for (const t of texts) bytes += encoder.encode(t).length;

const start = process.hrtime.bigint();
const chunks = [];
let count = 0;
for (const t of texts) {
  if (t.length === 0) continue;
  const ids = enc.encode_ordinary(t);
  chunks.push(ids);
  count += ids.length + 1;
}
const seconds = Number(process.hrtime.bigint() - start) / 1e9;

const out = new Uint32Array(count);
let at = 0;
for (const ids of chunks) {
  out.set(ids, at);
  at += ids.length;
  out[at++] = eos;
}
fs.writeFileSync(idsPath, Buffer.from(out.buffer));
enc.free();
console.log(JSON.stringify({ reference: "tiktoken (npm, WebAssembly)", encoding: encodingName, documents: chunks.length, tokens: count, megabytes: bytes / 1e6, seconds }));

#!/bin/bash
# Byte-level BPE parity (issue 39): OpenAI's tiktoken (npm, its Rust core as WebAssembly) with
# the cl100k_base it ships encodes >= 1 MB of mixed text; our prep() reads the same ranks as
# a tiktoken file (what Llama 3's tokenizer.model is) and as a tokenizer.json converted the
# way Llama 3's was (Split regex + ByteLevel, merges, ignore_merges, added tokens): 0
# mismatched ids for each, <|endoftext|> after every document.
source "$(dirname "$0")/lib.sh"
if ! command -v node >/dev/null; then
  echo "SKIP: node is not installed; the byte-level BPE reference (tiktoken) runs under node"
  exit 77
fi
[ -d "$here/js/node_modules/tiktoken" ] || {
  echo "FAIL: $here/js/node_modules/tiktoken is missing: scripts/install-deps.sh installs it (npm ci in tests/tokenizer/js)"
  exit 1
}
make_corpus 1.1
data="$here/js/node_modules/tiktoken/encoders/cl100k_base.json"
ref=$(node "$here/js/tiktoken_reference.cjs" cl100k_base "$work/corpus.jsonl" "$work/ref.u32" "$work/cl100k_base.tiktoken")

echo "== tiktoken ranks file"
all=$(ours "$work/cl100k_base.tiktoken" "$work/ours.bin" llmc-u32 0)
one=$(ours "$work/cl100k_base.tiktoken" "$work/ours1.bin" llmc-u32 1)
"$PY" "$here/compare_ids.py" "$work/ours.bin" 1024 "$work/ref.u32" "$ref" "$all" "$one"

echo "== tokenizer.json (Megatron output: int32 ids for 100277 tokens)"
mkdir "$work/hf"
"$PY" "$here/tiktoken_to_hf.py" "$work/cl100k_base.tiktoken" "$("$PY" -c 'import json,sys; print(json.load(open(sys.argv[1]))["pat_str"])' "$data")" \
  "$("$PY" -c 'import json,sys; print(json.dumps(json.load(open(sys.argv[1]))["special_tokens"]))' "$data")" "$work/hf/tokenizer.json"
all=$(ours "$work/hf" "$work/mg" megatron 0)
"$PY" "$here/compare_ids.py" "$work/mg.bin" 0 "$work/ref.u32" "$ref" "$all"

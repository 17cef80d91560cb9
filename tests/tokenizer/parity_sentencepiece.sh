#!/bin/bash
# SentencePiece parity (issue 39): a BPE model with byte fallback trained here by Debian's
# python3-sentencepiece on >= 1 MB of mixed text, then every document encoded by it and by
# our prep() (JSONL in, threads, </s> after each document): 0 mismatched ids.
source "$(dirname "$0")/lib.sh"
make_corpus 1.1
"$PY" "$here/sentencepiece_reference.py" train "$work/corpus.jsonl" "$work/sp" 4000
ref=$("$PY" "$here/sentencepiece_reference.py" encode "$work/sp.model" "$work/corpus.jsonl" "$work/ref.u32")
all=$(ours "$work/sp.model" "$work/ours.bin" llmc-u32 0)
one=$(ours "$work/sp.model" "$work/ours1.bin" llmc-u32 1)
cmp -s "$work/ours.bin" "$work/ours1.bin" || { echo "FAIL: 1 thread and all cores wrote different files"; exit 1; }
"$PY" "$here/compare_ids.py" "$work/ours.bin" 1024 "$work/ref.u32" "$ref" "$all" "$one"

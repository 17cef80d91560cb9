#!/bin/bash
# Tokenizer throughput: our prep() (all cores and 1 thread) against the reference
# implementations, the same corpus in the same run (tests/tokenizer's parity scripts on a
# larger corpus; the ids are compared too). Results: BENCHMARKS.md, "Tokenizers".
#   bench/tokenizer/throughput.sh [BUILD_DIR] [MEGABYTES]
set -euo pipefail
src=$(cd "$(dirname "$0")/../.." && pwd)
build=${1:-$src/build}
export SG_CORPUS_MB=${2:-20}
export SG_TOKENIZE=$build/tests/tokenizer/sg_tokenize SCALEGUARD_SOURCE_DIR=$src
echo "# $(nproc) cores, corpus ${SG_CORPUS_MB} MB of mixed text (tests/tokenizer/make_corpus.py)"
for t in sentencepiece tiktoken; do
  echo "## $t"
  bash "$src/tests/tokenizer/parity_$t.sh" | grep -E "mismatched|throughput|^=="
done

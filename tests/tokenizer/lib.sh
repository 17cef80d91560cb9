# Shared by the parity scripts: a scratch directory, the corpus, our tokenizer run.
set -euo pipefail
: "${SG_TOKENIZE:?the sg_tokenize binary (ctest sets it)}"
: "${SCALEGUARD_SOURCE_DIR:?the source tree (ctest sets it)}"
here="$SCALEGUARD_SOURCE_DIR/tests/tokenizer"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
PY=/usr/bin/python3   # Debian's, with python3-sentencepiece

# make_corpus MEGABYTES: $work/corpus.jsonl, deterministic mixed text (SG_CORPUS_MB overrides: bench/tokenizer)
make_corpus() { "$PY" "$here/make_corpus.py" "$work/corpus.jsonl" "${SG_CORPUS_MB:-$1}"; }

# ours TOKENIZER OUTPUT FORMAT THREADS: runs prep(), echoes the seconds it reported
ours() {
  local line
  line=$("$SG_TOKENIZE" "$1" "$2" "$3" text default "$4" "$work/corpus.jsonl")
  echo "ours: $line" >&2
  sed -E 's/.* in ([0-9.]+) s:.*/\1/' <<<"$line"
}

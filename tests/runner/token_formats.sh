#!/usr/bin/env bash
# Token files users bring (issue 15 item 8): llm.c .bin files (256 x int32 header; magic
# 20240520 version 1 = uint16 tokens, 20240801 version 7 = uint32) and raw u16/u32 arrays
# with a stated vocabulary, memory-mapped; prep writes the llm.c format. Every broken file is
# a clear error on both ranks (never a hang), and a GPT trains on a u16 llm.c file with a
# vocabulary above 256: the loss falls.
source "$(dirname "$0")/lib.sh"
"$run" prep --input /usr/share/games/fortunes/fortunes --output bytes.sg
"$run" prep --input /usr/share/games/fortunes/fortunes --output bytes.llmc --format llmc
"$run" prep --input /usr/share/games/fortunes/fortunes --output bytes.llmc32 --format llmc-u32

# prep's llm.c files: the header llm.c's data_common.py writes, then the bytes widened.
/usr/bin/python3 - <<'PY'
import struct, sys
text = open("/usr/share/games/fortunes/fortunes", "rb").read()
for name, magic, version, code, width in (("bytes.llmc", 20240520, 1, "H", 2), ("bytes.llmc32", 20240801, 7, "I", 4)):
    data = open(name, "rb").read()
    header = struct.unpack("<256i", data[:1024])
    assert header[:3] == (magic, version, len(text)), (name, header[:3])
    assert not any(header[3:]), name
    assert len(data) == 1024 + width * len(text), name
    assert list(struct.unpack("<%d%s" % (len(text), code), data[1024:])) == list(text), name
print("prep llmc/llmc-u32 headers and tokens as llm.c writes them")
PY

small=(--model mlp --n-embd 8 --hidden 16 --seq-len 16 --global-batch 4 --steps 2 --threads 1 --quiet)
# expect_ok NAME ARGS...: 2 ranks train and exit 0.
expect_ok() {
  local name=$1; shift
  mpi 2 train "$@" > "$name.log" 2>&1 || { cat "$name.log"; fail "$name: training failed"; }
  echo "$name: ok"
}
expect_failure() {
  local name=$1 pattern=$2; shift 2
  rm -f rc.*
  local status=0
  mpi_rc 2 rc "$@" > "$name.log" 2>&1 || status=$?
  [ "$status" -ne 124 ] || fail "$name: timed out (hang)"
  [ "$status" -ne 0 ] || { cat "$name.log"; fail "$name: mpirun exited 0"; }
  grep -qE "$pattern" "$name.log" || { cat "$name.log"; fail "$name: no message matching '$pattern'"; }
  echo "$name: $(grep -m1 -oE "$pattern" "$name.log")"
}

# The same corpus in every layout trains (auto-detected headers, stated raw formats).
tail -c +1025 bytes.llmc > bytes.u16
tail -c +1025 bytes.llmc32 > bytes.u32
expect_ok sg train --data bytes.sg "${small[@]}"
expect_ok llmc_u16 train --data bytes.llmc --data-vocab 256 "${small[@]}"
expect_ok llmc_u32 train --data bytes.llmc32 --data-format llmc --data-vocab 256 "${small[@]}"
expect_ok raw_u16 train --data bytes.u16 --data-format u16 --data-vocab 256 "${small[@]}"
expect_ok raw_u32 train --data bytes.u32 --data-format u32 --data-vocab 256 "${small[@]}"

# Broken files and mismatched vocabularies.
head -c 600 bytes.llmc > short.llmc
expect_failure truncated_header "token file 'short.llmc' is truncated: 600 bytes, shorter than llm.c's 1024-byte header" \
  train --data short.llmc --data-format llmc --data-vocab 256 "${small[@]}"
head -c 5000 bytes.llmc > cut.llmc
expect_failure count_mismatch "token file 'cut.llmc' is truncated or corrupt: its header says [0-9]+ tokens of 2 bytes" \
  train --data cut.llmc --data-vocab 256 "${small[@]}"
/usr/bin/python3 - <<'PY'
import struct
data = open("bytes.llmc", "rb").read()
open("magic.llmc", "wb").write(struct.pack("<i", 20240521) + data[4:])
open("version.llmc", "wb").write(data[:4] + struct.pack("<i", 2) + data[8:])
# vocab 300: every token < 300 except one 4000 at token index 10 (byte offset 1024 + 20).
toks = [7] * 5000
toks[10] = 4000
for i in range(0, 5000, 13): toks[i] = 4000
open("overflow.llmc", "wb").write(struct.pack("<256i", 20240520, 1, len(toks), *([0] * 253)) + struct.pack("<%dH" % len(toks), *toks))
PY
expect_failure wrong_magic "wrong magic 20240521 for an llm.c data file" \
  train --data magic.llmc --data-format llmc --data-vocab 256 "${small[@]}"
expect_failure unknown_header "token file 'magic.llmc' has no known header" train --data magic.llmc --data-vocab 256 "${small[@]}"
expect_failure wrong_version "llm.c magic 20240520 with unsupported version 2" \
  train --data version.llmc --data-vocab 256 "${small[@]}"
head -c 10001 bytes.u16 > odd.u16
expect_failure odd_u16 "token file 'odd.u16' has 10001 bytes, an odd length" \
  train --data odd.u16 --data-format u16 --data-vocab 256 "${small[@]}"
expect_failure raw_needs_vocab "a raw u16 file has no header; state its vocabulary with --data-vocab" \
  train --data bytes.u16 --data-format u16 "${small[@]}"
expect_failure vocab_mismatch "data-vocab 300\\) does not match the model's vocab-size 256" \
  train --data bytes.llmc --data-vocab 300 "${small[@]}"
expect_failure overflow "token 4000 at index [0-9]+ \\(byte offset [0-9]+\\) is outside the vocabulary: vocab-size is 300" \
  train --data overflow.llmc --data-vocab 300 --vocab-size 300 "${small[@]}"
expect_failure vocab_too_wide "a vocabulary of 70000 does not fit 2-byte tokens" \
  train --data bytes.llmc --data-vocab 70000 --vocab-size 70000 "${small[@]}"

# Smoke: a GPT on a u16 llm.c file with 512 tokens (byte + 256 x the previous byte's low
# bit: learnable from the context) learns it; loss starts near ln(512) = 6.2.
/usr/bin/python3 - <<'PY'
import glob, struct
text = b"".join(open(f, "rb").read() for f in sorted(glob.glob("/usr/share/games/fortunes/*")) if "." not in f.rsplit("/", 1)[1])
toks = [text[0]] + [b + 256 * (a & 1) for a, b in zip(text, text[1:])]
open("wide.bin", "wb").write(struct.pack("<256i", 20240520, 1, len(toks), *([0] * 253)) + struct.pack("<%dH" % len(toks), *toks))
PY
mpi 2 train --config "$SCALEGUARD_SOURCE_DIR/configs/examples/gpt-small.ini" --data wide.bin --vocab-size 512 \
  --data-vocab 512 --steps 120 --log-every 1 --metrics m.jsonl --quiet > smoke.log 2>&1 || { cat smoke.log; fail "smoke: training failed"; }
first=$(grep -m1 '"step":1,' m.jsonl | sed -E 's/.*"loss":([^,]*).*/\1/')
last=$(final_field m.jsonl loss)
echo "u16 llm.c file, vocab 512: loss step 1 $first, step 120 $last"
awk -v a="$first" -v b="$last" 'BEGIN { exit !(a > 5.8 && b < 0.65 * a) }' ||
  fail "loss did not fall well below its start ($first -> $last)"

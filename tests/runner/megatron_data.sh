#!/usr/bin/env bash
# Megatron-LM indexed datasets (PREFIX.bin + PREFIX.idx, issue 26 item 5): the fortunes
# tokens written as Megatron's preprocess_data.py writes them (documents back to back, the
# MMIDIDX index), as uint16 and int32, train exactly like the same tokens in a scaleguard
# token file (same stream, same sampler: the same loss at every step and the same
# checksum), named as PREFIX, PREFIX.bin or PREFIX.idx; a corrupt index or data file is an
# error naming the file and the problem.
source "$(dirname "$0")/lib.sh"
fortunes_tokens tokens.bin
/usr/bin/python3 - <<'PY'
import struct
import numpy as np
tok = np.frombuffer(open("tokens.bin", "rb").read()[32:], dtype=np.uint8)
cuts = [0] + [i + 1 for i in np.flatnonzero(tok == ord("%"))[::7]] + [len(tok)]
docs = [tok[a:b] for a, b in zip(cuts, cuts[1:]) if b > a]

def write(prefix, dtype, code, tweak=None):
    lengths = np.array([len(d) for d in docs], dtype=np.int32)
    item = np.dtype(dtype).itemsize
    pointers = np.concatenate([[0], np.cumsum(lengths[:-1], dtype=np.int64) * item]).astype(np.int64)
    doc_idx = np.arange(len(docs) + 1, dtype=np.int64)
    with open(prefix + ".bin", "wb") as f:
        for d in docs:
            f.write(d.astype(dtype).tobytes(order="C"))
    hdr = b"MMIDIDX\x00\x00" + struct.pack("<Q", 1) + struct.pack("<B", code)
    hdr += struct.pack("<Q", len(lengths)) + struct.pack("<Q", len(doc_idx))
    body = lengths.tobytes() + pointers.tobytes() + doc_idx.tobytes()
    data = bytearray(hdr + body)
    if tweak:
        data = tweak(data)
    open(prefix + ".idx", "wb").write(bytes(data))

write("corpus16", np.uint16, 8)
write("corpus32", np.int32, 4)
write("badmagic", np.uint16, 8, lambda d: b"XXIDIDX\x00\x00" + d[9:])
write("badversion", np.uint16, 8, lambda d: d[:9] + struct.pack("<Q", 2) + d[17:])
write("float", np.float32, 7)
write("shortidx", np.uint16, 8, lambda d: d[:-12])
write("badptr", np.uint16, 8, lambda d: d[:34 + 4 * len(docs) + 8] + struct.pack("<q", 5) + d[34 + 4 * len(docs) + 16:])
write("shortbin", np.uint16, 8)
with open("shortbin.bin", "r+b") as f:
    f.truncate(1000)
write("nobin", np.uint16, 8)
import os
os.remove("nobin.bin")
print(f"{len(docs)} documents, {len(tok)} tokens")
PY
args=(train --model gpt --n-layer 1 --n-embd 32 --n-head 4 --seq-len 32 --steps 8 --global-batch 8 --seed 9
      --threads 1 --log-every 1 --quiet)
"$run" "${args[@]}" --data tokens.bin --metrics sg.jsonl 2> sg.log || { cat sg.log; fail "token file run failed"; }
for name in "corpus16" "corpus16.bin" "corpus32.idx"; do
  "$run" "${args[@]}" --data "$name" --data-vocab 256 --metrics "$name.jsonl" 2> "$name.log" ||
    { cat "$name.log"; fail "$name: run failed"; }
  expect_same_run sg.jsonl "$name.jsonl"
  echo "PASS $name: the token file's run bit for bit ($(final_field "$name.jsonl" params_checksum))"
done
# Data parallel: 2 ranks == 1 rank accumulating the same two micro-batches (dp_equals_single.sh).
"$run" "${args[@]}" --data corpus16 --data-format megatron --data-vocab 256 --micro-batch 4 --metrics one.jsonl 2> one.log ||
  { cat one.log; fail "1 rank with micro-batch 4 failed"; }
mpi 2 "${args[@]}" --data corpus16 --data-format megatron --data-vocab 256 --metrics two.jsonl 2> two.log ||
  { cat two.log; fail "dp=2 on the Megatron files failed"; }
expect_same_run one.jsonl two.jsonl
echo "PASS dp=2 on PREFIX (--data-format megatron) == 1 rank ($(final_field two.jsonl params_checksum))"

bad() {  # bad NAME EXPECTED-TEXT
  if "$run" "${args[@]}" --data "$1" --data-vocab 256 > "$1.log" 2>&1; then cat "$1.log"; fail "$1: accepted"; fi
  grep -qF -- "$2" "$1.log" || { cat "$1.log"; fail "$1: no '$2'"; }
  echo "PASS $1: $(grep -F -- "$2" "$1.log" | head -1 | cut -c1-170)"
}
bad badmagic "Megatron index 'badmagic.idx' is not a Megatron indexed dataset index (no MMIDIDX magic)"
bad badversion "Megatron index 'badversion.idx' has version 2, expected 1"
bad float "Megatron index 'float.idx' has dtype float32; token files are uint8, uint16 or int32"
bad shortidx "Megatron index 'shortidx.idx' is truncated: it declares"
bad badptr "Megatron index 'badptr.idx': sequence 1 points to byte 5, expected"
bad shortbin "token file 'shortbin.bin' is truncated or corrupt: its index says 2576674 tokens of 2 bytes"
bad nobin "Megatron index 'nobin.idx': its data file 'nobin.bin' is missing"

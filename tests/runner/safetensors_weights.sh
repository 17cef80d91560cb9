#!/usr/bin/env bash
# Weights out and in as safetensors (scaleguard-run export, train --init-from), GPT model:
#  1. a tp=2 run checkpoints step 4; `export` writes exactly its final parameters (the tp
#     slices gathered; compared with --dump-params, bit for bit) under the runner's names,
#     no config.json (GPT is not an HF architecture); a pp=2 checkpoint exports the same way.
#  2. --init-from the export continues like resuming the HDF5 checkpoint: both runs train on a
#     token file holding one window (every sample is the same sequence), so the resumed run's
#     step 5 and the --init-from run's step 1 compute the forward loss of the same weights on
#     the same batch: equal (tp=2 both: bit for bit; pp=2, ZeRO-3 dp=2 (each rank loads its
#     shard) and 1 process from the same export:
#     <= 1e-5). Only that first forward loss is compared: --init-from starts AdamW fresh, so
#     the updates (and every later loss) differ from the resumed run's.
#  3. sharded export (index.json) and a bf16 export load too; a checkpoint in --ckpt-dir wins
#     over --init-from (log line).
#  4. hostile and mismatched files fail on both ranks of mpirun -np 2 with the file and the
#     tensor named, never a hang: bad header length, offsets past the end, overlapping
#     tensors, an I32 tensor (tp=2), an extra tensor (pp=2: no single rank can tell, the
#     ranks' unused names are intersected); a missing tensor and a wrong shape in one process.
source "$(dirname "$0")/lib.sh"
fortunes_tokens tokens.bin
head -c 33 /usr/share/games/fortunes/fortunes > one.txt   # seq-len 32 + 1: exactly one window
"$run" prep --input one.txt --output one.bin 2>/dev/null
common=(train --model gpt --n-layer 2 --n-embd 32 --n-head 4 --seq-len 32 --vocab-size 256 --global-batch 4
        --micro-batch 2 --warmup 0 --min-lr-ratio 1 --seed 7 --threads 1 --log-every 1 --quiet)

mpi 2 "${common[@]}" --tp 2 --data tokens.bin --steps 4 --ckpt-dir ck --ckpt-every 100 --dump-params a.bin \
  2> a.log || { cat a.log; fail "tp=2 training run failed"; }
"$run" export --ckpt ck --output exp 2> export.log || { cat export.log; fail "export failed"; }
grep -q "not a Hugging Face architecture" export.log || { cat export.log; fail "export of a GPT does not say it is not HF"; }
[ -f exp/model.safetensors ] && [ ! -e exp/config.json ] || fail "export wrote $(ls exp)"

# The export holds exactly the dumped parameters (names, shapes, values).
cat > st.py <<'PY'
import json, struct, sys
import numpy as np
DT = {"F32": "<f4", "F16": "<f2", "I32": "<i4"}
def load(path):
    data = open(path, "rb").read()
    (n,) = struct.unpack_from("<Q", data, 0)
    hdr = json.loads(data[8:8 + n])
    out = {}
    for name, e in hdr.items():
        if name == "__metadata__":
            continue
        b, end = e["data_offsets"]
        raw = data[8 + n + b:8 + n + end]
        if e["dtype"] == "BF16":
            a = (np.frombuffer(raw, "<u2").astype(np.uint32) << 16).view(np.float32)
        else:
            a = np.frombuffer(raw, DT[e["dtype"]])
        out[name] = a.reshape(e["shape"])
    return hdr, out
def load_dump(path):  # --dump-params (the layout compare_params.py reads)
    data = open(path, "rb").read()
    assert data[:8] == b"SGPARAMS", path
    (count,) = struct.unpack_from("<I", data, 8)
    pos, out = 12, {}
    for _ in range(count):
        (n,) = struct.unpack_from("<I", data, pos)
        name = data[pos + 4:pos + 4 + n].decode()
        pos += 4 + n
        (ndim,) = struct.unpack_from("<I", data, pos)
        shape = struct.unpack_from(f"<{ndim}q", data, pos + 4)
        pos += 4 + 8 * ndim
        size = int(np.prod(shape)) if ndim else 1
        out[name] = np.frombuffer(data, "<f4", size, pos).reshape(shape)
        pos += 4 * size
    return out
def save(path, tensors, raw_header=None):
    hdr, at, blobs = {}, 0, []
    for name in sorted(tensors):
        dtype, arr = tensors[name]
        b = arr.tobytes()
        hdr[name] = {"dtype": dtype, "shape": list(arr.shape), "data_offsets": [at, at + len(b)]}
        at += len(b)
        blobs.append(b)
    text = json.dumps(raw_header if raw_header is not None else hdr).encode()
    text += b" " * (-len(text) % 8)
    open(path, "wb").write(struct.pack("<Q", len(text)) + text + b"".join(blobs))
    return hdr
PY
/usr/bin/python3 - a.bin exp/model.safetensors <<'PY' || fail "exported tensors differ from the run's parameters"
import sys
sys.path.insert(0, ".")
from st import load, load_dump
dump = load_dump(sys.argv[1])
hdr, exp = load(sys.argv[2])
assert hdr["__metadata__"]["format"] == "pt", hdr["__metadata__"]
assert sorted(dump) == sorted(exp), (sorted(dump), sorted(exp))
for k in dump:
    assert dump[k].shape == exp[k].shape and (dump[k] == exp[k]).all(), k
print(f"export == dump: {len(exp)} tensors")
PY

# pp=2 checkpoint: the stages' parameters gathered by name (the tied wte saved once).
mpi 2 "${common[@]}" --pp 2 --data tokens.bin --steps 1 --ckpt-dir ckpp --ckpt-every 100 --dump-params pp.bin \
  2> pp.log || { cat pp.log; fail "pp=2 training run failed"; }
"$run" export --ckpt ckpp/step-00000001 --output exppp 2> exportpp.log || { cat exportpp.log; fail "pp export failed"; }
/usr/bin/python3 - pp.bin exppp/model.safetensors <<'PY' || fail "pp=2 export differs from the run's parameters"
import sys
sys.path.insert(0, ".")
from st import load, load_dump
dump, (_, exp) = load_dump(sys.argv[1]), load(sys.argv[2])
assert sorted(dump) == sorted(exp) and all((dump[k] == exp[k]).all() for k in dump)
PY

# 2. resume step 5 vs --init-from step 1, same batch.
cp -r ck ck-resume
mpi 2 "${common[@]}" --tp 2 --data one.bin --steps 5 --ckpt-dir ck-resume --ckpt-every 100 --metrics resume.jsonl \
  2> resume.log || { cat resume.log; fail "resume failed"; }
grep -q "resumed from step-00000004" resume.log || { cat resume.log; fail "did not resume"; }
loss_at() { /usr/bin/python3 -c "
import json, sys
print([r['loss'] for r in map(json.loads, open('$1')) if r.get('step') == $2 and 'loss' in r and not r.get('final')][0])"; }
ref=$(loss_at resume.jsonl 5)
check_init() {  # check_init NAME RANKS TOLERANCE WEIGHTS ARGS...
  local name=$1 n=$2 tol=$3 weights=$4; shift 4
  if [ "$n" = 1 ]; then
    timeout 180 "$run" "${common[@]}" --data one.bin --steps 1 --init-from "$weights" --metrics "$name.jsonl" "$@" 2> "$name.log"
  else
    mpi "$n" "${common[@]}" --data one.bin --steps 1 --init-from "$weights" --metrics "$name.jsonl" "$@" 2> "$name.log"
  fi || { cat "$name.log"; fail "$name: --init-from run failed"; }
  grep -q "initialised .* from $weights" "$name.log" || { cat "$name.log"; fail "$name: no --init-from line"; }
  local got; got=$(loss_at "$name.jsonl" 1)
  /usr/bin/python3 -c "import sys; d = abs($got - $ref); print('$name: init-from step 1 loss $got, resumed step 5 loss $ref, diff %.2e' % d); sys.exit(d > $tol)" ||
    fail "$name: --init-from's first loss $got differs from the resumed run's $ref"
}
check_init init-tp2 2 0 exp --tp 2
check_init init-pp2 2 1e-5 exp --pp 2
check_init init-zero3 2 1e-5 exp --dp 2 --zero 3

# 3. sharded and bf16 exports; a checkpoint in --ckpt-dir wins.
"$run" export --ckpt ck --output exp-sharded --max-shard-gb 0.00002 2> sh.log || { cat sh.log; fail "sharded export failed"; }
[ -f exp-sharded/model.safetensors.index.json ] && ls exp-sharded/model-00002-of-*.safetensors >/dev/null ||
  fail "no sharded export: $(ls exp-sharded)"
check_init init-sharded-single 1 1e-5 exp-sharded
"$run" export --ckpt ck --output exp-bf16 --dtype bf16 2> bf.log || { cat bf.log; fail "bf16 export failed"; }
check_init init-bf16 1 0.05 exp-bf16
mpi 2 "${common[@]}" --tp 2 --data one.bin --steps 5 --ckpt-dir ck --ckpt-every 100 --init-from exp-bf16 --metrics wins.jsonl \
  2> wins.log || { cat wins.log; fail "resume with --init-from failed"; }
grep -q "init-from exp-bf16 ignored: resumed from the checkpoint" wins.log || { cat wins.log; fail "no precedence line"; }
[ "$(loss_at wins.jsonl 5)" = "$ref" ] || fail "the checkpoint did not win over --init-from"

# 4. hostile files: an error naming the problem on both ranks, never a hang.
/usr/bin/python3 - <<'PY'
import os, shutil, struct, sys
import numpy as np
sys.path.insert(0, ".")
from st import load, save
hdr, t = load("exp/model.safetensors")
f32 = {k: ("F32", v) for k, v in t.items()}
os.makedirs("bad", exist_ok=True)
data = open("exp/model.safetensors", "rb").read()
open("bad/header-length.safetensors", "wb").write(struct.pack("<Q", 1 << 40) + data[8:])
open("bad/past-end.safetensors", "wb").write(data[:-8])        # last tensor's end past the end
h = save("bad/overlap.safetensors", f32)
names = sorted(f32)
h[names[1]]["data_offsets"][0] -= 4; h[names[1]]["data_offsets"][1] -= 4   # 4 bytes into names[0]
save("bad/overlap.safetensors", f32, raw_header=h)
i32 = dict(f32); i32["ln_f.weight"] = ("I32", t["ln_f.weight"].astype(np.int32))
save("bad/i32.safetensors", i32)
miss = dict(f32); del miss["blocks.1.mlp.fc.weight"]
save("bad/missing.safetensors", miss)
extra = dict(f32); extra["blocks.9.attn.qkv.weight"] = ("F32", t["blocks.1.attn.qkv.weight"])
save("bad/extra.safetensors", extra)
shape = dict(f32); shape["blocks.0.mlp.fc.weight"] = ("F32", t["blocks.0.mlp.fc.weight"][:, :16].copy())
save("bad/shape.safetensors", shape)
PY
# Mismatches that need no second rank to show: one process (the same code path).
single_refused() {  # single_refused FILE EXPECTED-TEXT
  timeout 120 "$run" "${common[@]}" --data one.bin --steps 1 --init-from "$1" > single.log 2>&1 && fail "$1: accepted"
  grep -qF -- "$2" single.log || { cat single.log; fail "$1: no '$2' in the error"; }
  echo "refused $1: $(grep -m1 -F -- "$2" single.log)"
}
single_refused bad/missing.safetensors "has no tensor 'blocks.1.mlp.fc.weight'"
single_refused bad/shape.safetensors "tensor 'blocks.0.mlp.fc.weight' has shape [128,16] but the model's is [128,32]"
hostile() {  # hostile FILE LAYOUT EXPECTED-TEXT
  local file=$1 layout=$2 want=$3 tag; tag=$(basename "$file" .safetensors)-${layout// /}
  rm -f "rc.$tag".*
  # shellcheck disable=SC2086
  mpi_rc 2 "rc.$tag" "${common[@]}" $layout --data one.bin --steps 1 --init-from "$file" > "$tag.log" 2>&1 &&
    fail "$tag: accepted"
  [ $? -ne 124 ] || fail "$tag: hung"
  for r in 0 1; do [ "$(cat "rc.$tag.$r" 2>/dev/null)" = 1 ] || { cat "$tag.log"; fail "$tag: rank $r exit $(cat "rc.$tag.$r")"; }; done
  grep -qF -- "$want" "$tag.log" || { cat "$tag.log"; fail "$tag: no '$want' in the error"; }
  echo "refused $tag: $(grep -m1 -F -- "$want" "$tag.log")"
}
hostile bad/header-length.safetensors "--tp 2" "header length 1099511627776 is more than"
hostile bad/past-end.safetensors "--tp 2" "past the end of the data"
hostile bad/overlap.safetensors "--tp 2" "overlap tensor"
hostile bad/i32.safetensors "--tp 2" "tensor 'ln_f.weight' is I32; --init-from reads F32, BF16 or F16"
hostile bad/extra.safetensors "--pp 2" "holds tensor 'blocks.9.attn.qkv.weight', which this model does not have"
echo "PASS"

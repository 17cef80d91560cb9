#!/usr/bin/env bash
# --model llama (Hugging Face LlamaForCausalLM: RMSNorm, rotary, SwiGLU, grouped-query
# attention, no biases, untied lm_head) under every strategy of the runner, on fortunes.
#  1. Names and shapes are HF's; the built parameter count equals `scaleguard plan`'s for
#     the same shape (arch=llama, kv_heads, default ffn_hidden) and a hand count;
#     --model-preset takes the catalog's llama3-8b keys (rope theta, untied head).
#  2. GQA shape (4 query heads, 2 key/value heads): dp=2, ZeRO-1/2/3, tp=2, pp=2 (GPipe),
#     tp=2 x pp=2 (1F1B) and selective recompute follow one process, and a tied head on
#     pp=2 follows a tied one process: every step's loss within 1e-4 and the final
#     parameters within 1e-4 (the layouts only order float sums differently; the ranks'
#     checksums agree); top-k compression over dp=2 trains (loss falls).
#  3. bf16 + full recompute under tp=2: the loss falls.
#  4. A dp=2 checkpoint resumes under tp=2: steps 7-12 within 1e-5 of the uninterrupted run.
#  5. tp=3 with n-kv-head=2 is refused, naming both numbers.
source "$(dirname "$0")/lib.sh"
fortunes_tokens tokens.bin

# ---- 1. names, shapes and the planner's parameter count --------------------------------
shape=(--model llama --n-layer 2 --n-embd 64 --n-head 4 --n-kv-head 2 --seq-len 64 --untied-head)
"$run" train --data tokens.bin "${shape[@]}" --steps 1 --global-batch 2 --threads 1 --quiet \
  --metrics count.jsonl --dump-params count.bin 2> count.log || { cat count.log; fail "llama C=64 run failed"; }
/usr/bin/python3 - count.bin <<'PY' || fail "parameter names or shapes are not Hugging Face's"
import struct, sys
data = open(sys.argv[1], "rb").read()
(count,) = struct.unpack_from("<I", data, 8)
pos, got = 12, {}
for _ in range(count):
    (n,) = struct.unpack_from("<I", data, pos); name = data[pos + 4:pos + 4 + n].decode(); pos += 4 + n
    (ndim,) = struct.unpack_from("<I", data, pos); shape = struct.unpack_from(f"<{ndim}q", data, pos + 4)
    pos += 4 + 8 * ndim
    size = 1
    for d in shape: size *= d
    pos += 4 * size
    got[name] = tuple(shape)
C, F, V, kv = 64, 256, 256, 2 * 16  # ffn default: 2/3*4*64 = 170 -> 256; kv width 2 heads x 16
want = {"model.embed_tokens.weight": (V, C), "model.norm.weight": (C,), "lm_head.weight": (V, C)}
for i in range(2):
    p = f"model.layers.{i}."
    want.update({p + "input_layernorm.weight": (C,), p + "post_attention_layernorm.weight": (C,),
                 p + "self_attn.q_proj.weight": (C, C), p + "self_attn.k_proj.weight": (kv, C),
                 p + "self_attn.v_proj.weight": (kv, C), p + "self_attn.o_proj.weight": (C, C),
                 p + "mlp.gate_proj.weight": (F, C), p + "mlp.up_proj.weight": (F, C),
                 p + "mlp.down_proj.weight": (C, F)})
if got != want:
    sys.exit(f"missing {sorted(set(want) - set(got))}, extra {sorted(set(got) - set(want))}, "
             f"shapes {[(k, got[k], want[k]) for k in want if k in got and got[k] != want[k]]}")
print(f"{len(got)} tensors, names and shapes as Hugging Face's LlamaForCausalLM")
PY
runner_params=$(grep -o '"params":[0-9]*' count.jsonl | head -1 | cut -d: -f2)
if [ -n "${SCALEGUARD_PLANNER:-}" ]; then
  "$SCALEGUARD_PLANNER" plan --model arch=llama,layers=2,hidden=64,heads=4,kv_heads=2,seq=64,vocab=256,tied=no,precision=fp32 \
    --tokens 1M --gpu-type A100-80GB --gpus 1 --json > plan.json || { cat plan.json; fail "plan failed"; }
  plan_params=$(/usr/bin/python3 -c 'import json,sys; print(json.load(open("plan.json"))["params"])')
  [ "$runner_params" = "$plan_params" ] || fail "runner builds $runner_params parameters, the planner counts $plan_params"
  echo "PASS parameter count: runner $runner_params = planner $plan_params"
else
  echo "SKIP planner comparison: SCALEGUARD_PLANNER not set (runner counts $runner_params)"
fi
# Hand count: 2 x (2*64*64 + 2*64*32 + 3*64*256 + 2*64) + 64 + 2*256*64.
[ "$runner_params" = 155968 ] || fail "runner builds $runner_params parameters, the hand count is 155968"

# A catalog preset gives arch and shape for every key not given: llama3-8b's rope theta
# 500000 and untied head, with a tiny width so it runs here.
"$run" train --verbose --data tokens.bin --model-preset llama3-8b --n-layer 1 --n-embd 64 --n-head 4 --n-kv-head 2 --ffn-hidden 64 \
  --vocab-size 256 --seq-len 32 --steps 1 --global-batch 2 --threads 1 --quiet 2> preset.log || { cat preset.log; fail "preset run failed"; }
for line in model=llama rope-theta=500000 untied-head=true n-kv-head=2; do
  grep -qx "$line" preset.log || { cat preset.log; fail "--model-preset llama3-8b: no '$line' in the effective configuration"; }
done
if "$run" train --data tokens.bin --model-preset llama9 --steps 1 2> nopreset.log; then fail "an unknown preset was accepted"; fi
grep -q "no \[model llama9\] in .*catalog.ini (presets: .*llama3-8b" nopreset.log || { cat nopreset.log; fail "unknown preset: unclear error"; }
echo "PASS --model-preset llama3-8b (rope-theta 500000, untied) and an unknown preset refused"

# ---- 2. strategies equal one process ---------------------------------------------------
base=(train --verbose --data tokens.bin --model llama --n-layer 2 --n-embd 32 --n-head 4 --n-kv-head 2 --ffn-hidden 64
      --seq-len 32 --untied-head --global-batch 8 --micro-batch 2 --lr 3e-3 --seed 11 --threads 1 --log-every 1 --quiet)
common=("${base[@]}" --warmup 2)
"$run" "${common[@]}" --steps 12 --metrics one.jsonl --dump-params one.bin 2> one.log || { cat one.log; fail "1 rank failed"; }

compare() {  # compare NAME [REF]: NAME.jsonl / NAME.bin against REF (default: one process)
  local ref=${2:-one}
  /usr/bin/python3 - "$ref.jsonl" "$1.jsonl" <<'PY' || fail "$1: losses differ from $ref"
import json, sys
rows = [{r["step"]: r["loss"] for r in map(json.loads, open(p)) if "loss" in r and not r.get("final")}
        for p in sys.argv[1:]]
assert sorted(rows[1]) == sorted(rows[0]) and rows[0], f"steps {sorted(rows[1])} vs {sorted(rows[0])}"
diff = max(abs(rows[0][s] - rows[1][s]) for s in rows[0])
print(f"{sys.argv[2]}: max abs loss diff over {len(rows[0])} steps {diff:.2e}")
sys.exit(0 if diff <= 1e-4 else 1)
PY
  "$here/compare_params.py" "$ref.bin" "$1.bin" 1e-4 || fail "$1: final parameters differ from $ref"
}
strategy() {  # strategy NAME RANKS ARGS...
  local name=$1 n=$2; shift 2
  mpi "$n" "${common[@]}" --steps 12 "$@" --metrics "$name.jsonl" --dump-params "$name.bin" 2> "$name.log" ||
    { cat "$name.log"; fail "$name run failed"; }
  ! grep -q "WARNING" "$name.log" || { grep WARNING "$name.log"; fail "$name: ranks disagree"; }
  compare "$name"
}
strategy dp2 2
strategy zero1 2 --zero 1
strategy zero2 2 --zero 2
strategy zero3 2 --zero 3
strategy tp2 2 --tp 2
grep -qF "vocab-parallel embedding, head and cross-entropy: 128 of 256 logits per rank" tp2.log ||
  { cat tp2.log; fail "tp=2 did not use the vocabulary-parallel embedding and loss"; }
strategy pp2-gpipe 2 --pp 2 --schedule gpipe
strategy tp2pp2 4 --tp 2 --pp 2
"$run" "${common[@]}" --steps 12 --recompute selective --metrics selective.jsonl --dump-params selective.bin \
  2> selective.log || { cat selective.log; fail "selective recompute failed"; }
compare selective
# Tied head: the last stage's copy of model.embed_tokens.weight summed with the first's.
tied=("${common[@]/--untied-head/--untied-head=false}")
"$run" "${tied[@]}" --steps 12 --metrics one-tied.jsonl --dump-params one-tied.bin 2> one-tied.log ||
  { cat one-tied.log; fail "tied 1 rank failed"; }
mpi 2 "${tied[@]}" --steps 12 --pp 2 --metrics pp2-tied.jsonl --dump-params pp2-tied.bin 2> pp2-tied.log ||
  { cat pp2-tied.log; fail "tied pp=2 failed"; }
compare pp2-tied one-tied
first=$(grep -m1 -o '"loss":[^,]*' one.jsonl | cut -d: -f2); last=$(final_field one.jsonl loss)
/usr/bin/python3 -c "import sys; sys.exit(0 if $last < $first - 0.5 else 1)" || fail "loss did not fall ($first -> $last)"
echo "PASS dp=2, ZeRO-1/2/3, tp=2, pp=2 GPipe, tp=2 x pp=2 1F1B, selective recompute, tied pp=2 = 1 rank (loss $first -> $last)"

mpi 2 "${common[@]}" --steps 30 --compress topk:0.1 --metrics topk.jsonl 2> topk.log || { cat topk.log; fail "top-k failed"; }
first=$(grep -m1 -o '"loss":[^,]*' topk.jsonl | cut -d: -f2); last=$(final_field topk.jsonl loss)
/usr/bin/python3 -c "import sys; sys.exit(0 if $last < $first - 0.5 else 1)" || fail "top-k: loss did not fall ($first -> $last)"
echo "PASS top-k 0.1 over dp=2: loss $first -> $last"

# ---- 3. bf16 + full recompute --------------------------------------------------------
mpi 2 "${common[@]}" --steps 30 --tp 2 --precision bf16 --recompute full --metrics bf16.jsonl 2> bf16.log ||
  { cat bf16.log; fail "bf16 + full recompute failed"; }
first=$(grep -m1 -o '"loss":[^,]*' bf16.jsonl | cut -d: -f2); last=$(final_field bf16.jsonl loss)
/usr/bin/python3 -c "import sys; sys.exit(0 if $last < $first - 0.5 else 1)" || fail "bf16: loss did not fall ($first -> $last)"
echo "PASS bf16 + full recompute, tp=2: loss $first -> $last"

# ---- 4. resume a dp=2 checkpoint under tp=2 -------------------------------------------
# A constant LR (no warm-up, no decay) makes "--steps 6" the first half of "--steps 12".
flat=(--warmup 0 --min-lr-ratio 1)
mpi 2 "${base[@]}" "${flat[@]}" --steps 12 --metrics ref.jsonl --dump-params ref.bin 2> ref.log || { cat ref.log; fail "reference failed"; }
mpi 2 "${base[@]}" "${flat[@]}" --steps 6 --ckpt-dir ck --ckpt-every 100 --metrics a.jsonl 2> a.log || { cat a.log; fail "first half failed"; }
[ -d ck/step-00000006 ] || { cat a.log; fail "no checkpoint at step 6"; }
mpi 2 "${base[@]}" "${flat[@]}" --steps 12 --tp 2 --ckpt-dir ck --ckpt-every 100 --metrics b.jsonl --dump-params b.bin \
  2> b.log || { cat b.log; fail "resumed run failed"; }
grep -qF "resumed from step-00000006" b.log || { cat b.log; fail "tp=2 did not resume the dp=2 checkpoint"; }
/usr/bin/python3 - ref.jsonl b.jsonl <<'PY' || fail "resume dp=2 -> tp=2: continued losses differ"
import json, sys
ref, got = ({r["step"]: r["loss"] for r in map(json.loads, open(p)) if "loss" in r and not r.get("final")}
            for p in sys.argv[1:])
assert sorted(got) == list(range(7, 13)), f"resumed run logged steps {sorted(got)}"
diff = max(abs(ref[s] - got[s]) for s in got)
print(f"resume dp=2 -> tp=2: max abs loss diff over steps 7-12: {diff:.2e}")
sys.exit(0 if diff <= 1e-5 else 1)
PY
"$here/compare_params.py" ref.bin b.bin 1e-5 || fail "resume dp=2 -> tp=2: final parameters differ"

# ---- 5. a tp that does not divide the key/value heads ----------------------------------
if "$run" train --data tokens.bin --model llama --n-layer 2 --n-embd 48 --n-head 6 --n-kv-head 2 --seq-len 32 --steps 1 \
  --tp 3 2> tp3.log; then fail "tp=3 with n-kv-head=2 was accepted"; fi
grep -q "tp=3 does not divide n-kv-head=2" tp3.log || { cat tp3.log; fail "tp=3: the error does not name tp and n-kv-head"; }
echo "PASS tp=3 with n-kv-head=2 refused: $(grep -o 'tp=3 does not divide[^:]*' tp3.log)"

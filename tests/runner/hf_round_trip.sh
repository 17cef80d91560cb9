#!/usr/bin/env bash
# The Hugging Face round trip by directory (issue 39 item 2):
#  1. text -> prep -> a tiny llama with non-default shape keys (GQA 4/2, intermediate 96,
#     rope_theta 5e5, rms_norm_eps 1e-6, untied head, seq 32) trains on 2 ranks -> export:
#     config.json states every key, generation_config.json is written, the log names the files.
#  2. `train --init-from exp` with no shape option: the model's shape comes from exp/config.json,
#     and its first loss equals the exported model's (the checkpoint resumed on a token file of
#     one window: both runs compute the same weights' loss on the same batch), bit for bit.
#  3. an option that disagrees with config.json is an error naming both values (n-kv-head,
#     rope-theta, --model gpt; a seq-len longer than max_position_embeddings); an agreeing one
#     and a shorter seq-len are accepted.
#  4. an older Hugging Face save holding model.layers.N.self_attn.rotary_emb.inv_freq loads
#     with a note and the same loss; inv_freq of another rope_theta is refused.
#  5. export --tokenizer DIR copies tokenizer.json, tokenizer_config.json,
#     special_tokens_map.json; generation_config.json and config.json carry the bos/eos ids;
#     a run started from that export and exported again keeps them (from its --init-from
#     directory, which the checkpoint records).
source "$(dirname "$0")/lib.sh"
head -c 20000 /usr/share/games/fortunes/fortunes > corpus.txt
"$run" prep --input corpus.txt --output tokens.bin 2>/dev/null
head -c 33 corpus.txt > one.txt   # seq-len 32 + 1: exactly one window
"$run" prep --input one.txt --output one.bin 2>/dev/null
shape=(--model llama --n-layer 2 --n-embd 64 --n-head 4 --n-kv-head 2 --ffn-hidden 96 --rope-theta 500000
       --norm-eps 1e-6 --untied-head --seq-len 32 --vocab-size 256)
run_opts=(--global-batch 4 --micro-batch 4 --warmup 0 --min-lr-ratio 1 --seed 7 --threads 1 --log-every 1 --quiet)

# 1. train, export
mpi 2 train "${shape[@]}" --global-batch 4 --warmup 0 --min-lr-ratio 1 --seed 7 --threads 1 --quiet --data tokens.bin --steps 4 \
  --ckpt-dir ck --ckpt-every 100 2> train.log || { cat train.log; fail "training failed"; }
"$run" export --ckpt ck --output exp 2> export.log || { cat export.log; fail "export failed"; }
cat export.log
grep -q "exp: model.safetensors, config.json (LlamaForCausalLM), generation_config.json" export.log ||
  fail "export does not log what it wrote"
grep -q "resuming from" export.log && fail "export logs 'resuming from'"
/usr/bin/python3 - <<'PY' || fail "exp/config.json or generation_config.json"
import json
c = json.load(open("exp/config.json"))
want = {"hidden_size": 64, "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2,
        "intermediate_size": 96, "rope_theta": 500000.0, "rms_norm_eps": 1e-6, "vocab_size": 256,
        "tie_word_embeddings": False, "max_position_embeddings": 32, "model_type": "llama"}
bad = {k: (c.get(k), v) for k, v in want.items() if c.get(k) != v}
assert not bad, bad
g = json.load(open("exp/generation_config.json"))
assert g == {"_from_model_config": True}, g   # byte-level: no special tokens to name
PY

# 2. the exported model's loss: step 5 of the checkpoint resumed on one window ...
loss_at() { /usr/bin/python3 -c "
import json
print([r['loss'] for r in map(json.loads, open('$1')) if r.get('step') == $2 and 'loss' in r and not r.get('final')][0])"; }
cp -r ck ck-resume
timeout 120 "$run" train "${shape[@]}" "${run_opts[@]}" --data one.bin --steps 5 --ckpt-dir ck-resume --ckpt-every 100 \
  --metrics resume.jsonl 2> resume.log || { cat resume.log; fail "resume failed"; }
grep -q "resumed from step-00000004" resume.log || { cat resume.log; fail "did not resume"; }
ref=$(loss_at resume.jsonl 5)
# ... and the first loss of a run started from the directory alone: no shape option.
init_loss() {  # init_loss NAME WEIGHTS [ARGS...]
  local name=$1 weights=$2; shift 2
  timeout 120 "$run" train "${run_opts[@]}" --data one.bin --steps 1 --init-from "$weights" --metrics "$name.jsonl" "$@" \
    2> "$name.log" || { cat "$name.log"; fail "$name: --init-from $weights failed"; }
  loss_at "$name.jsonl" 1
}
got=$(init_loss init exp)
cat init.log
grep -q "model shape from exp/config.json" init.log || fail "no line saying where the shape came from"
echo "exported model's loss $ref (checkpoint resumed), --init-from exp alone: $got"
[ "$got" = "$ref" ] || fail "--init-from exp's first loss $got differs from the exported model's $ref"

# 3. options that disagree with config.json: errors naming both values
refused() {  # refused EXPECTED ARGS...
  local want=$1; shift
  timeout 120 "$run" train "${run_opts[@]}" --data one.bin --steps 1 --init-from exp "$@" > refused.log 2>&1 &&
    fail "$*: accepted"
  grep -qF -- "$want" refused.log || { cat refused.log; fail "$*: no '$want' in the error"; }
  echo "refused $*: $(grep -m1 -F -- "$want" refused.log)"
}
refused "--n-kv-head 4 disagrees with exp/config.json: num_key_value_heads = 2" --n-kv-head 4
refused "--rope-theta 10000 disagrees with exp/config.json: rope_theta = 500000" --rope-theta 10000
refused "--untied-head false disagrees with exp/config.json: tie_word_embeddings = false" --untied-head false
refused "--model gpt, but exp/config.json describes a llama model" --model gpt
refused "--seq-len 64 is longer than the model's context (exp/config.json: max_position_embeddings = 32)" --seq-len 64
[ "$(init_loss agree exp --n-kv-head 2 --n-embd 64 --model llama)" = "$ref" ] || fail "agreeing options changed the loss"
init_loss shorter exp --seq-len 16 > /dev/null || fail "a seq-len shorter than the context was refused"

# 4. an older HF save: rotary_emb.inv_freq per layer (F32), skipped with a note; another theta refused.
/usr/bin/python3 - <<'PY'
import json, os, shutil, struct
import numpy as np
def load(path):
    data = open(path, "rb").read()
    (n,) = struct.unpack_from("<Q", data, 0)
    hdr = json.loads(data[8:8 + n])
    out = {}
    for name, e in hdr.items():
        if name != "__metadata__":
            b, end = e["data_offsets"]
            out[name] = np.frombuffer(data[8 + n + b:8 + n + end], "<f4").reshape(e["shape"])
    return out
def save(path, tensors):
    hdr, at, blobs = {}, 0, []
    for name in sorted(tensors):
        b = tensors[name].astype("<f4").tobytes()
        hdr[name] = {"dtype": "F32", "shape": list(tensors[name].shape), "data_offsets": [at, at + len(b)]}
        at += len(b)
        blobs.append(b)
    text = json.dumps(hdr).encode()
    text += b" " * (-len(text) % 8)
    open(path, "wb").write(struct.pack("<Q", len(text)) + text + b"".join(blobs))
t = load("exp/model.safetensors")
D = 64 // 4
for name, theta in (("old-hf", 500000.0), ("other-theta", 10000.0)):
    os.makedirs(name, exist_ok=True)
    shutil.copy("exp/config.json", name)
    inv = 1.0 / theta ** (np.arange(0, D, 2, dtype=np.int64).astype(np.float32) / D)
    extra = {f"model.layers.{i}.self_attn.rotary_emb.inv_freq": inv.astype(np.float32) for i in range(2)}
    save(f"{name}/model.safetensors", {**t, **extra})
PY
got=$(init_loss old old-hf)
grep -q "note: skipped 2 non-parameter buffers in the weights (model.layers.0.self_attn.rotary_emb.inv_freq" old.log ||
  { cat old.log; fail "no note about the skipped rotary_emb.inv_freq buffers"; }
[ "$got" = "$ref" ] || fail "the old-style save's first loss $got differs from $ref"
echo "old HF save with rotary_emb.inv_freq: loss $got, $(grep -m1 'note:' old.log)"
timeout 120 "$run" train "${run_opts[@]}" --data one.bin --steps 1 --init-from other-theta > theta.log 2>&1 &&
  fail "inv_freq of another rope_theta accepted"
grep -q "rotary_emb.inv_freq' holds other rotary frequencies than rope_theta 500000" theta.log ||
  { cat theta.log; fail "no error naming the inv_freq mismatch"; }

# 5. tokenizer files: copied by export --tokenizer, then carried through a run started from them.
mkdir tok
cat > tok/tokenizer.json <<'JSON'
{"version": "1.0", "added_tokens": [{"id": 254, "content": "<s>"}, {"id": 255, "content": "</s>"}],
 "model": {"type": "BPE", "vocab": {"a": 0}, "merges": []}}
JSON
echo '{"bos_token": "<s>", "eos_token": {"content": "</s>"}}' > tok/tokenizer_config.json
echo '{"bos_token": "<s>", "eos_token": "</s>"}' > tok/special_tokens_map.json
"$run" export --ckpt ck --output exp-tok --tokenizer tok 2> export-tok.log || { cat export-tok.log; fail "export --tokenizer failed"; }
cat export-tok.log
for f in tokenizer.json tokenizer_config.json special_tokens_map.json; do
  cmp -s "tok/$f" "exp-tok/$f" || fail "export --tokenizer did not copy $f"
  grep -q "$f" export-tok.log || fail "export does not log $f"
done
/usr/bin/python3 -c "
import json
g = json.load(open('exp-tok/generation_config.json')); c = json.load(open('exp-tok/config.json'))
assert g['bos_token_id'] == 254 and g['eos_token_id'] == 255, g
assert c['bos_token_id'] == 254 and c['eos_token_id'] == 255, c" || fail "special token ids not in generation_config.json/config.json"
timeout 120 "$run" train "${run_opts[@]}" --data one.bin --steps 1 --init-from exp-tok --ckpt-dir ck-tok --ckpt-every 100 \
  2> tok-run.log || { cat tok-run.log; fail "training from exp-tok failed"; }
"$run" export --ckpt ck-tok --output exp-tok2 2> export-tok2.log || { cat export-tok2.log; fail "second export failed"; }
cmp -s tok/tokenizer.json exp-tok2/tokenizer.json || { cat export-tok2.log; fail "the init directory's tokenizer was not carried"; }
grep -q "(the run's --init-from directory)" export-tok2.log || { cat export-tok2.log; fail "export does not say where the tokenizer came from"; }
"$run" export --ckpt ck --output exp-none --tokenizer "$work/no-such" 2> none.log && fail "a missing --tokenizer accepted"
grep -q "no such file or directory" none.log || { cat none.log; fail "no error for a missing --tokenizer"; }
echo "PASS"

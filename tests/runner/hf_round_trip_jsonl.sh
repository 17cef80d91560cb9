#!/usr/bin/env bash
# The round trip of issue 39 with a real tokenizer: JSONL (the fortunes, a document per line)
# -> prep --tokenizer (a SentencePiece model trained here by python3-sentencepiece, vocabulary
# 512) -> a tiny llama on 2 ranks -> export --tokenizer (tokenizer.model beside the weights)
# -> `train --init-from exp` with no shape option (vocabulary included): the same loss as the
# exported model (its checkpoint resumed on a token file of exactly one window), bit for bit;
# a run started from that export carries tokenizer.model into its own export; `sample` decodes
# through it exactly as python3-sentencepiece does.
source "$(dirname "$0")/lib.sh"
"$run" prep --help 2>&1 | grep -q -- --tokenizer || fail "this scaleguard-run's prep has no --tokenizer"
/usr/bin/python3 - <<'PY'
import json
import sentencepiece as spm
docs = [d.strip("\n") for d in open("/usr/share/games/fortunes/fortunes", encoding="utf-8", errors="replace")
        .read().split("\n%\n") if d.strip()][:400]
with open("fortunes.jsonl", "w") as out:
    for d in docs:
        out.write(json.dumps({"text": d}) + "\n")
spm.SentencePieceTrainer.train(sentence_iterator=iter(docs), model_prefix="sp", vocab_size=512, model_type="bpe",
                               byte_fallback=True, minloglevel=2)
PY
"$run" prep --tokenizer sp.model --input fortunes.jsonl --format llmc --output tokens.bin 2> prep.log ||
  { cat prep.log; fail "prep --tokenizer failed"; }
# one.bin: the first 33 tokens (seq-len 32 + 1) as an llm.c file: every sample is that window.
/usr/bin/python3 - <<'PY'
import struct
data = open("tokens.bin", "rb").read()
head = struct.unpack_from("<256i", data, 0)
assert head[0] == 20240520 and head[1] == 1, head[:3]
ids = data[1024:1024 + 2 * 33]
hdr = [20240520, 1, 33] + [0] * 253
open("one.bin", "wb").write(struct.pack("<256i", *hdr) + ids)
PY
shape=(--model llama --n-layer 2 --n-embd 64 --n-head 4 --n-kv-head 2 --seq-len 32 --vocab-size 512)
run_opts=(--global-batch 4 --micro-batch 4 --warmup 0 --min-lr-ratio 1 --seed 5 --threads 1 --log-every 1 --quiet)
mpi 2 train "${shape[@]}" --global-batch 4 --warmup 0 --min-lr-ratio 1 --seed 5 --threads 1 --quiet --data tokens.bin \
  --steps 3 --ckpt-dir ck --ckpt-every 100 2> train.log || { cat train.log; fail "training failed"; }
"$run" export --ckpt ck --output exp --tokenizer sp.model 2> export.log || { cat export.log; fail "export failed"; }
cat export.log
cmp -s sp.model exp/tokenizer.model || fail "export --tokenizer sp.model did not write exp/tokenizer.model"
grep -q "tokenizer.model" export.log || fail "export does not log tokenizer.model"
grep -q '"vocab_size": 512' exp/config.json || fail "config.json: $(cat exp/config.json)"

loss_at() { /usr/bin/python3 -c "
import json
print([r['loss'] for r in map(json.loads, open('$1')) if r.get('step') == $2 and 'loss' in r and not r.get('final')][0])"; }
cp -r ck ck-resume
timeout 120 "$run" train "${shape[@]}" "${run_opts[@]}" --data one.bin --steps 4 --ckpt-dir ck-resume --ckpt-every 100 \
  --metrics resume.jsonl 2> resume.log || { cat resume.log; fail "resume failed"; }
grep -q "resumed from step-00000003" resume.log || { cat resume.log; fail "did not resume"; }
ref=$(loss_at resume.jsonl 4)
timeout 120 "$run" train "${run_opts[@]}" --data one.bin --steps 1 --init-from exp --metrics init.jsonl --ckpt-dir ck2 \
  --ckpt-every 100 2> init.log || { cat init.log; fail "--init-from exp failed"; }
got=$(loss_at init.jsonl 1)
echo "exported model's loss $ref, --init-from exp alone: $got"
[ "$got" = "$ref" ] || { cat init.log; fail "--init-from exp's first loss $got differs from the exported model's $ref"; }
"$run" export --ckpt ck2 --output exp2 2> export2.log || { cat export2.log; fail "second export failed"; }
cmp -s sp.model exp2/tokenizer.model || { cat export2.log; fail "tokenizer.model not carried from the --init-from directory"; }

# sample through the tokenizer beside the weights: the text is what python3-sentencepiece
# decodes from the prompt's ids and the new ones; a checkpoint finds the tokenizer in the
# directory its run started from.
prompt="A day for firm"
out=$("$run" sample --init-from exp --prompt "$prompt" --max-new-tokens 24 --temperature 1 --seed 4 --print-ids 2> sample.log) ||
  { cat sample.log; fail "sample with tokenizer.model failed"; }
cat sample.log
grep -q "SentencePiece model, 512 pieces" sample.log || fail "sample did not use exp/tokenizer.model"
ids=$(sed -n 's/.*new token ids //p' sample.log)
/usr/bin/python3 - "$prompt" "$out" "$ids" <<'PY' || fail "sample's text is not python3-sentencepiece's decoding of its ids"
import sys
import sentencepiece as spm
sp = spm.SentencePieceProcessor(model_file="sp.model")
prompt, out, ids = sys.argv[1], sys.argv[2], [int(x) for x in sys.argv[3].split(",") if x]
assert ids, "no ids"
if ids[-1] == sp.eos_id():
    ids = ids[:-1]   # the end-of-text token stops generation and is not printed
p = sp.encode(prompt)
full, base = sp.decode(p + ids), sp.decode(p)
assert full.startswith(base), (full, base)
want = prompt + full[len(base):]
assert out.rstrip("\n") == want.rstrip("\n"), (out, want)
print(f"sample: {out!r} == python3-sentencepiece's decoding of {len(ids)} new ids")
PY
"$run" sample --ckpt ck2 --prompt "$prompt" --max-new-tokens 4 > /dev/null 2> sample2.log ||
  { cat sample2.log; fail "sample --ckpt ck2 failed"; }
grep -q "SentencePiece model" sample2.log || { cat sample2.log; fail "sample --ckpt did not find the init directory's tokenizer"; }
echo "PASS"

#!/usr/bin/env bash
# prep --tokenizer end to end (issue 39 item 1): the fortunes corpus as JSONL through a
# SentencePiece model (trained here by python3-sentencepiece) into llm.c and Megatron files,
# the ids equal to the library's Python binding, then 2 ranks train a GPT on each (the
# tokenizer module is dlopen()ed beside LibTorch: a process that linked both would crash).
# A missing or malformed tokenizer, a JSONL line without the field: exit 1 with the file.
source "$(dirname "$0")/lib.sh"
/usr/bin/python3 - <<'PY'
import glob, json
import sentencepiece as spm
docs = []
for f in sorted(glob.glob("/usr/share/games/fortunes/*")):
    if "." not in f.rsplit("/", 1)[1]:
        docs += [d.strip("\n") for d in open(f, encoding="utf-8", errors="replace").read().split("\n%\n") if d.strip()]
with open("fortunes.jsonl", "w") as out:
    for d in docs:
        out.write(json.dumps({"text": d}) + "\n")
spm.SentencePieceTrainer.train(sentence_iterator=iter(docs[:3000]), model_prefix="sp", vocab_size=500, model_type="bpe",
                               byte_fallback=True, minloglevel=2)
sp = spm.SentencePieceProcessor(model_file="sp.model")
ids = [i for d in docs for i in sp.encode(d) + [sp.eos_id()]]
open("reference.u16", "wb").write(b"".join(i.to_bytes(2, "little") for i in ids))
PY
"$run" prep --tokenizer sp.model --input fortunes.jsonl --output sp.bin 2> prep.log || { cat prep.log; fail "prep failed"; }
grep -q "MB/s" prep.log || fail "prep printed no MB/s: $(cat prep.log)"
cmp <(tail -c +1025 sp.bin) reference.u16 || fail "prep's ids differ from python3-sentencepiece's"
"$run" prep --tokenizer sp.model --input fortunes.jsonl --format megatron --output mg 2> /dev/null
cmp mg.bin reference.u16 || fail "the Megatron .bin differs from python3-sentencepiece's ids"
echo "prep --tokenizer: llm.c and Megatron files hold python3-sentencepiece's ids"

small=(--model gpt --n-layer 1 --n-head 2 --n-embd 16 --seq-len 32 --global-batch 4 --steps 3 --threads 1 --quiet --vocab-size 500)
for data in sp.bin mg; do
  mpi 2 train "${small[@]}" --data "$data" > "train-$data.log" 2>&1 || { cat "train-$data.log"; fail "training on $data failed"; }
done
echo "2 ranks train on both files"

expect_prep_error() {
  local pattern=$1; shift
  local status=0
  "$run" prep "$@" > err.log 2>&1 || status=$?
  [ "$status" -eq 1 ] || { cat err.log; fail "prep $*: exit $status, expected 1"; }
  grep -qE "$pattern" err.log || { cat err.log; fail "prep $*: no message matching '$pattern'"; }
}
expect_prep_error "missing.model" --tokenizer missing.model --input fortunes.jsonl --output x.bin
echo '{"model": {"type": "BPE", "vocab": {}' > broken.json
expect_prep_error "broken.json: not valid JSON" --tokenizer broken.json --input fortunes.jsonl --output x.bin
head -c 3000 sp.model > truncated.model
expect_prep_error "truncated.model" --tokenizer truncated.model --input fortunes.jsonl --output x.bin
echo '{"body": "x"}' > nofield.jsonl
expect_prep_error "nofield.jsonl:1: no string field 'text'" --tokenizer sp.model --input nofield.jsonl --output x.bin
[ ! -e x.bin ] && [ ! -e x.bin.tmp ] || fail "a failed prep left a file behind"
echo "bad tokenizers and inputs: exit 1 naming the file"

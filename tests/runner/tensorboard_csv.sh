#!/usr/bin/env bash
# The metrics people read: a TensorBoard event file (--tensorboard DIR) and a CSV file
# (--metrics-csv FILE) beside the JSON lines, from a 2-rank run with evaluation:
#  1. DIR holds exactly one file, events.out.tfevents.<unix time>.<hostname> (rank 0 only);
#  2. read back by tfevents.py, an independent reader (crcmod's CRC-32C for the TFRecord
#     framing, Google's protobuf library for the Event records): the first record is
#     file_version "brain.Event:2", then train/loss, train/lr, train/grad_norm and
#     train/tokens_per_s at every logged step and eval/loss at every evaluation, equal (as
#     float32) to the JSON lines' values;
#  3. the CSV has the header and one row per logged step and per evaluation, equal to the
#     JSON lines' values.
source "$(dirname "$0")/lib.sh"
fortunes_tokens tokens.bin
"$run" prep --input /usr/share/games/fortunes/wisdom --output held.bin
before=$(date +%s)
mpi 2 train --data tokens.bin --model gpt --n-layer 1 --n-embd 32 --n-head 4 --seq-len 32 --global-batch 8 \
  --micro-batch 4 --lr 3e-3 --warmup 2 --steps 9 --log-every 2 --eval-data held.bin --eval-every 4 --eval-tokens 256 \
  --seed 5 --threads 1 --quiet --metrics m.jsonl --metrics-csv m.csv --tensorboard tb 2> run.log ||
  { cat run.log; fail "run failed"; }

mapfile -t files < <(ls tb)
[ "${#files[@]}" = 1 ] || fail "tb/ holds ${files[*]}: expected one event file (rank 0's)"
[[ "${files[0]}" =~ ^events\.out\.tfevents\.([0-9]+)\.(.+)$ ]] || fail "event file name '${files[0]}'"
stamp=${BASH_REMATCH[1]} host=${BASH_REMATCH[2]}
[ "$host" = "$(hostname)" ] || fail "event file host '$host', expected '$(hostname)'"
[ "$stamp" -ge "$before" ] && [ "$stamp" -le "$(date +%s)" ] || fail "event file time $stamp is not the run's"
/usr/bin/python3 "$here/tfevents.py" "tb/${files[0]}" > events.jsonl || fail "the event file does not read back"

/usr/bin/python3 - m.jsonl events.jsonl m.csv <<'PY' || fail "TensorBoard / CSV values differ from the JSON lines"
import csv, json, math, struct, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
train = {r["step"]: r for r in rows if "loss" in r and not r.get("final")}
evals = {r["eval_step"]: r["eval_loss"] for r in rows if "eval_loss" in r}
assert sorted(train) == [2, 4, 6, 8, 9], sorted(train)
assert sorted(evals) == [4, 8], sorted(evals)
f32 = lambda x: struct.unpack("<f", struct.pack("<f", x))[0]
def close(a, b, rel):  # a: the logged value (float32 or text), b: the JSON line's (rounded when written)
    return math.isclose(a, b, rel_tol=rel, abs_tol=1e-5)

events = [json.loads(l) for l in open(sys.argv[2])]
first = events.pop(0)
assert first.get("file_version") == "brain.Event:2" and "scalars" not in first, first
tb_train = {e["step"]: e["scalars"] for e in events if "train/loss" in e["scalars"]}
tb_eval = {e["step"]: e["scalars"]["eval/loss"] for e in events if "eval/loss" in e["scalars"]}
assert len(tb_train) + len(tb_eval) == len(events), events
assert sorted(tb_train) == sorted(train), (sorted(tb_train), sorted(train))
assert sorted(tb_eval) == sorted(evals), (sorted(tb_eval), sorted(evals))
for s, r in train.items():
    sc = tb_train[s]
    assert set(sc) == {"train/loss", "train/lr", "train/grad_norm", "train/tokens_per_s"}, sc
    for tag, key, rel in (("loss", "loss", 1e-6), ("lr", "lr", 1e-5), ("grad_norm", "grad_norm", 1e-5),
                          ("tokens_per_s", "tokens_per_s", 1e-5)):
        assert close(sc["train/" + tag], r[key], rel), (s, tag, sc["train/" + tag], r[key])
    assert sc["train/loss"] == f32(sc["train/loss"])
for s, v in evals.items():
    assert close(tb_eval[s], v, 1e-6), (s, tb_eval[s], v)
assert all(b["wall_time"] >= a["wall_time"] for a, b in zip(events, events[1:]))

with open(sys.argv[3]) as f:
    header = f.readline().strip()
    assert header == "step,tokens,loss,lr,grad_norm,tokens_per_s,step_ms,eval_loss", header
    f.seek(0)
    csv_rows = list(csv.DictReader(f))
csv_train = {int(r["step"]): r for r in csv_rows if r["loss"]}
csv_eval = {int(r["step"]): r for r in csv_rows if r["eval_loss"]}
assert len(csv_train) + len(csv_eval) == len(csv_rows), csv_rows
assert sorted(csv_train) == sorted(train) and sorted(csv_eval) == sorted(evals)
for s, r in csv_train.items():
    j = train[s]
    assert int(r["tokens"]) == s * 8 * 32, r
    assert r["loss"] == "%.6f" % j["loss"] and close(float(r["lr"]), j["lr"], 1e-5), (r, j)
    assert close(float(r["grad_norm"]), j["grad_norm"], 1e-5) and float(r["tokens_per_s"]) == j["tokens_per_s"], (r, j)
    assert float(r["step_ms"]) == j["step_ms"] and r["eval_loss"] == "", (r, j)
for s, r in csv_eval.items():
    assert float(r["eval_loss"]) == evals[s] and int(r["tokens"]) == s * 8 * 32 and r["loss"] == "", r
print(f"{len(events)} events, {len(csv_rows)} CSV rows agree with the JSON lines")
PY
echo "PASS TensorBoard event file (rank 0 only, read back independently) and CSV agree with the JSON lines"

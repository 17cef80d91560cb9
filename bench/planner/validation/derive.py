#!/usr/bin/env python3
"""Re-derives runs.csv's tok_s_gpu column from each run's raw published figure.

Every source states its result differently (hardware TFLOP/s with recomputation, MFU,
tokens/s, GPU-hours for a token count, wall time on N GPUs); docs/validation.md compares
the planner in one currency, training tokens per second per GPU. This script applies the
conversions the doc states and exits non-zero when a stored value drifts from its source
figure by more than 0.5%. Standard library only.

  bench/planner/validation/derive.py
"""
import csv
import os
import re
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
RUNS = os.path.join(HERE, "runs.csv")

# Peak dense 16-bit TFLOP/s used only to turn a reported MFU into tokens/s (Korthikanti et
# al. report MFU against the A100's 312).
A100_PEAK = 312e12
# Parameter counts the sources use for runs whose FLOPs they state as 6*N per token.
NOMINAL_PARAMS = {"llama3-405b": 405e9}


def load_runs():
    with open(RUNS) as f:
        rows = [line for line in f if line.strip() and not line.startswith("#")]
    return list(csv.DictReader(rows, delimiter=";"))


def shape(run):
    """layers, hidden, seq, vocab from an explicit model spec."""
    kv = dict(part.split("=") for part in run["model"].split(",") if "=" in part)
    return int(kv["layers"]), int(kv["hidden"]), int(run["seq"]), int(kv["vocab"])


def megatron_hw_flops_per_token(l, h, s, v):
    # Narayanan et al. 2021, eq. (3) per token: 96*l*h^2*(1 + s/6h + V/16lh), full recompute.
    return 96 * l * h * h * (1 + s / (6 * h) + v / (16 * l * h))


def megatron_model_flops_per_token(l, h, s, v):
    # Korthikanti et al. 2022, model FLOPs (no recompute): 72*l*h^2*(1 + s/6h + V/12lh).
    return 72 * l * h * h * (1 + s / (6 * h) + v / (12 * l * h))


SCALE = {"B": 1e9, "T": 1e12, "M": 1e6, "": 1}
SECONDS = {"min": 60, "h": 3600, "days": 86400}


def num(text):
    return float(text.replace(",", ""))


def derive(run):
    """tokens/s/GPU from the raw figure, by the conversion docs/validation.md states."""
    raw = run["raw"]
    m = re.match(r"([\d.]+) TFLOP/s(?:/GPU| on one GPU) \(hw, full recompute\)", raw)
    if m:
        return num(m[1]) * 1e12 / megatron_hw_flops_per_token(*shape(run))
    m = re.match(r"([\d.]+) PFLOP/s on (\d+) GPUs \(hw, full recompute\)", raw)
    if m:
        return num(m[1]) * 1e15 / int(m[2]) / megatron_hw_flops_per_token(*shape(run))
    m = re.match(r"MFU ([\d.]+)% \(selective", raw)
    if m:
        return num(m[1]) / 100 * A100_PEAK / megatron_model_flops_per_token(*shape(run))
    m = re.match(r"([\d.]+) TFLOP/s/GPU \(BF16 MFU", raw)
    if m:
        return num(m[1]) * 1e12 / (6 * NOMINAL_PARAMS[run["model"].split(",")[0]])
    m = re.match(r"([\d.]+) tokens/s/GPU", raw)
    if m:
        return num(m[1])
    m = re.match(r"([\d.]+)([BT]) tokens in ([\d.,]+)([M]?) GPU-hours", raw)
    if m:
        return num(m[1]) * SCALE[m[2]] / (num(m[3]) * SCALE[m[4]] * 3600)
    m = re.match(r"([\d.]+)([BT]) tokens in ~?([\d.]+) (min|h|days) on (\d+) GPUs", raw)
    if m:
        return num(m[1]) * SCALE[m[2]] / (num(m[3]) * SECONDS[m[4]] * int(m[5]))
    m = re.match(r"([\d.]+)k iters x ([\d,]+) tokens in ~?([\d.]+) days on (\d+) GPUs", raw)
    if m:
        return num(m[1]) * 1e3 * num(m[2]) / (num(m[3]) * 86400 * int(m[4]))
    raise ValueError(f"{run['id']}: no conversion for raw figure '{raw}'")


def main():
    drifted = 0
    for r in load_runs():
        derived, stored = derive(r), float(r["tok_s_gpu"])
        ok = abs(derived / stored - 1) < 0.005
        drifted += not ok
        print(f"{r['id']:22s} stored {stored:12.1f} derived {derived:12.1f} {'ok' if ok else 'DRIFT'}")
    sys.exit(1 if drifted else 0)


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""The planner against published training runs: the table of docs/validation.md.

Runs `scaleguard plan --json` for every run in runs.csv (layout pinned to what the run
used), compares predicted with reported tokens per second per GPU, and prints a Markdown
table with per-GPU-type error summaries.

  validate.py --scaleguard BUILD/planner/scaleguard            table with the shipped catalog
  validate.py --scaleguard ... --fit                           refit one efficiency per GPU
                                                               type on the `fit` runs, print
                                                               the lines for catalog.ini and
                                                               the table with the fitted values
  validate.py --derive                                         re-derive runs.csv's tok_s_gpu
                                                               column from the raw figures

Standard library only; the catalog in the repository is never modified (the fit works on a
temporary copy).
"""
import argparse
import csv
import json
import math
import os
import re
import statistics
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.normpath(os.path.join(HERE, "..", "..", ".."))
RUNS = os.path.join(HERE, "runs.csv")
CATALOG = os.path.join(ROOT, "configs", "catalog.ini")

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


SCALE = {"k": 1e3, "B": 1e9, "T": 1e12, "M": 1e6, "": 1}
SECONDS = {"min": 60, "h": 3600, "days": 86400}


def num(text):
    return float(text.replace(",", ""))


def derive(run):
    """tokens/s/GPU from the raw figure, by the conversion docs/validation.md states."""
    raw, gpus = run["raw"], int(run["gpus"])
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
        return num(m[1]) * 1e12 / (6 * NOMINAL_PARAMS[run["model"]])
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
    raise ValueError(f"{run['id']}: no conversion for raw figure '{raw}' (gpus={gpus})")


def plan(scaleguard, catalog, run):
    """The planner's prediction (tokens/s/GPU) and its JSON plan."""
    cmd = [scaleguard, "plan", "--json", "--catalog", catalog,
           "--model", run["model"], "--seq", run["seq"],
           "--gpu-type", run["gpu_type"], "--gpus", run["gpus"],
           "--tokens", run["tokens"] if run["tokens"] != "-" else "1e9"]
    for field, flag in (("batch", "--global-batch"), ("tp", "--tp"), ("pp", "--pp"),
                        ("dp", "--dp"), ("zero", "--zero"), ("micro", "--micro-batch"),
                        ("recompute", "--recompute")):
        if run[field] != "-":
            cmd += [flag, run[field]]
    out = subprocess.run(cmd, capture_output=True, text=True)
    if out.returncode != 0:
        return None, (out.stderr or out.stdout).strip().splitlines()[-1:]
    p = json.loads(out.stdout)
    if run["kind"] == "e2e":  # whole run: tokens over GPU-hours, failure overhead included
        return float(run["tokens"]) / (p["gpu_hours"] * 3600), p
    return p["global_batch"] * int(run["seq"]) / (p["step_seconds"] * p["gpus"]), p


def catalog_with(efficiency):
    """A temporary copy of the catalog with `efficiency` replaced per GPU type section."""
    with open(CATALOG) as f:
        lines = f.read().split("\n")
    section = None
    for i, line in enumerate(lines):
        m = re.match(r"\s*\[\s*gpu\s+([^\]]+?)\s*\]", line)
        if m:
            section = m[1]
        elif re.match(r"\s*\[", line):
            section = None
        elif section in efficiency and re.match(r"\s*efficiency\s*=", line):
            lines[i] = f"efficiency = {efficiency[section]:.3f}"
    tmp = tempfile.NamedTemporaryFile("w", suffix=".ini", delete=False)
    tmp.write("\n".join(lines))
    tmp.close()
    return tmp.name


def current_efficiency():
    eff, section = {}, None
    with open(CATALOG) as f:
        for line in f:
            m = re.match(r"\s*\[\s*gpu\s+([^\]]+?)\s*\]", line)
            if m:
                section = m[1]
            elif re.match(r"\s*\[", line):
                section = None
            m2 = re.match(r"\s*efficiency\s*=\s*([\d.]+)", line)
            if section and m2:
                eff[section] = float(m2[1])
    return eff


def fit(scaleguard, runs):
    """One efficiency per GPU type: e <- e * geomean(reported/predicted) over its fit runs.
    Communication and bubbles do not scale with e, so iterate to the fixed point."""
    eff = current_efficiency()
    types = sorted({r["gpu_type"] for r in runs if r["set"] == "fit"})
    for _ in range(6):
        cat = catalog_with(eff)
        for t in types:
            logs = []
            for r in runs:
                if r["gpu_type"] == t and r["set"] == "fit":
                    pred, _ = plan(scaleguard, cat, r)
                    if pred:
                        logs.append(math.log(float(r["tok_s_gpu"]) / pred))
            if logs:
                eff[t] = eff[t] * math.exp(sum(logs) / len(logs))
        os.unlink(cat)
    return {t: round(eff[t], 3) for t in types}, eff


def fmt_rate(x):
    return f"{x:,.0f}" if x >= 100 else f"{x:.1f}"


def table(scaleguard, catalog, runs):
    print("| run | GPU | layout (tp x pp x dp, zero, recompute) | kind | set | reported tok/s/GPU "
          "| predicted | error | planner MFU |")
    print("|---|---|---|---|---|---|---|---|---|")
    errors = {}
    for r in runs:
        pred, p = plan(scaleguard, catalog, r)
        if pred is None:
            print(f"| {r['id']} | {r['gpu_type']} | | {r['kind']} | {r['set']} | "
                  f"{fmt_rate(float(r['tok_s_gpu']))} | error: {' '.join(p)} | | |")
            continue
        err = pred / float(r["tok_s_gpu"]) - 1
        errors.setdefault((r["gpu_type"], r["kind"], r["set"]), []).append(err)
        lay = p["tp"], p["pp"], p["dp"], p["zero"], p["recompute"]
        print(f"| {r['id']} | {r['gpu_type']} | {lay[0]}x{lay[1]}x{lay[2]}, z{lay[3]}, {lay[4]}"
              f" | {r['kind']} | {r['set']} | {fmt_rate(float(r['tok_s_gpu']))} | "
              f"{fmt_rate(pred)} | {err:+.0%} | {p['mfu']:.0%} |")
    print()
    print("| GPU | kind | set | runs | median abs error | worst |")
    print("|---|---|---|---|---|---|")
    for (t, k, s), errs in sorted(errors.items()):
        worst = max(errs, key=abs)
        print(f"| {t} | {k} | {s} | {len(errs)} | "
              f"{statistics.median(abs(e) for e in errs):.0%} | {worst:+.0%} |")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--scaleguard", help="path to the scaleguard executable")
    ap.add_argument("--fit", action="store_true", help="refit efficiencies on the fit runs")
    ap.add_argument("--derive", action="store_true", help="check runs.csv's tok_s_gpu column")
    args = ap.parse_args()
    runs = load_runs()
    if args.derive:
        bad = 0
        for r in runs:
            d = derive(r)
            stored = float(r["tok_s_gpu"])
            ok = abs(d / stored - 1) < 0.005
            bad += not ok
            print(f"{r['id']:22s} stored {stored:12.1f} derived {d:12.1f} {'ok' if ok else 'DRIFT'}")
        sys.exit(1 if bad else 0)
    if not args.scaleguard:
        ap.error("--scaleguard is required (or --derive)")
    catalog = CATALOG
    if args.fit:
        fitted, full = fit(args.scaleguard, runs)
        print("Fitted efficiency per GPU type (put these in configs/catalog.ini):")
        for t, e in fitted.items():
            print(f"  [gpu {t}]  efficiency = {e:.3f}")
        print()
        catalog = catalog_with(full)
    table(args.scaleguard, catalog, runs)
    if catalog != CATALOG:
        os.unlink(catalog)


if __name__ == "__main__":
    main()

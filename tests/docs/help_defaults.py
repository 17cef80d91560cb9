#!/usr/bin/env python3
"""Defaults in --help read as a person wrote them: `(=0.1)`, not Boost.Program_options'
`(=0.10000000000000001)` (a double printed to 17 digits when no text form is given).

  help_defaults.py SCALEGUARD [SCALEGUARD_RUN]

Runs `scaleguard --help`, `scaleguard VERB --help` for every verb it lists, and
`scaleguard-run VERB --help` for every verb of its usage, and fails on any number shown as a
default, `(=N)` or `default N`, with more than 6 significant digits.
Exit 0 = pass, 1 = fail.
"""
import re
import subprocess
import sys
import os

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from options import help_commands  # noqa: E402

MAX_DIGITS = 6
NUMBER = r"[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?"


def significant_digits(text):
    mantissa = re.split(r"[eE]", text)[0].lstrip("+-").replace(".", "")
    digits = mantissa.lstrip("0")
    if "." in re.split(r"[eE]", text)[0]:
        return len(digits)  # 0.100 has 3: written zeros after the point count
    return len(digits.rstrip("0")) or 1  # 10000 has 1


def help_text(args):
    p = subprocess.run(args, capture_output=True, text=True)
    if p.returncode != 0:
        raise SystemExit(f"{' '.join(args)}: exit {p.returncode}\n{p.stdout}{p.stderr}")
    return p.stdout + p.stderr


def defaults_in(text):
    """(option line, number) for every default a --help text shows."""
    found = []
    for line in text.splitlines():
        for m in re.finditer(r"\(=(" + NUMBER + r")\)", line):
            found.append((line.strip(), m.group(1)))
        for m in re.finditer(r"\bdefault:?\s+(" + NUMBER + r")(?![\w.])", line):
            found.append((line.strip(), m.group(1)))
    return found


def main():
    if len(sys.argv) < 2:
        raise SystemExit(__doc__)
    sg = sys.argv[1]
    pages = {"scaleguard --help": help_text([sg, "--help"])}
    verbs = help_commands(pages["scaleguard --help"])
    if not verbs:
        raise SystemExit("scaleguard --help lists no commands")
    for v in verbs:
        pages[f"scaleguard {v} --help"] = help_text([sg, v, "--help"])
    if len(sys.argv) > 2:
        run = sys.argv[2]
        usage = help_text([run, "--help"])
        run_verbs = sorted(set(re.findall(r"scaleguard-run (\w+)", usage)))
        if "train" not in run_verbs:
            raise SystemExit(f"scaleguard-run --help names no train verb:\n{usage}")
        for v in run_verbs:
            pages[f"scaleguard-run {v} --help"] = help_text([run, v, "--help"])
    failures = 0
    shown = 0
    for page, text in pages.items():
        for line, number in defaults_in(text):
            shown += 1
            if significant_digits(number) > MAX_DIGITS:
                failures += 1
                print(f"FAIL: {page}: default {number} has more than {MAX_DIGITS} significant digits: {line}")
    if shown == 0:
        raise SystemExit("no defaults found in any --help: the check would pass vacuously")
    print(f"{len(pages)} help pages, {shown} defaults, {failures} too long")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env python3
"""docs/admin-guide.md and docs/user-guide.md: every command line in their code blocks that
runs one of our programs uses a command and options the program really has.

  scaleguard VERB --opt ...          VERB in `scaleguard --help`, --opt in `scaleguard VERB --help`
  scaleguard-run prep|train --opt    --opt in `scaleguard-run VERB --help` (when built)
  .../install.sh --opt               --opt in `install.sh --help`
  sbatch|srun|salloc --train-*       --train-* is an option `scaleguard decide` mirrors
Environment: SCALEGUARD_SOURCE_DIR, SCALEGUARD_BIN, optional SCALEGUARD_RUN_BIN.
"""
import os
import re
import shlex
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from options import command_options, help_commands, help_options  # noqa: E402

SRC = os.environ["SCALEGUARD_SOURCE_DIR"]
BIN = os.environ["SCALEGUARD_BIN"]
RUN_BIN = os.environ.get("SCALEGUARD_RUN_BIN")
INSTALL = os.path.join(SRC, "scripts", "parallelcluster", "install.sh")
GUIDES = ["docs/admin-guide.md", "docs/user-guide.md"]
failures = []
_help = {}


def fail(msg):
    failures.append(msg)
    print("FAIL: " + msg)


def options_of(*cmd):
    if cmd not in _help:
        p = subprocess.run([*cmd, "--help"], capture_output=True, text=True)
        _help[cmd] = help_options(p.stdout) if p.returncode == 0 else None
    return _help[cmd]


def install_options():
    return help_options(subprocess.run([INSTALL, "--help"], capture_output=True, text=True, check=True).stdout)


def commands(path):
    """(line number, words) of each command in ``` blocks and in 4-space indented code
    lines, continuation lines joined."""
    out, block, pending, start = [], False, "", 0
    with open(path, encoding="utf-8") as f:
        for n, line in enumerate(f, 1):
            if line.lstrip().startswith("```"):
                block = not block
                continue
            if not block and not pending and not line.startswith("    "):
                continue
            text = re.sub(r"\s+#.*$", "", line.rstrip("\n")).strip()
            text = re.sub(r"^(\$|#|sudo)\s+", "", text)
            if not pending:
                start = n
            if text.endswith("\\"):
                pending += text[:-1] + " "
                continue
            full = pending + text
            pending = ""
            for part in re.split(r"\s*(?:&&|\|\||;|\|)\s*", full):
                try:
                    words = shlex.split(part)
                except ValueError:
                    words = part.split()
                if words:
                    out.append((start, words))
    return out


def main():
    verbs = set(help_commands(subprocess.run([BIN, "--help"], capture_output=True, text=True).stdout))
    train_opts = {o for o in options_of(BIN, "decide") if o.startswith("train-")}
    inst = install_options()
    for guide in GUIDES:
        path = os.path.join(SRC, guide)
        if not os.path.exists(path):
            fail(f"{guide} is missing")
            continue
        checked = 0
        for n, words in commands(path):
            where = f"{guide}:{n}"
            prog = os.path.basename(words[0])
            if prog == "scaleguard" and len(words) > 1 and not words[1].startswith("-"):
                verb = words[1]
                if verb not in verbs:
                    fail(f"{where}: `scaleguard {verb}`: no such command ({sorted(verbs)})")
                    continue
                known = options_of(BIN, verb)
                for o in command_options(words[2:]):
                    if o not in known and o != "help":
                        fail(f"{where}: `scaleguard {verb}` has no option --{o}")
                checked += 1
            elif prog == "scaleguard-run" and len(words) > 1 and RUN_BIN:
                known = options_of(RUN_BIN, words[1])
                if known is None:
                    fail(f"{where}: `scaleguard-run {words[1]}`: no such command")
                    continue
                for o in command_options(words[2:]):
                    if o not in known and o != "help":
                        fail(f"{where}: `scaleguard-run {words[1]}` has no option --{o}")
                checked += 1
            elif prog == "install.sh":
                for o in command_options(words[1:]):
                    if o not in inst and o != "help":
                        fail(f"{where}: install.sh has no option --{o}")
                checked += 1
            elif prog in ("sbatch", "srun", "salloc"):
                for o in command_options(words[1:]):
                    if o.startswith("train-") and o not in train_opts:
                        fail(f"{where}: {prog} --{o}: the SPANK plugin has no such option ({sorted(train_opts)})")
                checked += 1
        if checked < 5:
            fail(f"{guide}: only {checked} command lines of ours found in code blocks; the guide should show how to run things")
        print(f"{guide}: {checked} command lines checked")
    if failures:
        print(f"{len(failures)} problem(s)")
        return 1
    print("ok")
    return 0


if __name__ == "__main__":
    sys.exit(main())

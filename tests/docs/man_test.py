#!/usr/bin/env python3
"""Man pages checked against the programs they describe.

  man_test.py render                  every man/*.[1-8] renders with no groff warning
  man_test.py scaleguard BIN          scaleguard.1: one subsection per verb of `BIN --help`,
                                      each naming exactly the verb's long options
  man_test.py scaleguard-run BIN      scaleguard-run.1: the options of `prep`, `train` and `export`
  man_test.py policy BIN              scaleguard-policy.5: rule ids and defaults as `policy
                                      check` prints them; the EXAMPLE passes `policy check`
Environment: SCALEGUARD_SOURCE_DIR (the source tree). Exit 0 = pass, 1 = fail.
"""
import os
import re
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from options import help_commands, help_options, man_options  # noqa: E402

SRC = os.environ.get("SCALEGUARD_SOURCE_DIR") or os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
MAN = os.path.join(SRC, "man")
failures = []


def fail(msg):
    failures.append(msg)
    print("FAIL: " + msg)


def run(args, expect_rc=0):
    p = subprocess.run(args, capture_output=True, text=True)
    if expect_rc is not None and p.returncode != expect_rc:
        raise SystemExit(f"{' '.join(args)}: exit {p.returncode}, expected {expect_rc}\n{p.stdout}{p.stderr}")
    return p.stdout + p.stderr


def roff_text(path):
    with open(path, encoding="utf-8") as f:
        return f.read()


def man_sections(text, macro):
    """{name: body} of `.SS name` (macro SS) or `.SH name` subsections."""
    parts = {}
    name = None
    for line in text.splitlines():
        m = re.match(r"^\." + macro + r"\s+\"?([^\"]+?)\"?\s*$", line)
        if m:
            name = m.group(1).replace("\\-", "-")
            parts[name] = []
        elif line.startswith(".SH") or line.startswith(".SS"):
            name = None
        elif name is not None:
            parts[name].append(line)
    return {k: "\n".join(v) for k, v in parts.items()}


def check_render():
    pages = sorted(f for f in os.listdir(MAN) if re.search(r"\.[1-8]$", f))
    if len(pages) < 3:
        fail(f"expected at least 3 man pages in {MAN}, found {pages}")
    for page in pages:
        p = subprocess.run(["groff", "-man", "-ww", "-z", os.path.join(MAN, page)], capture_output=True, text=True)
        if p.returncode != 0 or p.stderr.strip():
            fail(f"{page}: groff -man -ww reports:\n{p.stderr}")
        p = subprocess.run(["man", "--warnings", "-l", os.path.join(MAN, page)], capture_output=True, text=True,
                           env=dict(os.environ, MANPAGER="cat", MANWIDTH="80"))
        if p.returncode != 0 or p.stderr.strip():
            fail(f"{page}: man --warnings reports:\n{p.stderr}")


def compare(where, documented, accepted):
    documented = documented - {"help"}   # every command has --help; the pages say so once
    for o in sorted(accepted - documented):
        fail(f"{where}: --{o} is in --help but not in the man page")
    for o in sorted(documented - accepted):
        fail(f"{where}: the man page names --{o}, which the program does not accept")


def check_scaleguard(binary):
    text = roff_text(os.path.join(MAN, "scaleguard.1"))
    verbs = help_commands(run([binary, "--help"]))
    if not verbs:
        fail("scaleguard --help lists no commands")
    sections = man_sections(text, "SS")
    for v in verbs:
        if v not in sections:
            fail(f"scaleguard.1: no '.SS {v}' for the command `scaleguard {v}`")
    for s in sections:
        if s not in verbs:
            fail(f"scaleguard.1: '.SS {s}' documents a command scaleguard does not have")
    union = set()
    for v in verbs:
        accepted = help_options(run([binary, v, "--help"]))
        union |= accepted
        if v in sections:
            compare(f"scaleguard.1 [{v}]", man_options(sections[v]), accepted)
    # Options named outside the command subsections must belong to some command.
    for o in sorted(man_options(text) - union - {"help", "version"}):
        fail(f"scaleguard.1 names --{o}, which no scaleguard command accepts")
    # The page must not name an option the program rejects: ask the program itself.
    for v in verbs:
        if v in sections:
            for o in sorted(man_options(sections[v])):
                out = subprocess.run([binary, v, "--" + o, "--help"], capture_output=True, text=True)
                if re.search(r"unrecognised option|unknown option", out.stderr):
                    fail(f"scaleguard {v} rejects --{o}: {out.stderr.strip()}")


def check_runner(binary):
    text = roff_text(os.path.join(MAN, "scaleguard-run.1"))
    sections = man_sections(text, "SS")
    for verb in ("prep", "train", "export"):
        if verb not in sections:
            fail(f"scaleguard-run.1: no '.SS {verb}'")
            continue
        compare(f"scaleguard-run.1 [{verb}]", man_options(sections[verb]), help_options(run([binary, verb, "--help"])))


def check_policy(binary):
    text = roff_text(os.path.join(MAN, "scaleguard-policy.5"))
    rules = man_sections(text, "SS").get("[rules]", "")
    documented = dict(re.findall(r"^\.BR (\w+) \" \[([^\]]+)\]\"", rules, re.M))
    catalog = os.path.join(SRC, "configs", "catalog.ini")
    with tempfile.TemporaryDirectory() as tmp:
        # A policy with no [rules] shows every rule at its default.
        minimal = os.path.join(tmp, "minimal.ini")
        with open(minimal, "w") as f:
            f.write(f"catalog = {catalog}\n[partition p]\ninstance = p4d.24xlarge\ndefault = yes\n")
        out = run([binary, "policy", "check", minimal])
        defaults = dict((m.group(1), " ".join(m.group(2).split()))
                        for m in re.finditer(r"^  ([a-z_]+)\s{2,}(\S.*)$", out, re.M))
        if not defaults:
            fail("scaleguard policy check printed no rules")
        for rule, value in defaults.items():
            if rule not in documented:
                fail(f"scaleguard-policy.5: rule {rule} (default '{value}') is not documented")
            elif documented[rule] != value:
                fail(f"scaleguard-policy.5: rule {rule}: the page says [{documented[rule]}], policy check says '{value}'")
        for rule in documented:
            if rule not in defaults:
                fail(f"scaleguard-policy.5 documents rule {rule}, which policy check does not know")
        # The EXAMPLE, with the catalog made absolute, must be a valid policy.
        example = man_sections(text, "SH").get("EXAMPLE", "")
        m = re.search(r"^\.EX\n(.*?)^\.EE", example, re.M | re.S)
        if not m:
            fail("scaleguard-policy.5: EXAMPLE has no .EX/.EE block")
            return
        body = m.group(1).replace("\\-", "-").replace("catalog = catalog.ini", f"catalog = {catalog}")
        path = os.path.join(tmp, "example.ini")
        with open(path, "w") as f:
            f.write(body)
        p = subprocess.run([binary, "policy", "check", path], capture_output=True, text=True)
        if p.returncode != 0:
            fail(f"scaleguard-policy.5: the EXAMPLE policy fails policy check:\n{p.stderr}")


def main():
    if len(sys.argv) < 2:
        raise SystemExit(__doc__)
    what = sys.argv[1]
    if what == "render":
        check_render()
    elif what == "scaleguard":
        check_scaleguard(sys.argv[2])
    elif what == "scaleguard-run":
        check_runner(sys.argv[2])
    elif what == "policy":
        check_policy(sys.argv[2])
    else:
        raise SystemExit(f"unknown check '{what}'\n{__doc__}")
    if failures:
        print(f"{len(failures)} problem(s)")
        return 1
    print("ok")
    return 0


if __name__ == "__main__":
    sys.exit(main())

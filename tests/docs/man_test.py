#!/usr/bin/env python3
"""Man pages checked against the programs they describe.

  man_test.py render                  every man/*.[1-8] renders with no groff warning
  man_test.py scaleguard BIN          scaleguard.1: one subsection per verb of `BIN --help`,
                                      each naming exactly the verb's long options
  man_test.py scaleguard-run BIN      scaleguard-run.1: the options of `prep`, `train` and `export`
  man_test.py policy BIN              scaleguard-policy.5: rule ids and defaults as `policy
                                      check` prints them; the EXAMPLE passes `policy check`
  man_test.py exit-codes              EXIT STATUS of scaleguard-run.1 and scaleguard.1 lists
                                      exactly the codes the sources return (runner: the
                                      constants of exit_codes.h and literal codes of exits and
                                      aborts; CLI: the verbs' `return N`)
  man_test.py policy-reload           scaleguard.1 and the guides say what the job_submit
                                      plugin does: it reloads a changed policy by itself
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


def source_files(*dirs):
    for d in dirs:
        for root, _, files in os.walk(os.path.join(SRC, d)):
            for f in sorted(files):
                if re.search(r"\.(cpp|h)$", f):
                    yield os.path.join(root, f)


def documented_exit_codes(page):
    body = man_sections(roff_text(os.path.join(MAN, page)), "SH").get("EXIT STATUS", "")
    return {int(c) for c in re.findall(r"^\.B (\d+)\s*$", body, re.M)}


def compare_codes(page, documented, returned):
    if not documented:
        fail(f"{page}: no EXIT STATUS entries (.TP / .B N)")
    for code, where in sorted(returned.items()):
        if code not in documented:
            fail(f"{page}: EXIT STATUS omits {code}, which the code returns ({where})")
    for code in sorted(documented - set(returned)):
        fail(f"{page}: EXIT STATUS lists {code}, which no source returns")


def check_exit_codes():
    # scaleguard-run: its named exit statuses, and any literal status an exit or abort uses.
    runner = {}
    with open(os.path.join(SRC, "runner", "src", "config", "exit_codes.h"), encoding="utf-8") as f:
        for name, code in re.findall(r"constexpr int (kExit\w+) = (\d+);", f.read()):
            runner.setdefault(int(code), name)
    if 86 not in runner:
        fail("runner/src/config/exit_codes.h: no exit status 86 (a collective failed; train.sbatch requeues on it)")
    for path in source_files("runner"):
        with open(path, encoding="utf-8") as f:
            text = f.read()
        for m in re.finditer(r"\b(?:MPI_Abort\s*\([^,()]+,|_Exit\s*\(|_exit\s*\(|exit\s*\()\s*(\d+)\s*\)", text):
            runner.setdefault(int(m.group(1)), os.path.relpath(path, SRC))
    compare_codes("scaleguard-run.1", documented_exit_codes("scaleguard-run.1"), runner)
    # scaleguard: what the verbs return (a forked child's _exit(127) is not the CLI's status).
    cli = {}
    for path in source_files("cli"):
        with open(path, encoding="utf-8") as f:
            text = f.read()
        for m in re.finditer(r"\breturn\s+(?:[^;?]+\?\s*)?(\d+)\s*(?::\s*(\d+)\s*)?;", text):
            for g in m.groups():
                if g is not None:
                    cli.setdefault(int(g), os.path.relpath(path, SRC))
    compare_codes("scaleguard.1", documented_exit_codes("scaleguard.1"), cli)


def check_policy_reload():
    with open(os.path.join(SRC, "spank-plugin", "job_submit", "policy.cpp"), encoding="utf-8") as f:
        plugin = f.read()
    reloads = "reload_if_changed" in plugin and "st_mtim" in plugin
    if not reloads:
        fail("spank-plugin/job_submit/policy.cpp no longer reloads on a changed mtime: update this check and the docs")
        return
    # The plugin reloads by itself: no page may tell the admin to reconfigure Slurm for it.
    pages = [os.path.join(MAN, f) for f in os.listdir(MAN)]
    pages += [os.path.join(SRC, "docs", f) for f in os.listdir(os.path.join(SRC, "docs")) if f.endswith(".md")]
    pages += [os.path.join(SRC, "configs", "policy.ini"), os.path.join(SRC, "README.md")]
    wrong = re.compile(r"policy check[^\n]*(?:&&|\bthen\b|before)[^\n]*scontrol reconfigure|"
                       r"before\s+\W*(?:\.BR?\s+)?\W*scontrol reconfigure", re.S)
    for path in pages:
        if not os.path.isfile(path):
            continue
        with open(path, encoding="utf-8") as f:
            text = f.read()
        for m in wrong.finditer(text):
            line = text.count("\n", 0, m.start()) + 1
            fail(f"{os.path.relpath(path, SRC)}:{line}: says the policy needs `scontrol reconfigure` "
                 f"({' '.join(m.group(0).split())!r}), but job_submit/scaleguard reloads a changed policy by itself")
    policy = man_sections(roff_text(os.path.join(MAN, "scaleguard.1")), "SS").get("policy", "")
    if not re.search(r"reloads", policy):
        fail("scaleguard.1 [policy]: does not say that job_submit/scaleguard reloads a changed policy by itself")


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
    elif what == "exit-codes":
        check_exit_codes()
    elif what == "policy-reload":
        check_policy_reload()
    else:
        raise SystemExit(f"unknown check '{what}'\n{__doc__}")
    if failures:
        print(f"{len(failures)} problem(s)")
        return 1
    print("ok")
    return 0


if __name__ == "__main__":
    sys.exit(main())

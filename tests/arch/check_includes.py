#!/usr/bin/env python3
"""Includes point one way inside a source tree split into folders (runner/src/).

Each folder directly under SRC_DIR holds one concern and has a README.md with a paragraph
starting "May include:" that names, in backticks with a trailing slash (`comm/`), the other
folders of SRC_DIR its files may include ("May include: nothing" names none). Checked:

  - every #include "..." of a header of SRC_DIR is written from SRC_DIR (`"comm/comm.h"`, also
    within a folder), and reaches only its own folder or one its README names;
  - the arrows the READMEs allow have no cycle, and name only folders that exist;
  - no folder holds more than --max-units units (a unit: a source with its header, x.h + x.cpp);
  - the only files at the top of SRC_DIR are the --top ones (main.cpp), which may include anything.

    check_includes.py SRC_DIR [--top FILE]... [--max-units N]
Exit 0: every include allowed; 1: each offence printed (file:line) with the README to change.
"""
import argparse
import re
import sys
from pathlib import Path

from check_layout import cycles  # the same cycle search over the parts' READMEs

SOURCES = (".cpp", ".h", ".hpp", ".cc", ".cu", ".cuh")
INCLUDE = re.compile(r'^\s*#\s*include\s*"([^"]+)"', re.M)
FOLDER = re.compile(r"`([A-Za-z][\w-]*)/`")


def allowed_of(readme):
    """The folders named in the README's "May include:" paragraph, or None without one."""
    for p in re.split(r"\n\s*\n", readme.read_text(encoding="utf-8")):
        if p.lstrip().startswith("May include:"):
            return set(FOLDER.findall(p))
    return None


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("src")
    ap.add_argument("--top", action="append", default=[], help="a file allowed at the top (may include anything)")
    ap.add_argument("--max-units", type=int, default=15)
    args = ap.parse_args(argv[1:])
    src = Path(args.src).resolve()
    name = src.name if src.parent == src else f"{src.parent.name}/{src.name}"
    problems = []

    folders = sorted(p.name for p in src.iterdir() if p.is_dir())
    allowed = {}
    for f in folders:
        readme = src / f / "README.md"
        rules = allowed_of(readme) if readme.is_file() else None
        if rules is None:
            problems.append(f"{name}/{f}/: no README.md with a \"May include:\" paragraph (what lives "
                            f"there and which folders of {name}/ it may include)")
            rules = set()
        for other in sorted(rules - set(folders)):
            problems.append(f"{name}/{f}/README.md: \"May include:\" names `{other}/`, which is no folder of {name}/")
        allowed[f] = rules & set(folders) - {f}
    for cycle in cycles(allowed):
        problems.append("the READMEs' \"May include:\" arrows go round: " + " -> ".join(c + "/" for c in cycle))

    includes = 0
    for path in sorted(p for p in src.rglob("*") if p.is_file() and p.suffix in SOURCES):
        rel = path.relative_to(src)
        folder = rel.parts[0] if len(rel.parts) > 1 else None
        if folder is None and rel.name not in args.top:
            problems.append(f"{name}/{rel}: a source at the top of {name}/ (only {', '.join(args.top) or 'none'}); "
                            f"it belongs in the folder of its concern")
        text = path.read_text(encoding="utf-8", errors="replace")
        for m in INCLUDE.finditer(text):
            spelled = m.group(1)
            line = text.count("\n", 0, m.start()) + 1
            where = f"{name}/{rel}:{line}"
            local = (path.parent / spelled).resolve()
            from_src = (src / spelled).resolve()
            if local.is_file() and src in local.parents and local != from_src:
                problems.append(f"{where}: #include \"{spelled}\": write it from {name}/ "
                                f"(\"{local.relative_to(src).as_posix()}\")")
                target = local
            elif from_src.is_file() and src in from_src.parents:
                target = from_src
            else:
                continue                        # not ours: ckpt/, scaleguard/, a system header
            to = target.relative_to(src).parts
            if len(to) < 2:
                problems.append(f"{where}: #include \"{spelled}\": a header at the top of {name}/")
                continue
            includes += 1
            if folder is None or to[0] == folder:
                continue
            if to[0] not in allowed.get(folder, ()):
                problems.append(f"{where}: {folder}/ includes {to[0]}/ (\"{spelled}\"), but "
                                f"{name}/{folder}/README.md's \"May include:\" does not name `{to[0]}/`: "
                                f"an include upward or sideways")

    for f in folders:
        units = {p.stem for p in (src / f).rglob("*") if p.is_file() and p.suffix in SOURCES}
        if len(units) > args.max_units:
            problems.append(f"{name}/{f}/: {len(units)} units (a source with its header), more than "
                            f"{args.max_units}: split it by concern")

    for p in problems:
        print("includes: " + p)
    if problems:
        return 1
    arrows = sum(len(a) for a in allowed.values())
    print(f"includes: {includes} includes in {len(folders)} folders of {name}/, each one its folder's "
          f"README allows ({arrows} arrows, no cycle)")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))

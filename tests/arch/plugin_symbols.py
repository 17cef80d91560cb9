#!/usr/bin/env python3
"""A Slurm plugin holds none of the code of the libraries it must not link.

    plugin_symbols.py PLUGIN --core LIB.a --forbid LIB.a [--forbid LIB.a ...]

Every strong global function or object a forbidden library defines (nm type T, D, B, R: not
the weak copies of templates and inline functions that any two libraries share) must be
missing from PLUGIN's symbol table. The core library is the control: at least one of its
strong symbols must be there, or the plugin has no symbol table to judge (stripped) and the
check fails rather than pass on nothing. Exit 0 clean, 1 with the offending symbols.
"""
import argparse
import subprocess
import sys

STRONG = set("TDBR")


def defined(path, strong_only):
    out = subprocess.run(["nm", "--defined-only", path], check=True, capture_output=True, text=True).stdout
    names = set()
    for line in out.splitlines():
        fields = line.split()
        if len(fields) == 3 and (not strong_only or fields[1] in STRONG):
            names.add(fields[2])
    return names


def demangle(names):
    out = subprocess.run(["c++filt"], input="\n".join(names), check=True, capture_output=True, text=True).stdout
    return out.splitlines()


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("plugin")
    ap.add_argument("--core", required=True)
    ap.add_argument("--forbid", action="append", required=True)
    args = ap.parse_args()
    plugin = defined(args.plugin, strong_only=False)
    core = defined(args.core, strong_only=True) & plugin
    if not core:
        print(f"{args.plugin}: none of {args.core}'s symbols found: stripped, or not built from it?")
        return 1
    bad = 0
    for lib in args.forbid:
        found = sorted(defined(lib, strong_only=True) & plugin)
        if found:
            bad += len(found)
            print(f"{args.plugin} defines {len(found)} symbols of {lib}, e.g.:")
            for name in demangle(found[:10]):
                print("    " + name)
    if bad:
        return 1
    print(f"{args.plugin}: {len(core)} symbols of {args.core}, none of {', '.join(args.forbid)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

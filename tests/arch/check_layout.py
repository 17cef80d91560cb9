#!/usr/bin/env python3
"""Dependencies point one way: every link between two folders must be one the linking
folder's README allows, and the allowed arrows must have no cycle.

The links come from the build (cmake/layout.cmake writes BUILD/layout-links.txt: target,
folder, linked target, its folder). A folder's *part* is the nearest folder at or above it
whose README.md has a paragraph starting "May depend on:"; the folders that paragraph names
in backticks (`planner/`, `runner/ckpt/`) are the parts it may link. Tests, benchmarks and
fuzz harnesses may link anything.

    check_layout.py SOURCE_DIR LINKS_FILE
Exit 0: every arrow allowed; 1: each offending link printed with the README to change.
"""
import re
import sys
from pathlib import Path

FREE = ("tests", "bench", "fuzz")          # may link anything
FOLDER = re.compile(r"`([a-z][\w-]*(?:/[\w-]+)*)/`")


def allowed_of(readme):
    """The folders named in the README's "May depend on:" paragraph, or None without one."""
    paragraphs = re.split(r"\n\s*\n", readme.read_text(encoding="utf-8"))
    for p in paragraphs:
        if p.lstrip().startswith("May depend on:"):
            return set(FOLDER.findall(p))
    return None


class Layout:
    def __init__(self, root):
        self.root = root
        self.parts = {}   # part folder -> set of folders it may depend on

    def part_of(self, folder):
        """The nearest folder at or above `folder` with a "May depend on:" README."""
        path = Path(folder)
        while str(path) not in (".", ""):
            key = path.as_posix()
            if key not in self.parts:
                readme = self.root / path / "README.md"
                self.parts[key] = allowed_of(readme) if readme.is_file() else None
            if self.parts[key] is not None:
                return key
            path = path.parent
        return None


def cycles(graph):
    """Each cycle in {part: parts it may depend on}, as a list of parts."""
    found, state, stack = [], {}, []

    def visit(node):
        state[node] = "open"
        stack.append(node)
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == "open":
                found.append(stack[stack.index(nxt):] + [nxt])
            elif nxt not in state:
                visit(nxt)
        stack.pop()
        state[node] = "done"

    for node in sorted(graph):
        if node not in state:
            visit(node)
    return found


def main(argv):
    if len(argv) != 3:
        print(__doc__, file=sys.stderr)
        return 2
    root, links = Path(argv[1]), Path(argv[2])
    layout = Layout(root)
    for readme in sorted(root.glob("*/README.md")) + sorted(root.glob("*/*/README.md")):
        layout.part_of(readme.parent.relative_to(root).as_posix())   # every part, for the cycle check
    problems, arrows = [], 0
    for line in links.read_text(encoding="utf-8").splitlines():
        if not line.strip() or line.startswith("#"):
            continue
        target, folder, linked, linked_folder = line.split()
        if folder.split("/")[0] in FREE:
            continue
        part = layout.part_of(folder)
        if part is None:
            problems.append(f"{target} ({folder}/): no README.md at or above {folder}/ says what it "
                            f"\"May depend on:\" (a paragraph of its own, naming folders in backticks)")
            continue
        to = layout.part_of(linked_folder) or linked_folder
        if to == part:
            continue
        arrows += 1
        if to not in layout.parts[part]:
            problems.append(f"{target} ({part}/) links {linked} ({to}/), but {part}/README.md's "
                            f"\"May depend on:\" does not name `{to}/`: a link upward or sideways")
    graph = {p: a for p, a in layout.parts.items() if a is not None}
    for cycle in cycles(graph):
        problems.append("the READMEs' \"May depend on:\" arrows go round: " + " -> ".join(c + "/" for c in cycle))
    for p in problems:
        print("layout: " + p)
    if problems:
        return 1
    print(f"layout: {arrows} links between {len(graph)} parts, each one its README allows, no cycle")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))

"""Option and command extractors shared by the docs tests: what a --help text accepts, what a
man page or a command line names. One parser each, so the tests compare like with like."""
import re

_OPT = r"--([a-z][a-z0-9-]*)"


def help_options(text):
    """Long options a --help text accepts: option lines in Boost's form (`  -o [ --output ] arg`,
    `  --since arg`) or getopt's (`  -h, --help`), and bracketed usage words (`[--json]`) on a
    usage line; not options quoted in prose. --help itself is left out."""
    opts = set()
    for line in text.splitlines():
        m = re.match(r"^\s+(?:-\w(?: \[ |, ))?" + _OPT, line)
        if m:
            opts.add(m.group(1))
        if re.match(r"^\s*(usage:|scaleguard)", line):
            opts.update(re.findall(r"\[" + _OPT, line))
    opts.discard("help")
    return opts


def help_commands(text):
    """Command names a top-level --help lists: lines `  name   description`."""
    return re.findall(r"^  (\S+)\s{2,}", text, re.M)


def man_options(roff):
    """Long options a piece of roff names: \\-\\-word, with font escapes removed."""
    plain = re.sub(r"\\f[BIRP]", "", roff).replace("\\-", "-")
    return set(re.findall(r"(?<![\w-])" + _OPT, plain))


def command_options(words):
    """Long options of a shell command's words: `--opt` and `--opt=value` give `opt`."""
    return [w[2:].split("=", 1)[0] for w in words if w.startswith("--") and len(w) > 2]

"""Read the commands out of Markdown code blocks: what the doc checks and the walkthrough test run.

`code_blocks(text)` gives each fenced block's language and body; `command_lines(body)` joins
backslash continuations and drops comments; `proofcheck_commands(body)` gives the argv of every
`proofcheck ...` command in a block (after `&&`, `;` or an environment assignment too).
"""

from __future__ import annotations

import re
import shlex

FENCE = re.compile(r"^```(\w*)\n(.*?)^```", re.M | re.S)
ASSIGNMENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*=")


def code_blocks(text: str) -> list[tuple[str, str]]:
    """(language, body) of every fenced code block, in order."""
    return [(m.group(1), m.group(2)) for m in FENCE.finditer(text)]


def command_lines(body: str) -> list[str]:
    """The block's command lines: continuations joined, whole-line and trailing comments dropped."""
    joined = re.sub(r"\\\n\s*", " ", body)
    out = []
    for line in joined.splitlines():
        line = re.sub(r"(^|\s)#(?!\S*#).*$", "", line).strip()  # ' # comment', not URL#model
        if line:
            out.append(line)
    return out


def split_command(line: str) -> list[list[str]]:
    """The `proofcheck` commands of one shell line, each as argv without the leading `proofcheck`."""
    try:
        tokens = shlex.split(line)
    except ValueError:  # a quote opened on another line (`bash -c '` ... `'`): read the words without it
        try:
            tokens = shlex.split(line.replace("'", " "))
        except ValueError:
            return []
    commands, current = [], None
    for tok in tokens:
        if "proofcheck " in tok and tok.strip() != "proofcheck":  # a quoted script: `bash -c '... proofcheck ...'`
            commands += split_command(tok)
            current = False
            continue
        if tok in ("&&", ";", "|", "||", "&"):
            current = None
            continue
        if current is None:
            if ASSIGNMENT.match(tok):
                continue
            if tok == "proofcheck":
                current = []
                commands.append(current)
            else:
                current = False  # another program: skip to the next separator
            continue
        if current is not False:
            current.append(tok.strip("[]"))
    return [c for c in commands if c is not False]


def proofcheck_commands(body: str) -> list[list[str]]:
    """Every `proofcheck` command of a block, as argv without the leading `proofcheck`."""
    return [cmd for line in command_lines(body) for cmd in split_command(line)]

"""Text meant for a person's terminal, made safe to print (as kubectl escapes it).

Names, reasons and file names come from input: an object called "\\x1b]0;...\\a" or
one with a newline in it would otherwise retitle the terminal, move the cursor or
forge a line of output. Every control character (C0, DEL, C1), every bidirectional
override, the line separators and a lone surrogate (a file name's undecodable byte) is
written as a visible escape instead. YAML and JSON output escape on
their own; this is for tables, warnings, errors and progress lines.
"""

from __future__ import annotations

import re

_UNSAFE = re.compile("[\x00-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069\u2028\u2029\ufeff\ud800-\udfff]")
_NAMED = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}


def _escape(match: re.Match[str]) -> str:
    char = match.group()
    code = ord(char)
    return _NAMED.get(char) or (f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}")


def printable(text: object) -> str:
    """`text` on one line, every control character visible as an escape."""
    return _UNSAFE.sub(_escape, str(text))


def printable_lines(text: object) -> str:
    """Like printable, but the line breaks of a message built of several lines are kept."""
    return "\n".join(printable(line) for line in str(text).split("\n"))

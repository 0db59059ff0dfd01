"""Kubernetes label selectors in their string form, parsed exactly as kubectl parses `-l`.

The grammar, lexer and matching follow apimachinery's `labels.Parse`
(`pkg/labels/selector.go`): requirements separated by commas, each `KEY`, `!KEY`,
`KEY=V`, `KEY==V`, `KEY!=V`, `KEY in (V, ...)`, `KEY notin (V, ...)`, `KEY>N`,
`KEY<N`; whitespace between tokens; `in`/`notin` are keywords only where an operator
may stand; the empty string is a valid value (`k=`, `k in (a,)`); keys must be
qualified names and values label values, as the API server checks them. Anything
else is refused with kubectl's own wording, so `a!b`, `!!x` or `k in v` never select
nodes by accident.

Pure: no I/O. The caller names the flag in its error (`field`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Mapping

from planner.base.errors import InputError

EXISTS, NOT_EXISTS, IN, NOT_IN, GT, LT = "exists", "!", "in", "notin", "gt", "lt"
_OPERATORS = {"=": IN, "==": IN, "!=": NOT_IN, "in": IN, "notin": NOT_IN, ">": GT, "<": LT}
_SPECIAL = set("=!(),><")
_SYMBOLS = {")", ",", "!", "==", "=", ">", "<", "!=", "("}
_KEYWORDS = {"in", "notin"}
_WHITESPACE = " \t\r\n"
_END = ""   # the end-of-string token's literal

_NAME = re.compile(r"^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$")
_DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
_VALUE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")


@dataclass(frozen=True)
class Requirement:
    """One requirement. `=`/`==` are `in` with one value and `!=` is `notin` with one
    value, as they match the same labels."""

    key: str
    op: str                      # exists | ! | in | notin | gt | lt
    values: tuple[str, ...] = ()

    def matches(self, labels: Mapping[str, str]) -> bool:
        have = labels.get(self.key)
        if self.op == EXISTS:
            return have is not None
        if self.op == NOT_EXISTS:
            return have is None
        if self.op == IN:
            return have is not None and have in self.values
        if self.op == NOT_IN:
            return have is None or have not in self.values
        if have is None or not _is_int(have):   # gt / lt: a label that is no integer never matches
            return False
        return int(have) > int(self.values[0]) if self.op == GT else int(have) < int(self.values[0])


Selector = tuple[Requirement, ...]


def parse(text: str, field: str) -> Selector:
    """`text` as kubectl parses a label selector; InputError (exit 2) naming `field` if it
    is malformed. An empty selector selects everything in kubectl; here it is refused, as
    a flag given with nothing in it is a mistake (callers that want everything say so)."""
    if not text.strip():
        raise InputError("empty label selector (it would select every node)", field=field)
    try:
        return _Parser(text).parse()
    except _Malformed as error:
        raise InputError(f"unable to parse requirement: {error} in label selector {text!r}", field=field) from None


def matches(selector: Selector, labels: Mapping[str, str]) -> bool:
    """Every requirement holds (kubectl's AND)."""
    return all(r.matches(labels) for r in selector)


class _Malformed(Exception):
    pass


def _is_int(text: str) -> bool:
    return re.fullmatch(r"[+-]?[0-9]+", text) is not None and -(2 ** 63) <= int(text) < 2 ** 63


def _lex(text: str) -> list[tuple[str, str]]:
    """(kind, literal) tokens: kind is "id", a symbol, "in"/"notin", or "" at the end."""
    tokens: list[tuple[str, str]] = []
    i = 0
    while True:
        while i < len(text) and text[i] in _WHITESPACE:
            i += 1
        if i >= len(text):
            tokens.append((_END, _END))
            return tokens
        if text[i] in _SPECIAL:
            # the longest run of special characters that is a symbol, as scanSpecialSymbol
            best, j = "", i
            while j < len(text) and text[j] in _SPECIAL:
                if text[i:j + 1] in _SYMBOLS:
                    best = text[i:j + 1]
                elif best:
                    break
                j += 1
            if not best:
                raise _Malformed(f"error expected: keyword found '{text[i:j]}'")
            tokens.append((best, best))
            i += len(best)
            continue
        j = i
        while j < len(text) and text[j] not in _SPECIAL and text[j] not in _WHITESPACE:
            j += 1
        word = text[i:j]
        tokens.append((word if word in _KEYWORDS else "id", word))
        i = j


class _Parser:
    """apimachinery's recursive descent, token for token (its error texts too)."""

    def __init__(self, text: str):
        self.tokens = _lex(text)
        self.at = 0

    def _peek(self, values: bool = True) -> tuple[str, str]:
        kind, literal = self.tokens[self.at]
        return ("id" if values and kind in _KEYWORDS else kind), literal

    def _take(self, values: bool = True) -> tuple[str, str]:
        token = self._peek(values)
        self.at += 1
        return token

    def parse(self) -> Selector:
        out: list[Requirement] = []
        while True:
            kind, literal = self._peek()
            if kind == _END:
                return tuple(out)
            if kind not in ("id", "!"):
                raise _Malformed(f"found '{literal}', expected: !, identifier, or 'end of string'")
            out.append(self._requirement())
            kind, literal = self._take()
            if kind == _END:
                return tuple(out)
            if kind != ",":
                raise _Malformed(f"found '{literal}', expected: ',' or 'end of string'")
            kind, literal = self._peek()
            if kind not in ("id", "!"):
                raise _Malformed(f"found '{literal}', expected: identifier after ','")

    def _requirement(self) -> Requirement:
        kind, key = self._take()
        negated = kind == "!"
        if negated:
            kind, key = self._take()
        if kind != "id":
            raise _Malformed(f"found '{key}', expected: identifier")
        _check_key(key)
        if negated:
            return Requirement(key, NOT_EXISTS)
        if self._peek()[0] in (_END, ","):
            return Requirement(key, EXISTS)
        kind, literal = self._take(values=False)
        if kind not in _OPERATORS:
            raise _Malformed(f"found '{literal}', expected: '=', '!=', '==', 'in', notin'")
        op = _OPERATORS[kind]
        values = self._set() if kind in _KEYWORDS else (self._exact(),)
        if op in (GT, LT) and not _is_int(values[0]):
            raise _Malformed(f"values[0]: Invalid value: {values[0]!r}: for 'Gt', 'Lt' operators, "
                             "the value must be an integer")
        for value in values:
            _check_value(key, value)
        return Requirement(key, op, tuple(sorted(set(values))))

    def _exact(self) -> str:
        kind, literal = self._peek()
        if kind in (_END, ","):
            return ""
        self._take()
        if kind != "id":
            raise _Malformed(f"found '{literal}', expected: identifier")
        return literal

    def _set(self) -> tuple[str, ...]:
        kind, literal = self._take()
        if kind != "(":
            raise _Malformed(f"found '{literal}' expected: '('")
        kind, literal = self._peek()
        if kind == ")":
            self._take()
            return ("",)
        if kind not in ("id", ","):
            raise _Malformed(f"found '{literal}', expected: ',', ')' or identifier")
        values = self._list()
        if self._take()[0] != ")":
            raise _Malformed(f"found '{literal}', expected: ')'")
        return values

    def _list(self) -> tuple[str, ...]:
        values: list[str] = []
        while True:
            kind, literal = self._take()
            if kind == "id":
                values.append(literal)
                after, shown = self._peek()
                if after == ",":
                    continue
                if after == ")":
                    return tuple(values)
                raise _Malformed(f"found '{shown}', expected: ',' or ')'")
            if kind == ",":
                if not values:
                    values.append("")        # "(,"
                after = self._peek()[0]
                if after == ")":
                    values.append("")        # ",)"
                    return tuple(values)
                if after == ",":
                    self._take()
                    values.append("")        # ",,"
                continue
            raise _Malformed(f"found '{literal}', expected: ',', or identifier")


def _check_key(key: str) -> None:
    """validation.IsQualifiedName: [DNS-1123 subdomain '/'] name of at most 63 characters."""
    prefix, slash, name = key.rpartition("/")
    if key.count("/") > 1 or (slash and (not prefix or len(prefix) > 253 or not _DNS_SUBDOMAIN.match(prefix))) \
            or not name or len(name) > 63 or not _NAME.match(name):
        raise _Malformed(f"key: Invalid value: {key!r}: a qualified name must consist of alphanumeric "
                         "characters, '-', '_' or '.', and must start and end with an alphanumeric character, "
                         "with an optional DNS subdomain prefix and '/'")


def _check_value(key: str, value: str) -> None:
    """validation.IsValidLabelValue: empty, or at most 63 characters of [-A-Za-z0-9_.]
    starting and ending with an alphanumeric character."""
    if len(value) > 63 or not _VALUE.match(value):
        raise _Malformed(f"values[{key}]: Invalid value: {value!r}: a valid label must be an empty string or "
                         "consist of alphanumeric characters, '-', '_' or '.', and must start and end with an "
                         "alphanumeric character")

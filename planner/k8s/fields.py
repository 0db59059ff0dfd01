"""Typed access to fields of decoded Kubernetes objects, failing with the field's path.

Readers call these on plain dicts from YAML/JSON. A wrong type raises `Bad(field,
message)`, which the reader turns into a Problem on the object (or an InputError
where the planner cannot run without the value). Nothing here copies the input.
"""

from __future__ import annotations

import json
import math
import re
from datetime import datetime, timezone
from typing import Any, overload

from models import Taint, Toleration

_EMPTY: dict[str, Any] = {}


class Bad(Exception):
    """One field of one object is wrong."""

    def __init__(self, field: str, message: str):
        super().__init__(f"{field}: {message}")
        self.field = field
        self.message = message


def type_name(value: object) -> str:
    if value is None:
        return "null"
    return {dict: "a mapping", list: "a list", str: "a string", bool: "a boolean",
            int: "an integer", float: "a number"}.get(type(value), type(value).__name__)


def mapping(value: object, field: str) -> dict[str, Any]:
    """A mapping field; absent (None) reads as empty."""
    if value is None:
        return _EMPTY
    if type(value) is not dict:
        raise Bad(field, f"must be a mapping, got {type_name(value)}")
    return value


def sequence(value: object, field: str) -> list[Any]:
    """A list field; absent (None) reads as empty."""
    if value is None:
        return []
    if type(value) is not list:
        raise Bad(field, f"must be a list, got {type_name(value)}")
    return value


def string(value: object, field: str, required: bool = False) -> str | None:
    if value is None or value == "":
        if required:
            raise Bad(field, "is required")
        return None
    if type(value) is not str:
        raise Bad(field, f"must be a string, got {type_name(value)}")
    return value


def required(value: object, field: str) -> str:
    """A string field that must be present and non-empty."""
    text = string(value, field, required=True)
    assert text is not None
    return text


@overload
def integer(value: object, field: str, default: int, minimum: int | None = None) -> int: ...
@overload
def integer(value: object, field: str, default: None = None, minimum: int | None = None) -> int | None: ...


def integer(value: object, field: str, default: int | None = None, minimum: int | None = None) -> int | None:
    if value is None:
        return default
    if type(value) is not int:
        raise Bad(field, f"must be an integer, got {type_name(value)} {shown(value)}")
    if minimum is not None and value < minimum:
        raise Bad(field, f"must be at least {minimum}, got {shown(value)}")
    if abs(value) > MAX_EXACT_INT:
        raise Bad(field, f"{shown(value)} is out of range (Kubernetes' integers are int64)")
    return value


def boolean(value: object, field: str, default: bool = False) -> bool:
    if value is None:
        return default
    if type(value) is not bool:
        raise Bad(field, f"must be true or false, got {type_name(value)} {value!r}")
    return value


def string_map(value: object, field: str) -> dict[str, str]:
    """Labels, annotations, nodeSelector: every value a string (YAML may not quote them)."""
    result = mapping(value, field)
    for key, item in result.items():
        if type(item) is not str:
            raise Bad(f"{field}[{key}]", f"must be a string, got {type_name(item)} {item!r} (quote it)")
    return result


def timestamp(value: object, field: str) -> float | None:
    """An RFC 3339 time (string, or a datetime as YAML decodes bare ones) as epoch seconds."""
    if value is None or value == "":
        return None
    if isinstance(value, datetime):
        moment = value
    elif type(value) is str:
        try:
            moment = datetime.fromisoformat(value)
        except ValueError:
            raise Bad(field, f"{value!r} is not an RFC 3339 time such as 2026-01-31T12:00:00Z") from None
    else:
        raise Bad(field, f"must be an RFC 3339 time string, got {type_name(value)} {value!r}")
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=timezone.utc)   # kubectl always writes UTC ("Z")
    return moment.timestamp()


MAX_EXACT_INT = 2**63 - 1   # past int64 a number is no Kubernetes value (and float() of 10**400 overflows)
_DECIMAL = re.compile(r"[0-9]{1,18}", re.ASCII)   # str.isdigit() also takes "²" and "٣", which int() refuses


def shown(value: object, width: int = 40) -> str:
    """`value` for a message: its repr, cut to `width` characters (an integer of 5,000 digits
    is refused by repr itself, so it is described instead)."""
    if type(value) is int and abs(value) > 10**width:
        return f"an integer of more than {width} digits"
    text = repr(value)
    return text if len(text) <= width else f"{text[:width]}... ({len(text):,} characters)"


def decimal(text: str, field: str, minimum: int = 0) -> int:
    """An integer written in ASCII digits (annotation values): at most 18 of them."""
    stripped = text.strip()
    if not _DECIMAL.fullmatch(stripped):
        raise Bad(field, f"{shown(text)} is not a whole number of at most 18 digits")
    value = int(stripped)
    if value < minimum:
        raise Bad(field, f"must be at least {minimum}, got {value}")
    return value


MAX_JSON_TEXT = 256 * 1024   # an annotation as a whole may hold 256 KiB (the API server's limit)


def json_value(text: object, field: str, expected: str = "") -> Any:
    """JSON embedded in an annotation, decoded within bounds: at most 256 KiB, nested no
    deeper than the decoder's recursion allows (its RecursionError is caught: a check of
    every character in Python would cost the L benchmark's 10,000 assignments a second),
    integers within int64's digits, no NaN, no lone UTF-16 surrogate. Bad says why."""
    hint = f"; expected {expected}" if expected else ""
    if type(text) is not str:
        raise Bad(field, f"must be a string holding JSON, got {type_name(text)}")
    if len(text) > MAX_JSON_TEXT:
        raise Bad(field, f"is {len(text):,} characters, more than the {MAX_JSON_TEXT:,} an annotation may hold")
    try:
        value = json.loads(text, parse_int=_json_int, parse_constant=_json_constant)
    except RecursionError:
        raise Bad(field, f"is JSON nested too deeply (about 1,000 levels){hint}") from None
    except json.JSONDecodeError as err:
        raise Bad(field, f"is not valid JSON ({err.msg} at column {err.colno}){hint}") from None
    except ValueError as err:
        raise Bad(field, f"is not valid JSON ({err}){hint}") from None
    if "\\u" in text:   # only an escape can make a lone surrogate
        try:
            json.dumps(value, ensure_ascii=False).encode("utf-8")
        except UnicodeEncodeError:
            raise Bad(field, "holds a lone UTF-16 surrogate (\\ud800-\\udfff), which is not text") from None
    return value


def _json_int(text: str) -> int:
    if len(text.lstrip("-")) > 19:
        raise ValueError(f"the integer {text[:20]}... is out of int64's range")
    return int(text)


def _json_constant(text: str) -> float:
    raise ValueError(f"{text} is not JSON")


def is_decimal(text: str) -> bool:
    """ASCII digits only, at most 18 (so int() of it is an int64), unlike str.isdigit()."""
    return _DECIMAL.fullmatch(text) is not None


def number(value: object, field: str) -> float:
    """A finite number; numeric strings are accepted since annotations are strings."""
    if type(value) is int or type(value) is float:
        if type(value) is int and abs(value) > MAX_EXACT_INT:
            raise Bad(field, f"{shown(value)} is out of range (at most {MAX_EXACT_INT:,} in size)")
        result = float(value)
    elif type(value) is str:
        if len(value) > 64:
            raise Bad(field, f"{shown(value)} is not a number (too long)")
        try:
            result = float(value)
        except ValueError:
            raise Bad(field, f"{shown(value)} is not a number") from None
    else:
        raise Bad(field, f"must be a number, got {type_name(value)} {value!r}")
    if not math.isfinite(result):
        raise Bad(field, f"{value!r} is not a finite number")
    return result


# ---------------------------------------------------------------- shared object parts

_EFFECTS = ("NoSchedule", "PreferNoSchedule", "NoExecute")


def taints(value: object, field: str) -> tuple[Taint, ...]:
    out = []
    for i, item in enumerate(sequence(value, field)):
        where = f"{field}[{i}]"
        taint = mapping(item, where)
        key = required(taint.get("key"), f"{where}.key")
        effect = required(taint.get("effect"), f"{where}.effect")
        if effect not in _EFFECTS:
            raise Bad(f"{where}.effect", f"must be one of {', '.join(_EFFECTS)}, got {effect!r}")
        out.append(Taint(key, string(taint.get("value"), f"{where}.value") or "", effect))
    return tuple(out)


def tolerations(value: object, field: str) -> tuple[Toleration, ...]:
    out = []
    for i, item in enumerate(sequence(value, field)):
        where = f"{field}[{i}]"
        tol = mapping(item, where)
        operator = string(tol.get("operator"), f"{where}.operator") or "Equal"
        if operator not in ("Equal", "Exists"):
            raise Bad(f"{where}.operator", f"must be Equal or Exists, got {operator!r}")
        effect = string(tol.get("effect"), f"{where}.effect") or ""
        if effect and effect not in _EFFECTS:
            raise Bad(f"{where}.effect", f"must be one of {', '.join(_EFFECTS)}, got {effect!r}")
        out.append(Toleration(
            key=string(tol.get("key"), f"{where}.key") or "",
            operator=operator,
            value=string(tol.get("value"), f"{where}.value") or "",
            effect=effect,
        ))
    return tuple(out)

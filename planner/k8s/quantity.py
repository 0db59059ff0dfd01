"""Kubernetes quantities ("500m", "64Gi", "1e3") to exact integers.

`cpu` becomes milli-cores, rounded up (resource.Quantity.MilliValue); every other
resource becomes whole units, rounded up (Value()). Arithmetic is exact
(fractions.Fraction); a float never touches a quantity. Negative values and
anything Kubernetes would not parse are rejected with a message that says why.
"""

from __future__ import annotations

import math
import re
from fractions import Fraction
from functools import lru_cache

CPU = "cpu"

_BINARY = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "Pi": 2**50, "Ei": 2**60}
_DECIMAL = {
    "n": Fraction(1, 10**9), "u": Fraction(1, 10**6), "m": Fraction(1, 1000), "": Fraction(1),
    "k": Fraction(10**3), "M": Fraction(10**6), "G": Fraction(10**9), "T": Fraction(10**12),
    "P": Fraction(10**15), "E": Fraction(10**18),
}
_MULTIPLIER: dict[str, Fraction] = {**{k: Fraction(v) for k, v in _BINARY.items()}, **_DECIMAL}

# Kubernetes' grammar: <sign><digits>[.<digits>] then a binary/decimal suffix or e<int>.
_QUANTITY = re.compile(
    r"([+-]?)([0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:(Ki|Mi|Gi|Ti|Pi|Ei|n|u|m|k|M|G|T|P|E)|[eE]([+-]?[0-9]+))?"
)
_MAX_EXPONENT = 30          # Kubernetes stores int64 with a scale; anything wider is nonsense input
_MAX_VALUE = 2**63 - 1
_MAX_DIGITS = 64            # digits and decimals together; a longer number is out of int64's range or noise


def _shown(text: str) -> str:
    return repr(text) if len(text) <= 40 else f"{text[:40]!r}... ({len(text):,} characters)"


class QuantityError(ValueError):
    """A value that is not a non-negative Kubernetes quantity."""


def parse_quantity(value: object, resource: str) -> int:
    """`value` (a string, or an int/float as YAML gives bare numbers) as an integer amount.

    cpu -> milli-cores; any other resource -> whole units; both rounded up.
    """
    milli = resource == CPU
    if type(value) is str:
        return _parse_text(value, milli)
    if type(value) is int:
        if value < 0:
            raise QuantityError(f"{value} is negative; quantities must be at least 0")
        result = value * 1000 if milli else value
        if result > _MAX_VALUE:      # as for text: beyond int64, which every consumer (and Kueue) assumes
            raise QuantityError(f"{value} is too large")
        return result
    if type(value) is float:
        if not math.isfinite(value):
            raise QuantityError(f"{value!r} is not a quantity")
        # repr gives the shortest decimal that reads back as this float: the number as written
        return _parse_text(repr(value), milli)
    raise QuantityError(f"{value!r} is not a quantity (expected a string such as \"500m\" or \"64Gi\")")


@lru_cache(maxsize=65536)
def _parse_text(text: str, milli: bool) -> int:
    amount = quantity_fraction(text)
    if milli:
        amount *= 1000
    result = -((-amount.numerator) // amount.denominator)   # ceiling, exactly
    if result > _MAX_VALUE:
        raise QuantityError(f"{text!r} is too large")
    return result


@lru_cache(maxsize=65536)
def quantity_fraction(text: str) -> Fraction:
    """The exact value of a quantity string, in base units (cores, bytes, devices)."""
    match = _QUANTITY.fullmatch(text)
    if match is None:
        raise QuantityError(
            f"{_shown(text)} is not a quantity (expected Kubernetes notation such as 2, 0.5, 500m, 64Gi, 1e3)"
        )
    sign, number, suffix, exponent = match.groups()
    if len(number) > _MAX_DIGITS:   # int64 has 19 digits; Fraction() of 4,301 digits would raise
        raise QuantityError(f"{_shown(text)} has more than {_MAX_DIGITS} digits: out of range")
    amount = Fraction(number)
    if exponent is not None:
        power = int(exponent)
        if abs(power) > _MAX_EXPONENT:
            raise QuantityError(f"{text!r}: exponent {power} is out of range")
        amount *= Fraction(10) ** power
    else:
        amount *= _MULTIPLIER[suffix or ""]
    if sign == "-" and amount != 0:
        raise QuantityError(f"{text!r} is negative; quantities must be at least 0")
    return amount

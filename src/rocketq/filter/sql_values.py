"""Values and comparisons of the SQL92 selector, with the Java semantics RocketMQ has.

RocketMQ evaluates a selector on Java objects: message properties are always ``String`` (or null
when absent); literals are ``Integer`` (an integer that fits 32 bits), ``Long`` (a larger one),
``Double``, ``String`` or ``Boolean``.  Which conversion a comparison tries depends on the classes
of both sides (``ComparisonExpression.__compare``), so the classes are kept here: Python ``int``
is Integer, :class:`JLong` is Long, ``float`` is Double, ``str`` String, ``bool`` Boolean,
``None`` null.

The rules, all RocketMQ's:

* Comparing different classes converts one side: a String against a number is parsed as that
  number's class (``Integer.valueOf`` / ``Long.valueOf`` / ``Double.valueOf``), a String against a
  Boolean is ``Boolean.valueOf`` (true only for "true", any case); Integer/Long/Double mix
  numerically (a Long against a Double as a double).  A parse that fails is an error
  (:class:`EvalError`), and an error anywhere makes the whole selector not match the message.
  A Boolean on the LEFT of a String fails too (Java casts the Boolean to String); any other
  pair of classes compares as "less" (so ``=`` is false).
* ``<``, ``<=``, ``>``, ``>=`` with a String on both sides parse both as Double, else error.
* null: ``=`` is null if the left side is null and the right not, false if only the right is
  null, true if both are; ``<``... are null if either side is; AND/OR/NOT are three-valued.
  A selector matches only when it evaluates to TRUE.
"""

from __future__ import annotations

import math
import re

INT_MIN, INT_MAX = -(1 << 31), (1 << 31) - 1
LONG_MIN, LONG_MAX = -(1 << 63), (1 << 63) - 1
DOUBLE_MAX = 1.7976931348623157e308

_JAVA_INTEGER = re.compile(r"[+-]?\d+")              # Character.digit: any Unicode decimal digit
_JAVA_DOUBLE = re.compile(r"""[+-]?(?:
    NaN | Infinity
  | (?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?[fFdD]?
  | (?P<hex>0[xX](?:[0-9a-fA-F]+\.?|[0-9a-fA-F]*\.[0-9a-fA-F]+)[pP][+-]?[0-9]+)[fFdD]?
)""", re.VERBOSE)
_JAVA_TRIM = "".join(chr(i) for i in range(33))      # String.trim: every char <= U+0020


class JLong(int):
    """A Java ``Long`` (an ``int`` is an ``Integer``); the class decides conversions."""

    __slots__ = ()


class EvalError(Exception):
    """What Java throws while evaluating (a property that does not parse as the number compared
    with): the selector does not match this message."""


def java_integer(text: str, bits: int = 32) -> int:
    """``Integer.valueOf`` (*bits* 32) or ``Long.valueOf`` (64) of a property value."""
    if not _JAVA_INTEGER.fullmatch(text):
        raise EvalError(f"{text[:40]!r} is not an integer")
    value = int(text)
    lo, hi = (INT_MIN, INT_MAX) if bits == 32 else (LONG_MIN, LONG_MAX)
    if not lo <= value <= hi:
        raise EvalError(f"{text[:40]!r} does not fit {bits} bits")
    return value if bits == 32 else JLong(value)


def java_double(text: str) -> float:
    """``Double.valueOf`` of a property value: Java's syntax (surrounding control characters and
    spaces trimmed, an f/d suffix, hexadecimal with a binary exponent, NaN, Infinity)."""
    text = text.strip(_JAVA_TRIM)
    m = _JAVA_DOUBLE.fullmatch(text)
    if m is None:
        raise EvalError(f"{text[:40]!r} is not a number")
    if m.group("hex"):
        value = float.fromhex(m.group("hex"))
        return -value if text.startswith("-") else value
    return float(text.rstrip("fFdD"))


def _cmp(a, b) -> int:
    if type(a) is float:                   # Double.compareTo: -0.0 < 0.0, NaN above all and equal to itself
        if a < b:
            return -1
        if a > b:
            return 1
        a_nan, b_nan = math.isnan(a), math.isnan(b)
        if a_nan or b_nan:
            return int(a_nan) - int(b_nan)
        return int(math.copysign(1, a) > 0) - int(math.copysign(1, b) > 0)
    return (a > b) - (a < b)


def java_compare(lv, rv) -> int:
    """``ComparisonExpression.__compare`` with string conversion on: the sign of lv - rv."""
    lc, rc = type(lv), type(rv)
    if lc is not rc:
        if lc is bool:
            if rc is str:
                raise EvalError("a Boolean cannot be compared with a String on its right")
            return -1
        if lc is int or lc is JLong:
            if rc is float:
                lv = float(lv)
            elif rc is str:
                rv = java_integer(rv, 32 if lc is int else 64)
            elif rc is not int and rc is not JLong:
                return -1
        elif lc is float:
            if rc is int or rc is JLong:
                rv = float(rv)
            elif rc is str:
                rv = java_double(rv)
            else:
                return -1
        elif lc is str:
            if rc is bool:
                lv = lv.lower() == "true"
            elif rc is int:
                lv = java_integer(lv, 32)
            elif rc is JLong:
                lv = java_integer(lv, 64)
            elif rc is float:
                lv = java_double(lv)
            else:
                return -1
        else:
            return -1
    return _cmp(lv, rv)


def equal(lv, rv):
    """``=``: True / False / None (unknown)."""
    if lv is None or rv is None:
        if lv is None and rv is None:
            return True
        return None if lv is None else False
    return java_compare(lv, rv) == 0


def relation(lv, rv):
    """``lv - rv``'s sign for ``<``, ``<=``, ``>``, ``>=``, or None when a side is null."""
    if lv is None or rv is None:
        return None
    if type(lv) is str and type(rv) is str:
        return _cmp(java_double(lv), java_double(rv))
    return java_compare(lv, rv)


def negate(value):
    """Unary minus: numbers keep their class; anything else (a String, a Boolean) is null."""
    t = type(value)
    if t is int or t is float:
        return -value
    if t is JLong:
        return JLong(-value)
    return None


def integer_literal(text: str) -> int:
    """``ConstantExpression.createFromDecimal``: a Long, an Integer when it fits 32 bits."""
    value = int(text.rstrip("lL"))
    if value > LONG_MAX:
        raise ValueError(f"{text} is larger than the largest long, {LONG_MAX}")
    return value if value <= INT_MAX else JLong(value)


def decimal_literal(text: str) -> float:
    """``ConstantExpression.createFloat``.  (RocketMQ also refuses a literal below
    ``Double.MIN_VALUE``, which takes ``0.0`` with it; rocketq accepts 0.0.)"""
    value = float(text)
    if value > DOUBLE_MAX:
        raise ValueError(f"{text} is greater than {DOUBLE_MAX}")
    return value


def describe(value) -> str:
    """A constant as a selector writes it (for error messages)."""
    if value is None:
        return "NULL"
    if type(value) is bool:
        return "TRUE" if value else "FALSE"
    if type(value) is str:
        return "'" + value.replace("'", "''") + "'"
    return repr(value) if type(value) is float else str(int(value))

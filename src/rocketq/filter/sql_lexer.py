"""Tokens of RocketMQ's SQL92 message selector (``SelectorParser.jj``'s token section).

The token set is RocketMQ's, which is ActiveMQ's JMS selector minus LIKE, arithmetic, hex and
octal literals:

* keywords, case-insensitive: NOT AND OR BETWEEN IN TRUE FALSE NULL IS CONTAINS STARTSWITH ENDSWITH
* identifiers ``[A-Za-z_$][A-Za-z0-9_$]*`` (property names; case kept: properties are
  case-sensitive) - a word that spells a keyword is the keyword, as in JavaCC where the longest
  match wins and a tie goes to the token declared first
* integers ``0 | [1-9][0-9]*`` with an optional ``L`` suffix; decimals ``1.5``, ``1.``, ``.5``,
  ``1e9``, ``1.5E-3`` (no sign: ``-`` is the unary operator)
* strings in single quotes, ``''`` standing for one quote
* ``= <> < <= > >= ( ) , + -``
* white space, ``-- line`` and ``/* block */`` comments are skipped.  (JavaCC's line comment
  needs a line end; here the end of the text also ends it.)

A token is ``(kind, text, position)``, *position* 0-based in the expression; the parser reports
errors with it.  Lexing is one left-to-right pass with one compiled regular expression.
"""

from __future__ import annotations

import re
from typing import NamedTuple

KEYWORDS = frozenset({"NOT", "AND", "OR", "BETWEEN", "IN", "TRUE", "FALSE", "NULL", "IS", "CONTAINS",
                      "STARTSWITH", "ENDSWITH"})

_TOKEN = re.compile(r"""
    (?P<space>[ \t\n\r\f]+)
  | (?P<line_comment>--[^\n\r]*)
  | (?P<block_comment>/\*.*?\*/)
  | (?P<float>(?:[0-9]+\.[0-9]*(?:[eE][+-]?[0-9]+)?|\.[0-9]+(?:[eE][+-]?[0-9]+)?|[0-9]+[eE][+-]?[0-9]+))
  | (?P<int>(?:0|[1-9][0-9]*)[lL]?)
  | (?P<string>'(?:''|[^'])*')
  | (?P<word>[A-Za-z_$][A-Za-z0-9_$]*)
  | (?P<op><>|<=|>=|[=<>(),+-])
""", re.VERBOSE | re.DOTALL)


class Token(NamedTuple):
    kind: str          # a keyword (upper case), "id", "int", "float", "string", an operator, or "end"
    text: str          # as written (a string literal's value, quotes undone)
    position: int      # 0-based offset in the expression


class SqlSyntaxError(ValueError):
    """An expression RocketMQ's selector grammar does not accept; ``position`` is 0-based."""

    def __init__(self, expression: str, position: int, reason: str):
        self.expression, self.position, self.reason = expression, position, reason
        super().__init__(f"{reason} at {where(expression, position)}")


def where(expression: str, position: int) -> str:
    """``position 7`` (1-based), with the line and column when the expression has several lines."""
    if "\n" not in expression[:position]:
        return f"position {position + 1}"
    line = expression.count("\n", 0, position) + 1
    column = position - expression.rfind("\n", 0, position)
    return f"position {position + 1} (line {line}, column {column})"


def tokenize(expression: str) -> list[Token]:
    """Every token of *expression*, ending with an ``end`` token; raises SqlSyntaxError."""
    out: list[Token] = []
    pos, n = 0, len(expression)
    while pos < n:
        m = _TOKEN.match(expression, pos)
        if m is None:
            raise SqlSyntaxError(expression, pos, _stray(expression, pos))
        kind, text = m.lastgroup, m.group()
        if kind == "word":
            upper = text.upper()
            out.append(Token(upper, text, pos) if upper in KEYWORDS else Token("id", text, pos))
        elif kind == "string":
            out.append(Token("string", text[1:-1].replace("''", "'"), pos))
        elif kind == "op":
            out.append(Token(text, text, pos))
        elif kind in ("int", "float"):
            out.append(Token(kind, text, pos))
        pos = m.end()
    out.append(Token("end", "", n))
    return out


def _stray(expression: str, pos: int) -> str:
    ch = expression[pos]
    if ch == "'":
        return "a string literal without its closing quote"
    if expression.startswith("/*", pos):
        return "a comment without its closing */"
    return f"unexpected character {ch!r}"

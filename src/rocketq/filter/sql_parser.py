"""A recursive-descent parser for RocketMQ's SQL92 selector that compiles as it parses.

Grammar (``SelectorParser.jj``; loosest first, every binary operator left-associative)::

    selector   := or                                  (must be boolean, see below)
    or         := and ( OR and )*
    and        := equality ( AND equality )*
    equality   := comparison ( '=' comparison | '<>' comparison | IS NULL | IS NOT NULL )*
    comparison := unary ( ('>'|'>='|'<'|'<=') unary
                        | [NOT] (CONTAINS|STARTSWITH|ENDSWITH) string
                        | [NOT] BETWEEN unary AND unary
                        | [NOT] IN '(' string (',' string)* ')' )*
    unary      := '+' unary | '-' unary | NOT unary | primary
    primary    := string | integer | decimal | TRUE | FALSE | NULL | property | '(' or ')'

Note that NOT is a unary operator binding tighter than comparisons, as in RocketMQ:
``NOT a = 1`` is ``(NOT a) = 1``; write ``NOT (a = 1)``.

Each rule returns a :class:`Node` whose ``fn(properties)`` evaluates it, so the expression is
compiled once and a message costs only closure calls.  RocketMQ's checks at parse time are made
here too, each refusing the expression with the position of the operand at fault:

* a boolean is needed (the whole selector, operands of AND / OR / NOT): a comparison, a logic
  expression, TRUE / FALSE / NULL, or a property (cast: a property value is a string, never a
  Boolean, so a bare property is false, or null when absent);
* ``<`` ``<=`` ``>`` ``>=`` and BETWEEN take no string, boolean or NULL literal and no boolean
  expression; ``=`` / ``<>`` take no NULL literal, nor TRUE/FALSE against another literal;
* BETWEEN's literal bounds must be in order; IN needs a property on its left.

AND / OR chains are kept flat (n-ary, evaluated left to right, stopping at the first FALSE /
TRUE), which is what the nested binary form computes, without recursion per term.
"""

from __future__ import annotations

from typing import Callable

from rocketq.filter.sql_lexer import SqlSyntaxError, Token, tokenize
from rocketq.filter.sql_values import (EvalError, decimal_literal, describe, equal, integer_literal, java_compare,
                                       negate, relation)

MAX_EXPRESSION_CHARS = 32_768     # longer selectors are refused (RocketMQ sets no limit)
MAX_NESTING = 100                 # parentheses and unary operators inside each other

_RELATIONS = {">": lambda c: c > 0, ">=": lambda c: c >= 0, "<": lambda c: c < 0, "<=": lambda c: c <= 0}
_STRING_TESTS = {"CONTAINS": str.__contains__, "STARTSWITH": str.startswith, "ENDSWITH": str.endswith}


class Node:
    """A compiled (sub)expression: ``fn(properties)`` gives its Java-typed value."""

    __slots__ = ("kind", "value", "fn", "pos")

    def __init__(self, kind: str, fn: Callable, pos: int, value=None):
        self.kind = kind          # "const", "prop", "neg" (a unary minus) or "bool" (a boolean expression)
        self.fn, self.pos, self.value = fn, pos, value

    @property
    def is_boolean(self) -> bool:
        return self.kind == "bool" or (self.kind == "const" and (self.value is None or type(self.value) is bool))


def constant(value, pos: int) -> Node:
    return Node("const", lambda p: value, pos, value)


class Parser:
    def __init__(self, expression: str):
        if len(expression) > MAX_EXPRESSION_CHARS:
            raise SqlSyntaxError(expression, MAX_EXPRESSION_CHARS,
                                 f"the expression is longer than {MAX_EXPRESSION_CHARS} characters")
        self.text = expression
        self.tokens = tokenize(expression)
        self.i = 0
        self.depth = 0
        self.names: set[str] = set()      # the properties the expression reads (the bit-map prefilter's columns)

    # -- token helpers ---------------------------------------------------------------------------

    @property
    def tok(self) -> Token:
        return self.tokens[self.i]

    def peek(self, k: int = 1) -> Token:
        return self.tokens[min(self.i + k, len(self.tokens) - 1)]

    def take(self) -> Token:
        t = self.tokens[self.i]
        self.i += 1
        return t

    def expect(self, kind: str, what: str) -> Token:
        if self.tok.kind != kind:
            self.fail(self.tok, f"expected {what}")
        return self.take()

    def fail(self, at: Token | Node, reason: str):
        if isinstance(at, Token):
            if reason.startswith("expected"):
                found = "the end of the expression" if at.kind == "end" else (
                    describe(at.text) if at.kind == "string" else repr(at.text))
                reason = f"{reason}, found {found}"
            raise SqlSyntaxError(self.text, at.position, reason)
        raise SqlSyntaxError(self.text, at.pos, reason)

    # -- the grammar -------------------------------------------------------------------------------

    def parse(self) -> Node:
        node = self.as_boolean(self.or_expr())
        if self.tok.kind != "end":
            self.fail(self.tok, "expected AND, OR or the end of the expression")
        return node

    def or_expr(self) -> Node:
        return self._chain("OR", self.and_expr, _any_true)

    def and_expr(self) -> Node:
        return self._chain("AND", self.equality, _all_true)

    def _chain(self, keyword: str, operand, combine) -> Node:
        first = operand()
        if self.tok.kind != keyword:
            return first
        terms = [self.as_boolean(first)]
        while self.tok.kind == keyword:
            self.take()
            terms.append(self.as_boolean(operand()))
        return Node("bool", combine(tuple(t.fn for t in terms)), first.pos)

    def equality(self) -> Node:
        left = self.comparison()
        while True:
            t = self.tok
            if t.kind in ("=", "<>"):
                self.take()
                right = self.comparison()
                left = self.compare_equal(left, right, negated=t.kind == "<>")
            elif t.kind == "IS" and self.peek().kind == "NULL":
                self.i += 2
                fn = left.fn
                left = Node("bool", lambda p: fn(p) is None, left.pos)
            elif t.kind == "IS" and self.peek().kind == "NOT" and self.peek(2).kind == "NULL":
                self.i += 3
                fn = left.fn
                left = Node("bool", lambda p: fn(p) is not None, left.pos)
            elif t.kind == "IS":
                self.fail(self.peek(), "expected NULL or NOT NULL after IS")
            else:
                return left

    def comparison(self) -> Node:
        left = self.unary()
        while True:
            t = self.tok
            negated = t.kind == "NOT" and self.peek().kind in ("BETWEEN", "IN", *_STRING_TESTS)
            op = self.peek().kind if negated else t.kind
            if t.kind in _RELATIONS:
                self.take()
                left = self.compare_order(left, self.unary(), t.kind)
            elif op in _STRING_TESTS:
                self.i += 2 if negated else 1
                search = self.expect("string", f"a string literal after {op}").text
                left = _string_test(left, _STRING_TESTS[op], search, negated)
            elif op == "BETWEEN":
                self.i += 2 if negated else 1
                low = self.unary()
                self.expect("AND", "AND between the bounds of BETWEEN")
                left = self.between(left, low, self.unary(), negated)
            elif op == "IN":
                self.i += 2 if negated else 1
                left = self.in_list(left, negated)
            else:
                return left

    def unary(self) -> Node:
        t = self.tok
        if t.kind not in ("+", "-", "NOT"):
            return self.primary()
        self.take()
        self.depth += 1
        if self.depth > MAX_NESTING:
            self.fail(t, f"the expression nests deeper than {MAX_NESTING} levels")
        operand = self.unary()
        self.depth -= 1
        if t.kind == "+":
            return operand
        fn = operand.fn
        if t.kind == "-":
            if operand.kind == "const":
                value = negate(operand.value)
                return Node("neg", lambda p: value, t.position)
            return Node("neg", lambda p: negate(fn(p)), t.position)
        fn = self.as_boolean(operand).fn
        return Node("bool", lambda p: _not(fn(p)), t.position)

    def primary(self) -> Node:
        t = self.take()
        k = t.kind
        if k == "string":
            return constant(t.text, t.position)
        if k in ("int", "float"):
            try:
                return constant(integer_literal(t.text) if k == "int" else decimal_literal(t.text), t.position)
            except ValueError as exc:
                self.fail(t, str(exc))
        if k in ("TRUE", "FALSE", "NULL"):
            return constant({"TRUE": True, "FALSE": False, "NULL": None}[k], t.position)
        if k == "id":
            name = t.text
            self.names.add(name)
            return Node("prop", lambda p: p.get(name), t.position, name)
        if k == "(":
            self.depth += 1
            if self.depth > MAX_NESTING:
                self.fail(t, f"the expression nests deeper than {MAX_NESTING} levels")
            inner = self.or_expr()
            self.expect(")", "')'")
            self.depth -= 1
            return inner
        self.i -= 1
        self.fail(t, "expected a property, a literal or '('")

    # -- operators with RocketMQ's checks ----------------------------------------------------------

    def as_boolean(self, node: Node) -> Node:
        if node.is_boolean:
            return node
        if node.kind == "prop":
            fn = node.fn
            return Node("bool", lambda p: _boolean_cast(fn(p)), node.pos)
        self.fail(node, "this does not give a boolean value (a comparison, TRUE, FALSE or a property is needed)")

    def compare_equal(self, left: Node, right: Node, *, negated: bool) -> Node:
        for side in (left, right):
            if side.kind == "const" and side.value is None:
                self.fail(side, "NULL cannot be compared with '=' or '<>' (use IS NULL / IS NOT NULL)")
        if left.kind == "const" and right.kind == "const" and left.is_boolean and not right.is_boolean:
            self.fail(right, f"{describe(left.value)} cannot be compared with {describe(right.value)}")
        lf, rf = left.fn, right.fn
        if left.kind == "prop" and right.kind == "const" and type(right.value) is str:
            # the common "name = 'text'": a String against a String is plain equality, null unknown
            name, text = left.value, right.value
            if negated:
                return Node("bool", lambda p: None if (v := p.get(name)) is None else v != text, left.pos)
            return Node("bool", lambda p: None if (v := p.get(name)) is None else v == text, left.pos)
        if negated:
            return Node("bool", lambda p: _not(equal(lf(p), rf(p))), left.pos)
        return Node("bool", lambda p: equal(lf(p), rf(p)), left.pos)

    def check_ordered(self, node: Node) -> None:
        if node.kind == "const" and (node.value is None or type(node.value) in (str, bool)):
            self.fail(node, f"{describe(node.value)} cannot be compared with <, <=, > or >= (only numbers can)")
        if node.kind == "bool":
            self.fail(node, "a boolean expression cannot be compared with <, <=, > or >=")

    def compare_order(self, left: Node, right: Node, op: str) -> Node:
        self.check_ordered(left)
        self.check_ordered(right)
        test, lf, rf = _RELATIONS[op], left.fn, right.fn
        if right.kind == "const":
            rv = right.value
            return Node("bool", lambda p: _test(test, relation(lf(p), rv)), left.pos)
        return Node("bool", lambda p: _test(test, relation(lf(p), rf(p))), left.pos)

    def between(self, value: Node, low: Node, high: Node, negated: bool) -> Node:
        if low.kind == "const" and high.kind == "const":
            if low.value is None or high.value is None:
                self.fail(low if low.value is None else high, "BETWEEN's bounds cannot be NULL")
            try:
                if java_compare(high.value, low.value) < 0:
                    self.fail(low, f"BETWEEN's low bound {describe(low.value)} is above its high bound "
                                   f"{describe(high.value)}")
            except EvalError:
                pass
        if negated:
            return Node("bool", _any_true((self.compare_order(value, low, "<").fn,
                                           self.compare_order(value, high, ">").fn)), value.pos)
        return Node("bool", _all_true((self.compare_order(value, low, ">=").fn,
                                       self.compare_order(value, high, "<=").fn)), value.pos)

    def in_list(self, left: Node, negated: bool) -> Node:
        if left.kind != "prop":
            self.fail(left, "IN needs a property on its left")
        self.expect("(", "'(' after IN")
        items = {self.expect("string", "a string literal in the IN list").text}
        while self.tok.kind == ",":
            self.take()
            items.add(self.expect("string", "a string literal in the IN list").text)
        self.expect(")", "')' or ',' in the IN list")
        name, members = left.value, frozenset(items)

        def test(p):
            v = p.get(name)
            if v is None:
                return None
            return (v in members) != negated
        return Node("bool", test, left.pos)


# -- evaluation helpers (module level: closures call them without attribute lookups) ---------------

def _not(v):
    return None if v is None else not v


def _boolean_cast(v):
    if v is None:
        return None
    return v if type(v) is bool else False


def _test(test, c):
    return None if c is None else test(c)


def _any_true(fns: tuple) -> Callable:
    def evaluate(p):
        unknown = False
        for fn in fns:
            v = fn(p)
            if v is True:
                return True
            if v is None:
                unknown = True
        return None if unknown else False
    return evaluate


def _all_true(fns: tuple) -> Callable:
    def evaluate(p):
        unknown = False
        for fn in fns:
            v = fn(p)
            if v is False:
                return False
            if v is None:
                unknown = True
        return None if unknown else True
    return evaluate


def _string_test(left: Node, test, search: str, negated: bool) -> Node:
    fn = left.fn

    def evaluate(p):
        if not search:
            return False
        v = fn(p)
        if type(v) is not str:
            return False              # null or not a string: false either way, also under NOT
        return test(v, search) != negated
    return Node("bool", evaluate, left.pos)

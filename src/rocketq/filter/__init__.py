"""Message filters: RocketMQ's tag expressions and SQL92 property selectors.

A consumer subscribes to a topic with an expression of a type (RocketMQ's ``ExpressionType``):
``TAG`` (``"TagA || TagB"``, ``*`` for all) or ``SQL92`` (``"region = 'eu' AND amount > 100"``,
see :mod:`rocketq.filter.sql_parser`).  :func:`subscription` turns one into a
:class:`Subscription`, parsed once and cached by (type, expression): every pull of a subscription
reuses it.  Tag filters run on the consume queue (the tags hash codes); SQL92 filters on each
message's properties (:meth:`Subscription.matches`), where ``TAGS`` is one of them.

Nothing here does I/O; the broker, the gRPC endpoint and the client use it alike.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Mapping

from rocketq.common.javahash import tag_hash
from rocketq.filter.sql_lexer import SqlSyntaxError
from rocketq.filter.sql_parser import Parser
from rocketq.filter.sql_values import EvalError

__all__ = ["FilterError", "SQL92", "SqlFilter", "SqlSyntaxError", "Subscription", "TAG", "compile_sql",
           "sub_version", "subscription"]

TAG, SQL92 = "TAG", "SQL92"
SUB_ALL = "*"
CACHED_EXPRESSIONS = 4_096        # distinct (type, expression) pairs kept parsed


class FilterError(ValueError):
    """An expression that cannot be a subscription (bad type, bad SQL92 with its position)."""


class SqlFilter:
    """A compiled SQL92 selector."""

    __slots__ = ("expression", "_fn", "properties")

    def __init__(self, expression: str):
        self.expression = expression
        parser = Parser(expression)
        self._fn = parser.parse().fn
        self.properties = frozenset(parser.names)      # names it reads

    def evaluate(self, properties: Mapping[str, str]):
        """True / False / None (unknown); raises EvalError where Java would throw."""
        return self._fn(properties)

    def matches(self, properties: Mapping[str, str]) -> bool:
        """Whether a message with *properties* passes: only a TRUE result does; an evaluation
        error (a property that is not the number it is compared with) does not."""
        try:
            return self._fn(properties) is True
        except (EvalError, ValueError, OverflowError):
            return False

    def __repr__(self) -> str:
        return f"SqlFilter({self.expression!r})"


def compile_sql(expression: str) -> SqlFilter:
    """The compiled selector (cached); raises :class:`SqlSyntaxError` naming the position."""
    compiled = _compile_cached(expression)
    if isinstance(compiled, SqlSyntaxError):
        raise compiled
    return compiled


@lru_cache(maxsize=CACHED_EXPRESSIONS)
def _compile_cached(expression: str) -> SqlFilter | SqlSyntaxError:
    try:
        return SqlFilter(expression)
    except SqlSyntaxError as exc:          # cached too, as RocketMQ caches failed parses
        return exc


class Subscription:
    """What a consumer reads of a topic: everything, some tags, or an SQL92 selector."""

    __slots__ = ("expression_type", "expression", "tags", "codes", "sql")

    def __init__(self, expression_type: str, expression: str, tags: frozenset[str] | None = None,
                 sql: SqlFilter | None = None):
        self.expression_type, self.expression, self.tags, self.sql = expression_type, expression, tags, sql
        self.codes = frozenset(tag_hash(t) for t in tags) if tags is not None else None

    @property
    def is_all(self) -> bool:
        return self.tags is None and self.sql is None

    def matches(self, properties: Mapping[str, str]) -> bool:
        """Whether a message with *properties* passes (tags compared by name, not hash code)."""
        if self.sql is not None:
            return self.sql.matches(properties)
        return self.tags is None or properties.get("TAGS") in self.tags

    def __repr__(self) -> str:
        return f"Subscription({self.expression_type}, {self.expression!r})"


def sub_version(sub: dict) -> int:
    """A heartbeat's ``SubscriptionData.subVersion`` (0 when absent or not a number)."""
    try:
        return int(sub.get("subVersion") or 0)
    except (TypeError, ValueError):
        return 0


def is_tag_type(expression_type: str | None) -> bool:
    """RocketMQ's ``ExpressionType.isTagType``: null, empty or TAG."""
    return not expression_type or expression_type == TAG


def subscription(expression: str | None, expression_type: str | None = TAG) -> Subscription:
    """The parsed subscription (cached); raises :class:`FilterError` with the reason."""
    result = _subscription_cached(expression or "", expression_type or TAG)
    if isinstance(result, FilterError):
        raise result
    return result


@lru_cache(maxsize=CACHED_EXPRESSIONS)
def _subscription_cached(expression: str, expression_type: str) -> Subscription | FilterError:
    if is_tag_type(expression_type):
        text = expression.strip()
        if not text or text == SUB_ALL:
            return Subscription(TAG, SUB_ALL)
        tags = frozenset(t.strip() for t in text.split("||") if t.strip())
        return Subscription(TAG, expression, tags)       # "||" alone: no tag, nothing matches (as in Java)
    if expression_type != SQL92:
        return FilterError(f"expression type {expression_type!r} is not TAG or SQL92")
    try:
        return Subscription(SQL92, expression, sql=compile_sql(expression))
    except SqlSyntaxError as exc:
        return FilterError(f"SQL92 expression {_shown(expression)} refused: {exc}")


def _shown(expression: str, limit: int = 200) -> str:
    return repr(expression) if len(expression) <= limit else repr(expression[:limit]) + "..."

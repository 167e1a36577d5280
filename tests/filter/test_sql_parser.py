"""The SQL92 selector as a library: three-valued results, Java's conversions, and refusals that
name the position (RocketMQ's SelectorParser / ComparisonExpression rules; the wire tests in
tests/broker/test_sql_filter_wire.py check the same rules on real messages)."""

import pytest

from rocketq.filter import FilterError, SqlSyntaxError, compile_sql, subscription
from rocketq.filter.sql_lexer import tokenize
from rocketq.filter.sql_parser import MAX_NESTING
from rocketq.filter.sql_values import EvalError, JLong, java_compare, java_double, java_integer

U = None        # unknown (null): never a match

# expression, properties, value (True / False / None), or EvalError when Java throws
EVALUATIONS = [
    ("a = 1", {"a": "1"}, True),
    ("a = 1", {}, U),                            # null on the left: unknown
    ("1 = a", {}, False),                        # null on the right only: false
    ("a = b", {}, True),                         # both null: equal (RocketMQ's doCreateEqual)
    ("a <> b", {}, False),
    ("a <> 1", {}, U),
    ("a > 1", {}, U),
    ("NOT (a > 1)", {}, U),
    ("a > 1 OR TRUE", {}, True),
    ("a > 1 OR FALSE", {}, U),
    ("a > 1 AND FALSE", {}, False),
    ("a > 1 AND TRUE", {}, U),
    ("a IS NULL", {}, True),
    ("a IS NOT NULL", {}, False),
    ("a IN ('x')", {}, U),
    ("a NOT IN ('x')", {}, U),
    ("a CONTAINS 'x'", {}, False),               # the string tests are false on null, also under NOT
    ("a NOT CONTAINS 'x'", {}, False),
    ("a", {"a": "true"}, False),                 # a property value is a String, never a Boolean
    ("a", {}, U),
    ("a = TRUE", {"a": "TRUE"}, True),           # Boolean.valueOf ignores case
    ("a = TRUE", {"a": "yes"}, False),
    ("TRUE = a", {"a": "true"}, EvalError),      # Java casts the Boolean to String
    ("a = 10", {"a": "10.0"}, EvalError),        # Integer.valueOf("10.0") throws
    ("a = 10.0", {"a": "10"}, True),
    ("a > 2147483647", {"a": "2147483648"}, EvalError),   # an Integer literal: the property must fit 32 bits
    ("a > 2147483648", {"a": "2147483649"}, True),        # a Long literal
    ("a > 1.5", {"a": " 2 "}, True),             # Double.valueOf trims; Integer.valueOf does not
    ("a > 1", {"a": " 2 "}, EvalError),
    ("a > 1.5", {"a": "2f"}, True),              # Java's float suffix
    ("a > 1.5", {"a": "0x1p1"}, True),           # and hexadecimal with a binary exponent
    ("a < b", {"a": "1", "b": "1e1"}, True),     # two Strings: both as Double
    ("a < b", {"a": "1", "b": "x"}, EvalError),
    ("a = b", {"a": "1", "b": "1.0"}, False),    # two Strings: compared as text
    ("-a > 0", {"a": "1"}, U),                   # minus of a String is null
    ("a > -5", {"a": "-3"}, True),
    ("a > 1 = TRUE", {"a": "2"}, True),
    ("NOT a = 1", {"a": "1"}, False),            # (NOT a) = 1: NOT binds tighter than '=' in RocketMQ
    ("a BETWEEN 1 AND 3", {"a": "3"}, True),
    ("a NOT BETWEEN 1 AND 3", {"a": "4"}, True),
    ("a IN ('x', 'y')", {"a": "y"}, True),
    ("a NOT IN ('x', 'y')", {"a": "z"}, True),
    ("a STARTSWITH 'ab'", {"a": "abc"}, True),
    ("a ENDSWITH 'bc'", {"a": "abc"}, True),
    ("a CONTAINS ''", {"a": "abc"}, False),      # an empty search string never matches
    ("TAGS = 'TagA'", {"TAGS": "TagA"}, True),
    ("a = 'it''s'", {"a": "it's"}, True),
    ("a = 1 -- the rest of the line is a comment", {"a": "1"}, True),
    ("/* a block */ a = 1", {"a": "1"}, True),
    ("a = 1 aNd B = 2 Or c Is NuLl", {"a": "9"}, True),     # keywords in any case; names keep theirs
]


@pytest.mark.parametrize("expression,props,want", EVALUATIONS, ids=[e for e, _, _ in EVALUATIONS])
def test_evaluation(expression, props, want):
    f = compile_sql(expression)
    if want is EvalError:
        with pytest.raises(EvalError):
            f.evaluate(props)
        assert not f.matches(props)
    else:
        assert f.evaluate(props) is want
        assert f.matches(props) is (want is True)


def test_an_error_anywhere_spoils_the_whole_selector_but_a_short_circuit_avoids_it():
    # RocketMQ evaluates left to right; an exception ends the evaluation (the message does not match)
    props = {"a": "abc", "b": "z"}
    assert not compile_sql("a > 3 OR b = 'z'").matches(props)
    assert compile_sql("b = 'z' OR a > 3").matches(props)


# expression, what the refusal says, 1-based position it names
REFUSALS = [
    ("a >", "expected a property, a literal or '('", 4),
    ("a > 'x'", "cannot be compared with <", 5),
    ("a BETWEEN 'a' AND 'b'", "cannot be compared with <", 11),
    ("a > TRUE", "cannot be compared with <", 5),
    ("NOT a > 3", "a boolean expression cannot be compared", 1),
    ("a = NULL", "NULL cannot be compared", 5),
    ("TRUE = 1", "TRUE cannot be compared with 1", 8),
    ("a IN (1)", "expected a string literal in the IN list", 7),
    ("5 IN ('a')", "IN needs a property", 1),
    ("a BETWEEN 10 AND 5", "low bound 10 is above its high bound 5", 11),
    ("a BETWEEN NULL AND 5", "bounds cannot be NULL", 11),
    ("'abc'", "does not give a boolean value", 1),
    ("a + 1 > 0", "expected AND, OR or the end of the expression, found '+'", 3),
    ("a LIKE 'x%'", "expected AND, OR or the end of the expression, found 'LIKE'", 3),
    ("a = 'open", "a string literal without its closing quote", 5),
    ("a = 1 /* open", "a comment without its closing */", 7),
    ("a ! b", "unexpected character '!'", 3),
    ("a = 99999999999999999999", "larger than the largest long", 5),
    ("a = 1 AND", "expected a property, a literal or '('", 10),
    ("(a = 1", "expected ')'", 7),
    ("a IS 1", "expected NULL or NOT NULL after IS", 6),
    ("a CONTAINS b", "expected a string literal after CONTAINS", 12),
    ("a = 1\nAND b >", "expected a property", 14),
]


@pytest.mark.parametrize("expression,says,position", REFUSALS, ids=[e for e, _, _ in REFUSALS])
def test_refusals_name_the_position(expression, says, position):
    with pytest.raises(SqlSyntaxError) as info:
        compile_sql(expression)
    assert says in str(info.value)
    assert info.value.position + 1 == position, str(info.value)
    assert f"position {position}" in str(info.value)


def test_a_refusal_on_a_later_line_names_line_and_column():
    with pytest.raises(SqlSyntaxError, match=r"position 14 \(line 2, column 8\)"):
        compile_sql("a = 1\nAND b >")


def test_nesting_and_long_chains():
    deep = "(" * (MAX_NESTING + 1) + "a = 1" + ")" * (MAX_NESTING + 1)
    with pytest.raises(SqlSyntaxError, match="nests deeper"):
        compile_sql(deep)
    # a long OR chain is flat, not one level of recursion per term
    chain = " OR ".join(f"a = '{i}'" for i in range(1_500))       # deeper than Python's recursion limit
    assert compile_sql(chain).matches({"a": "1499"})
    with pytest.raises(SqlSyntaxError, match="longer than"):
        compile_sql("a = 1 OR " * 5_000 + "TRUE")


def test_subscriptions_are_parsed_once_and_typed():
    assert subscription("a > 1", "SQL92") is subscription("a > 1", "SQL92")
    tags = subscription("A || B ||", "TAG")
    assert tags.tags == {"A", "B"} and tags.sql is None and tags.matches({"TAGS": "B"})
    assert subscription("*", None).is_all and subscription("", "").is_all
    assert subscription("||", "TAG").tags == frozenset()       # no tag at all: nothing (as in Java)
    with pytest.raises(FilterError, match="not TAG or SQL92"):
        subscription("a", "XPATH")
    with pytest.raises(FilterError, match="position 5"):
        subscription("a > ", "SQL92")
    with pytest.raises(FilterError):                             # the failure is cached and raised again
        subscription("a > ", "SQL92")


def test_java_conversions():
    assert java_integer("+12") == 12 and java_integer("-0") == 0
    assert type(java_integer("5", 64)) is JLong
    for bad in ("", "+", "1.0", " 1", "1_000", "0x10", "2147483648"):
        with pytest.raises(EvalError):
            java_integer(bad)
    assert java_double(" 1.5d ") == 1.5 and java_double("Infinity") == float("inf")
    assert java_double("-0x1.8p1") == -3.0 and java_double(".5") == 0.5 and java_double("1.") == 1.0
    for bad in ("1_0", "inf", "nan", "1e", "0x1.8", "١"):
        with pytest.raises(EvalError):
            java_double(bad)
    nan = float("nan")
    assert java_compare(nan, nan) == 0 and java_compare(nan, float("inf")) == 1   # Double.compareTo
    assert java_compare(-0.0, 0.0) == -1
    assert java_compare(1, JLong(1)) == 0 and java_compare(True, 1) == -1


def test_tokens_carry_their_positions():
    assert [(t.kind, t.position) for t in tokenize("a<>'x''y' OR 1.5e3")] == [
        ("id", 0), ("<>", 1), ("string", 3), ("OR", 10), ("float", 13), ("end", 18)]

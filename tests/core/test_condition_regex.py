"""What a ``matches()`` pattern costs, and CEL string literals decoded as the library does."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from lifecycle_controller.core.policy.condition import _compiler
from lifecycle_controller.core.policy.condition_regex import (
    ANY_WEIGHT,
    COMPILE_BASE,
    FOLDED_WEIGHT,
    LITERAL_WEIGHT,
    RegexCost,
    decode_literal,
    regex_cost,
)

WORD = 100_000  # \w, \W
TABLE = 50_000  # \p{...}, \P{...}


@pytest.mark.parametrize(
    ("pattern", "weight", "atoms"),
    [
        ("", 0, 0),
        ("^ab$", 4 * LITERAL_WEIGHT, 4),
        ("a{1000}", 1000 * LITERAL_WEIGHT, 1000),
        ("a{2,5}", 5 * LITERAL_WEIGHT, 5),
        ("a{3,}", 4 * LITERAL_WEIGHT, 4),  # n copies and a loop over one more
        ("a{ 3 , 4 }", 4 * LITERAL_WEIGHT, 4),
        ("a{0}", LITERAL_WEIGHT, 1),  # never less than one copy
        ("a*b+c?d??", 4 * LITERAL_WEIGHT, 4),
        ("x{", 2 * LITERAL_WEIGHT, 2),  # not a repetition: a literal brace
        ("{2}", 3 * LITERAL_WEIGHT, 3),  # nothing to repeat: literals
        ("*a", 2 * LITERAL_WEIGHT, 2),
        (".", ANY_WEIGHT, 1),
        (r"\w", WORD, 1),
        (r"\W{2}", 2 * WORD, 2),
        (r"\w{200}", 200 * WORD, 200),
        (r"(\w{20}){10}", 200 * WORD, 200),  # nested repetitions multiply
        (r"\d", 6_000, 1),
        (r"\s\S", 2 * ANY_WEIGHT, 2),
        (r"\pL", TABLE, 1),
        (r"\p{Greek}x", TABLE + LITERAL_WEIGHT, 2),
        (r"\PL", TABLE, 1),
        (r"\x{2603}", LITERAL_WEIGHT, 1),
        (r"\.\\", 2 * LITERAL_WEIGHT, 2),
        ("\\", LITERAL_WEIGHT, 1),  # a lone backslash: costed, refused by the engine
        ("é", FOLDED_WEIGHT, 1),
        ("(?i)ab", 2 * FOLDED_WEIGHT, 2),
        ("(?i)a(?-i)b", FOLDED_WEIGHT + LITERAL_WEIGHT, 2),
        ("(?i:a)b", FOLDED_WEIGHT + LITERAL_WEIGHT, 2),
        ("(?i)1", LITERAL_WEIGHT, 1),  # not a letter: nothing to fold
        ("(?sm-x).", ANY_WEIGHT, 1),  # flags that change no weight
        (r"(?-u)\w.é", 3 * LITERAL_WEIGHT, 3),  # ASCII classes are cheap
        (r"(?-u:\w){200}", 200 * LITERAL_WEIGHT, 200),
        (r"(?u)\w", WORD, 1),
        ("[a-z]", LITERAL_WEIGHT, 1),
        ("[[:alpha:]]", LITERAL_WEIGHT, 1),
        ("[]a]", LITERAL_WEIGHT, 1),
        ("[^a-z]", LITERAL_WEIGHT + ANY_WEIGHT, 1),
        ("[a-zé]", LITERAL_WEIGHT + ANY_WEIGHT, 1),
        (r"[a\xe9]", LITERAL_WEIGHT, 1),
        ("(?i)[a-z]", LITERAL_WEIGHT + ANY_WEIGHT, 1),
        ("(?-u)[^a]", LITERAL_WEIGHT, 1),
        (r"[\w]", LITERAL_WEIGHT + WORD, 1),
        (r"[\w\s\d]{150}", 150 * (LITERAL_WEIGHT + WORD + ANY_WEIGHT + 6_000), 150),
        (r"[a[^b]]", LITERAL_WEIGHT + ANY_WEIGHT, 1),
        (r"[\p{Greek}é]", LITERAL_WEIGHT + TABLE + ANY_WEIGHT, 1),
        (r"[é\é]", LITERAL_WEIGHT + ANY_WEIGHT, 1),
        ("[[:alpha:", LITERAL_WEIGHT, 1),  # unterminated: costed to the end
        ("a|bc", 3 * LITERAL_WEIGHT, 3),
        ("(a|b){30}", 60 * LITERAL_WEIGHT, 60),
        ("(?:ab)+", 2 * LITERAL_WEIGHT, 2),
        ("(?P<n>a)(?<m>b)", 2 * LITERAL_WEIGHT, 2),
        ("(ab", 2 * LITERAL_WEIGHT, 2),  # unclosed: refused by the engine, costed anyway
        ("a)", 2 * LITERAL_WEIGHT, 2),
        ("a{99999999}", 100_000 * LITERAL_WEIGHT, 100_000),  # capped
    ],
)
def test_the_compile_estimate(pattern: str, weight: int, atoms: int) -> None:
    assert regex_cost(pattern) == RegexCost(COMPILE_BASE + weight, atoms)


@given(st.text(max_size=40))
def test_any_text_is_costed_without_raising(pattern: str) -> None:
    cost = regex_cost(pattern)
    assert cost.compile >= COMPILE_BASE
    assert cost.atoms >= 0


@given(st.text(alphabet="ab.(|)*?{},0123456789\\wdp[]^-", max_size=20))
def test_repeating_a_pattern_never_costs_less(pattern: str) -> None:
    once = regex_cost(f"(?:{pattern})")
    twice = regex_cost(f"(?:{pattern})(?:{pattern})")
    assert twice.compile - COMPILE_BASE >= once.compile - COMPILE_BASE


@pytest.mark.parametrize(
    ("literal", "value"),
    [
        (r"'\\w{200}'", r"\w{200}"),
        (r'"\\d"', r"\d"),
        (r"r'\w{200}'", r"\w{200}"),
        (r"R'\d'", r"\d"),
        (r"'''it's'''", "it's"),
        ('"""a"b"""', 'a"b'),
        (r"'\a\b\f\n\r\t\v\\\'\"\`\?'", "\a\b\f\n\r\t\v\\'\"`?"),
        (r"'\x41\X42\u00e9\U0001F600'", "ABé\U0001f600"),
        (r"'\101\102'", "AB"),
        (r"'\xZZ'", r"\xZZ"),  # not an escape: kept (the compiler refuses it)
        (r"'\q'", r"\q"),
        (r"'\1'", r"\1"),
        (r"'\U0011FFFF'", "\ufffd"),  # beyond Unicode
        ("'a\\'", "a\\"),  # a trailing backslash
        (r"b'\\w'", r"\w"),
        (r"br'\w'", r"\w"),
    ],
)
def test_literals_decode_as_cel_reads_them(literal: str, value: str) -> None:
    assert decode_literal(literal) == value


def _cel(literal: str) -> object:
    return _compiler().compile(literal).execute({})


@pytest.mark.parametrize(
    "literal",
    [r"'\\w{200}'", r"r'\w'", r"'''it's'''", r"'\x41\u00e9\U0001F600'", r"'\101'", r"'\n\t\"'"],
)
def test_the_table_agrees_with_the_library(literal: str) -> None:
    assert decode_literal(literal) == _cel(literal)


@given(st.text(alphabet=st.characters(exclude_categories=["Cs"]), max_size=30))
def test_any_text_written_as_a_literal_decodes_to_itself(text: str) -> None:
    """JSON's escapes (with raw non-ASCII) are CEL's: the library reads the same value."""
    literal = json.dumps(text, ensure_ascii=False)
    assert decode_literal(literal) == text == _cel(literal)

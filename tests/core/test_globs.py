"""Go ``filepath.Match`` (docs/behaviour.md#resource-keys-and-globs) and group reachability."""

from __future__ import annotations

import itertools
import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lifecycle_controller.core.text.globs import (
    BadPatternError,
    example_with_suffix,
    filepath_match,
    glob_match,
    has_glob_meta,
    matches_any,
    matching_patterns,
)

# Go's own table: src/path/filepath/match_test.go (pattern, name, match, bad pattern).
GO_MATCH_TESTS = [
    ("abc", "abc", True, False),
    ("*", "abc", True, False),
    ("*c", "abc", True, False),
    ("a*", "a", True, False),
    ("a*", "abc", True, False),
    ("a*", "ab/c", False, False),
    ("a*/b", "abc/b", True, False),
    ("a*/b", "a/c/b", False, False),
    ("a*b*c*d*e*/f", "axbxcxdxe/f", True, False),
    ("a*b*c*d*e*/f", "axbxcxdxexxx/f", True, False),
    ("a*b*c*d*e*/f", "axbxcxdxe/xxx/f", False, False),
    ("a*b*c*d*e*/f", "axbxcxdxexxx/fff", False, False),
    ("a*b?c*x", "abxbbxdbxebxczzx", True, False),
    ("a*b?c*x", "abxbbxdbxebxczzy", False, False),
    ("ab[c]", "abc", True, False),
    ("ab[b-d]", "abc", True, False),
    ("ab[e-g]", "abc", False, False),
    ("ab[^c]", "abc", False, False),
    ("ab[^b-d]", "abc", False, False),
    ("ab[^e-g]", "abc", True, False),
    ("a\\*b", "a*b", True, False),
    ("a\\*b", "ab", False, False),
    ("a?b", "a☺b", True, False),
    ("a[^a]b", "a☺b", True, False),
    ("a???b", "a☺b", False, False),
    ("a[^a][^a][^a]b", "a☺b", False, False),
    ("[a-ζ]*", "α", True, False),  # noqa: RUF001 (Go's table)
    ("*[a-ζ]", "A", False, False),
    ("a?b", "a/b", False, False),
    ("a*b", "a/b", False, False),
    ("[\\]a]", "]", True, False),
    ("[\\-]", "-", True, False),
    ("[x\\-]", "x", True, False),
    ("[x\\-]", "-", True, False),
    ("[x\\-]", "z", False, False),
    ("[\\-x]", "x", True, False),
    ("[\\-x]", "-", True, False),
    ("[\\-x]", "a", False, False),
    ("[]a]", "]", False, True),
    ("[-]", "-", False, True),
    ("[x-]", "x", False, True),
    ("[x-]", "-", False, True),
    ("[x-]", "z", False, True),
    ("[-x]", "x", False, True),
    ("[-x]", "-", False, True),
    ("[-x]", "a", False, True),
    ("\\", "a", False, True),
    ("[a-b-c]", "a", False, True),
    ("[", "a", False, True),
    ("[^", "a", False, True),
    ("[^bc", "a", False, True),
    ("a[", "a", False, True),
    ("a[", "ab", False, True),
    ("a[", "x", False, True),
    ("a/b[", "x", False, True),
    ("*x", "xxx", True, False),
]


@pytest.mark.parametrize(("pattern", "name", "match", "bad"), GO_MATCH_TESTS)
def test_go_match_table(pattern: str, name: str, match: bool, bad: bool) -> None:
    if bad:
        with pytest.raises(BadPatternError):
            filepath_match(pattern, name)
    else:
        assert filepath_match(pattern, name) is match
    # The reference ignores the error: a malformed pattern simply never matches.
    assert glob_match(pattern, name) is match


@pytest.mark.parametrize(
    ("pattern", "key", "match"),
    [
        # `*` crosses dots, so it selects core and grouped keys alike
        # (docs/behaviour.md#resource-keys-and-globs).
        ("*", "pods", True),
        ("*", "deployments.apps", True),
        ("*", "ingresses.networking.k8s.io", True),
        ("*.k8s.io", "ingresses.networking.k8s.io", True),
        # AS-66: `*.*` needs a dot, so no core resource.
        ("*.*", "pods", False),
        ("*.*", "deployments.apps", True),
        ("*.apps", "statefulsets.apps", True),
        ("*.apps", "deployments.apps.example.com", False),
        ("deployment?.apps", "deployments.apps", True),
        ("[cd]*.apps", "daemonsets.apps", True),
        ("[^d]*.apps", "daemonsets.apps", False),
        ("cron-*", "cron-jobs", True),
        ("namespace*", "namespaces", True),
        # Subresource keys contain `/`, which no glob wildcard crosses.
        ("*", "pods/status", False),
        ("pods*", "pods/status", False),
        ("pods/*", "pods/status", True),
        # Malformed patterns never match, even where a prefix would.
        ("pods[", "pods", False),
        ("[", "[", False),
        # fnmatch would treat these differently.
        ("*", "a/b", False),
        ("\\*", "*", True),
        ("[!a]", "b", False),
        ("[!a]", "!", True),
    ],
)
def test_ref_005_key_globs(pattern: str, key: str, match: bool) -> None:
    assert glob_match(pattern, key) is match


def test_helpers() -> None:
    assert matches_any(["x", "*.apps"], "deployments.apps")
    assert not matches_any([], "pods")
    assert matching_patterns(["*", "pods", "x", "p?ds"], "pods") == ("*", "pods", "p?ds")
    assert [has_glob_meta(v) for v in ["team-a", "dev-*", "a?", "[a]", "a]", "a\\b"]] == [
        False,
        True,
        True,
        True,
        True,
        True,
    ]


# --------------------------------------------------------------------------- a reference model


class _Malformed(Exception):
    pass


def _model_regex(pattern: str) -> str:
    """An independent reading of Go's documented grammar, as a Python regex."""
    out: list[str] = []
    i = 0

    def char_at(j: int) -> str:
        if j >= len(pattern):
            raise _Malformed
        return pattern[j]

    while i < len(pattern):
        c = pattern[i]
        if c == "*":
            out.append("[^/]*")
            i += 1
        elif c == "?":
            out.append("[^/]")
            i += 1
        elif c == "\\":
            out.append(re.escape(char_at(i + 1)))
            i += 2
        elif c == "[":
            i += 1
            negated = char_at(i) == "^"
            if negated:
                i += 1
            ranges: list[tuple[str, str]] = []
            while True:
                if char_at(i) == "]" and ranges:
                    i += 1
                    break

                def one(j: int) -> tuple[str, int]:
                    ch = char_at(j)
                    if ch in "-]":
                        raise _Malformed
                    if ch == "\\":
                        return char_at(j + 1), j + 2
                    return ch, j + 1

                low, i = one(i)
                high = low
                if char_at(i) == "-":
                    high, i = one(i + 1)
                ranges.append((low, high))
            parts = "".join(f"{re.escape(lo)}-{re.escape(hi)}" for lo, hi in ranges if lo <= hi)
            if not parts:
                out.append("(?s:.)" if negated else "(?!)")
            else:
                out.append(f"[{'^' if negated else ''}{parts}]")
        else:
            out.append(re.escape(c))
            i += 1
    return "".join(out)


PATTERN_CHARS = "ab.-/*?[]^\\"
# No "/" in names: Go matches each chunk after a star at its first possible position and never
# backtracks past a separator, which a backtracking regex model cannot mirror (see
# test_separator_cases_match_go). Resource keys and namespace names never contain "/".
NAME_CHARS = "ab.-]^*?[\\"


@settings(max_examples=3000, deadline=None)
@given(st.text(PATTERN_CHARS, max_size=8), st.text(NAME_CHARS, max_size=8))
def test_agrees_with_grammar_model(pattern: str, name: str) -> None:
    try:
        expected: bool | None = re.fullmatch(_model_regex(pattern), name, re.DOTALL) is not None
    except _Malformed:
        expected = None
    if expected is None:
        with pytest.raises(BadPatternError):
            filepath_match(pattern, name)
        assert not glob_match(pattern, name)
    else:
        assert filepath_match(pattern, name) is expected


@pytest.mark.parametrize(
    ("pattern", "name", "expected"),
    [
        # Results of Go's own path/filepath.Match (Go 1.26), separator-sensitive corners.
        ("*[^[]*", "?/", False),  # the first chunk match is kept; the trailing * can't eat "/"
        ("*[^a]", "b/", True),  # a class may match the separator
        ("[^a]", "/", True),
        ("a*[/]", "ab/", True),
        ("*", "a/b", False),
        ("a?b", "a/b", False),  # ? never matches the separator
    ],
)
def test_separator_cases_match_go(pattern: str, name: str, expected: bool) -> None:
    assert filepath_match(pattern, name) is expected


@settings(max_examples=500, deadline=None)
@given(st.text("ab.-", max_size=10))
def test_plain_names_match_only_themselves(name: str) -> None:
    assert glob_match(name, name)
    assert not glob_match(name, name + "x")


# --------------------------------------------------------------------------- group reachability


@pytest.mark.parametrize(
    ("pattern", "suffix", "reachable"),
    [
        ("*", ".apps", True),
        ("*", "", True),
        ("*.apps", ".apps", True),
        ("*.apps", ".metrics.k8s.io", False),
        ("deployments.apps", ".apps", True),
        ("deployments.apps", ".metrics.k8s.io", False),
        ("deployments.apps", "", False),  # a core key has no dot
        ("pods", "", True),
        ("pods", ".apps", False),
        ("*.k8s.io", ".metrics.k8s.io", True),
        ("*s.k8s.io", ".metrics.k8s.io", True),
        ("*.*", "", False),
        ("*.*", ".x", True),
        ("?.apps", ".apps", True),
        ("[", ".apps", False),  # malformed: matches nothing
        ("*/status", ".apps", False),
        ("*.app?", ".apps", True),
        ("*.app[^s]", ".apps", False),
    ],
)
def test_example_with_suffix(pattern: str, suffix: str, reachable: bool) -> None:
    example = example_with_suffix(pattern, suffix, stem_excludes=".")
    assert (example is not None) is reachable
    if example is not None:
        assert example.endswith(suffix)
        assert glob_match(pattern, example)


@settings(max_examples=800, deadline=None)
@given(st.text("ab.*?[]^-\\", max_size=6), st.text("ab.", max_size=3))
def test_example_with_suffix_is_exact(pattern: str, group: str) -> None:
    suffix = f".{group}" if group else ""
    example = example_with_suffix(pattern, suffix, stem_excludes=".")
    if example is not None:
        stem = example[: len(example) - len(suffix)]
        assert example.endswith(suffix)
        assert stem
        assert "." not in stem
        assert "/" not in stem
        assert glob_match(pattern, example)
        return
    # None: no short stem over a rich enough alphabet matches either.
    alphabet = sorted({*"abz-", *(c for c in pattern if c not in "./")})
    for size in range(1, 4 if len(alphabet) > 6 else 5):
        for chars in itertools.product(alphabet, repeat=size):
            assert not glob_match(pattern, "".join(chars) + suffix), (pattern, chars)


_exactish = st.text(alphabet="ab/.*?[]\\-^", max_size=5)


@given(pattern=_exactish, value=st.text(alphabet="ab/.*?[]\\-^", max_size=5))
def test_matches_any_agrees_with_glob_match(pattern: str, value: str) -> None:
    # The exact-name shortcut must answer exactly what the port of Go's loop answers.
    assert matches_any([pattern], value) is glob_match(pattern, value)
    assert matching_patterns([pattern], value) == ((pattern,) if glob_match(pattern, value) else ())

"""Go ``path/filepath.Match`` globs, the pattern language of every scope flag.

The reference controller matches ``--watch-resource``, ``--ignore-resource``,
``--watch-namespace`` and ``--ignore-namespace`` with Go's ``filepath.Match`` on Unix and
ignores its error, so users' patterns behave exactly as there:

* ``*`` matches any run of characters except ``/`` -- dots included, so ``*`` selects every
  resource key and ``*.k8s.io`` selects ``ingresses.networking.k8s.io``;
* ``?`` matches one character except ``/``;
* ``[...]`` is a character class with ranges (``[a-c]``) and negation (``[^...]``);
* ``\\`` escapes the next character (also inside classes);
* a malformed pattern (``[``, ``[]a]``, ``[x-]``, a trailing ``\\``...) never matches.

Python's :mod:`fnmatch` differs on every one of those points, hence this port of Go's
algorithm (Go 1.22+, which validates the rest of a pattern even after a mismatch). Names are
matched code point by code point; for the valid UTF-8 that Kubernetes names are, that is
what Go's byte-wise loop does.

:func:`example_with_suffix` answers a different question for discovery: can a pattern match
*some* resource key of an API group (docs/behaviour.md#discovery-modes: a failing group that no
watch pattern can match does not block startup)?
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass

__all__ = [
    "GLOB_META",
    "BadPatternError",
    "example_with_suffix",
    "filepath_match",
    "glob_match",
    "has_glob_meta",
    "matches_any",
    "matching_patterns",
]

SEPARATOR = "/"
#: Characters that make a scope entry a pattern, not an exact name (docs/behaviour.md#read-scoping).
GLOB_META = "*?[]\\"
_GLOB_META_SET = frozenset(GLOB_META)


class BadPatternError(ValueError):
    """Go's ``filepath.ErrBadPattern``: the pattern is malformed."""

    def __init__(self) -> None:
        super().__init__("syntax error in pattern")


# --------------------------------------------------------------------------- matching


def filepath_match(pattern: str, name: str) -> bool:
    """Go's ``filepath.Match(pattern, name)``; raises :class:`BadPatternError` like its error."""
    while pattern:
        star, chunk, pattern = _scan_chunk(pattern)
        if star and not chunk:
            # A trailing star matches the rest of the name unless it has a separator.
            return SEPARATOR not in name
        rest = _match_chunk(chunk, name)
        # The last chunk must consume the whole name; otherwise keep looking with the star.
        if rest is not None and (not rest or pattern):
            name = rest
            continue
        if star:
            rest = _match_after_star(chunk, pattern, name)
            if rest is not None:
                name = rest
                continue
        # Before a clean "no", make sure the rest of the pattern is well formed.
        while pattern:
            _, chunk, pattern = _scan_chunk(pattern)
            _match_chunk(chunk, "")
        return False
    return not name


def _match_after_star(chunk: str, pattern: str, name: str) -> str | None:
    """Try ``chunk`` after skipping 1, 2, ... characters of ``name`` (never a separator)."""
    for i, char in enumerate(name):
        if char == SEPARATOR:
            break
        rest = _match_chunk(chunk, name[i + 1 :])
        if rest is not None:
            if not pattern and rest:
                continue  # the last chunk must exhaust the name
            return rest
    return None


def glob_match(pattern: str, value: str) -> bool:
    """The reference's ``matched, _ := filepath.Match(p, v)``: malformed never matches."""
    try:
        return filepath_match(pattern, value)
    except BadPatternError:
        return False


def _matches(pattern: str, value: str) -> bool:
    """:func:`glob_match`, with the common exact name compared as a string (5x faster)."""
    if not has_glob_meta(pattern):
        return pattern == value  # what Go's loop amounts to for a pattern of literals
    return glob_match(pattern, value)


def matches_any(patterns: Iterable[str], value: str) -> bool:
    """Whether some pattern matches ``value`` (malformed patterns never do)."""
    return any(_matches(pattern, value) for pattern in patterns)


def matching_patterns(patterns: Iterable[str], value: str) -> tuple[str, ...]:
    """The patterns that match ``value``, in their given order."""
    return tuple(pattern for pattern in patterns if _matches(pattern, value))


def has_glob_meta(value: str) -> bool:
    """Whether ``value`` contains any of ``*?[]\\`` (so it is not an exact name)."""
    return not _GLOB_META_SET.isdisjoint(value)


def _scan_chunk(pattern: str) -> tuple[bool, str, str]:
    """Split off the next chunk: (preceded by a star?, chunk without stars, rest)."""
    star = False
    while pattern.startswith("*"):
        pattern = pattern[1:]
        star = True
    in_range = False
    i = 0
    while i < len(pattern):
        char = pattern[i]
        if char == "\\":
            # A trailing backslash is reported by _match_chunk.
            if i + 1 < len(pattern):
                i += 1
        elif char == "[":
            in_range = True
        elif char == "]":
            in_range = False
        elif char == "*" and not in_range:
            break
        i += 1
    return star, pattern[:i], pattern[i:]


def _match_chunk(chunk: str, s: str) -> str | None:
    """Match ``chunk`` (no stars) against the start of ``s``; the rest of ``s`` or None.

    After a mismatch the chunk is still parsed to the end, so a malformed chunk always
    raises :class:`BadPatternError`.
    """
    failed = False
    while chunk:
        if not failed and not s:
            failed = True
        head = chunk[0]
        if head == "[":
            char = ""
            if not failed:
                char, s = s[0], s[1:]
            chunk = chunk[1:]
            negated = chunk.startswith("^")
            if negated:
                chunk = chunk[1:]
            matched = False
            ranges = 0
            while True:
                if chunk.startswith("]") and ranges > 0:
                    chunk = chunk[1:]
                    break
                low, chunk = _get_escaped(chunk)
                high = low
                if chunk[0] == "-":
                    high, chunk = _get_escaped(chunk[1:])
                if not failed and low <= char <= high:
                    matched = True
                ranges += 1
            if matched == negated:
                failed = True
        elif head == "?":
            if not failed:
                if s[0] == SEPARATOR:
                    failed = True
                s = s[1:]
            chunk = chunk[1:]
        else:
            if head == "\\":
                chunk = chunk[1:]
                if not chunk:
                    raise BadPatternError
            if not failed:
                if chunk[0] != s[0]:
                    failed = True
                s = s[1:]
            chunk = chunk[1:]
    return None if failed else s


def _get_escaped(chunk: str) -> tuple[str, str]:
    """One possibly escaped character of a class, and the rest (which cannot be empty)."""
    if not chunk or chunk[0] in "-]":
        raise BadPatternError
    if chunk[0] == "\\":
        chunk = chunk[1:]
        if not chunk:
            raise BadPatternError
    char, rest = chunk[0], chunk[1:]
    if not rest:
        raise BadPatternError
    return char, rest


# --------------------------------------------------------------------------- analysis


@dataclass(frozen=True)
class _Token:
    """One element of a parsed pattern: star, any (``?``), class, or literal."""

    kind: str  # "star" | "any" | "class" | "literal"
    literal: str = ""
    ranges: tuple[tuple[str, str], ...] = ()
    negated: bool = False

    def accepts(self, char: str) -> bool:
        if self.kind in ("star", "any"):
            return char != SEPARATOR
        if self.kind == "literal":
            return char == self.literal
        inside = any(low <= char <= high for low, high in self.ranges)
        return inside != self.negated


def _tokens(pattern: str) -> tuple[_Token, ...]:
    """Parse a pattern the way Go reads it; raises BadPatternError when malformed."""
    _validate(pattern)
    tokens: list[_Token] = []
    while pattern:
        star, chunk, pattern = _scan_chunk(pattern)
        if star:
            tokens.append(_Token("star"))
        while chunk:
            head = chunk[0]
            if head == "[":
                chunk = chunk[1:]
                negated = chunk.startswith("^")
                if negated:
                    chunk = chunk[1:]
                ranges: list[tuple[str, str]] = []
                while not (chunk.startswith("]") and ranges):
                    low, chunk = _get_escaped(chunk)
                    high = low
                    if chunk[0] == "-":
                        high, chunk = _get_escaped(chunk[1:])
                    ranges.append((low, high))
                chunk = chunk[1:]
                tokens.append(_Token("class", ranges=tuple(ranges), negated=negated))
            elif head == "?":
                tokens.append(_Token("any"))
                chunk = chunk[1:]
            else:
                if head == "\\":
                    chunk = chunk[1:]
                tokens.append(_Token("literal", literal=chunk[0]))
                chunk = chunk[1:]
    return tuple(tokens)


def _validate(pattern: str) -> None:
    while pattern:
        _, chunk, pattern = _scan_chunk(pattern)
        _match_chunk(chunk, "")


# Candidates tried first when a witness character is needed (readable examples).
_CANDIDATES = "abcdefghijklmnopqrstuvwxyz0123456789-"


def _pick(token: _Token, forbidden: str) -> str | None:
    """Some character the token accepts that is not ``/`` nor in ``forbidden``."""
    if token.kind == "literal":
        ok = token.literal != SEPARATOR and token.literal not in forbidden
        return token.literal if ok else None
    for char in _CANDIDATES:
        if char not in forbidden and token.accepts(char):
            return char
    if token.kind == "class" and not token.negated:
        for low, high in token.ranges:
            for code in range(ord(low), min(ord(high), ord(low) + 512) + 1):
                char = chr(code)
                if char != SEPARATOR and char not in forbidden:
                    return char
        return None
    # "any", "star" or a negated class: infinitely many characters qualify.
    code = 0x100
    while not token.accepts(chr(code)):
        code += 1
    return chr(code)


def example_with_suffix(pattern: str, suffix: str, *, stem_excludes: str = "") -> str | None:
    """An example ``stem + suffix`` that ``pattern`` matches, or None if there is none.

    ``stem`` is non-empty and contains neither ``/`` nor any character of
    ``stem_excludes``. A malformed pattern matches nothing, so it gives None. Used to decide
    whether a watch pattern could select any resource key ``<plural>.<group>`` of a group.
    """
    try:
        tokens = _tokens(pattern)
    except BadPatternError:
        return None
    forbidden = stem_excludes + SEPARATOR
    n = len(tokens)
    # Product of the pattern's NFA (position) and the target's DFA: -1 = empty stem,
    # 0 = non-empty stem, j >= 1 = j characters of the suffix consumed.
    start = (0, -1)
    previous: dict[tuple[int, int], tuple[tuple[int, int], str] | None] = {start: None}
    queue = deque([start])
    while queue:
        state = queue.popleft()
        position, target = state
        if position == n and target == (len(suffix) if suffix else 0):
            return _spell(previous, state)
        for next_state, char in _moves(tokens, position, target, suffix, forbidden):
            if next_state not in previous:
                previous[next_state] = (state, char)
                queue.append(next_state)
    return None


def _moves(
    tokens: tuple[_Token, ...], position: int, target: int, suffix: str, forbidden: str
) -> Iterable[tuple[tuple[int, int], str]]:
    if position == len(tokens):
        return
    token = tokens[position]
    advance = position if token.kind == "star" else position + 1
    if token.kind == "star":
        yield (position + 1, target), ""  # the star matches nothing more
    if target in (-1, 0):
        char = _pick(token, forbidden)
        if char is not None:
            yield (advance, 0), char
        if target == 0 and suffix and token.accepts(suffix[0]):
            yield (advance, 1), suffix[0]
    elif 1 <= target < len(suffix) and token.accepts(suffix[target]):
        yield (advance, target + 1), suffix[target]


def _spell(
    previous: dict[tuple[int, int], tuple[tuple[int, int], str] | None], state: tuple[int, int]
) -> str:
    chars: list[str] = []
    step = previous[state]
    while step is not None:
        state, char = step
        chars.append(char)
        step = previous[state]
    return "".join(reversed(chars))

"""What a ``matches()`` call costs: the pattern's literal decoded, its compilation estimated.

The CEL library compiles a regular expression on **every** ``matches()`` call (measured: a
``'\\w{200}'`` pattern takes tens of milliseconds each time, whatever the input), so a
pattern is costed as if compiled per call, and only a string literal is accepted as a
pattern: its cost is then known when the policy is read
(:mod:`lifecycle_controller.core.policy.condition_cost`).

The library's regex engine builds an automaton whose size, and so its compile time, grows
with the pattern: a literal character or an ASCII class costs little, ``.`` and a negated
class cover all of Unicode (its UTF-8 encodings), and ``\\w``, ``\\W``, ``\\p{...}`` are
large Unicode tables, about a thousand times a literal. A counted repetition (``{n}``,
``{n,m}``, ``{n,}``) copies what it repeats, nesting multiplies. :func:`regex_cost` reads the
pattern with that grammar and adds the weights up: an upper bound, never a parse that can
fail (a pattern the engine refuses is refused when the policy is compiled, by the engine).
``(?i)`` makes letters dearer (case folding), ``(?-u)`` makes classes ASCII and cheap.

:func:`decode_literal` turns a CEL string literal, as written, into its value (prefixes,
quotes and escapes as in the CEL specification), for :func:`regex_cost` to read.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Final

__all__ = [
    "ANY_WEIGHT",
    "COMPILE_BASE",
    "FOLDED_WEIGHT",
    "LITERAL_WEIGHT",
    "RegexCost",
    "decode_literal",
    "regex_cost",
]

#: Steps (about 10 ns each, as the rest of the cost model) to compile an empty pattern.
COMPILE_BASE: Final = 1_000
#: One ASCII literal character, anchor or ASCII class (``[a-z]``, ``[[:alpha:]]``).
LITERAL_WEIGHT: Final = 50
#: A non-ASCII literal, or a letter under ``(?i)``.
FOLDED_WEIGHT: Final = 500
#: ``.``, a negated class, ``\s``/``\S``: every Unicode scalar value, as UTF-8.
ANY_WEIGHT: Final = 1_000
#: Escape classes under Unicode, by letter (``\pL``, ``\p{Greek}``, ``\PL`` as ``p``/``P``).
_CLASS_WEIGHTS: Final = {
    "d": 6_000,
    "D": 6_000,
    "s": ANY_WEIGHT,
    "S": ANY_WEIGHT,
    "w": 100_000,
    "W": 100_000,
    "p": 50_000,
    "P": 50_000,
}
#: Escapes followed by a braced argument that is part of them (``\p{Greek}``, ``\x{2603}``).
_BRACED: Final = frozenset("pPxuU")
_REPEAT: Final = re.compile(r"\{\s*(\d+)\s*(,\s*(\d*)\s*)?\}")
_FLAGS: Final = re.compile(r"\(\?([A-Za-z-]*)([:)])")
_NAMED: Final = re.compile(r"\(\?P?<[^>]*>")
#: At most this many copies are counted per repetition (beyond, the engine refuses anyway).
_MAX_COPIES: Final = 100_000


@dataclass(frozen=True, slots=True)
class RegexCost:
    """``compile``: steps to compile the pattern once; ``atoms``: the automaton's size in
    pattern elements (repetitions expanded), what matching walks per input character."""

    compile: int
    atoms: int


@dataclass(slots=True)
class _Mode:
    fold: bool = False
    unicode: bool = True

    def flagged(self, flags: str) -> _Mode:
        mode = _Mode(self.fold, self.unicode)
        on = True
        for flag in flags:
            if flag == "-":
                on = False
            elif flag == "i":
                mode.fold = on
            elif flag == "u":
                mode.unicode = on
        return mode


@dataclass(slots=True)
class _Group:
    mode: _Mode
    weight: int = 0  # closed alternatives
    atoms: int = 0
    #: (weight, atoms) of each element of the open alternative.
    items: list[tuple[int, int]] = field(default_factory=list)

    def close_alternative(self) -> None:
        self.weight += sum(w for w, _ in self.items)
        self.atoms += sum(a for _, a in self.items)
        self.items = []


def _literal_weight(char: str, mode: _Mode) -> int:
    if not mode.unicode:
        return LITERAL_WEIGHT
    if not char.isascii() or (mode.fold and char.isalpha()):
        return FOLDED_WEIGHT
    return LITERAL_WEIGHT


def _escape(pattern: str, at: int, mode: _Mode) -> tuple[int, int, bool]:
    """(weight, index after, whether a class) of the escape whose backslash is at ``at``."""
    letter = pattern[at + 1 : at + 2]
    end = at + 2
    if letter in _BRACED and pattern[end : end + 1] == "{":
        close = pattern.find("}", end)
        end = len(pattern) if close < 0 else close + 1
    elif letter in ("p", "P") and end < len(pattern):
        end += 1  # \pL: a one-letter class name
    if letter in _CLASS_WEIGHTS:
        return (_CLASS_WEIGHTS[letter] if mode.unicode else LITERAL_WEIGHT), end, True
    return _literal_weight(letter or "\\", mode), end, False


def _bracket(pattern: str, at: int, mode: _Mode) -> tuple[int, int]:
    """(weight, index after) of the class opening with the ``[`` at ``at``."""
    i = at + 1
    weight = LITERAL_WEIGHT
    dear = False
    if pattern[i : i + 1] == "^":
        dear = True
        i += 1
    if pattern[i : i + 1] == "]":
        i += 1  # a leading ']' is a literal
    depth = 1
    while i < len(pattern) and depth:
        char = pattern[i]
        if char == "\\":
            escaped, i, is_class = _escape(pattern, i, mode)
            if is_class:
                weight += escaped
            else:
                dear = dear or escaped > LITERAL_WEIGHT
            continue
        if pattern.startswith("[:", i):
            close = pattern.find(":]", i + 2)
            i = len(pattern) if close < 0 else close + 2
            continue
        if char == "[":
            depth += 1
            if pattern[i + 1 : i + 2] == "^":
                dear = True
        elif char == "]":
            depth -= 1
        elif not char.isascii() or (mode.fold and char.isalpha()):
            dear = True
        i += 1
    if dear and mode.unicode:
        weight += ANY_WEIGHT
    return weight, i


def regex_cost(pattern: str) -> RegexCost:
    """The estimated cost of compiling ``pattern`` (see the module docstring); never raises."""
    mode = _Mode()
    stack = [_Group(mode)]
    i = 0
    while i < len(pattern):
        group = stack[-1]
        items = group.items
        char = pattern[i]
        if char == "\\":
            weight, i, _ = _escape(pattern, i, group.mode)
            items.append((weight, 1))
            continue
        if char == "[":
            weight, i = _bracket(pattern, i, group.mode)
            items.append((weight, 1))
            continue
        if char == "(":
            flags = _FLAGS.match(pattern, i)
            if flags is not None and flags.group(2) == ")":
                group.mode = group.mode.flagged(flags.group(1))  # the rest of this group
                i = flags.end()
                continue
            named = _NAMED.match(pattern, i)
            inner = group.mode.flagged(flags.group(1)) if flags is not None else group.mode
            stack.append(_Group(inner))
            i = flags.end() if flags is not None else named.end() if named is not None else i + 1
            continue
        if char == ")" and len(stack) > 1:
            group.close_alternative()
            stack.pop()
            stack[-1].items.append((group.weight, group.atoms))
            i += 1
            continue
        if char == "|":
            group.close_alternative()
            i += 1
            continue
        repeat = _REPEAT.match(pattern, i) if char == "{" and items else None
        if (char in "*+?" and items) or repeat is not None:
            copies = 1
            if repeat is not None:
                low, comma, high = repeat.group(1), repeat.group(2), repeat.group(3)
                copies = int(high) if high else int(low) + 1 if comma else int(low)
                copies = min(max(copies, 1), _MAX_COPIES)
                i = repeat.end()
            else:
                i += 1
            if pattern[i : i + 1] in ("?", "+"):
                i += 1  # lazy or possessive marker
            weight, atoms = items[-1]
            items[-1] = (weight * copies, atoms * copies)
            continue
        weight = ANY_WEIGHT if char == "." and group.mode.unicode else 0
        items.append((weight or _literal_weight(char, group.mode), 1))
        i += 1
    while len(stack) > 1:  # unclosed groups: the engine refuses them; cost them anyway
        group = stack.pop()
        group.close_alternative()
        stack[-1].items.append((group.weight, group.atoms))
    stack[0].close_alternative()
    return RegexCost(COMPILE_BASE + stack[0].weight, stack[0].atoms)


_SIMPLE_ESCAPES: Final = {
    "a": "\a",
    "b": "\b",
    "f": "\f",
    "n": "\n",
    "r": "\r",
    "t": "\t",
    "v": "\v",
    "\\": "\\",
    "'": "'",
    '"': '"',
    "`": "`",
    "?": "?",
}
_HEX_LENGTHS: Final = {"x": 2, "X": 2, "u": 4, "U": 8}


def decode_literal(literal: str) -> str:
    """The value of a CEL string literal written ``literal`` (prefix and quotes included).

    An escape the specification does not have is kept as written (the compiler refuses it
    anyway); a bytes literal is read as text (``matches()`` takes a string)."""
    body = literal.lstrip("rRbB")
    prefix = literal[: len(literal) - len(body)]
    quote = body[:3] if body[:3] in ("'''", '"""') else body[:1]
    content = body[len(quote) : len(body) - len(quote)]
    if "r" in prefix.lower():
        return content
    out: list[str] = []
    i = 0
    while i < len(content):
        char = content[i]
        if char != "\\" or i + 1 == len(content):
            out.append(char)
            i += 1
            continue
        code = content[i + 1]
        if code in _SIMPLE_ESCAPES:
            out.append(_SIMPLE_ESCAPES[code])
            i += 2
        elif code in _HEX_LENGTHS:
            digits = content[i + 2 : i + 2 + _HEX_LENGTHS[code]]
            if len(digits) == _HEX_LENGTHS[code] and _is_hex(digits):
                out.append(_char(int(digits, 16)))
                i += 2 + len(digits)
            else:
                out.append(content[i : i + 2])
                i += 2
        elif content[i + 1 : i + 4].isdigit() and _is_octal(content[i + 1 : i + 4]):
            out.append(_char(int(content[i + 1 : i + 4], 8)))
            i += 4
        else:
            out.append(content[i : i + 2])
            i += 2
    return "".join(out)


def _is_hex(text: str) -> bool:
    return all(c in "0123456789abcdefABCDEF" for c in text)


def _is_octal(text: str) -> bool:
    return len(text) == 3 and all(c in "01234567" for c in text)


def _char(code: int) -> str:
    try:
        return chr(code)
    except ValueError:
        return "\ufffd"

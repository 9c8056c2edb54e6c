"""The cost bound of a policy's CEL ``condition``, computed on the parsed expression.

A text scan cannot tell a macro call from a comment or a string (``labels. // x⏎ all(v, ...)``
is a comprehension), so the expression is tokenized and parsed here with CEL's grammar
(comments, strings with every prefix and quote form, numbers, operators, member calls,
list/map/message literals; the engine's package exposes no tree of its own:
docs/architecture.md#condition-parser), and two bounds are taken on the tree, as Kubernetes
does for the CEL rules of CRDs:

* comprehension depth: a macro (``all``, ``exists``, ``exists_one``, ``map``, ``filter``)
  inside another one's body is refused;
* an estimated cost, in abstract steps, for given sizes of the object's metadata: every value
  is bounded by an element count and a total size, every operation costs at most a polynomial
  of its operands' sizes. A comprehension costs its range plus its body once for a bound
  variable as large as the whole range and once per other element for an empty one (every cost
  is a convex function of the variable's size, and the elements' sizes add up to the range's).
  ``matches()`` costs the compilation of its pattern on every call, as the library compiles
  it each time (:mod:`lifecycle_controller.core.policy.condition_regex`); its pattern must be
  a string literal (:class:`PatternError` otherwise), so that cost is known here.

:func:`analyse` parses (raising :class:`CostError` for what it cannot read; the CEL compiler
reports real syntax errors) and returns a :class:`CostModel` whose :meth:`CostModel.cost`
gives the bound for given :class:`Sizes`.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Final

from lifecycle_controller.core.policy.condition_regex import RegexCost, decode_literal, regex_cost
from lifecycle_controller.core.policy.field_paths import EVERY_ELEMENT, element

__all__ = [
    "MACROS",
    "REFERENCES_VARIABLE",
    "CostError",
    "CostModel",
    "NestedMacroError",
    "PatternError",
    "Sizes",
    "analyse",
    "identifiers",
]

MACROS: Final = frozenset({"all", "exists", "exists_one", "map", "filter"})
#: The macros whose value holds nothing of an element but what their body reads of it
#: (``filter`` yields the elements themselves, to be read in any way after it).
_FOLLOWED_MACROS: Final = MACROS - {"filter"}
#: The variable listing what uses the object (sized by :attr:`Sizes.references_entries`).
REFERENCES_VARIABLE: Final = "referencedBy"


class CostError(ValueError):
    """The expression cannot be read by the cost analysis."""


class NestedMacroError(ValueError):
    """A comprehension inside another one's body; ``macro`` is the inner one."""

    def __init__(self, macro: str) -> None:
        super().__init__(macro)
        self.macro = macro


class PatternError(ValueError):
    """A ``matches()`` call whose pattern is not a string literal."""


@dataclass(frozen=True, slots=True)
class Sizes:
    """Sizes of the metadata a condition sees: lengths of strings, entries and bytes of maps."""

    name: int
    namespace: int
    labels_entries: int
    labels_bytes: int
    annotations_entries: int
    annotations_bytes: int
    owner_entries: int
    owner_bytes: int
    #: Scalars, entries and characters of the object's fields other than metadata that the
    #: condition is given (only the paths it reads).
    fields: int = 0
    #: Entries of ``referencedBy`` and their characters.
    references_entries: int = 0
    references_bytes: int = 0

    @property
    def total(self) -> int:
        return (
            self.name
            + self.namespace
            + self.labels_entries
            + self.labels_bytes
            + self.annotations_entries
            + self.annotations_bytes
            + self.owner_entries
            + self.owner_bytes
            + self.fields
            + 16
        )


# --- tokens ---------------------------------------------------------------------------------

_TOKEN: Final = re.compile(
    r"""
    (?P<space>\s+|//[^\n]*)
  | (?P<string>(?:[rR][bB]?|[bB][rR]?)?(?:'''|\"\"\"|'|\"))
  | (?P<number>0[xX][0-9a-fA-F]+[uU]?|(?:[0-9]+\.[0-9]*|\.[0-9]+|[0-9]+)(?:[eE][+-]?[0-9]+)?[uU]?)
  | (?P<ident>[A-Za-z_][A-Za-z0-9_]*)
  | (?P<op>\|\||&&|==|!=|<=|>=|\.\?|[-+*/%!<>?:.,()\[\]{}])
    """,
    re.VERBOSE,
)
#: A literal list index the reads follow into the element (``[0]``, ``[2u]``); any other key
#: (negative, computed, a string) ends the chain.
_ELEMENT_INDEX: Final = re.compile(r"([0-9]+)[uU]?")


@dataclass(frozen=True, slots=True)
class _Token:
    kind: str  # "string", "number", "ident", "op", "end"
    text: str
    size: int = 1  # a string literal's length


def _string_end(source: str, start: int, prefix: str, quote: str) -> tuple[int, int]:
    """(index after the literal, length of its content) of the literal opening at ``start``."""
    raw = "r" in prefix.lower()
    i = start + len(prefix) + len(quote)
    content = 0
    while i < len(source):
        if source.startswith(quote, i):
            return i + len(quote), content
        if source[i] == "\n" and len(quote) == 1:
            break
        i += 1 if raw or source[i] != "\\" else 2
        content += 1
    raise CostError("unterminated string literal")


def _tokens(source: str) -> list[_Token]:
    tokens: list[_Token] = []
    i = 0
    while i < len(source):
        match = _TOKEN.match(source, i)
        if match is None:
            raise CostError(f"unexpected character {source[i]!r}")
        kind = match.lastgroup or ""
        if kind == "space":
            i = match.end()
        elif kind == "string":
            opener = match.group()
            quote = opener.lstrip("rRbB")
            end, size = _string_end(source, i, opener[: len(opener) - len(quote)], quote)
            tokens.append(_Token("string", source[i:end], size))
            i = end
        else:
            tokens.append(_Token(kind, match.group()))
            i = match.end()
    tokens.append(_Token("end", ""))
    return tokens


# --- values and costs -----------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _Val:
    """A bound on a value (``count``: elements or characters; ``size``: total size) and on the
    cost of computing it."""

    count: int
    size: int
    cost: int


_Env = Mapping[str, int]  # bound variable → its size
Node = Callable[[Sizes, _Env], _Val]

_ONE: Final = _Val(1, 1, 1)
_SCALAR_FUNCTIONS: Final = frozenset(
    {
        "size", "has", "int", "uint", "double", "bool", "type", "duration", "timestamp",
        "startsWith", "endsWith", "contains", "indexOf", "lastIndexOf",
        "getFullYear", "getMonth", "getDate", "getDayOfMonth", "getDayOfWeek", "getDayOfYear",
        "getHours", "getMinutes", "getSeconds", "getMilliseconds", "isSorted", "sum", "min",
        "max", "exists_one",
    }
)  # fmt: skip
_COPYING_FUNCTIONS: Final = frozenset(
    {
        "string", "dyn", "lowerAscii", "upperAscii", "trim", "substring", "charAt", "reverse",
        "join", "quote", "format", "bytes", "sort", "flatten", "slice",
    }
)  # fmt: skip


def _sum(vals: Sequence[_Val]) -> tuple[int, int, int]:
    return (sum(v.count for v in vals), sum(v.size for v in vals), sum(v.cost for v in vals))


def _literal(count: int) -> Node:
    value = _Val(count, count, 1)
    return lambda sizes, env: value


def _identifier(name: str) -> Node:
    def node(sizes: Sizes, env: _Env) -> _Val:
        if name in env:
            return _Val(env[name], env[name], 1)
        if name == REFERENCES_VARIABLE:
            entries = sizes.references_entries
            return _Val(entries, entries + sizes.references_bytes, 1)
        return _Val(sizes.total, sizes.total, 1)

    return node


_METADATA_FIELDS: Final[Mapping[str, Callable[[Sizes], tuple[int, int]]]] = {
    "name": lambda s: (s.name, s.name),
    "namespace": lambda s: (s.namespace, s.namespace),
    "labels": lambda s: (s.labels_entries, s.labels_entries + s.labels_bytes),
    "annotations": lambda s: (s.annotations_entries, s.annotations_entries + s.annotations_bytes),
    "ownerReferences": lambda s: (s.owner_entries, s.owner_entries + s.owner_bytes),
    "creationTimestamp": lambda s: (1, 1),
}


def _select(operand: Node, field: str, path: tuple[str, ...]) -> Node:
    sized = _METADATA_FIELDS.get(field) if path == ("object", "metadata") else None

    def node(sizes: Sizes, env: _Env) -> _Val:
        inner = operand(sizes, env)
        if sized is not None and "object" not in env:
            count, size = sized(sizes)
            return _Val(count, size, inner.cost + 1)
        return _Val(inner.size, inner.size, inner.cost + 1)

    return node


def _index(operand: Node, key: Node) -> Node:
    def node(sizes: Sizes, env: _Env) -> _Val:
        a, b = operand(sizes, env), key(sizes, env)
        return _Val(a.size, a.size, a.cost + b.cost + b.size + 1)

    return node


def _collection(items: Sequence[Node]) -> Node:
    def node(sizes: Sizes, env: _Env) -> _Val:
        vals = [item(sizes, env) for item in items]
        _, size, cost = _sum(vals)
        return _Val(len(vals), size + len(vals), cost + len(vals) + 1)

    return node


def _binary(op: str, left: Node, right: Node) -> Node:
    def node(sizes: Sizes, env: _Env) -> _Val:
        a, b = left(sizes, env), right(sizes, env)
        if op in ("&&", "||"):
            return _Val(1, 1, a.cost + b.cost + 1)
        if op == "+":
            size = a.size + b.size
            return _Val(a.count + b.count, size, a.cost + b.cost + size + 1)
        if op in ("-", "*", "/", "%"):
            return _Val(1, 1, a.cost + b.cost + 1)
        # comparisons and `in`: at most a walk over both operands
        return _Val(1, 1, a.cost + b.cost + a.size + b.size + 1)

    return node


def _unary(operand: Node) -> Node:
    def node(sizes: Sizes, env: _Env) -> _Val:
        a = operand(sizes, env)
        return _Val(1, 1, a.cost + 1)

    return node


def _conditional(test: Node, yes: Node, no: Node) -> Node:
    def node(sizes: Sizes, env: _Env) -> _Val:
        c, a, b = test(sizes, env), yes(sizes, env), no(sizes, env)
        return _Val(max(a.count, b.count), max(a.size, b.size), c.cost + max(a.cost, b.cost) + 1)

    return node


def _call(name: str, receiver: Node | None, args: Sequence[Node]) -> Node:
    def node(sizes: Sizes, env: _Env) -> _Val:
        vals = [arg(sizes, env) for arg in ([receiver] if receiver else []) + list(args)]
        _, size, cost = _sum(vals)
        if name in _SCALAR_FUNCTIONS:
            return _Val(1, 1, cost + size + 1)
        if name in _COPYING_FUNCTIONS:
            return _Val(size, size, cost + 2 * size + 1)
        if name == "split":
            return _Val(size + 1, 2 * size + 1, cost + 2 * size + 1)
        if name == "replace":
            grown = size * max(1, size)
            return _Val(grown, grown, cost + 2 * grown + 1)
        # anything else: quadratic in its arguments, to be safe
        return _Val(size, size, cost + (size + 1) ** 2)

    return node


def _matches(subject: Node, regex: RegexCost) -> Node:
    """``subject.matches(pattern)``: the pattern compiled again on every call, then a walk
    of the subject per element of the pattern's automaton."""

    def node(sizes: Sizes, env: _Env) -> _Val:
        text = subject(sizes, env)
        return _Val(1, 1, text.cost + regex.compile + (text.size + 1) * (regex.atoms + 1))

    return node


def _comprehension(
    name: str, target: Node, variables: Sequence[str], bodies: Sequence[Node]
) -> Node:
    def node(sizes: Sizes, env: _Env) -> _Val:
        source = target(sizes, env)
        n = max(source.count, 0)
        full = {**env, **dict.fromkeys(variables, source.size)}
        empty = {**env, **dict.fromkeys(variables, 0)}
        big = [body(sizes, full) for body in bodies]
        small = [body(sizes, empty) for body in bodies]
        rest = max(n - 1, 0)
        cost = source.cost + n + sum(v.cost for v in big) + rest * sum(v.cost for v in small)
        if name == "map":
            last_big, last_small = big[-1], small[-1]
            size = n + last_big.size + rest * last_small.size
            return _Val(n, size, cost + size)
        if name == "filter":
            return _Val(n, source.size, cost + source.size)
        return _Val(1, 1, cost)

    return node


# --- parser ---------------------------------------------------------------------------------


class _Parser:
    def __init__(self, tokens: list[_Token]) -> None:
        self.tokens = tokens
        self.at = 0
        self.macro_depth = 0
        #: The paths under ``object`` the expression reads (see :attr:`CostModel.reads`).
        self.reads: set[tuple[str, ...]] = set()
        #: The ``matches()`` patterns, decoded (see :attr:`CostModel.patterns`).
        self.patterns: set[str] = set()
        #: A macro's variable, while its body is parsed, and the path it stands for (every
        #: element of the macro's receiver: ``("object", "spec", "containers", "[*]")``).
        self.bound: dict[str, tuple[str, ...]] = {}

    def read(self, path: tuple[str, ...]) -> None:
        """``path`` (from ``object``) is read as a whole: a selection chain ended there."""
        if path and path[0] == "object":
            self.reads.add(path[1:])

    def peek(self, offset: int = 0) -> _Token:
        return self.tokens[min(self.at + offset, len(self.tokens) - 1)]

    def next(self) -> _Token:
        token = self.peek()
        self.at += 1
        return token

    def accept(self, text: str) -> bool:
        if self.peek().kind in ("op", "ident") and self.peek().text == text:
            self.at += 1
            return True
        return False

    def expect(self, text: str) -> None:
        if not self.accept(text):
            raise CostError(f"expected {text!r}, found {self.peek().text or 'the end'!r}")

    def parse(self) -> Node:
        node = self.expr()
        if self.peek().kind != "end":
            raise CostError(f"unexpected {self.peek().text!r}")
        return node

    def expr(self) -> Node:
        test = self.binary(0)
        if self.accept("?"):
            yes = self.binary(0)
            self.expect(":")
            return _conditional(test, yes, self.expr())
        return test

    _LEVELS: Final = (
        ("||",),
        ("&&",),
        ("==", "!=", "<", "<=", ">", ">=", "in"),
        ("+", "-"),
        ("*", "/", "%"),
    )

    def binary(self, level: int) -> Node:
        if level == len(self._LEVELS):
            return self.unary()
        left = self.binary(level + 1)
        while self.peek().kind in ("op", "ident") and self.peek().text in self._LEVELS[level]:
            op = self.next().text
            left = _binary(op, left, self.binary(level + 1))
        return left

    def unary(self) -> Node:
        if self.peek().kind == "op" and self.peek().text in ("!", "-"):
            self.next()
            return _unary(self.unary())
        return self.member()

    def arguments(
        self, closing: str, *, bind: Mapping[str, tuple[str, ...]] | None = None
    ) -> list[Node]:
        """The arguments; ``bind``: the variables :attr:`bound` from the second one on (a
        macro's body, after its variable)."""
        return [node for node, _ in self.literal_arguments(closing, bind=bind)]

    def literal_arguments(
        self, closing: str, *, bind: Mapping[str, tuple[str, ...]] | None = None
    ) -> list[tuple[Node, _Token | None]]:
        """The arguments, each with its token when it is a lone string literal."""
        args: list[tuple[Node, _Token | None]] = []
        while not self.accept(closing):
            start = self.at
            node = self.expr()
            if bind:
                self.bound = dict(bind)
            lone = self.at == start + 1 and self.tokens[start].kind == "string"
            args.append((node, self.tokens[start] if lone else None))
            if not self.accept(","):
                self.expect(closing)
                break
        return args

    def matches_call(self, receiver: Node | None) -> Node:
        """``receiver.matches(pattern)``, or ``matches(text, pattern)`` without a receiver."""
        args = self.literal_arguments(")")
        pattern = args[-1][1] if args else None
        if pattern is None:
            raise PatternError
        value = decode_literal(pattern.text)
        self.patterns.add(value)
        subjects = [receiver] if receiver is not None else []
        subjects += [node for node, _ in args[:-1]]
        subject = subjects[0] if len(subjects) == 1 else _collection(subjects)
        return _matches(subject, regex_cost(value))

    def member(self) -> Node:
        node, path = self.primary()
        while True:
            if self.accept(".") or self.accept(".?"):
                token = self.next()
                if token.kind != "ident":
                    raise CostError(f"expected a field name after '.', found {token.text!r}")
                if self.accept("("):
                    node = self.member_call(token.text, node, path)
                    path = ()
                else:
                    node = _select(node, token.text, path)
                    path = (*path, token.text) if path else ()
            elif self.accept("["):
                start = self.at
                key = self.expr()
                literal = self.tokens[start] if self.at == start + 1 else None
                self.expect("]")
                node, path = _index(node, key), self.indexed(path, literal)
            else:
                self.read(path)
                return node

    def indexed(self, path: tuple[str, ...], literal: _Token | None) -> tuple[str, ...]:
        """The chain ``path`` goes on through ``[literal]`` into the element at a literal,
        non-negative index of a field (``object.status.containerStatuses[0]``); any other
        index ends it, ``path`` read whole (the key is not known statically)."""
        found = (
            _ELEMENT_INDEX.fullmatch(literal.text) if literal and literal.kind == "number" else None
        )
        if found is None or not _narrowable(path):
            self.read(path)
            return ()
        return (*path, element(int(found.group(1))))

    def member_call(self, name: str, receiver: Node, path: tuple[str, ...]) -> Node:
        """``receiver.name(...)``: ``path``, the receiver's chain, is read whole, but by a
        macro of one variable over a field (``object.spec.containers.all(c, c.image != "")``)
        whose value holds nothing else of the elements: that reads, of every element, what
        its body reads of the variable."""
        if name not in MACROS:
            self.read(path)
            if name == "matches":
                return self.matches_call(receiver)
            return _call(name, receiver, self.arguments(")"))
        if self.macro_depth:
            raise NestedMacroError(name)
        start = self.at
        variable = self.peek().text if self.peek().kind == "ident" else ""
        followed = variable and name in _FOLLOWED_MACROS and _narrowable(path)
        binding = {variable: (*path, EVERY_ELEMENT)} if followed else {}
        self.macro_depth += 1
        try:
            args = self.arguments(")", bind=binding)
        finally:
            self.macro_depth -= 1
            self.bound = {}
        names = [t.text for t in self.tokens[start : self.at]]
        variables = [n for n, _ in zip(names[::2], range(len(args) - 1), strict=False)]
        if name == "map" and len(args) == 3:
            variables = variables[:1]
        if variables != [variable] or not binding:
            self.read(path)  # another form: its variables are not followed
        return _comprehension(name, receiver, variables, args[len(variables) :] or args)

    def primary(self) -> tuple[Node, tuple[str, ...]]:
        token = self.next()
        if token.kind == "string":
            return _literal(token.size), ()
        if token.kind == "number":
            return _literal(1), ()
        if token.kind == "op" and token.text == ".":
            return self.primary()
        if token.kind == "op" and token.text == "(":
            node = self.expr()
            self.expect(")")
            return node, ()
        if token.kind == "op" and token.text == "[":
            return _collection(self.arguments("]")), ()
        if token.kind == "op" and token.text == "{":
            return _collection(self.entries()), ()
        if token.kind == "ident":
            if self.accept("("):
                if token.text == "matches":
                    return self.matches_call(None), ()
                return _call(token.text, None, self.arguments(")")), ()
            if self.peek().text == "{" and token.text[:1].isupper():
                self.next()
                return _collection(self.entries()), ()
            if token.text in ("true", "false", "null"):
                return _literal(1), ()
            return _identifier(token.text), self.bound.get(token.text, (token.text,))
        raise CostError(f"unexpected {token.text or 'end'!r}")

    def entries(self) -> list[Node]:
        items: list[Node] = []
        while not self.accept("}"):
            self.accept("?")
            items.append(self.expr())
            self.expect(":")
            items.append(self.expr())
            if not self.accept(","):
                self.expect("}")
                break
        return items


def _narrowable(path: tuple[str, ...]) -> bool:
    """Whether a read of ``path`` may go on into its elements: a field (or an element) below
    ``object``, not ``object`` itself nor its ``metadata`` as a whole (both read whole, and
    refused: :mod:`lifecycle_controller.core.policy.condition_reads`)."""
    return len(path) > 1 and path != ("object", "metadata")


@dataclass(frozen=True, slots=True)
class CostModel:
    """The parsed expression's cost bound, as a function of the metadata's sizes, and the
    paths under ``object`` it reads.

    ``reads`` holds each chain of field selections from ``object`` as far as it is known
    statically: ``object.spec.replicas`` reads ``("spec", "replicas")``. A literal,
    non-negative index goes on into the element (``object.status.containerStatuses[0].state``
    reads ``("status", "containerStatuses", "[0]", "state")``), and so does a macro of one
    variable other than ``filter`` into every element, as far as its body reads the variable
    (``object.spec.containers.all(c, c.image != "")`` reads ``("spec", "containers", "[*]",
    "image")``; the steps are :mod:`~lifecycle_controller.core.policy.field_paths`'). Any
    other index (``object.spec[k]``, ``[-1]``), a method call, ``filter`` (its value holds the
    elements themselves) or a macro of two variables ends the chain, so everything below where
    it ended is read (``("spec",)``, ``("spec", "containers")``); ``object`` alone, or indexed,
    reads ``()``: everything, and ``object.metadata`` indexed ``("metadata",)``.

    ``patterns`` are the ``matches()`` patterns (decoded literals), for the compiler to check
    once when the condition is compiled.
    """

    _root: Node
    reads: frozenset[tuple[str, ...]] = frozenset()
    patterns: frozenset[str] = frozenset()

    def cost(self, sizes: Sizes) -> int:
        return self._root(sizes, {}).cost


def analyse(source: str) -> CostModel:
    """Parse ``source``; raise :class:`NestedMacroError`, :class:`PatternError` or
    :class:`CostError`."""
    try:
        parser = _Parser(_tokens(source))
        root = parser.parse()
        return CostModel(root, frozenset(parser.reads), frozenset(parser.patterns))
    except RecursionError:
        raise CostError("nested too deeply") from None


def identifiers(source: str) -> frozenset[str]:
    """The top-level names an expression reads (an identifier not after a ``.``): which
    variables it uses. Unreadable text reads nothing."""
    try:
        tokens = _tokens(source)
    except CostError:
        return frozenset()
    return frozenset(
        token.text
        for before, token in zip([None, *tokens], tokens, strict=False)
        if token.kind == "ident" and not (before is not None and before.text in (".", ".?"))
    )

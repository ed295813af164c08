"""A small BPF-like filter over a connection's two ends: ``host``, ``port``, ``net``, ``src``/``dst``,
``and``/``or``/``not`` and parentheses (``"host 127.0.0.1 and not port 22"``).

The monitor filters connections, not packets, so a term asks about a segment's source and destination
only; it is the subset of tcpdump's syntax an operator needs to narrow what is watched.
"""

from __future__ import annotations

import ipaddress
from typing import Callable

Address = tuple[str, int]
Predicate = Callable[[Address, Address], bool]


class FilterError(ValueError):
    """The filter expression does not parse."""


def compile_filter(expression: str) -> Predicate:
    """A predicate of (source, destination) for ``expression`` (an empty one accepts everything)."""
    tokens = expression.replace("(", " ( ").replace(")", " ) ").split()
    if not tokens:
        return lambda src, dst: True
    parser = _Parser(tokens)
    predicate = parser.disjunction()
    if parser.position != len(tokens):
        raise FilterError(f"unexpected {tokens[parser.position]!r} in filter")
    return predicate


class _Parser:
    def __init__(self, tokens: list[str]) -> None:
        self.tokens = tokens
        self.position = 0

    def _peek(self) -> str | None:
        return self.tokens[self.position] if self.position < len(self.tokens) else None

    def _next(self, what: str) -> str:
        token = self._peek()
        if token is None:
            raise FilterError(f"filter ends where {what} was expected")
        self.position += 1
        return token

    def disjunction(self) -> Predicate:
        left = self.conjunction()
        while self._peek() in ("or", "||"):
            self.position += 1
            left = _either(left, self.conjunction())
        return left

    def conjunction(self) -> Predicate:
        left = self.negation()
        while self._peek() in ("and", "&&"):
            self.position += 1
            left = _both(left, self.negation())
        return left

    def negation(self) -> Predicate:
        if self._peek() in ("not", "!"):
            self.position += 1
            inner = self.negation()
            return lambda s, d: not inner(s, d)
        if self._peek() == "(":
            self.position += 1
            inner = self.disjunction()
            if self._next("')'") != ")":
                raise FilterError("missing ')' in filter")
            return inner
        return self.term()

    def term(self) -> Predicate:
        word = self._next("a term")
        sides = (True, True)
        if word in ("src", "dst"):
            sides = (word == "src", word == "dst")
            word = self._next("host, port or net")
        value = self._next(f"a value after {word!r}")
        test = _test(word, value)
        use_src, use_dst = sides
        return lambda s, d: (use_src and test(s)) or (use_dst and test(d))


def _either(a: Predicate, b: Predicate) -> Predicate:
    return lambda s, d: a(s, d) or b(s, d)


def _both(a: Predicate, b: Predicate) -> Predicate:
    return lambda s, d: a(s, d) and b(s, d)


def _test(word: str, value: str) -> Callable[[Address], bool]:
    try:
        if word == "port":
            port = int(value)
            if not 0 <= port <= 65535:
                raise ValueError
            return lambda address: address[1] == port
        if word == "host":
            host = ipaddress.ip_address(value)
            return lambda address: ipaddress.ip_address(address[0]) == host
        if word == "net":
            network = ipaddress.ip_network(value, strict=False)
            return lambda address: ipaddress.ip_address(address[0]) in network
    except ValueError:
        raise FilterError(f"bad {word} {value!r} in filter") from None
    raise FilterError(f"unknown filter term {word!r} (host, port, net, src, dst, and, or, not)")

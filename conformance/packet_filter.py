"""A small BPF-like filter over a connection's two ends: ``host``, ``port``, ``net``, ``src``/``dst``,
``and``/``or``/``not`` and parentheses (``"host 127.0.0.1 and not port 22"``).

The monitor filters connections, not packets, so a term asks about a segment's source and destination
only; it is the subset of tcpdump's syntax an operator needs to narrow what is watched. Besides the
predicate, compiling says which hosts and ports a matching packet must have an end on, when the
expression implies that, so that a live capture can ask the kernel for those packets only.
"""

from __future__ import annotations

import ipaddress
from typing import Callable, NamedTuple

from conformance.bpf import Endpoints

Address = tuple[str, int]
Predicate = Callable[[Address, Address], bool]


class FilterError(ValueError):
    """The filter expression does not parse."""


class Compiled(NamedTuple):
    matches: Predicate
    endpoints: Endpoints | None
    """Every matching packet has an end on one of these hosts or ports (None: nothing so narrow is implied)."""


def compile_filter(expression: str) -> Compiled:
    """The filter ``expression`` (an empty one accepts everything)."""
    tokens = expression.replace("(", " ( ").replace(")", " ) ").split()
    if not tokens:
        return Compiled(lambda src, dst: True, None)
    parser = _Parser(tokens)
    compiled = parser.disjunction()
    if parser.position != len(tokens):
        raise FilterError(f"unexpected {tokens[parser.position]!r} in filter")
    return compiled


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

    def disjunction(self) -> Compiled:
        left = self.conjunction()
        while self._peek() in ("or", "||"):
            self.position += 1
            right = self.conjunction()
            a, b = left.matches, right.matches
            ends = None if left.endpoints is None or right.endpoints is None else Endpoints(
                left.endpoints.hosts | right.endpoints.hosts, left.endpoints.ports | right.endpoints.ports)
            left = Compiled(lambda s, d: a(s, d) or b(s, d), ends)
        return left

    def conjunction(self) -> Compiled:
        left = self.negation()
        while self._peek() in ("and", "&&"):
            self.position += 1
            right = self.negation()
            a, b = left.matches, right.matches
            left = Compiled(lambda s, d: a(s, d) and b(s, d), left.endpoints or right.endpoints)
        return left

    def negation(self) -> Compiled:
        if self._peek() in ("not", "!"):
            self.position += 1
            negated = self.negation().matches
            return Compiled(lambda s, d: not negated(s, d), None)
        if self._peek() == "(":
            self.position += 1
            grouped = self.disjunction()
            if self._next("')'") != ")":
                raise FilterError("missing ')' in filter")
            return grouped
        return self.term()

    def term(self) -> Compiled:
        word = self._next("a term")
        use_src = use_dst = True
        if word in ("src", "dst"):
            use_src, use_dst = word == "src", word == "dst"
            word = self._next("host, port or net")
        value = self._next(f"a value after {word!r}")
        test, ends = _test(word, value)
        return Compiled(lambda s, d: (use_src and test(s)) or (use_dst and test(d)), ends)


def _test(word: str, value: str) -> tuple[Callable[[Address], bool], Endpoints | None]:
    try:
        if word == "port":
            port = int(value)
            if not 0 <= port <= 65535:
                raise ValueError
            return (lambda address: address[1] == port), Endpoints(ports=frozenset({port}))
        if word == "host":
            host = ipaddress.ip_address(value)
            ends = Endpoints(hosts=frozenset({str(host)})) if host.version == 4 else None
            return (lambda address: ipaddress.ip_address(address[0]) == host), ends
        if word == "net":
            network = ipaddress.ip_network(value, strict=False)
            return (lambda address: ipaddress.ip_address(address[0]) in network), None
    except ValueError:
        raise FilterError(f"bad {word} {value!r} in filter") from None
    raise FilterError(f"unknown filter term {word!r} (host, port, net, src, dst, and, or, not)")

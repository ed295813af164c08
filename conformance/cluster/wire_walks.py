"""The cluster wire walk corpus: seeded sequences of frames a client, or a misbehaving stranger, sends to
a cluster service, kept only when they tell the spec apart from one of the mutants of every family
(``conformance/operator_mutants.every_mutant``) of the session and the wire and what they reach.

A walk is steps on numbered connections: ``send`` frames (a HELLO with each field at its edge, requests,
frames cut short or grown by a byte, garbage, unknown kinds, a length past a bound), ``await`` the reply to
a request id, move the stopped clock to a session's silence deadline and a tick either side, and at the
end close each connection's sending side and read what the service still says until it closes. Every
frame the service answers is recorded in order, as plain JSON (the ERROR's message and WELCOME's takeover
token are words no rule fixes), with whether it closed.

Events pushed after WELCOME reach a connection from the cluster's fan-out thread while replies come from
the poller, so where they fall among the replies is free, and so is how many consecutive membership changes
one MEMBERSHIP_DELTA carries (docs/spec/cluster.md); what the RFC fixes is each connection's own sequence:
shard-log and gossip notifications in commit order, membership deltas each on the epoch told before (SHARD gossip is a minimum: its keys are left out). So
they are recorded apart, per connection and order-insensitively towards the replies: before the ends, every
member still open writes a GLOBAL gossip key of its own (a barrier: once its notification arrived, everything
committed before reached it), and the walk's last answer lists, per such connection, the membership it was
last told (the run's own nodes), its data notifications in order and how many deltas did not apply on the
epoch told before.

:func:`replay` is the one driver: ``walks/derived-every-wire-walk`` replays each walk through a target
with it, and the selection runs each walk with it on the harness ``exec:python -m
conformance.cluster.reference_target`` serves (:func:`conformance.cluster.reference_target.harness`,
run in process with the mutated spec; this module and the frames it sends stay the unmutated spec's).
No walk waits on a wall clock: the service's clock is stopped and moved, and a connection's end is read up
to the service's close.

``python -m conformance.cluster.wire_walks`` runs the selection (minutes: run it under ``nice``) and
writes ``vectors/wire_walks.json``, ``docs/walks/cluster-wire-selection.json`` (what it found) and
``docs/walks/cluster-wire.md``; ``--check`` exits 1 when any is stale (``conformance/corpus_record.py``);
``--unjudged`` selects for the mutants the record does not judge yet (a new family's), ``--again RULE...`` for
the mutants of those rules on the recorded and derived walks (a survivor a derived walk was added for). The
report lists a survivor another cluster corpus's record tells apart as that corpus's, before any judgement by hand.
"""

from __future__ import annotations

import functools
import importlib
import itertools
import json
import random
import sys
from contextlib import AbstractContextManager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Final, Sequence

from conformance.corpus_record import CorpusFiles, Record, corpus_report, record_of, record_with, unjudged_mutants, write_corpus
from conformance.cluster.walks import (BATCHES_RESORTED, RECIPIENTS, REVISION_STEP, TOLD_ORDER, bounded_hangs,
                                      first_difference, kept_comments, progress_printer, suite_elsewhere)
from conformance.operator_mutants import OperatorMutant, Selection, canonical, every_mutant, rule_of
from conformance.cluster.service_wire import RawConnection, ServiceAddress
from conformance.framework import CaseContext, CaseTimeout
from conformance.vectorgen import recorded_tests
from spec.cluster import wire
from spec.cluster.errors import ClusterError, FrameTooLarge, MalformedMessage
from spec.cluster.types import MAX_ID_BYTES
from spec.cluster.wire import ServiceKind, ServiceMessage

ROOT: Final = Path(__file__).resolve().parents[2]
WALKS_FILE: Final = ROOT / "conformance" / "cluster" / "vectors" / "wire_walks.json"
SCHEMA_NAME: Final = "wire_walks.schema.json"
REPORT_FILE: Final = ROOT / "docs" / "walks" / "cluster-wire.md"
FILES: Final = CorpusFiles(WALKS_FILE, ROOT / "docs" / "walks" / "cluster-wire-selection.json", REPORT_FILE)
GENERATOR_VERSION: Final = "2"
SEED: Final = 43
CANDIDATES: Final = 900
MEMBER_CANDIDATES: Final = 400
"""Walks of members told each other's changes after WELCOME (:func:`_members`), from a generator of their own
so the other walks stay what they were."""
MODULES: Final = ("spec.cluster.session", "spec.cluster.wire", "spec.cluster.errors", "spec.cluster.interface",
                   "spec.cluster.model", "spec.cluster.detector")
"""The spec modules a wire walk's service reaches: its session and wire, and through them the model (a HELLO's
claim and takeover, writes, a catch-up) and the detector (a session's timing)."""
PREFIXES: Final = ("spec.", "reference.", "conformance.cluster.reference_target", "conformance.cluster.controls")
"""Imported afresh for each mutant: the harness and all it runs. This module, the frames it builds and
the replies it reads stay the unmutated spec's, as the runner of an ``exec:`` target does."""
TAG: Final = "~~~~"
"""Stands in node ids for a run's own four characters (ids keep their byte length, bounds included)."""
_RUN_TAGS: Final = itertools.count()
"""Each replay's own tag in place of ``TAG``, unique in this process: a target shared by every case holds the
other replays' nodes and keys (a random tag could repeat, or occur inside another session's ids), and only ids
that start with this replay's tag are its own."""
READ_S: Final = 2.0
"""How long one read waits before the walk records that the service said nothing (the spec always answers, in
milliseconds; in the selection a read that waits in vain tells nothing unless the service's poller failed)."""
HUNG_WALKS: Final = 4
BARRIER_ID: Final = 2**62
"""The request id of an end-of-walk barrier write (no walk's own request uses it)."""
BARRIER_KEY: Final = "~barrier-"
EVENT_KINDS: Final = frozenset({ServiceKind.MEMBERSHIP, ServiceKind.MEMBERSHIP_DELTA, ServiceKind.GOSSIP_UPDATE,
                                ServiceKind.SHARD_LOG_UPDATE, ServiceKind.CLUSTER_DOWN})
"""What the service pushes with request id 0 (events), as opposed to its replies."""
"""Walks a mutant may leave the service silent on before the rest are skipped (each costs two reads' wait)."""
HEADER: Final = [
    "Cluster wire walk corpus (issue 43), generated by conformance/cluster/wire_walks.py from a seed: each walk was "
    "kept because it tells spec/cluster's session and wire, and the model and detector they reach, from one of their "
    "operator mutants of every family (conformance/operator_mutants.every_mutant; its comment names which, as "
    "'function: operator'). The candidates are seeded walks, then walks derived from the spec's tables and rules (every "
    "kind whose body is its header alone, sent by a stranger and by a welcomed node; a successor resuming after its "
    "node moved into a shard written before).",
    "A step sends frames on a connection (conn, numbered from 0; a frame is a message by its fields, with trim/pad "
    "bytes cut from or added to its body, or raw hex; an op's value in hex, its expected revision a symbol or a "
    "number; a resumed HELLO's resume_after a symbol and an offset: -1 just below it, 0 at it, 1 the next revision named "
    "after it, as a provider's revisions may skip numbers), awaits the reply to a request id (or any ERROR), moves the "
    "stopped clock to a connection's silence deadline (its last frame plus WELCOME's fail_bound_ms) plus offset ms, "
    "or starts a service (capability configure: SERVE) that the connections opened after it reach, answered "
    "'serving' or 'refused'. At the end each connection's sending side is closed and what the service sends up to "
    "its close is read.",
    "'answer' lists, per step that reads and per connection at the end, every frame the service sent that is not "
    "an event, and the events before WELCOME (a resumed session's catch-up): kind, request id, the fields a rule "
    "fixes (ERROR by condition, WELCOME without its token, shard ids and revisions as symbols in order of "
    "appearance, only the run's own members and entries), and whether it closed. '~~~~' in a node id or key is "
    "the run's own four characters; 'takeover': '@n' is the token WELCOME gave connection n; a field given as "
    "{'shard': 's1'} is the shard id named s1 so far.",
    "Events after WELCOME are recorded apart (their place among the replies and how many membership changes one "
    "delta carries are free): when any connection is a member still open at the end, the last answer holds one "
    "EVENTS item per such connection (id: the connection), after a barrier write of its own: 'members' the run's "
    "own nodes as it was last told them (node, shard, state), 'data' its shard-log and gossip notifications in "
    "order (keys written as SHARD gossip left out: SHARD is a minimum, a provider may deliver them further), "
    "'brokenBases' how many deltas did not apply on the epoch told before.",
]


# -- the driver ---------------------------------------------------------------------------------------

def _conditions(cls: type[ClusterError]) -> dict[int, str]:
    """Every error's wire code -> its condition (INVALID_IDENTIFIER too, which a client maps to no class)."""
    found = {cls.code: cls.condition} if hasattr(cls, "code") else {}
    for sub in cls.__subclasses__():
        found |= _conditions(sub)
    return found


CONDITIONS: Final = _conditions(ClusterError)


class Symbols:
    """Shard ids and revisions as s1, s2... and r1, r2... in order of appearance (a target picks its own)."""

    def __init__(self) -> None:
        self.names: dict[tuple[str, Any], str] = {}

    def name(self, kind: str, value: Any) -> str:
        return self.names.setdefault((kind, value), f"{kind}{1 + sum(k == kind for k, _ in self.names)}")

    def shard(self, symbol: str) -> str:
        """A walk's shard symbol as this run's shard id ('' when not seen)."""
        return next((str(value) for (kind, value), name in self.names.items() if kind == "s" and name == symbol), "")

    def revision(self, symbol: str | int | None, plus: int = 0) -> int:
        """A walk's revision (a symbol seen, 0 or a number) as this run's: a symbol not seen is 0. Around a symbol,
        ``plus`` -1 is just below its revision and 1 the next revision named after it (the commit that followed it),
        or just above it when none was: a provider's revisions only grow, by any step (docs/spec/cluster.md,
        "Compare-and-swap and revisions": etcd's global revision moves for every key), so a walk resumes only where
        what it is owed does not hang on the step."""
        if symbol is None or isinstance(symbol, int):
            return (symbol or 0) + plus
        found = next((value for (kind, value), name in self.names.items() if kind == "r" and name == symbol), None)
        if found is None:
            return 0
        later = [int(value) for (kind, value) in self.names if kind == "r" and value > found]
        return min(later) if plus > 0 and later else max(0, found + plus)


@dataclass
class Driver:
    """Where a replay sends and what it asks of the target: its service, a stopped clock to move on, a service
    started on request (``configure``), and what a read that waited ``READ_S`` in vain answers (or raises)."""

    address: ServiceAddress
    advance: Callable[[int], None]
    configure: Callable[[int, int, int, str | None], int | str] | None
    silent: Callable[[], str]
    tag: str


def _ops(items: Sequence[dict[str, Any]], tag: str, symbols: Symbols) -> list[dict[str, Any]]:
    return [{"key": o["key"].replace(TAG, tag), "value": bytes.fromhex(o["value"]),
             "expected": symbols.revision(o.get("expected"))} for o in items]


def _frame(spec: dict[str, Any], tag: str, tokens: dict[int, str], secret: str, symbols: Symbols) -> bytes:
    """The bytes of one frame a step sends."""
    if "raw" in spec:
        return bytes.fromhex(spec["raw"])
    fields: dict[str, Any] = {k: symbols.shard(v["shard"]) if isinstance(v, dict) and "shard" in v else v
                              for k, v in spec.items() if k not in ("kind", "id", "trim", "pad")}
    if "node_id" in fields:
        fields["node_id"] = fields["node_id"].replace(TAG, tag)
    if "ops" in fields:
        fields["ops"] = _ops(fields["ops"], tag, symbols)
    if spec["kind"] == "HELLO":
        defaults: dict[str, Any] = {"secret": secret, "takeover": "", "resume": False, "resume_after": 0}
        fields = defaults | fields
        takeover: str = fields["takeover"]
        if takeover.startswith("@"):
            fields["takeover"] = tokens.get(int(takeover[1:]), "")
        after = fields["resume_after"]
        if isinstance(after, dict):
            fields["resume_after"] = symbols.revision(after["revision"], after["plus"])
    body = wire.encode(ServiceKind[spec["kind"]], spec["id"], **fields)[wire.FRAME_HEADER.sizeof():]
    body = body[:len(body) - spec.get("trim", 0)] + bytes(spec.get("pad", 0))
    return len(body).to_bytes(wire.FRAME_HEADER.sizeof(), "big") + body


def _entries(items: Sequence[Any], tag: str, symbols: Symbols) -> list[list[str]]:
    """A run's own entries (keys holding its tag), untagged, revisions as symbols."""
    return [[e.key.replace(tag, TAG), bytes(e.value).hex(), symbols.name("r", e.revision)] for e in items
            if e.key.startswith(tag)]


def _told(message: ServiceMessage, symbols: Symbols, tag: str) -> dict[str, Any]:
    """A frame as the walk records it: the fields a rule fixes, a run's own ids, keys and entries only."""
    p = message.payload
    told: dict[str, Any] = {"kind": message.kind.name, "id": message.request_id}
    if message.kind is ServiceKind.ERROR:
        told["error"] = CONDITIONS.get(p["code"], p["code"])
    elif message.kind is ServiceKind.WELCOME:
        told |= {k: p[k] for k in ("heartbeat_ms", "ttl_ms", "fail_bound_ms")}
    elif message.kind is ServiceKind.SHARD:
        told["shard"] = symbols.name("s", p["shard_id"])
    elif message.kind is ServiceKind.REVISION:
        told["revision"] = symbols.name("r", p["revision"])
    elif message.kind is ServiceKind.RENEWED:
        told["ttl_ms"] = p["ttl_ms"]
    elif message.kind is ServiceKind.CAS_ERROR:
        told |= {"key": p["key"].replace(tag, TAG), "expected": symbols.name("r", p["expected"]) if p["expected"] else 0,
                 "actual": None if p["actual"] is None else _entries([p["actual"]], tag, symbols)}
    elif message.kind in (ServiceKind.GOSSIP_UPDATE, ServiceKind.SHARD_LOG_UPDATE):
        told["entries"] = _entries(p["entries"], tag, symbols)
    elif message.kind is ServiceKind.MEMBERSHIP:
        told["members"] = sorted([n.node_id.replace(tag, TAG), symbols.name("s", s.shard_id), str(n.state)]
                                 for s in p["shards"] for n in s.nodes if n.node_id.startswith(tag))
    return told


class _Connection:
    """One of a walk's connections: what it read so far, and whether the service closed it."""

    def __init__(self, address: ServiceAddress, secret: str) -> None:
        self.raw = RawConnection(address, timeout=READ_S)
        self.secret = secret
        self.closed = False
        self.welcomed = False
        self.token = ""
        self.fail_bound_ms = 0
        self.last_frame_ms = 0
        self.events: list[ServiceMessage] = []
        """Events after WELCOME, in arrival order (recorded apart: :meth:`told_events`)."""
        self.replies: list[ServiceMessage] = []
        """Replies read by the barrier, recorded in the end's answer as they would have been read there."""
        self.sent = bytearray()
        """Every byte sent on it: a barrier goes only after whole frames (else it would end a partial one)."""
        self.barrier_passed = 0
        """How many events had arrived once the barrier's own notification did (0: it did not pass)."""

    def read_until(self, driver: Driver, symbols: Symbols, done: Callable[[ServiceMessage], bool]) -> list[Any]:
        """Replies up to the first ``done`` one (or the close: then ``"closed"`` ends the list); events only
        before WELCOME (a resumed session's catch-up, sent before it: later ones are the model walks' business)."""
        out: list[Any] = []
        while not self.closed:
            try:
                message = self.raw.read()
            except CaseTimeout:
                return out + [driver.silent()]
            except (MalformedMessage, FrameTooLarge):
                return out + ["unreadable"]
            if message is None:
                self.closed = True
                return out + ["closed"]
            if message.kind is ServiceKind.WELCOME:
                self.welcomed = True
                self.token = message.payload["session"]
                self.fail_bound_ms = message.payload["fail_bound_ms"]
            elif message.request_id == 0 and message.kind is not ServiceKind.ERROR and self.welcomed:
                self.events.append(message)
                continue
            told = _told(message, symbols, driver.tag)
            if told.get("entries", told.get("members")) == []:
                continue  # only other runs' entries or members (a target shared by every case holds them)
            out.append(told)
            if done(message) or self.unasked(message):
                return out
        return out + ["closed"]

    def unasked(self, message: ServiceMessage) -> bool:
        """A reply (not an ERROR) to a request id no frame sent on this connection carried: the spec never sends
        one, and a reply awaited will not come after it, so the read stops there instead of waiting in vain."""
        if message.kind in EVENT_KINDS or message.kind is ServiceKind.ERROR:
            return False
        return message.request_id not in {int.from_bytes(body[1:9], "big") for body in _frame_bodies(self.sent)[0]
                                          if len(body) >= 9}

    def barrier(self, driver: Driver, n: int) -> None:
        """A member's GLOBAL gossip write of its own, and every frame up to its notification: then every
        event committed before it has reached this connection (a refused write, or a close, passes nothing)."""
        key = f"{driver.tag}:{BARRIER_KEY}{n}"
        if not _frame_bodies(self.sent)[1]:
            return
        try:
            self.raw.send(wire.encode(ServiceKind.UPDATE_GOSSIP, BARRIER_ID, scope="GLOBAL",
                                      ops=[{"key": key, "value": b"", "expected": 0}]))
        except OSError:
            return
        answered = False
        while not (answered and self.barrier_passed):
            try:
                message = self.raw.read()
            except CaseTimeout:
                driver.silent()
                return
            except (MalformedMessage, FrameTooLarge):
                return
            if message is None:
                self.closed = True
                return
            if message.request_id == BARRIER_ID:
                if message.kind is not ServiceKind.REVISION:
                    self.barrier_passed = 0
                    return
                answered = True
            elif self.unasked(message):
                self.replies.append(message)
                self.barrier_passed = 0
                return
            elif message.request_id != 0 or message.kind is ServiceKind.ERROR:
                self.replies.append(message)
            else:
                self.events.append(message)
                if message.kind is ServiceKind.GOSSIP_UPDATE and any(e.key == key for e in message.payload["entries"]):
                    self.barrier_passed = len(self.events)

    def end(self, driver: Driver, symbols: Symbols) -> list[Any]:
        """Close the sending side and read the rest, up to the service's close (after what the barrier read)."""
        if not self.closed:
            self.raw.finish_sending()
        read = [_told(m, symbols, driver.tag) for m in self.replies]
        return read + (["closed"] if self.closed else self.read_until(driver, symbols, lambda _: False))

    def told_events(self, n: int, symbols: Symbols, tag: str, shard_keys: set[str]) -> dict[str, Any]:
        """The events after WELCOME as the walk records them (one EVENTS item): the membership last told, the
        data notifications in order (but the keys written as SHARD gossip: SHARD is a minimum, and a provider
        may deliver them beyond the shard, docs/spec/cluster.md), the deltas that did not apply on the epoch
        told before."""
        epoch: int | None = None
        records: dict[str, tuple[str, str]] = {}
        data: list[list[Any]] = []
        broken = 0
        for message in self.events[:self.barrier_passed]:
            p = message.payload
            if message.kind is ServiceKind.MEMBERSHIP:
                epoch = p["epoch"]
                records = {node.node_id: (shard.shard_id, str(node.state)) for shard in p["shards"]
                           for node in shard.nodes if node.node_id.startswith(tag)}
            elif message.kind is ServiceKind.MEMBERSHIP_DELTA:
                broken += p["base"] != epoch
                epoch = p["epoch"]
                for change in p["changes"]:
                    records.pop(change.node_id, None)
                    if change.present and change.node_id.startswith(tag):
                        records[change.node_id] = (change.record.shard_id, str(change.record.state))
            elif message.kind in (ServiceKind.GOSSIP_UPDATE, ServiceKind.SHARD_LOG_UPDATE):
                own = [e for e in p["entries"] if BARRIER_KEY not in e.key and e.key not in shard_keys]
                entries = _entries(own, tag, symbols)
                if entries:
                    shard = symbols.name("s", p["shard_id"]) if message.kind is ServiceKind.SHARD_LOG_UPDATE else ""
                    data.append([message.kind.name, shard, entries])
        members = [[node.replace(tag, TAG), symbols.name("s", shard), state] for node, (shard, state) in sorted(records.items())]
        return {"kind": "EVENTS", "id": n, "members": members, "data": data, "brokenBases": broken}


def _frame_bodies(data: bytes | bytearray) -> tuple[list[bytes], bool]:
    """The whole frame bodies in ``data`` (by each frame's length prefix alone), and whether it ends where a
    frame ends."""
    bodies: list[bytes] = []
    at, size = 0, wire.FRAME_HEADER.sizeof()
    while at + size <= len(data):
        end = at + size + int.from_bytes(data[at:at + size], "big")
        if end <= len(data):
            bodies.append(bytes(data[at + size:end]))
        at = end
    return bodies, at == len(data)


def replay(driver: Driver, steps: Sequence[dict[str, Any]]) -> list[Any]:
    """Run a walk's steps on a service whose clock is stopped; the answers."""
    symbols = Symbols()
    connections: dict[int, _Connection] = {}
    shard_keys: set[str] = set()
    """Keys written as SHARD gossip: left out of the events recorded (a provider may deliver them further)."""
    address = driver.address
    now_ms = 0
    answers: list[Any] = []
    try:
        for step in steps:
            if "silence" in step:
                conn = connections[step["silence"]]
                to = conn.last_frame_ms + conn.fail_bound_ms + step["offset"]
                driver.advance(max(0, to - now_ms))
                now_ms = max(now_ms, to)
                continue
            if "serve" in step:
                assert driver.configure is not None, "a walk that starts a service needs capability configure"
                settings = step["serve"]
                served = driver.configure(settings["heartbeatMs"], settings["failAfterMs"], settings["maxSessions"],
                                          settings["secret"])
                answers.append(["refused"] if isinstance(served, str) else ["serving"])
                if not isinstance(served, str):
                    address = ServiceAddress(driver.address.host, served, settings["secret"] or "")
                continue
            n = step["conn"]
            if n not in connections:
                connections[n] = _Connection(address, address.secret)
            conn = connections[n]
            if "send" in step:
                shard_keys.update(o["key"].replace(TAG, driver.tag) for f in step["send"]
                                  if f.get("kind") == "UPDATE_GOSSIP" and f.get("scope") == "SHARD" for o in f["ops"])
                tokens = {i: c.token for i, c in connections.items()}
                data = b"".join(_frame(f, driver.tag, tokens, conn.secret, symbols) for f in step["send"])
                conn.sent += data
                try:
                    conn.raw.send(data)
                except OSError:
                    pass  # closed by the service: the reads below say so
                conn.last_frame_ms = now_ms
            if "await" in step:
                rid = step["await"]
                answers.append(conn.read_until(driver, symbols, lambda m: m.request_id == rid or
                                               m.kind is ServiceKind.ERROR))
        for n in sorted(connections):
            if connections[n].welcomed and not connections[n].closed:
                connections[n].barrier(driver, n)
        for n in sorted(connections):
            answers.append(connections[n].end(driver, symbols))
        told = [c.told_events(n, symbols, driver.tag, shard_keys) for n, c in sorted(connections.items())
                if c.barrier_passed]
        if told:
            answers.append(told)
    finally:
        for conn in connections.values():
            conn.raw.close()
    return answers


def run_walk(walk: dict[str, Any]) -> list[Any]:
    """One walk on this project's harness, in process (what the selection and the recorded answers use)."""
    return _in_harness(importlib.import_module("conformance.cluster.reference_target").harness, walk)


def load_runner() -> Callable[[dict[str, Any]], list[Any]]:
    """For ``select``: the harness imported afresh (so with the mutant), this driver as it is. A mutant that left
    the service silent on ``HUNG_WALKS`` walks is not run again (each costs two reads' wait, and tells nothing)."""
    harness = importlib.import_module("conformance.cluster.reference_target").harness
    run: Callable[[dict[str, Any]], list[Any]] = bounded_hangs(lambda walk: _in_harness(harness, walk), HUNG_WALKS)
    return run


def _in_harness(harness: Callable[[], AbstractContextManager[Any]], walk: dict[str, Any]) -> list[Any]:
    from conformance.operator_mutants import WalkTimeout

    with harness() as controls:
        def silent() -> str:
            """A poller that failed answers nothing for good (the spec's never fails); one still serving may
            only be slow (load fakes a hang): that is no answer at all."""
            services = [controls.service] + ([controls.configured] if controls.configured is not None else [])
            if all(service.polling for service in services):
                raise WalkTimeout(f"the service sent nothing within {READ_S} s")
            return "crashed"

        def configure(heartbeat_ms: int, fail_after_ms: int, max_sessions: int, secret: str | None) -> int | str:
            try:
                return int(controls.serve(heartbeat_ms, fail_after_ms, max_sessions, secret))
            except ValueError as refused:
                return str(refused)

        controls.set_clock(True, 0)
        return replay(Driver(ServiceAddress("127.0.0.1", controls.service.port, ""),
                             lambda ms: controls.set_clock(True, ms), configure, silent, "w000"), walk["steps"])


def replay_through(target: Any, ctx: CaseContext, test: dict[str, Any]) -> list[str]:
    """A recorded wire walk through ``target`` (capabilities ``service`` and ``clock``, and ``configure`` for
    a walk that starts a service): [] when every answer is the recorded one, else the first that differs."""
    from conformance.cluster.harness import session

    assert target.url is not None and target.clock is not None
    with session(target, ctx) as s:
        try:
            target.clock(s.cluster, True, 0)
            got = replay(Driver(ServiceAddress.parse(target.url), lambda ms: target.clock(s.cluster, True, ms),
                                target.configure, lambda: "silent", f"w{next(_RUN_TAGS) % 4096:03x}"), test["steps"])
        finally:
            target.clock(s.cluster, False, 0)
            if target.unconfigure is not None and any("serve" in step for step in test["steps"]):
                target.unconfigure()
    return first_difference(test, got, "read")


# -- the generator ------------------------------------------------------------------------------------

def hello(node: str = f"{TAG}-a", rid: int = 1, **fields: Any) -> dict[str, Any]:
    return {"kind": "HELLO", "id": rid, "node_id": node} | fields


def renew(rid: int) -> dict[str, Any]:
    return {"kind": "RENEW", "id": rid}


def _raw(*parts: bytes) -> dict[str, Any]:
    return {"raw": b"".join(parts).hex()}


def _header(length: int) -> bytes:
    return length.to_bytes(4, "big")


def _ids() -> list[str]:
    """Node ids at the rules' edges: 1 byte, MAX_ID_BYTES and one more, each character class, one outside."""
    long = TAG + "-" + "n" * (MAX_ID_BYTES - len(TAG) - 1)
    return [f"{TAG}-a", f"{TAG}.b_C:9", long, long + "n", "", f"{TAG} a", f"{TAG}/a", f"{TAG}-\u00e9", "-" + TAG]


def _strangers(rng: random.Random) -> list[dict[str, Any]]:
    """A first frame no HELLO can be: short, long, unknown, a request, a length past the bound."""
    body = bytes(wire.encode(ServiceKind.HELLO, 1, node_id="x", secret="", takeover="", resume=False,
                             resume_after=0))[4:]
    shapes = [
        _raw(_header(wire.MAX_HELLO_BYTES + 1)),
        _raw(_header(wire.MAX_HELLO_BYTES), bytes([ServiceKind.HELLO]) + bytes(wire.MAX_HELLO_BYTES - 1)),
        _raw(_header(2 ** 32 - 1)),
        _raw(_header(len(body) - 1), body[:-1]),
        _raw(_header(len(body) + 1), body + b"\x00"),
        _raw(_header(rng.choice(range(0, 9))), bytes(9)[:0]),
        _raw(_header(9), bytes([rng.choice((0, 1, 2, 6, 8, 9, 15, 16, 19, 31, 32, 33, 39, 41, 63, 69, 255))]) + bytes(8)),
        renew(rng.choice((0, 1, 2))),
        {"kind": "JOIN_CLUSTER", "id": 1, "address": "127.0.0.1:1"},
        {"kind": "OK", "id": 1},
        {"kind": "WELCOME", "id": 1, "heartbeat_ms": 1, "ttl_ms": 1, "fail_bound_ms": 1, "session": ""},
        hello(rng.choice(_ids()), rid=rng.choice((0, 1, 2, 2 ** 64 - 1)), resume=True,
              resume_after=rng.choice((0, 1, 2 ** 64 - 1))),
        hello(pad=1), hello(trim=1), hello(trim=9),
    ]
    for length in range(9):
        shapes.append(_raw(_header(length), (bytes([ServiceKind.RENEW]) + bytes(8))[:length]))
    return shapes


def _after_welcome(rng: random.Random) -> dict[str, Any]:
    """A frame an identified node sends: a request, a second HELLO, a reply kind, a bad length."""
    rid = rng.choice((2, 3, 2 ** 64 - 1))
    return rng.choice([
        renew(rid), hello(rid=rid), {"kind": "OK", "id": rid}, {"kind": "RENEWED", "id": rid, "ttl_ms": 5},
        {"kind": "RENEW", "id": rid, "pad": 1}, {"kind": "RENEW", "id": rid, "trim": 1},
        _raw(_header(wire.MAX_REQUEST_BYTES + 1)), _raw(_header(wire.MAX_REQUEST_BYTES), bytes([ServiceKind.RENEW])),
        _raw(_header(9), bytes([rng.choice((0, 1, 2, 3, 7, 9, 31, 32, 69, 255))]) + rid.to_bytes(8, "big")),
        {"kind": "JOIN_SHARD", "id": rid, "shard_id": ""},
        {"kind": "REMOVE_FROM_CLUSTER", "id": rid, "node_id": f"{TAG}-zz"},
        {"kind": "UPDATE_SHARD_LOG", "id": rid, "ops": []},
    ])


def _walk(rng: random.Random) -> list[dict[str, Any]]:
    shape = rng.randrange(9)
    strangers = _strangers(rng)
    if shape == 0:  # a stranger's first frames: refused, then more frames a refused peer must not be read for
        first = [rng.choice(strangers) for _ in range(rng.choice((1, 2)))]
        if rng.random() < 0.5:  # the rest in a send of its own, after the refusal was read
            return [{"conn": 0, "send": first, "await": 0}, {"conn": 0, "send": [hello(), renew(2)]}]
        return [{"conn": 0, "send": first + [hello(), renew(2)]}]
    if shape == 1:  # HELLO with each field at its edge, then a request
        return [{"conn": 0, "send": [hello(rng.choice(_ids()), rid=rng.choice((0, 1, 7, 2 ** 64 - 1)),
                                           resume=rng.random() < 0.3, resume_after=rng.choice((0, 1, 5))),
                                     renew(2)], "await": 2}]
    if shape == 2:  # an identified node's frames: served, or refused with the connection closed
        sends = [_after_welcome(rng) for _ in range(rng.choice((1, 2)))]
        return [{"conn": 0, "send": [hello()], "await": 1}, {"conn": 0, "send": sends + [renew(9)]}]
    if shape == 3:  # a second session for the id: without, with a wrong, with the token; then both sessions' frames
        token = rng.choice(("", "@0", "nope", "@1"))
        return [{"conn": 0, "send": [hello()], "await": 1},
                {"conn": 1, "send": [hello(takeover=token)], "await": 1},
                {"conn": 0, "send": [renew(2)]}, {"conn": 1, "send": [renew(2)], "await": 2}]
    if shape == 4:  # silence: the clock at the deadline of the last frame read, a ms either side, then a frame
        steps: list[dict[str, Any]] = [{"conn": 0, "send": [hello()], "await": 1}]
        for rid in range(2, 2 + rng.choice((1, 2))):
            if rng.random() < 0.5:
                steps.append({"conn": 0, "send": [renew(rid)], "await": rid})
            steps.append({"silence": 0, "offset": rng.choice((-1, 0, 1))})
        return steps + [{"conn": 0, "send": [renew(7)], "await": 7}]
    if shape == 5:  # a frame cut short, then its rest (or a second frame) in another send
        frame = _frame(rng.choice([hello(), renew(2)]), "w000", {}, "", Symbols())
        cut = rng.randrange(1, len(frame))
        head = [{"conn": 0, "send": [hello()], "await": 1}] if frame[4] == ServiceKind.RENEW else []
        return head + [{"conn": 0, "send": [{"raw": frame[:cut].hex()}]}, {"conn": 0, "send": [{"raw": frame[cut:].hex()},
                                                                                                renew(8)]}]
    if shape == 6:  # a refused HELLO among good ones on other connections
        return [{"conn": 0, "send": [hello()], "await": 1},
                {"conn": 1, "send": [rng.choice(strangers), hello(f"{TAG}-b"), renew(2)]},
                {"conn": 0, "send": [renew(2)], "await": 2}]
    if shape == 7:
        return _served(rng)
    return _written_then_resumed(rng)


def _served(rng: random.Random) -> list[dict[str, Any]]:
    """A service started with a heartbeat and fail_after in whole ms that are not whole in binary seconds (1001 ms:
    1.001 s), a session bound of 1 or 2 and a secret or none; HELLOs with the secret, a near miss and none, a
    second node at the bound, and a takeover at it."""
    heartbeat = rng.choice((999, 1000, 1001, 1003, 2001))
    fail_after = rng.choice((2 * heartbeat - 1, 2 * heartbeat, 2 * heartbeat + 1, 2 * heartbeat + 3, 5003))
    secret = rng.choice((None, "s3cret"))
    presented = rng.choice([{}, {}, {"secret": ""}, {"secret": "s3cret "}, {"secret": "s3cre"}, {"secret": "S3CRET"}])
    steps: list[dict[str, Any]] = [
        {"serve": {"heartbeatMs": heartbeat, "failAfterMs": fail_after, "maxSessions": rng.choice((1, 2)),
                   "secret": secret}},
        {"conn": 0, "send": [hello() | presented, renew(2)], "await": 2},
        {"conn": 1, "send": [hello(f"{TAG}-b"), renew(2)], "await": 2},
    ]
    if rng.random() < 0.5:
        steps.append({"conn": 2, "send": [hello(takeover="@0"), renew(2)], "await": 2})
    return steps


def _op(key: str, value: str, expected: str | int | None = None) -> dict[str, Any]:
    return {"key": f"{TAG}:{key}", "value": value, "expected": expected}


def _written_then_resumed(rng: random.Random) -> list[dict[str, Any]]:
    """A member writes its shard log and gossip (and a CAS that fails: an expected revision stale, absent, or for
    an absent key), then a successor session resumes after a revision at, before and after the writes (or takes
    over without resuming): its catch-up, in order, before WELCOME."""
    steps: list[dict[str, Any]] = [
        {"conn": 0, "send": [hello()], "await": 1},
        {"conn": 0, "send": [{"kind": "JOIN_CLUSTER", "id": 2, "address": "127.0.0.1:7001"}], "await": 2},
        {"conn": 0, "send": [{"kind": "UPDATE_SHARD_LOG", "id": 3, "ops": [_op("k", "01"), _op("j", "")]}], "await": 3},
    ]
    if rng.random() < 0.7:
        steps.append({"conn": 0, "send": [{"kind": "UPDATE_GOSSIP", "id": 4, "scope": rng.choice(("SHARD", "GLOBAL")),
                                           "ops": [_op("g", "02")]}], "await": 4})
    if rng.random() < 0.6:
        steps.append({"conn": 0, "send": [{"kind": "UPDATE_SHARD_LOG", "id": 5, "ops": [rng.choice([
            _op("k", "03"), _op("k", "03", 1), _op("x", "03", "r1"), _op("k", "03", "r1"), _op("j", "03", "r2")])]}],
            "await": 5})
    resume = rng.random() < 0.8
    after = {"revision": rng.choice(("r1", "r2", "r3")), "plus": rng.choice((-1, 0, 0, 1))} if resume else 0
    steps.append({"conn": 1, "send": [hello(takeover=rng.choice(("@0", "@0", ""))), renew(2)], "await": 2}
                 if rng.random() < 0.1 else
                 {"conn": 1, "send": [hello(takeover="@0", resume=resume, resume_after=after), renew(2)], "await": 2})
    return steps


def _members(rng: random.Random) -> list[dict[str, Any]]:
    """Two or three members, each on its own connection, then moves, writes and removals by any of them, a
    takeover, or the clock at a member's silence deadline and a tick either side (the silent ones PFAIL or FAIL):
    every member is told the others' changes after WELCOME (recorded apart: the walk's EVENTS)."""
    names = "abc"[:rng.choice((2, 3))]
    rid = itertools.count(3)
    steps: list[dict[str, Any]] = []
    for n, name in enumerate(names):
        steps += [{"conn": n, "send": [hello(f"{TAG}-{name}")], "await": 1},
                  {"conn": n, "send": [{"kind": "JOIN_CLUSTER", "id": 2, "address": f"127.0.0.1:{7001 + n}"}],
                   "await": 2}]
    for _ in range(rng.choice((1, 2, 3, 4))):
        n, r = rng.randrange(len(names)), next(rid)
        other = f"{TAG}-{rng.choice(names)}"
        frame = rng.choice([
            {"kind": "JOIN_SHARD", "id": r, "shard_id": {"shard": rng.choice(("s1", "s2", "s3", "s4"))}},
            {"kind": "REMOVE_FROM_SHARD", "id": r, "node_id": other},
            {"kind": "REMOVE_FROM_CLUSTER", "id": r, "node_id": other},
            {"kind": "JOIN_CLUSTER", "id": r, "address": rng.choice(("127.0.0.1:7001", "127.0.0.1:7009"))},
            {"kind": "UPDATE_SHARD_LOG", "id": r, "ops": [_op(rng.choice("kj"), "0" + str(r % 10))]},
            {"kind": "UPDATE_GOSSIP", "id": r, "scope": rng.choice(("SHARD", "GLOBAL")),
             "ops": [_op(rng.choice("gh"), "0" + str(r % 10))]},
            renew(r),
        ])
        if rng.random() < 0.15:
            steps.append({"silence": n, "offset": rng.choice((-1, 0, 1))})
        elif rng.random() < 0.1:
            steps.append({"conn": len(names), "send": [hello(f"{TAG}-{names[n]}", takeover=f"@{n}"), renew(r)],
                          "await": r})
        else:
            steps.append({"conn": n, "send": [frame], "await": r})
    return steps


PROBE: Final = [{"conn": 0, "send": [hello(), renew(2)]}]
"""The first candidate: a HELLO and a RENEW awaited by no step, so what the service says is read up to its close
at the end. A mutant that leaves every frame unanswered (or answers it under another request id) is told apart by
it before a walk that awaits a reply can hang on it (the selection tries walks already kept first)."""


def payloadless() -> list[dict[str, Any]]:
    """Every kind whose body is its header alone (``wire.PAYLOADS[kind]`` is ``wire.Empty``: RENEW, OK and
    CLUSTER_DOWN, the event a service may push when its node loses its liveness, which a client hands its Core as
    ``cluster_down``), sent by a stranger as its first frame (refused: MALFORMED_MESSAGE, closed) and by a welcomed
    node, then a RENEW (a request served, another kind MALFORMED_MESSAGE and the node still served). The random walks'
    kinds are numbers that left out CLUSTER_DOWN; these are the spec's own table."""
    kinds = [kind for kind, layout in wire.PAYLOADS.items() if layout is wire.Empty]
    return [walk for kind in kinds for walk in (
        {"steps": [{"conn": 0, "send": [{"kind": kind.name, "id": 5}], "await": 5},
                   {"conn": 0, "send": [hello(), renew(2)]}]},
        {"steps": [{"conn": 0, "send": [hello()], "await": 1},
                   {"conn": 0, "send": [{"kind": kind.name, "id": 3}, renew(4)], "await": 4}]})]


def moved_then_resumed() -> list[dict[str, Any]]:
    """A member ``a`` writes its shard's log, GLOBAL and SHARD gossip; ``b``, in a shard of its own, writes GLOBAL
    gossip (the revision its successor resumes after, at it and just below it), then moves into ``a``'s shard; a
    successor of ``b`` resumes: a node moved since ``after`` is owed its new shard's whole log and SHARD gossip, even
    what was written at or before ``after``, and no GLOBAL gossip of that shard written by then (the catch-up's
    ``moved`` and its scope test, each decisive: the seeded walks never move a node before a resume)."""
    a, b = f"{TAG}-a", f"{TAG}-b"
    head: list[dict[str, Any]] = [
        {"conn": 0, "send": [hello(a)], "await": 1},
        {"conn": 0, "send": [{"kind": "JOIN_CLUSTER", "id": 2, "address": "127.0.0.1:7001"}], "await": 2},
        {"conn": 0, "send": [{"kind": "UPDATE_SHARD_LOG", "id": 3, "ops": [_op("k", "01")]}], "await": 3},
        {"conn": 0, "send": [{"kind": "UPDATE_GOSSIP", "id": 4, "scope": "GLOBAL", "ops": [_op("g", "02")]}], "await": 4},
        {"conn": 0, "send": [{"kind": "UPDATE_GOSSIP", "id": 5, "scope": "SHARD", "ops": [_op("h", "03")]}], "await": 5},
        {"conn": 1, "send": [hello(b)], "await": 1},
        {"conn": 1, "send": [{"kind": "JOIN_CLUSTER", "id": 2, "address": "127.0.0.1:7002"}], "await": 2},
        {"conn": 1, "send": [{"kind": "UPDATE_GOSSIP", "id": 3, "scope": "GLOBAL", "ops": [_op("x", "04")]}], "await": 3},
        {"conn": 1, "send": [{"kind": "JOIN_SHARD", "id": 4, "shard_id": {"shard": "s1"}}], "await": 4},
    ]
    return [{"steps": head + [{"conn": 2, "send": [hello(b, takeover="@1", resume=True,
                                                        resume_after={"revision": "r4", "plus": plus}), renew(2)],
                               "await": 2}]} for plus in (-1, 0)]


def candidates(seed: int = SEED) -> list[dict[str, Any]]:
    """The seeded walks, then those derived from the spec's tables and rules (after them, so a seeded walk keeps its
    index)."""
    rng = random.Random(seed)
    walks = [{"steps": PROBE}] + [{"steps": _walk(rng)} for _ in range(CANDIDATES)]
    members = random.Random(seed * 1000 + 1)
    return walks + [{"steps": _members(members)} for _ in range(MEMBER_CANDIDATES)] + derived()


def moved_written_then_resumed() -> list[dict[str, Any]]:
    """As :func:`moved_then_resumed`, then ``b`` writes GLOBAL gossip in its new shard, and its successor resumes just
    below that write's revision: at the move's own revision in the model, whose counter steps by one (so a node moved
    exactly at ``after`` is not owed the shard's log again), and between the move and the write in a provider whose
    revisions skip, where it is owed the same (the walk names no number the step decides)."""
    head = moved_then_resumed()[0]["steps"][:-1] + [
        {"conn": 1, "send": [{"kind": "UPDATE_GOSSIP", "id": 5, "scope": "GLOBAL", "ops": [_op("y", "05")]}],
         "await": 5}]
    return [{"steps": head + [{"conn": 2, "send": [hello(f"{TAG}-b", takeover="@1", resume=True,
                                                        resume_after={"revision": "r5", "plus": -1}), renew(2)],
                               "await": 2}]}]


def derived() -> list[dict[str, Any]]:
    """The walks derived from the spec's tables and rules, in the order they were added (a new one goes last)."""
    return payloadless() + moved_then_resumed() + moved_written_then_resumed()


_CLIENT = ("unreachable", "the client's end (ClientSession, its backoff, the decoders only a client runs): a wire walk "
           "drives the service's end; the client walks hold the other (docs/walks/cluster-client.md)")
_MODEL = ("unreachable", "not by this corpus's members (two or three joining, moving, writing, removed, silent up "
          "to a session's deadline): ids and addresses at their bounds, a verdict one tick either side of a threshold, "
          "unread time, a policy's own checks, a restart's snapshot and the in-process handles' paths are the model "
          "and session walks' (docs/walks/cluster.md) and the timeout cases' business")
_CONDITION = ("elsewhere", "by the MUST case inputs/derived-every-edge (input_edges.error_codes: every code of the error "
              "tree decoded by the target's errorFrom, its condition compared); not on the wire: ERROR carries the code "
              "and the message (session.error_frame), and a message never holds the condition (spec/errors.py: only "
              "str() prefixes it)")
_SHOWN_TEXT = ("elsewhere", "by the MUST case inputs/derived-every-edge (input_edges.hello_refusals: each refusal of a "
               "HELLO answered with its ERROR frame, message text included); a walk records an ERROR by its condition")
_CLIENT_REQUEST = ("elsewhere", "by the MUST case inputs/derived-every-edge (input_edges.update_requests: a client's "
                   "UPDATE_SHARD_LOG request built from typed ops, as its frame); a wire walk sends the service frames "
                   "it builds itself")
_KEPT_ID = ("equivalent", "the id a refusal keeps in its parameters (text=text[:60]: the message's own cut is another 60, "
            "inside the f-string, which no family plants): parameters reach no frame (session.error_frame sends the "
            "code and the message) and no target role")
JUDGED: Final[dict[str, tuple[str, str]]] = {
    "session.ClientSession.": _CLIENT,
    "session.Phase.": ("equivalent", "a client phase's value, read only by ClientSession._require's RuntimeError (the "
                       "caller's misuse of the machine): phases are compared by identity, and none reaches a frame"),
    "wire.ops_to_wire:": _CLIENT_REQUEST,
    "interface.": ("equivalent", "a Protocol member's body (``...``) never runs: ClusterProvider, ClusterBackend and "
                   "ClusterCore are typing.Protocol classes no provider subclasses"),
    **{f"errors.{name}.condition:": _CONDITION for name in (
        "ClusterError", "ClusterFull", "FrameTooLarge", "InvalidAddress", "InvalidBatch", "InvalidIdentifier",
        "MalformedMembership", "MalformedMessage", "NodeIdInUse", "NotAMember", "ProviderClosed",
        "ProviderUnavailable", "RevisionMismatch", "Unauthenticated", "UnknownNode", "UnknownShard")},
    "errors.RevisionMismatch.__init__:": (
        "elsewhere", "by the MUST case inputs/derived-every-edge (input_edges.error_codes: a CAS_ERROR with its entry and "
        "without, decoded by the target's errorFrom, whose message RevisionMismatch builds); not on the wire: CAS_ERROR "
        "carries the key, the expected revision and the entry, no message (session.error_frame)"),
    "errors.InvalidIdentifier.__init__: 60": _KEPT_ID,
    "wire.check_hello_secret: \"HELLO does not carry": _SHOWN_TEXT,
    "wire.check_hello_secret: swap arguments presented / required": (
        "equivalent", "secret_matches(presented, required) and (required, presented) differ only when required is "
        "blank (compare_digest is symmetric, and a blank secret matches nothing), and no service requires a blank one: "
        "ClusterService.__init__ and the harness's SERVE take it through spec.shared_secret.configured_secret, which "
        "refuses it (EmptySecret)"),
    "session.ServiceSession.__init__: drop self.last_frame": (
        "equivalent", "ServiceSession.deadline reads last_frame only once welcome set node_id, and receive sets it "
        "before _read hands the HELLO over"),
    "session.ServiceSession.connection_error: drop self.closed": (
        "equivalent", "ClusterService.received returns once it sent connection_error's frame, and departs the stream: "
        "the reactor reads a departing peer's bytes only to drop them (reference/net/reactor.py calls received no more "
        "once stream.ended), so receive is never called on that session again"),
    "session.ServiceSession.taken_over: drop self.closed": (
        "equivalent", "ClusterService._open closes the displaced stream right after sending taken_over's frame: no "
        "byte reaches that session again"),
    "session.error_frame: 0 -> -1": ("equivalent", "wire.entries_to_wire([actual]) has one element: [-1] is [0] (the "
                                     "other 0, an absent expected revision's, is told apart)"),
    "wire.FrameReader.__init__:": ("equivalent", "_size is read (feed, wanted) only while a body is read, after feed "
                                   "set it from that body's header"),
    "wire.FrameReader.feed: len(self._body) == self._size: == -> >=": (
        "equivalent", "feed takes at most self._size - len(self._body) bytes into a body: it never grows past its size"),
    "wire.decode: len(body) == 9: == -> <=": (
        "equivalent", "decode runs checked_length(len(body)) first: no body shorter than 9 bytes reaches the shortcut"),
    "wire.decode: remove check if kind in _EMPTY and len(body) == 9": (
        "equivalent", "the payload-less kinds' shortcut: the parse it skips (PAYLOADS' Empty, then Terminated, on no "
        "bytes) gives the same empty payload"),
    "wire.decode: 9 -> 8": ("equivalent", "(the surviving one: a payload-less kind's shortcut) decode runs "
                            "checked_length(len(body)) first, so no body of 8 bytes reaches it, and the parse it skips "
                            "gives the same empty payload"),
    "wire.update_frames:": ("unreachable", "an update event past MAX_FRAME_BYTES (a catch-up of more than 16 MiB): no "
                            "short walk writes that much (the inputs corpus's updateFrames calls split such events)"),
    "model.ClusterModel._next_revision: 1 -> 2": REVISION_STEP,  # before "model.": the first prefix that matches judges
    "model.owed_membership: drop sorted(...)": TOLD_ORDER,
    "model.ClusterModel.update_gossip: drop sorted(...)": TOLD_ORDER,
    "model.ClusterModel.shard_members: drop sorted(...)": RECIPIENTS,
    "model._batches: drop sorted(...) in sorted(groups)": BATCHES_RESORTED,
    "model.": _MODEL,
    "detector.": _MODEL,
}
"""Survivors judged by hand, by ``module.function: operator`` prefix -> (equivalent | unreachable | gap | elsewhere,
why); a survivor another cluster corpus's record tells apart is listed as that corpus's (:func:`report`), before any of
these."""


# -- the vectors and the report -----------------------------------------------------------------------

@functools.cache  # the spec's sources do not change within a run; --check and the report both ask
def wire_mutants() -> list[OperatorMutant]:
    """The mutants the walks are selected by: every family's of :data:`MODULES`."""
    return [m for module in MODULES for m in every_mutant(module)]


def selected(progress: bool = False) -> tuple[dict[str, Any], Record]:
    from conformance.operator_mutants import select

    walks = candidates()
    recorded = recorded_tests([WALKS_FILE])
    mutants = wire_mutants()
    selection = select(walks, load_runner, PREFIXES, mutants, per_walk_s=30.0, progress=progress_printer(progress),
                       carried=[({"steps": t["steps"]}, t["answer"]) for t in recorded])
    comments = kept_comments(selection, walks, [({"steps": t["steps"]}, t["comment"]) for t in recorded])
    return _document(walks, selection, comments), record_of(mutants, selection, len(walks))


UNJUDGED_TRIES: Final = 200
"""How many walks ``--unjudged`` tries on a mutant, the recorded ones first, every candidate run on it (untraced: a
new family's table entries run at import, on no walk's lines): its cost is bounded where none tells one apart."""


def selected_unjudged(record: Record, progress: bool = False) -> tuple[dict[str, Any], Record]:
    """The corpus and ``record`` with only the mutants it does not judge selected for (:func:`corpus_record.unjudged_mutants`),
    every recorded walk carried and keeping its comment."""
    from conformance.operator_mutants import select

    walks = candidates()
    recorded = recorded_tests([WALKS_FILE])
    mutants = wire_mutants()
    fresh = unjudged_mutants(record, mutants)
    selection = select(walks, load_runner, PREFIXES, fresh, per_walk_s=30.0, progress=progress_printer(progress),
                       carried=[({"steps": t["steps"]}, t["answer"]) for t in recorded], traced=False,
                       max_tries=UNJUDGED_TRIES)
    had = {canonical({"steps": t["steps"]}): t["comment"] for t in recorded}
    comments = kept_comments(selection, walks) | {
        index: had[canonical(walks[index])] for index in selection.kept if canonical(walks[index]) in had}
    return _document(walks, selection, comments), record_with(record, mutants, fresh, selection)


def _document(walks: Sequence[dict[str, Any]], selection: Selection, comments: dict[int, str]) -> dict[str, Any]:
    tests = []
    for tc_id, index in enumerate(sorted(selection.kept), 1):
        tests.append({"tcId": tc_id, "comment": comments[index],
                      "flags": [], "specRef": "docs/spec/cluster.md#the-services-end-servicesession",
                      "steps": walks[index]["steps"], "answer": run_walk(walks[index])})
    return {
        "algorithm": "cluster-service-wire-walks", "schema": SCHEMA_NAME, "generatorVersion": GENERATOR_VERSION,
        "seed": SEED, "candidates": len(walks), "numberOfTests": len(tests), "header": HEADER, "notes": {},
        "specRef": "docs/spec/cluster.md#the-services-end-servicesession",
        "testGroups": [{"type": "WireWalk", "specRef": "docs/spec/cluster.md#the-services-end-servicesession",
                        "tests": tests}],
    }


def report(record: Record) -> str:
    """``docs/walks/cluster-wire.md``, from the recorded selection."""
    return corpus_report(
        "# Walk corpus: cluster wire",
        "Generated by `python -m conformance.cluster.wire_walks` (do not edit): "
        f"{record['candidates']} candidate walks from seed {SEED} (frames sent to a cluster service on raw "
        "connections), each kept in `conformance/cluster/vectors/wire_walks.json` only when it tells the spec apart "
        "from one of the mutants of every family (`operator_mutants.every_mutant`) of the modules below, run on the "
        "harness `exec:` serves. "
        f"{record['kept']} walks kept.",
        MODULES, JUDGED, record, suite_elsewhere(FILES, wire_mutants()))


def selected_again(record: Record, rules: Sequence[str], progress: bool = False) -> tuple[dict[str, Any], Record]:
    """The corpus and ``record`` with the mutants of ``rules`` (rules the record names, as its report lists them)
    selected for again, on the recorded walks and the derived ones (:func:`derived`), every recorded walk carried
    and keeping its comment: a survivor a derived walk was added for is judged again in seconds, not in a whole
    selection's half hour (a seeded candidate that told it apart would have been kept already)."""
    from conformance.operator_mutants import select

    walks = candidates()
    recorded = recorded_tests([WALKS_FILE])
    mutants = wire_mutants()
    again = [m for m in mutants if rule_of(m.name) in set(rules)]
    had = {canonical({"steps": t["steps"]}): t["comment"] for t in recorded}
    first = len(walks) - len(derived())
    pool = [i for i, walk in enumerate(walks) if canonical(walk) in had or i >= first]
    chosen = select([walks[i] for i in pool], load_runner, PREFIXES, again, per_walk_s=30.0,
                    progress=progress_printer(progress), traced=False,
                    carried=[({"steps": t["steps"]}, t["answer"]) for t in recorded])
    selection = Selection([pool[i] for i in chosen.kept], {name: pool[i] for name, i in chosen.killed_by.items()},
                          chosen.survivors, chosen.broken, chosen.timed_out)
    comments = kept_comments(selection, walks) | {
        index: had[canonical(walks[index])] for index in selection.kept if canonical(walks[index]) in had}
    return (_document(walks, selection, comments),
            record_with(record | {"candidates": len(walks)}, mutants, again, selection))


def main(argv: Sequence[str] | None = None) -> int:
    """The corpus's command line (``corpus_record.write_corpus``), and ``--again RULE...``: :func:`selected_again`."""
    args = list(sys.argv[1:] if argv is None else argv)
    if args[:1] == ["--again"]:
        return write_corpus("conformance.cluster.wire_walks", __doc__, FILES,
                            lambda: selected_again(json.loads(FILES.record.read_text()), args[1:], progress=True),
                            wire_mutants, report, [])
    return write_corpus("conformance.cluster.wire_walks", __doc__, FILES, lambda: selected(progress=True),
                        wire_mutants, report, args, lambda record: selected_unjudged(record, progress=True))


if __name__ == "__main__":
    sys.exit(main())

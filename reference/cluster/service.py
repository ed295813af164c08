"""The driver-hosted cluster service: an :class:`InProcessCluster` reachable over TCP.

One connection is one node session: HELLO names the node (and presents the shared secret when
the service has one), then requests map one-to-one onto the provider's operations and the node's
notifications are pushed as events (layouts in spec/cluster/wire.py). The client renews liveness
with RENEW; a connection that dies stops renewing, so its node turns FAIL within the declared
bound, exactly like a crashed in-process node, and its node id is free again.

Strangers are bounded: one thread polls every connection (reference/net/reactor.py); a stranger
must complete HELLO (at most ``MAX_HELLO_BYTES``, checked from the length header before anything
is read) within ``bind_timeout_s``, and at most ``max_pending`` strangers wait at once (a newcomer
evicts the oldest); at most ``max_sessions`` nodes are served; an identified node's frames may be
up to ``MAX_REQUEST_BYTES`` (a full batch), at most ``max_buffered_bytes`` of partial requests are
held for all connections together (beyond, the service stops reading only the connections that hold
more than ``small_partial_bytes`` of an unfinished frame: each connection keeps that share, so
renewals and small requests of the other nodes are still read), and a node must send a frame at
least every ``fail_bound``; a node that does not read its
events is disconnected when ``max_queued_bytes`` wait for it. Closing a connection
releases its socket, buffers and node at once.

Silence is judged on what was read: every round reads each readable connection, and a session is
silent only for time before the last served round began (what arrived since may wait for the next
round: it is not silence); the failure detector is told the same (``InProcessCluster.add_reader``). The
poller only runs requests: the fan-out of their notifications runs on the cluster's fan-out thread,
and membership changes go out as one MEMBERSHIP_DELTA encoded once for all their recipients.

``python -m reference.cluster.service`` starts one on a free port and prints the port as its first
line (the conformance runner's ``exec:`` target uses this). It has no test mode: a conformance run
that needs to stop the detector's clock or restart the cluster starts a harness that embeds the
service (``python -m conformance.cluster.reference_target``), whose controls never reach this port.
"""

from __future__ import annotations

import argparse
import logging
import sys
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Sequence
from urllib.parse import quote

from reference.cluster.memory import DEFAULT_POLICY, InProcessCluster, InProcessNode
from reference.net.ledger import ResourceLedger
from reference.net.reactor import CloseReason, ConnectionLimits, Outgoing, Reactor, Stream
from spec.clock import after, elapsed
from spec.cluster import wire
from spec.cluster.detector import FailurePolicy
from spec.cluster.errors import ClusterError
from spec.cluster.model import MembershipChange, MembershipView
from spec.cluster.session import Answer, Hello, Request, ServiceInput, ServiceSession, error_frame
from spec.cluster.types import Entry, Membership, NodeId, NodeInfo, Scope, ShardId
from spec.cluster.wire import ServiceKind, ServiceMessage
from spec.shared_secret import configured_secret
from streamwire.cli import read_secret

log = logging.getLogger(__name__)


class PollerStalled(RuntimeError):
    """A caller waited for a round of the service's poller that did not end in time (or the poller
    stopped): what it asked the poller to carry out may not have been."""


POLL_S = 0.1
"""Longest poll (at most half the detector's check interval: an idle poller's reads are as old as its
last round, and the detector counts that as unread); silent sessions are looked for at most once per
this."""


@dataclass(frozen=True, slots=True)
class ServiceLimits:
    """What strangers and nodes can make the service hold."""

    connections: ConnectionLimits = ConnectionLimits(max_pending=256, bind_timeout_s=5.0)
    max_sessions: int = 1024
    max_queued_bytes: int = 64 * 1024 * 1024
    max_buffered_bytes: int = 256 * 1024 * 1024
    """Partial requests held for all connections together; beyond it the service stops reading
    the connections holding more than ``small_partial_bytes`` until the total is back under half."""
    small_partial_bytes: int = 64 * 1024
    """Each connection's own share: one holding no more of an unfinished frame is read even when the
    budget is spent, so a flood of large unfinished frames stalls only the connections sending them."""


class MembershipFrames:
    """The membership frames of one change, each built once for every session it goes to: the
    MEMBERSHIP_DELTA for the sessions told the membership it applies on, the whole MEMBERSHIP for the
    others (a newcomer). The whole frame is assembled from per-shard blocks, re-encoded only when
    their shard changes, so a change costs the same at any size (before, every member was sent the
    whole snapshot encoded for it: the square of the size per join). Used by the one thread that
    drains the cluster's fan-out at a time."""

    def __init__(self) -> None:
        self._epoch = -1
        self._shard_of: dict[NodeId, ShardId] = {}
        self._shards: dict[ShardId, dict[NodeId, NodeInfo]] = {}
        self._blocks: dict[ShardId, bytes] = {}
        self._changes: Sequence[MembershipChange] = ()
        self._delta = b""
        self._whole: tuple[int, bytes] = (-1, b"")

    def frame(self, changes: Sequence[MembershipChange], base: int, view: MembershipView, told: int) -> bytes:
        """What tells a session that was last told the membership of epoch ``told`` about ``changes``
        (applying on epoch ``base``; ``view`` shows the membership after them)."""
        if changes is not self._changes:
            self._advance(changes, base, view)
        if told == base:
            return self._delta
        if self._whole[0] != self._epoch:
            self._whole = (self._epoch, wire.membership_frame(self._epoch, list(self._blocks.values())))
        return self._whole[1]

    def _advance(self, changes: Sequence[MembershipChange], base: int, view: MembershipView) -> None:
        self._changes = changes
        self._delta = wire.encode(ServiceKind.MEMBERSHIP_DELTA, 0, **wire.membership_changes_to_wire(changes, base))
        if self._epoch != base:  # the first change, or the cluster restarted: start over
            self._shard_of.clear()
            self._shards.clear()
            self._blocks.clear()
            for shard, nodes in view.snapshot().shards.items():
                self._shards[shard] = {n.node_id: n for n in nodes}
                self._shard_of.update((n.node_id, shard) for n in nodes)
            changed = set(self._shards)
        else:
            changed = set().union(*(self._move(change) for change in changes))
        for shard in changed:
            members = self._shards.get(shard)
            if members:
                self._blocks[shard] = wire.shard_block(shard, [members[n] for n in sorted(members)])
            else:
                self._shards.pop(shard, None)
                self._blocks.pop(shard, None)
        self._epoch = view.epoch

    def _move(self, change: MembershipChange) -> set[ShardId]:
        """Put ``change`` into the shard index; the shards it changed."""
        changed: set[ShardId] = set()
        old = self._shard_of.pop(change.node_id, None)
        if old is not None:
            del self._shards[old][change.node_id]
            changed.add(old)
        record = change.record
        if record is not None:
            self._shard_of[change.node_id] = record.shard
            info = NodeInfo(node_id=change.node_id, address=record.address, state=record.state)
            self._shards.setdefault(record.shard, {})[change.node_id] = info
            changed.add(record.shard)
        return changed


@dataclass(eq=False)
class _Session:
    """One connection: its protocol end, its node once HELLO succeeded, and the bytes queued for
    it. It is the Core of its node's handle: events are queued, never blocking the fan-out."""

    stream: Stream
    max_queued_bytes: int
    membership_frames: MembershipFrames
    protocol: ServiceSession
    node: InProcessNode | None = None
    told: int = -1
    """The epoch of the last membership this session was sent (-1: none yet)."""
    queued: int = 0
    buffered: int = 0
    """Bytes of a partial request counted in the service's total."""
    lock: threading.Lock = field(default_factory=threading.Lock)

    def send(self, frame: bytes) -> None:
        """Queue ``frame``; a peer that lets ``max_queued_bytes`` pile up is disconnected."""
        if self.stream.ended:
            return  # refused and departing: only what was queued before is written
        with self.lock:
            self.queued += len(frame)
            overflow = self.queued > self.max_queued_bytes
        if overflow:
            log.warning("cluster service: %s does not read its events; disconnected", self.stream.label)
            self.stream.close()
            return
        try:
            self.written(self.stream.send([Outgoing([frame], len(frame))]))
        except OSError:
            pass  # closed meanwhile: the reactor reports it

    def written(self, tokens: list[object]) -> None:
        done = sum(t for t in tokens if isinstance(t, int))
        with self.lock:
            self.queued -= done

    def _event(self, kind: ServiceKind, **payload: Any) -> None:
        self.send(wire.encode(kind, 0, **payload))

    def update_membership(self, snapshot: Membership) -> None:
        """A resumed session's catch-up: the whole snapshot."""
        self.told = snapshot.epoch
        self._event(ServiceKind.MEMBERSHIP, **wire.membership_to_wire(snapshot))

    def membership_changed(self, changes: Sequence[MembershipChange], base: int, view: MembershipView) -> None:
        self.send(self.membership_frames.frame(changes, base, view, self.told))
        self.told = view.epoch

    def notify_gossip_update(self, entries: Sequence[Entry]) -> None:
        for frame in wire.update_frames(ServiceKind.GOSSIP_UPDATE, entries):
            self.send(frame)

    def notify_shard_log_update(self, shard: ShardId, entries: Sequence[Entry]) -> None:
        for frame in wire.update_frames(ServiceKind.SHARD_LOG_UPDATE, entries, shard_id=shard):
            self.send(frame)

    def cluster_heartbeat(self, ttl: float) -> None:
        """Heartbeats reach the client as RENEWED replies, not as events."""

    def cluster_down(self) -> None:
        self._event(ServiceKind.CLUSTER_DOWN)


class ClusterService:
    """Serves ``cluster`` on ``host:port`` (port 0: a free one, see ``port``) from one thread.

    ``secret``: when set, HELLO must carry it (UNAUTHENTICATED otherwise); clients find it in
    :attr:`url` (``tcp://:SECRET@host:port``). None turns authentication off; an empty or
    whitespace-only secret raises EmptySecret before anything listens. ``ledger`` records the service's sockets and thread.
    A session's silence is judged on the cluster's clock, the one its failure detector reads (so a
    conformance harness that stops that clock stops both, and :meth:`judge_silence` looks at its
    instant). Every rule of a connection (HELLO first, bounds, takeover, silence) is its
    :class:`ServiceSession`'s; the service carries them out.
    """

    def __init__(self, cluster: InProcessCluster, host: str = "127.0.0.1", port: int = 0, *,
                 secret: str | None = None, limits: ServiceLimits = ServiceLimits(),
                 ledger: ResourceLedger | None = None) -> None:
        self.cluster = cluster
        self._clock = cluster.clock
        self.limits = limits
        self._secret = configured_secret(secret, "the cluster service's secret")
        self._streams: dict[Stream, _Session] = {}
        self._by_deadline: dict[_Session, None] = {}
        """Identified sessions in the order of their deadline (each moved to the end when a frame
        moves it: one clock, so the order holds), so the silent ones are found without a scan of all."""
        self._nodes: dict[NodeId, _Session] = {}
        self._buffered = 0
        self._paused: list[_Session] = []
        self._membership_frames = MembershipFrames()
        self._silence_checked = 0.0
        self._silence = threading.Condition()
        self._silence_asked = 0
        self._silence_judged = 0
        self._round = 0
        self._round_done = 0
        self._held: dict[_Session, float] = {}
        """Sessions whose reading is held (:meth:`hold_reads`), each since that instant on the cluster's clock."""
        self._reactor = Reactor(self, limits.connections, listen=(host, port), ledger=ledger)
        self.host, self.port = host, self._reactor.port
        cluster.add_reader(self, self._unread_for)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="cluster-service", daemon=True)
        if ledger is not None:
            ledger.add_thread(self._thread)
        self._thread.start()

    @property
    def url(self) -> str:
        """Where clients connect, with the secret they need (keep it out of logs)."""
        auth = f":{quote(self._secret, safe='')}@" if self._secret else ""
        return f"tcp://{auth}{self.host}:{self.port}"

    @property
    def polling(self) -> bool:
        """Whether the poller still serves (false once closed, or once it failed: then nothing answers)."""
        return self._thread.is_alive()

    @property
    def connection_count(self) -> int:
        return len(self._reactor.streams)

    def held_bytes(self) -> int:
        """Bytes held for connections now: partial frames and queued events (approximate while
        the poller runs)."""
        return sum(s.protocol.frames.held_bytes + s.queued for s in list(self._streams.values()))

    def close(self) -> None:
        """Close every connection (their nodes stop as if crashed) and the listener."""
        self._stop.set()
        self._reactor.wake()
        self._thread.join(10.0)
        self.cluster.remove_reader(self)

    def _run(self) -> None:
        try:
            while not self._stop.is_set():
                with self._silence:
                    self._round += 1
                    begun = self._round
                self._reactor.poll(min(POLL_S, self.cluster.policy.check_interval / 2))
                now = self._clock.now()
                with self._silence:
                    asked = self._silence_asked
                if asked > self._silence_judged or now - self._silence_checked >= POLL_S:
                    self._silence_checked = now
                    self._end_silent_sessions(now if self._clock.stopped else after(now, -self._reactor.unread_for()))
                    with self._silence:
                        self._silence_judged = asked
                        self._silence.notify_all()
                if self._paused and self._buffered <= self.limits.max_buffered_bytes // 2:
                    for session in self._paused:
                        session.stream.resume()
                    self._paused.clear()
                with self._silence:
                    self._round_done = begun
                    self._silence.notify_all()
        except Exception:
            log.exception("cluster service poller failed")
        finally:
            for session in list(self._streams.values()):
                if session.node is not None:
                    session.node.close()
            self._streams.clear()
            self._by_deadline.clear()
            self._nodes.clear()
            self._reactor.close()

    def judge_silence(self, limit: float = 10.0) -> None:
        """Look for silent sessions now and return once they are closed: what the poller does every
        ``POLL_S`` while the clock runs, and what the owner of a stopped clock calls after each move
        (as :meth:`InProcessCluster.judge` for the detector). A stopped clock is the owner's: no
        unread time is subtracted. PollerStalled: not judged within ``limit`` s, or the poller stopped."""
        with self._silence:
            self._silence_asked += 1
            asked = self._silence_asked
            self._reactor.wake()
            self._await_poller(lambda: self._silence_judged >= asked, limit)

    def hold_reads(self, node_id: NodeId, held: bool, limit: float = 10.0) -> None:
        """Stop reading the connection serving ``node_id`` (what it sends waits unread, as behind a busy
        poller), or read it again; a conformance harness's ``PAUSE`` and ``RESUME``. Held time is unread
        time, never the node's silence (for its session and the failure detector); resumed, this returns
        once a round has read what waited and carried it out. KeyError: no session serves that node;
        PollerStalled: no poller round ended within ``limit`` s (what waited may not have been carried out)."""
        session = self._nodes[node_id]
        if held:
            self._held.setdefault(session, self._clock.now())
            session.stream.pause()
            self._next_round(limit)  # the poller no longer reads it
            return
        session.stream.resume()
        self._next_round(limit)
        self._held.pop(session, None)

    def _next_round(self, limit: float) -> None:
        """Return once a poller round that began after this call has ended; PollerStalled when none
        ended within ``limit`` s, or the poller stopped first."""
        with self._silence:
            wanted = self._round + 1
            self._reactor.wake()
            self._await_poller(lambda: self._round_done >= wanted, limit)

    def _await_poller(self, done: Callable[[], bool], limit: float) -> None:
        """Wait (holding ``_silence``) until the poller made ``done`` true; PollerStalled when ``limit`` s
        passed first, or the poller stopped."""
        if not self._silence.wait_for(lambda: done() or not self._thread.is_alive(), limit) or not done():
            raise PollerStalled(f"the cluster service's poller did not get there within {limit} s"
                                if self._thread.is_alive() else "the cluster service's poller stopped")

    def _unread_for(self) -> float:
        """How long renewals may have waited unread here (the failure detector does not count it as
        silence): the longest held connection's time, and on a running clock the reactor's rounds (a
        stopped clock is a conformance harness's: it holds reads itself)."""
        now = self._clock.now()
        held = max((elapsed(since, now) for since in list(self._held.values())), default=0.0)
        return held if self._clock.stopped else max(held, self._reactor.unread_for())

    def _end_silent_sessions(self, read_through: float) -> None:
        """Close the sessions silent before ``read_through`` (the time up to which everything that
        arrived was read; for a held session, the instant its reading was held): the first ones in
        deadline order, up to the first that is not and is read."""
        silent = []
        for session in self._by_deadline:
            held_since = self._held.get(session)
            if session.protocol.silent(read_through, held_since):
                silent.append(session)
            elif held_since is None:
                break
        for session in silent:
            log.info("cluster service: %s sent nothing for %.1f s; closed", session.stream.label,
                     session.protocol.fail_bound)
            session.stream.close()

    # -- reactor Handler (on the polling thread) ---------------------------------------------------

    def accepted(self, stream: Stream) -> None:
        protocol = ServiceSession(secret=self._secret, max_sessions=self.limits.max_sessions,
                                  fail_bound=self.cluster.timing.fail_bound)
        self._streams[stream] = _Session(stream, self.limits.max_queued_bytes, self._membership_frames, protocol)

    def received(self, stream: Stream, data: memoryview) -> None:
        session = self._streams.get(stream)
        if session is None:
            return
        deadline = session.protocol.deadline
        try:
            for asked in session.protocol.receive(data, self._clock.now(), len(self._nodes)):
                self._carry_out(session, asked)
                if stream.ended:
                    return
        except ClusterError as exc:
            session.send(session.protocol.connection_error(exc))
            stream.depart()  # the refusal may wait behind queued events: written before the close
            return
        finally:
            if not stream.closed:  # closed() took back what this connection held
                held = session.protocol.frames.held_bytes
                self._buffered += held - session.buffered
                session.buffered = held
                if session.protocol.deadline != deadline:
                    self._by_deadline.pop(session, None)
                    self._by_deadline[session] = None
        if self._buffered > self.limits.max_buffered_bytes and session.buffered > self.limits.small_partial_bytes:
            stream.pause()
            self._paused.append(session)

    def sent(self, stream: Stream, tokens: list[object]) -> None:
        session = self._streams.get(stream)
        if session is not None:
            session.written(tokens)

    def closed(self, stream: Stream, reason: CloseReason, error: OSError | None) -> None:
        session = self._streams.pop(stream, None)
        if session is not None:
            self._buffered -= session.buffered
            self._by_deadline.pop(session, None)
            self._held.pop(session, None)
        log.info("cluster service connection %s ended: %s%s", stream.label, reason.value,
                 f" ({error})" if error else "")
        if session is None or session.node is None:
            return
        node = session.node
        if self._nodes.get(node.node_id) is session:
            del self._nodes[node.node_id]
        node.close()  # crash semantics: the node stops renewing; its id is free

    # -- requests -------------------------------------------------------------------------------

    def _carry_out(self, session: _Session, asked: ServiceInput) -> None:
        """Do what a frame asked (spec/cluster/session.py decided what)."""
        match asked:
            case Answer(frame, close):
                session.send(frame)
                if close:
                    session.stream.depart()
            case Hello():
                self._open(session, asked)
            case Request(message):
                assert session.node is not None, "requests come after HELLO"
                try:
                    reply = self._dispatch(session.node, message)
                except ClusterError as exc:
                    reply = error_frame(message.request_id, exc)
                session.send(reply)

    def _open(self, session: _Session, hello: Hello) -> None:
        """Open the node a HELLO names (taking it over from a live session when its token allows)."""
        try:
            session.node = self.cluster.open_node(hello.node_id, session, takeover=hello.takeover, autorenew=False,
                                                  inline=True, resume_after=hello.resume_after)
        except ClusterError as exc:
            self._carry_out(session, session.protocol.refuse(hello.request_id, exc))
            return
        session.stream.bind()
        welcome = session.protocol.welcome(hello, session.node.takeover_token, self.cluster.timing)
        displaced = self._nodes.get(hello.node_id)
        self._nodes[hello.node_id] = session
        if displaced is not None:
            displaced.send(displaced.protocol.taken_over())
            displaced.stream.close()
        session.send(welcome)

    def _dispatch(self, node: InProcessNode, message: ServiceMessage) -> bytes:
        """Run one request; its reply frame."""
        rid, p = message.request_id, message.payload
        reply: bytes
        match message.kind:
            case ServiceKind.JOIN_CLUSTER:
                reply = wire.encode(ServiceKind.SHARD, rid, shard_id=node.join_cluster(p["address"]))
            case ServiceKind.REMOVE_FROM_CLUSTER:
                node.remove_from_cluster(NodeId(p["node_id"]))
                reply = wire.encode(ServiceKind.OK, rid)
            case ServiceKind.JOIN_SHARD:
                node.join_shard(ShardId(p["shard_id"]))
                reply = wire.encode(ServiceKind.OK, rid)
            case ServiceKind.REMOVE_FROM_SHARD:
                reply = wire.encode(ServiceKind.SHARD, rid, shard_id=node.remove_from_shard(NodeId(p["node_id"])))
            case ServiceKind.UPDATE_GOSSIP:
                revision = node.update_gossip(wire.ops_from_wire(p["ops"]), wire.enum_from_wire(Scope, p["scope"]))
                reply = wire.encode(ServiceKind.REVISION, rid, revision=revision)
            case ServiceKind.UPDATE_SHARD_LOG:
                reply = wire.encode(ServiceKind.REVISION, rid,
                                    revision=node.update_shard_log(wire.ops_from_wire(p["ops"])))
            case ServiceKind.RENEW:
                reply = wire.encode(ServiceKind.RENEWED, rid, ttl_ms=round(node.renew() * 1000))
            case _:
                raise AssertionError(f"{message.kind.name} is not in spec.cluster.session.REQUESTS")
        return reply


MEASURED_RENEWALS_PER_S = 10_936
"""RENEWs one service process answered per second at 16,384 members on the shared 2-core build
machine (``python -m benchmarks cluster``, load average 11-21; docs/cluster.md, "Growing over TCP")."""


def judging_capacity(policy: FailurePolicy) -> str:
    """One line: the largest membership this service can judge at ``policy``'s heartbeat, from the
    measured renewal rate with half of it kept for joins and fan-out (beyond it, renewals wait
    unread and verdicts slow down; nodes are not failed for it, docs/cluster.md)."""
    members = int(MEASURED_RENEWALS_PER_S / 2 * policy.heartbeat_interval)
    return (f"judges at most {members:,} renewing members at a {policy.heartbeat_interval * 1000:.0f} ms heartbeat "
            f"(measured {MEASURED_RENEWALS_PER_S:,} renewals/s on 2 cores, half kept for joins)")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--heartbeat", type=float, default=DEFAULT_POLICY.heartbeat_interval)
    parser.add_argument("--fail-after", type=float, default=DEFAULT_POLICY.fail_after)
    parser.add_argument("--data-dir", type=Path, default=None, help="journal directory (durable across restarts)")
    parser.add_argument("--secret-file", type=Path, default=None, help="file holding the shared secret")
    parser.add_argument("--max-sessions", type=int, default=ServiceLimits().max_sessions,
                        help="most nodes served at once")
    args = parser.parse_args(argv)
    try:
        policy = FailurePolicy(heartbeat_interval=args.heartbeat, fail_after=args.fail_after)
        if args.max_sessions < 1:
            raise ValueError(f"--max-sessions must be at least 1, got {args.max_sessions}")
        secret = read_secret(args.secret_file, "--secret-file") if args.secret_file else None
    except ValueError as refused:  # one line, no usage: the flags parsed, their values do not fit together
        parser.exit(2, f"{parser.prog}: error: {refused}\n")
    # The fan-out thread sends to every member while the poller waits for the interpreter: hand it
    # over every 0.5 ms instead of every 5 ms, so a join's reply does not wait behind a long fan-out.
    sys.setswitchinterval(0.0005)
    service = ClusterService(InProcessCluster(policy, data_dir=args.data_dir), port=args.port, secret=secret,
                             limits=ServiceLimits(max_sessions=args.max_sessions))
    print(f"cluster service: {judging_capacity(policy)}", file=sys.stderr, flush=True)
    print(service.port, flush=True)
    try:
        sys.stdin.read()  # runs until stdin closes, so the parent's exit ends it
    finally:
        service.close()
        service.cluster.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())

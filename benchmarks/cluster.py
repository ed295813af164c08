"""``python -m benchmarks cluster [--json]``: the cluster service over TCP as the cluster grows.

A cluster service process (``python -m reference.cluster.service``) is grown by raw node sessions
from this process, one join at a time, up to ``--members`` (16,384, ``MAX_MEMBERS``; one more is
refused CLUSTER_FULL); every member renews every ``--growth-heartbeat`` while it grows and reads
everything the service sends it. Reported per thousand members: join latency p50/p99 (JOIN sent
to SHARD read, the HELLO before it not counted), and the service's RSS per member. At the full
size, renewals/s held: every member keeps one RENEW outstanding for ``--seconds``, the answered
ones per second (the service's capacity to judge, so the largest membership it can judge at a
heartbeat is that rate times the heartbeat).

Then the churn goal at the default timing (heartbeat 0.2 s, FAIL after 1 s): ``--renewing``
members renew every heartbeat while ``--joins-per-s`` newcomers join for ``--churn-seconds``; a
watcher member decodes every membership frame and counts the PFAIL/FAIL verdicts on renewing
members (goal: zero), and the sessions the service cut.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import selectors
import socket
import statistics
import subprocess
import sys
import threading
import time
from typing import Any

from benchmarks.procstat import sample
from reference.cluster.memory import DEFAULT_POLICY
from spec.cluster import wire
from spec.cluster.errors import ClusterFull
from spec.cluster.model import MembershipView
from spec.cluster.types import MAX_MEMBERS, NodeState

HANG_GUARD = 60.0
DRAIN_EVERY_S = 0.05
"""While growing, this process reads what its members were sent at this period, not after every join
(reading every member after every join cost this process more than the service's work)."""
RENEW = wire.encode(wire.ServiceKind.RENEW, 3)
RENEW_BURST = 8
JOINER_START_S = 3.0
"""The joiner processes start joining together this long after they are spawned (an interpreter's start)."""
JOINERS = 4
"""Processes joining newcomers in the churn run (a join waits for its reply; four threads of this
process, which also reads the 1,000 renewing members, offered only 22-25 joins/s of 50 on the loaded
build machine)."""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Register the benchmark's options."""
    parser.add_argument("--members", type=int, default=MAX_MEMBERS, help="grow the cluster to this many")
    parser.add_argument("--growth-heartbeat", type=float, default=10.0,
                        help="heartbeat (s) while growing (FAIL after 12 heartbeats)")
    parser.add_argument("--seconds", type=float, default=5.0, help="length of the renewal-capacity run")
    parser.add_argument("--renewing", type=int, default=1000, help="members renewing through the churn run")
    parser.add_argument("--joins-per-s", type=float, default=50.0)
    parser.add_argument("--churn-seconds", type=float, default=60.0)
    parser.add_argument("--skip-growth", action="store_true")
    parser.add_argument("--skip-churn", action="store_true")
    parser.add_argument("--json", action="store_true", help="print one JSON object")


class Service:
    """A cluster service process on loopback."""

    def __init__(self, heartbeat: float, fail_after: float, max_sessions: int) -> None:
        self.process = subprocess.Popen(
            [sys.executable, "-m", "reference.cluster.service", "--heartbeat", str(heartbeat),
             "--fail-after", str(fail_after), "--max-sessions", str(max_sessions)],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        assert self.process.stdout is not None and self.process.stderr is not None
        self.port = int(self.process.stdout.readline())
        self.capacity_line = self.process.stderr.readline().strip()

    def rss(self) -> int:
        return sample(self.process.pid).rss_bytes

    def cpu(self) -> float:
        """User + system CPU seconds the service process used so far."""
        with open(f"/proc/{self.process.pid}/stat", encoding="ascii") as stat:
            fields = stat.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    def close(self) -> None:
        assert self.process.stdin is not None
        self.process.stdin.close()
        try:
            self.process.wait(30)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()


def reply(sock: socket.socket) -> wire.ServiceMessage:
    """The next reply on a blocking ``sock``, past the events before it (skipped undecoded: a
    newcomer's whole MEMBERSHIP may come first, and decoding it would be this process's cost)."""
    stream = sock.makefile("rb")
    try:
        while len(header := stream.read(4)) == 4:
            body = stream.read(wire.body_length(header))
            if int.from_bytes(body[1:9], "big"):
                return wire.decode(body)
    finally:
        stream.close()
    raise ConnectionError("the service closed a session")


class Members:
    """Node sessions of this process: they join, renew and read (and drop) what the service sends."""

    def __init__(self, port: int) -> None:
        self.port = port
        self.socks: list[socket.socket] = []
        self.selector = selectors.DefaultSelector()
        self.cut = 0
        self.renewed = 0
        self._buffer = bytearray(1 << 20)
        self._view = memoryview(self._buffer)

    def join(self, name: str) -> float:
        """Open a session for ``name``, join; seconds from JOIN sent to SHARD read."""
        sock = socket.create_connection(("127.0.0.1", self.port), timeout=HANG_GUARD)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        sock.sendall(wire.encode(wire.ServiceKind.HELLO, 1, node_id=name, secret="", takeover="", resume=False,
                                 resume_after=0))
        if (welcome := reply(sock)).kind is not wire.ServiceKind.WELCOME:
            raise ConnectionError(f"HELLO refused: {welcome.payload}")
        started = time.perf_counter()
        sock.sendall(wire.encode(wire.ServiceKind.JOIN_CLUSTER, 2, address="127.0.0.1:1"))
        answer = reply(sock)
        took = time.perf_counter() - started
        if answer.kind is not wire.ServiceKind.SHARD:
            sock.close()
            if answer.payload.get("code") == ClusterFull.code:
                raise ClusterFullError(answer.payload["message"])
            raise ConnectionError(f"JOIN refused: {answer.payload}")
        sock.setblocking(False)
        self.selector.register(sock, selectors.EVENT_READ, None)
        self.socks.append(sock)
        return took

    def renew(self, socks: list[socket.socket], frames: bytes = RENEW) -> None:
        for sock in socks:
            try:
                sock.send(frames)
            except (BlockingIOError, OSError):
                pass  # a full buffer: the service is not reading; counted as not renewed

    def drain(self, timeout: float = 0.0) -> None:
        """Read (and drop) what arrived; count the answered RENEWs and the cut sessions."""
        for key, _ in self.selector.select(timeout):
            sock = key.fileobj
            assert isinstance(sock, socket.socket)
            try:
                size = sock.recv_into(self._buffer)
            except BlockingIOError:
                continue
            except OSError:
                size = 0
            if not size:
                self.selector.unregister(sock)
                self.cut += 1
                continue
            self.renewed += self._view[:size].tobytes().count(RENEWED_MARK)

    def close(self) -> None:
        for sock in self.socks:
            sock.close()
        self.selector.close()


RENEWED_MARK = wire.encode(wire.ServiceKind.RENEWED, 3, ttl_ms=0)[:4 + 9]
"""A RENEWED reply to request id 3 up to its payload (its length, kind and id): what counts answers."""


class ClusterFullError(Exception):
    pass


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def grow(args: argparse.Namespace) -> dict[str, Any]:
    heartbeat = args.growth_heartbeat
    service = Service(heartbeat, 12 * heartbeat, args.members + 16)
    members = Members(service.port)
    rows: list[dict[str, Any]] = []
    try:
        base_rss = service.rss()
        latencies: list[float] = []
        next_renewal = time.monotonic() + heartbeat
        grown_at = drained = time.monotonic()
        for i in range(args.members):
            latencies.append(members.join(f"m{i:05}"))
            now = time.monotonic()
            if now - drained >= DRAIN_EVERY_S:  # a member per process would read at once; one for all reads in bulk
                members.drain()
                drained = now
            if now >= next_renewal:  # everyone renews once per heartbeat, spread over the joins
                members.renew(members.socks)
                next_renewal = now + heartbeat
            if (i + 1) % 1000 == 0 or i + 1 == args.members or i + 1 == 100:
                rows.append({"members": i + 1, "join_p50_ms": round(statistics.median(latencies) * 1000, 2),
                             "join_p99_ms": round(percentile(latencies, 0.99) * 1000, 2),
                             "service_rss_mib": round(service.rss() / 2**20, 1),
                             "rss_per_member_kib": round((service.rss() - base_rss) / (i + 1) / 1024, 2),
                             "seconds": round(time.monotonic() - grown_at, 1),
                             "service_cpu_s": round(service.cpu(), 1), "cut": members.cut})
                if not args.json:
                    print(json.dumps(rows[-1]), flush=True)
                latencies = []
        refused = ""
        if args.members >= MAX_MEMBERS:
            try:
                members.join("one-too-many")
            except ClusterFullError as exc:
                refused = str(exc)
        cpu = service.cpu()
        capacity = renewal_capacity(members, args.seconds)
        return {"heartbeat_s": heartbeat, "rows": rows, "beyond_max_members": refused or None,
                "renewals_per_s_held": capacity, "service_cpu_s_while_renewing": round(service.cpu() - cpu, 1),
                "capacity_line": service.capacity_line, "cut": members.cut}
    finally:
        members.close()
        service.close()


def renewal_capacity(members: Members, seconds: float) -> float:
    """Rounds of ``RENEW_BURST`` RENEWs sent by every member at once (one write each, so this process
    is not what limits the rate), each round read back before the next, for ``seconds``: answered
    RENEWs per second."""
    for _ in range(5):
        members.drain(0.2)  # the growth's backlog
    members.renewed = 0
    started = time.monotonic()
    while time.monotonic() - started < seconds:
        target = members.renewed + RENEW_BURST * len(members.socks) * 0.99
        members.renew(members.socks, RENEW * RENEW_BURST)
        give_up = time.monotonic() + 10.0
        while members.renewed < target and time.monotonic() < give_up:
            members.drain(0.01)
    return round(members.renewed / (time.monotonic() - started), 1)


class Renewing:
    """A thread that only sends: every member of ``socks`` one RENEW per heartbeat, so this process's
    other work (joining, reading) cannot make a renewal late; it counts the rounds that were late
    anyway (a busy machine), which would be silence the service rightly judges."""

    def __init__(self, socks: list[socket.socket], heartbeat: float) -> None:
        self.socks = socks
        self.heartbeat = heartbeat
        self.late = self.rounds = 0
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, name="renewing")
        self.thread.start()

    def _run(self) -> None:
        due = time.monotonic()
        while not self.stop.wait(max(0.0, due - time.monotonic())):
            self.late += time.monotonic() - due > self.heartbeat / 2
            self.rounds += 1
            for sock in list(self.socks):
                try:
                    sock.send(RENEW)
                except OSError:
                    pass  # a full buffer or a cut session: counted by the reader
            due += self.heartbeat

    def close(self) -> None:
        self.stop.set()
        self.thread.join(HANG_GUARD)


def churn(args: argparse.Namespace) -> dict[str, Any]:
    policy = DEFAULT_POLICY
    service = Service(policy.heartbeat_interval, policy.fail_after,
                      args.renewing + int(args.joins_per_s * args.churn_seconds) + 16)
    members = Members(service.port)
    watcher = socket.create_connection(("127.0.0.1", service.port), timeout=HANG_GUARD)
    watcher.sendall(wire.encode(wire.ServiceKind.HELLO, 1, node_id="watcher", secret="", takeover="",
                                resume=False, resume_after=0))
    reply(watcher)
    watcher.sendall(wire.encode(wire.ServiceKind.JOIN_CLUSTER, 2, address="127.0.0.1:1"))
    reply(watcher)
    watcher.setblocking(False)
    renewing = Renewing(members.socks, policy.heartbeat_interval)
    renewing.socks.append(watcher)
    joined: list[float] = []
    try:
        names = {f"r{i:04}" for i in range(args.renewing)}
        for name in sorted(names):
            members.join(name)
            members.drain()
        view: MembershipView | None = None
        buffer = bytearray()
        verdicts: dict[str, int] = {"PFAIL": 0, "FAIL": 0}
        for _ in range(10):  # what the renewing members' own joins sent the watcher is not the churn's
            members.drain(0.02)
            buffer += _available(watcher)
            view = watch(buffer, view, names, {"PFAIL": 0, "FAIL": 0})
        cut_before, late_before, rounds_before = members.cut, renewing.late, renewing.rounds
        spawn = multiprocessing.get_context("spawn")
        results = spawn.Queue()
        started = time.monotonic() + JOINER_START_S  # CLOCK_MONOTONIC: one clock for every process
        joiners = [spawn.Process(target=join_at_rate, args=(service.port, f"n{j}-", args.joins_per_s / JOINERS,
                                                            started, started + args.churn_seconds, results))
                   for j in range(JOINERS)]
        for joiner in joiners:
            joiner.start()
        while time.monotonic() - started < args.churn_seconds:
            members.drain(0.02)
            buffer += _available(watcher)
            view = watch(buffer, view, names, verdicts)
        for _ in joiners:
            joined += results.get(timeout=HANG_GUARD)
        for joiner in joiners:
            joiner.join(HANG_GUARD)
        return {"heartbeat_s": policy.heartbeat_interval, "fail_after_s": policy.fail_after,
                "renewing": args.renewing, "joined": len(joined), "seconds": args.churn_seconds,
                "joins_per_s": round(len(joined) / args.churn_seconds, 1),
                "join_p50_ms": round(statistics.median(joined) * 1000, 2) if joined else None,
                "join_p99_ms": round(percentile(joined, 0.99) * 1000, 2) if joined else None,
                "renewing_verdicts": verdicts, "renewing_sessions_cut": members.cut - cut_before,
                "renewal_rounds": renewing.rounds - rounds_before,
                "late_renewal_rounds_of_this_process": renewing.late - late_before,
                "capacity_line": service.capacity_line}
    finally:
        renewing.close()
        watcher.close()
        members.close()
        service.close()


def join_at_rate(port: int, prefix: str, rate: float, start: float, end: float, results: Any) -> None:
    """A process of its own: newcomers join at ``rate`` per second (on their own sessions, read now and
    then) from ``start`` to ``end`` (monotonic); their join latencies are put on ``results``."""
    newcomers = Members(port)
    joined: list[float] = []
    due = start
    try:
        while (now := time.monotonic()) < end:
            if now < due:
                time.sleep(min(due, end) - now)
                continue
            joined.append(newcomers.join(f"{prefix}{len(newcomers.socks):05}"))
            newcomers.drain()
            due = max(due + 1 / rate, time.monotonic() - 1.0)  # behind by more than a second: do not burst
    finally:
        newcomers.close()
        results.put(joined)


def _available(sock: socket.socket) -> bytes:
    try:
        return sock.recv(1 << 16)
    except BlockingIOError:
        return b""


def watch(buffer: bytearray, view: MembershipView | None, renewing: set[str],
          verdicts: dict[str, int]) -> MembershipView | None:
    """Decode the watcher's complete frames from ``buffer`` (consumed); count non-OK renewing members."""
    while len(buffer) >= 4:
        size = int.from_bytes(buffer[:4], "big")
        if len(buffer) < 4 + size:
            break
        message = wire.decode(bytes(buffer[4:4 + size]))
        del buffer[:4 + size]
        if message.kind is wire.ServiceKind.MEMBERSHIP:
            view = MembershipView(wire.membership_from_wire(message.payload))
            states = [(n.node_id, n.state) for nodes in view.snapshot().shards.values() for n in nodes]
        elif message.kind is wire.ServiceKind.MEMBERSHIP_DELTA:
            _, changes = wire.membership_changes_from_wire(message.payload)
            states = [(c.node_id, c.record.state) for c in changes if c.record is not None]
        else:
            continue
        for node_id, state in states:
            if node_id in renewing and state is not NodeState.OK:
                verdicts[state.value] += 1
    return view


def main(args: argparse.Namespace) -> int:
    """Run the benchmark and print its figures."""
    figures: dict[str, Any] = {"cpus": os.cpu_count(), "load_before": os.getloadavg()[0]}
    if not args.skip_growth:
        figures["growth"] = grow(args)
    if not args.skip_churn:
        figures["churn"] = churn(args)
    figures["load_after"] = os.getloadavg()[0]
    print(json.dumps(figures) if args.json else json.dumps(figures, indent=1))
    return 0

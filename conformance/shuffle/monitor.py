"""Watch Spark's streaming shuffle on the wire: every connection decoded and judged by the spec's machines.

Reads a pcap/pcapng file (``--read``) or captures live on an interface (``--interface``; a raw
AF_PACKET socket, so root), reassembles each TCP connection, recognises streaming-shuffle
connections by their first frame (no port needs configuring) and judges each with the reader machine
(conformance/shuffle/observer.py). Prints one line per connection as it ends; ``--json-report``
(schema: conformance/shuffle/vectors/monitor_report.schema.json) and ``--html`` hold every
connection's frames, records, bytes, DATA-to-CREDIT round trips and violations.

Exit 1 when a violation was seen, a connection closed with records or an ack outstanding (``incomplete``),
or the verdict is incomplete (connections evicted or ignored at the
tracked-connection cap, a retransmission contradicting the first copy), 0 otherwise, 2 on bad arguments
or a capture that cannot be read.
"""

from __future__ import annotations

import argparse
import html
import json
import signal
import sys
import threading
from collections import Counter
from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Final, Iterable, TextIO

from conformance.bpf import Endpoints
from conformance.capture import (
    CaptureError,
    CaptureStats,
    Packet,
    PcapWriter,
    live_capture,
    open_capture,
    read_capture,
)
from conformance.packet_filter import Compiled, FilterError, Predicate, compile_filter
from conformance.proc_sockets import ProcessConnections, ProcessGone
from conformance.shuffle.observer import UNDECODED, ConnectionReport, ShuffleConnectionObserver, Status
from conformance.tcp_streams import MAX_CONNECTIONS, Address, Flow, TcpTracker, segment_of

SCHEMA: Final = Path(__file__).resolve().parent / "vectors" / "monitor_report.schema.json"
CHECKSUMS: Final = {"auto": None, "on": True, "off": False}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("-r", "--read", metavar="FILE", help="a pcap or pcapng capture to read")
    source.add_argument("-i", "--interface", metavar="IFACE", help="capture live on this interface (root)")
    parser.add_argument("--ports", default="", help="only connections with one end on these ports (comma-separated)")
    parser.add_argument("--filter", default="", metavar="EXPR",
                        help="only connections matching a BPF-like expression (host, port, net, src, dst, and, or, "
                             "not, parentheses)")
    parser.add_argument("--pid", type=int, default=None, metavar="PID",
                        help="only connections of this process and its descendants (live; found through /proc), "
                             "and stop when it exits")
    parser.add_argument("--duration", type=float, default=None, metavar="SECONDS",
                        help="stop a live capture after this long (default: until Ctrl-C, or until --pid exits)")
    parser.add_argument("--checksums", choices=sorted(CHECKSUMS), default="auto",
                        help="whether writers send CRC32C checksums (auto: a checksum of 0 on the first DATA means off)")
    parser.add_argument("--json-report", metavar="FILE", help="write the JSON report here")
    parser.add_argument("--html", metavar="FILE", help="write an HTML report here")
    parser.add_argument("--write-pcap", metavar="FILE", help="also save the live capture (only the connections watched) as a pcap file")
    parser.add_argument("--quiet", action="store_true", help="no line per connection")


def connection_filter(ports: str, expression: str) -> Compiled:
    """What ``--ports`` and ``--filter`` together watch (both must hold), and the hosts or ports every
    watched packet has an end on, for the kernel's prefilter."""
    try:
        wanted = frozenset(int(p) for p in ports.split(",") if p.strip())
    except ValueError:
        raise FilterError(f"--ports takes comma-separated numbers, got {ports!r}") from None
    if any(not 0 < p < 65536 for p in wanted):
        raise FilterError(f"--ports out of range: {ports!r}")
    matches, endpoints = compile_filter(expression)

    def accept(src: Address, dst: Address) -> bool:
        return (not wanted or src[1] in wanted or dst[1] in wanted) and matches(src, dst)

    return Compiled(accept, Endpoints(ports=wanted) if wanted else endpoints)


@dataclass
class MonitorReport:
    """Every shuffle connection seen, in the order they ended (still-open ones last), and what the
    tracker could not watch."""

    connections: list[ConnectionReport] = field(default_factory=list)
    evicted: int = 0
    ignored: int = 0
    other: int = 0
    """TCP connections that carried bytes that are not the streaming shuffle."""

    @property
    def violations(self) -> int:
        return sum(len(c.violations) for c in self.connections)

    @property
    def anomalies(self) -> int:
        return sum(len(c.anomalies) for c in self.connections)

    @property
    def incomplete(self) -> list[str]:
        """Why the verdict does not cover everything captured (empty: it does)."""
        reasons = []
        if self.evicted:
            reasons.append(f"{self.evicted} half-open connection(s) evicted at the tracked-connection cap")
        if self.ignored:
            reasons.append(f"{self.ignored} new connection(s) ignored at the tracked-connection cap")
        if self.anomalies:
            reasons.append(f"{self.anomalies} capture anomal{'y' if self.anomalies == 1 else 'ies'}")
        return reasons

    @property
    def not_decoded(self) -> str:
        """One line for every connection the monitor could not decode (empty when there is none)."""
        counts = Counter(c.status.value for c in self.connections if c.status in UNDECODED)
        parts = [f"{n} {status}" for status, n in sorted(counts.items())]
        if self.other:
            parts.append(f"{self.other} other TCP (not the streaming shuffle)")
        return f"not decoded: {', '.join(parts)} connection(s)" if parts else ""

    @property
    def unfinished(self) -> int:
        """Connections closed with records or an ack outstanding (Status.INCOMPLETE)."""
        return sum(c.status is Status.INCOMPLETE for c in self.connections)

    @property
    def exit_code(self) -> int:
        """1 when a violation was seen, a conversation was left incomplete or the verdict is incomplete, 0 otherwise."""
        return 1 if self.violations or self.unfinished or self.incomplete else 0

    def to_json(self) -> dict[str, Any]:
        return {"connections": [c.to_json() for c in self.connections], "violations": self.violations,
                "evicted": self.evicted, "ignored": self.ignored}


def observe(packets: Iterable[Packet], watched: Compiled, checksums: bool | None = None,
            ended: Callable[[ConnectionReport], None] = lambda report: None,
            max_connections: int = MAX_CONNECTIONS,
            belongs: Callable[[Address, Address, float], bool] | None = None) -> MonitorReport:
    """Run packets through TCP reassembly and one observer per connection; ``ended`` hears each as it ends.
    ``belongs``: whether a connection carrying frames is watched (``--pid``: asked when its first frame
    arrives, while its sockets are open)."""
    report = MonitorReport()
    observers: list[ShuffleConnectionObserver] = []
    current: dict[Flow, ShuffleConnectionObserver] = {}

    def on_end(connection: ConnectionReport) -> None:
        report.connections.append(connection)
        ended(connection)

    def sink_for(flow: Flow) -> ShuffleConnectionObserver:
        observer = ShuffleConnectionObserver(flow, on_end, checksums, belongs)
        observers.append(observer)
        current[flow] = observer
        return observer

    def conflict(flow: Flow, sender: Address, seq: int) -> None:
        current[flow].report.anomalies.append(
            f"a retransmission from {sender[0]}:{sender[1]} differs from the first copy at TCP seq {seq} "
            "(the first copy was judged)")

    tracker = TcpTracker(sink_for, watched.matches, conflict, max_connections)
    try:
        tracker.packets(packets)
    finally:
        report.evicted, report.ignored = tracker.evicted, tracker.ignored
        report.other = sum(observer.other_traffic for observer in observers)
    still_open = set(tracker.open_flows)
    for observer in observers:
        if observer.flow in still_open and (connection := observer.end_of_capture()) is not None:
            on_end(connection)
    return report


class LiveMonitor:
    """A live capture on a thread (for tests and tools that run traffic while watching it)."""

    def __init__(self, interface: str, watched: Compiled, checksums: bool | None = None,
                 pcap: Path | None = None) -> None:
        self._interface, self._watched, self._checksums, self._pcap = interface, watched, checksums, pcap
        self.stats = CaptureStats()
        """Filled in when the capture ends: ``dropped`` > 0 means some connections were seen incomplete."""
        self.ended: list[ConnectionReport] = []
        """Connections that ended so far, appended as they end (readable while the capture runs)."""
        self._stop = threading.Event()
        self._ready = threading.Event()
        self._result: MonitorReport | BaseException | None = None
        self._thread = threading.Thread(target=self._run, name="streamwire-monitor", daemon=True)

    def _run(self) -> None:
        try:
            with ExitStack() as stack:
                packets: Iterable[Packet] = live_capture(self._interface, None, stop=self._stop, ready=self._ready,
                                                         only=self._watched.endpoints, stats=self.stats)
                if self._pcap is not None:
                    packets = _tee(packets, PcapWriter(stack.enter_context(open(self._pcap, "wb"))),
                                   self._watched.matches)
                self._result = observe(packets, self._watched, self._checksums, self.ended.append)
        except BaseException as error:  # noqa: BLE001 - handed to stop()
            self._result = error
        finally:
            self._ready.set()

    def __enter__(self) -> LiveMonitor:
        self._thread.start()
        self._ready.wait(10.0)
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(30.0)

    @property
    def report(self) -> MonitorReport:
        result = self._result
        if isinstance(result, BaseException):
            raise result
        if result is None:
            raise RuntimeError("the monitor has not stopped")
        return result


def _tee(packets: Iterable[Packet], writer: PcapWriter, accept: Predicate) -> Iterable[Packet]:
    """Pass every packet on, saving those of the connections watched (nobody else's traffic is kept)."""
    for packet in packets:
        segment = segment_of(packet)
        if segment is not None and accept(segment.src, segment.dst):
            writer.write(packet)
        yield packet


def write_html(report: MonitorReport, out: TextIO) -> None:
    """One self-contained page: a row per connection, then each violation with its rule and spec section."""
    esc = html.escape
    rows = []
    for c in report.connections:
        frames = ", ".join(f"{k} {v}" for k, v in c.frames.items())
        rows.append(f"<tr class='{'bad' if c.violations or c.outstanding else 'ok'}'><td>{esc(c.client[0])}:{c.client[1]}</td>"
                    f"<td>{esc(c.server[0])}:{c.server[1]}</td><td>{c.writer_id}</td><td>{c.partition_id}</td><td>{c.reader_id}</td>"
                    f"<td>{esc(c.status.value)}</td><td>{esc(frames)}</td><td class=n>{c.records}</td>"
                    f"<td class=n>{c.bytes}</td><td class=n>{c.percentile(50)}</td><td class=n>{c.percentile(99)}</td>"
                    f"<td class=n>{len(c.violations)}</td></tr>")
    violations = [f"<li><b>{esc(v.rule)}</b> at frame {v.frame_index} of {esc(c.client[0])}:{c.client[1]} -> "
                  f"{esc(c.server[0])}:{c.server[1]} (<code>{esc(v.spec_section)}</code>)"
                  f": {esc(v.message)}</li>" for c in report.connections for v in c.violations]
    out.write(
        "<!doctype html><meta charset=utf-8><title>streamwire monitor</title><style>"
        "body{font:14px/1.4 system-ui,sans-serif;margin:1.5em}table{border-collapse:collapse}"
        "td,th{border:1px solid #ccc;padding:2px 6px}.n{text-align:right}tr.bad td{background:#fdecea}"
        "</style><h1>streamwire monitor</h1>"
        f"<p>{len(report.connections)} connection(s), {report.violations} violation(s), {report.unfinished} incomplete</p>"
        "<table><tr><th>reader end</th><th>writer end</th><th>writer</th><th>partition</th><th>reader</th><th>status</th>"
        "<th>frames</th><th>records</th><th>bytes</th><th>rtt p50 ms</th><th>rtt p99 ms</th><th>violations</th></tr>"
        + "".join(rows) + "</table>"
        + (f"<h2>Violations</h2><ol>{''.join(violations)}</ol>" if violations else ""))


class _Until:
    """When a live capture ends: Ctrl-C (SIGINT; a second one interrupts at once), or the watched process
    exited."""

    def __init__(self, process: ProcessConnections | None) -> None:
        self.interrupted = threading.Event()
        self._process = process

    def interrupt(self, signum: int, frame: object) -> None:
        if self.interrupted.is_set():
            raise KeyboardInterrupt
        self.interrupted.set()

    def is_set(self) -> bool:
        return self.interrupted.is_set() or (self._process is not None and not self._process.alive)


class _Announce:
    """Says on stderr when the live capture has begun (what a script starting its job after it waits for)."""

    def __init__(self, interface: str) -> None:
        self._interface = interface

    def set(self) -> None:
        print(f"monitor: capturing on {self._interface}; Ctrl-C ends the capture and writes the reports",
              file=sys.stderr, flush=True)


def _process(args: argparse.Namespace) -> ProcessConnections | None:
    """The process tree ``--pid`` names (its connections are told apart when their first frame arrives:
    reading /proc for every new connection of a busy host would cost more than the capture)."""
    if args.pid is None:
        return None
    if args.read:
        raise FilterError("--pid watches a running process; it does not apply to --read")
    try:
        return ProcessConnections(args.pid)
    except ProcessGone as error:
        raise FilterError(str(error)) from None


def main(args: argparse.Namespace) -> int:
    try:
        watched = connection_filter(args.ports, args.filter)
        process = _process(args)
    except FilterError as error:
        print(f"monitor: {error}", file=sys.stderr)
        return 2
    if args.duration is not None and args.duration <= 0:
        print("monitor: --duration must be positive", file=sys.stderr)
        return 2
    quiet = args.quiet
    stats = CaptureStats()
    until = _Until(process)

    def ended(connection: ConnectionReport) -> None:
        if not quiet and connection.status not in UNDECODED:
            print(connection.summary(), flush=True)

    try:
        with ExitStack() as stack:
            if args.read:
                if args.write_pcap:
                    print("monitor: --write-pcap saves a live capture; it does not apply to --read", file=sys.stderr)
                    return 2
                packets: Iterable[Packet] = read_capture(stack.enter_context(open_capture(args.read)))
            else:
                previous = signal.signal(signal.SIGINT, until.interrupt)
                stack.callback(signal.signal, signal.SIGINT, previous)
                packets = live_capture(args.interface, args.duration, stop=until, ready=_Announce(args.interface),
                                       only=watched.endpoints, stats=stats)
                if args.write_pcap:
                    packets = _tee(packets, PcapWriter(stack.enter_context(open(args.write_pcap, "wb"))),
                                   watched.matches)
            try:
                report = observe(packets, watched, CHECKSUMS[args.checksums], ended,
                                 belongs=None if process is None else process.matches)
            except KeyboardInterrupt:
                print("monitor: interrupted twice; no report written", file=sys.stderr)
                return 130
    except CaptureError as error:
        print(f"monitor: {error}", file=sys.stderr)
        return 2
    if until.interrupted.is_set():
        print("monitor: capture ended by Ctrl-C; connections still open are reported as such", file=sys.stderr)
    if args.json_report:
        Path(args.json_report).write_text(json.dumps(report.to_json(), indent=2) + "\n")
    if args.html:
        with open(args.html, "w") as out:
            write_html(report, out)
    if stats.dropped:
        print(f"monitor: the kernel dropped {stats.dropped} packet(s) the capture could not read in time; "
              "connections they belonged to are seen incomplete (narrow --ports/--filter)", file=sys.stderr)
    if report.not_decoded and not quiet:
        print(report.not_decoded, flush=True)
    for reason in report.incomplete:
        print(f"monitor: verdict incomplete: {reason}", file=sys.stderr)
    unfinished = f", {report.unfinished} incomplete" if report.unfinished else ""
    incomplete = "; verdict incomplete" if report.incomplete else ""
    print(f"{len(report.connections)} connection(s), {report.violations} violation(s){unfinished}{incomplete}",
          flush=True)
    return report.exit_code

"""Implementations under test for the shuffle suite: how a case's workload reaches them and how
what they report comes back.

A case describes what the implementation should do as a :class:`Workload` (role, ids, records per
reader, settings). Each kind of target carries it its own way:

- ``exec:CMD`` (and ``reference``, which is ``exec:`` with this project's endpoint): the workload as
  a JSON file named by ``CONFORMANCE_WORKLOAD`` (see ``docs/conformance.md``); stdout lines after
  the handshake are reports, ``ERROR <CONDITION> <text>`` and ``COMPLETED``;
- ``tcp://HOST:PORT``: no way to pass anything, so only cases using :data:`DEFAULT_WRITER_WORKLOAD`
  apply, and no reports;
- ``spark-jvm``: Spark's handlers in a JVM, driven by commands; its events become reports.

What a target can do is the explicit set of capabilities it declares: ``writer`` and ``reader``
(roles it can play), ``workload`` (runs a case's own workload, not just the default) and
``reports`` (tells the runner about its errors and completion).
"""

from __future__ import annotations

import json
import shlex
import sys
import tempfile
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Final, Iterator, Mapping, Protocol, Sequence

from conformance.external import (
    PEER_VARIABLE,
    ROLE_VARIABLE,
    ExecProcess,
    declared_capabilities,
    parse_tcp,
)
from spec.auth import AuthConfig, CipherName
from spec.shuffle.settings import ShuffleSettings

if TYPE_CHECKING:  # the spark-jvm target's modules load with it: an exec: target's program imports this module per case
    from conformance.framework import CaseContext, RunOptions
    from conformance.shuffle.spark_jvm import Event, SparkJvm, SparkPeer

WRITER, READER, WORKLOAD, REPORTS, AUTH = "writer", "reader", "workload", "reports", "auth"
SLOW_CONSUMER, SETTINGS = "slow-consumer", "settings"
"""``slow-consumer``: a reader whose consumer takes no DATA's records until the runner allows it (``CONSUME
<n>`` lines on stdin), while it keeps reading its connections; ``settings``: an implementation that refuses
a workload setting Spark refuses reports it (``ERROR <condition>``) instead of running."""
SLOW_CONSUMER_KEY: Final = "slow_consumer"
OTHER_WRITERS_KEY: Final = "other_writers""""``auth``: not declared by an implementation but by the run: ``--secret-file`` was given, and the
target was told the secret (the handshake cases need it)."""
CASE_VARIABLE: Final = "CONFORMANCE_CASE"
WORKLOAD_VARIABLE: Final = "CONFORMANCE_WORKLOAD"
STARTUP_TIMEOUT_S: Final = 60.0
ACK_TIMEOUT_KEY: Final = "streamwire.shuffle.terminationAckTimeoutMs"
"""Not a Spark key (Spark waits for acks forever): this project's option, passed to any implementation."""
MAX_RECORD_SIZE_KEY: Final = "streamwire.shuffle.maxRecordSize"
"""Not a Spark key (Spark bounds no frame below 2 GiB): a reader's largest record, which with networkBufferSize
bounds the DATA frames it accepts (docs/spec/shuffle.md#frame); passed to any implementation."""
REFERENCE_COMMAND: Final = f"{shlex.quote(sys.executable)} -m conformance.shuffle.reference_target"
TARGET_HELP: Final = ("reference | spark-jvm | exec:CMD (CMD reads CONFORMANCE_* variables; see "
                      "docs/conformance.md) | tcp://HOST:PORT (a listening writer, default workload)")


@dataclass(frozen=True)
class Workload:
    """What the implementation under test is asked to do in one case."""

    role: str
    case: str = ""
    shuffle_id: int = 0
    writer_id: int = 0
    reader_id: int = 0
    """Reader role: the reader's own id."""
    num_readers: int = 1
    """Writer role: how many readers (ids 0..num_readers-1) the writer serves."""
    records: Mapping[int, Sequence[bytes]] = field(default_factory=dict)
    """Writer role: the records written for each reader, in order; then the input ends."""
    settings: Mapping[str, str] = field(default_factory=dict)
    """``spark.shuffle.streaming.*`` keys (Spark's spelling and defaults), :data:`ACK_TIMEOUT_KEY` and
    :data:`MAX_RECORD_SIZE_KEY`."""
    slow_consumer: bool = False
    """Reader role: the consumer holds every DATA until :meth:`AbstractRunning.consume` (``slow-consumer``)."""
    other_writers: Mapping[int, str] = field(default_factory=dict)
    """Reader role: writers read besides ``writer_id`` (whose peer is ``CONFORMANCE_PEER``), id -> ``host:port``."""
    directory_id: int | None = None
    """Writer role: the id readers know the writer by and name in their handshake (a later job's map task
    id; None: ``writer_id``, the partition id its messages name; docs/spec/shuffle.md#channel-ids)."""

    @property
    def shuffle_settings(self) -> ShuffleSettings:
        return ShuffleSettings.from_dict(self.settings)

    def for_case(self, case: str) -> Workload:
        return replace(self, case=case)

    def to_json(self) -> dict[str, Any]:
        """The document an ``exec:`` implementation reads (records in hex)."""
        out: dict[str, Any] = {"case": self.case, "role": self.role, "shuffle_id": self.shuffle_id,
                               "writer_id": self.writer_id, "settings": dict(self.settings)}
        if self.role == WRITER:
            out["num_readers"] = self.num_readers
            out["records"] = {str(r): [b.hex() for b in self.records.get(r, ())] for r in range(self.num_readers)}
            if self.directory_id is not None:
                out["directory_id"] = self.directory_id
        else:
            out["reader_id"] = self.reader_id
            out["writer_ids"] = [self.writer_id, *self.other_writers]
            if self.other_writers:
                out[OTHER_WRITERS_KEY] = {str(w): address for w, address in self.other_writers.items()}
            if self.slow_consumer:
                out[SLOW_CONSUMER_KEY] = True
        return out


DEFAULT_RECORDS: Final = tuple(f"record-{i:04d}".encode() for i in range(100))
DEFAULT_WRITER_WORKLOAD: Final = Workload(WRITER, records={0: DEFAULT_RECORDS})
"""What a ``tcp://`` writer must do for every accepted reader: shuffle 0, writer 0, one reader (id 0)
receiving ``record-0000`` .. ``record-0099``, Spark's default settings (checksums on)."""


@dataclass(frozen=True)
class Report:
    """Something the implementation told the runner: an ``error`` (with Spark's condition if any) or ``completed``."""

    kind: str
    condition: str | None = None
    detail: str = ""

    def __str__(self) -> str:
        if self.kind != "error":
            return self.kind
        return f"error [{self.condition or 'no condition'}] {self.detail}"


class Running(Protocol):
    """One started implementation under test."""

    @property
    def address(self) -> tuple[str, int]:
        """Writer role: where it listens."""
        ...

    def reports(self) -> list[Report]: ...

    def wait_report(self, kinds: frozenset[str], timeout: float) -> Report | None: ...

    def diagnostics(self) -> str: ...


class ShuffleTarget(Protocol):
    @property
    def description(self) -> str: ...

    @property
    def capabilities(self) -> frozenset[str]: ...

    def writer(self, workload: Workload, ctx: CaseContext) -> AbstractRunning: ...

    def reader(self, workload: Workload, peer: tuple[str, int], ctx: CaseContext) -> AbstractRunning: ...

    def refusals(self, workloads: Sequence[Workload], ctx: CaseContext) -> list[Report | None]:
        """``settings``: for each workload, the error a writer reports for its settings instead of listening, or
        None when it listens (it runs with them)."""
        ...


class AbstractRunning:
    """Reports parsed from a stream of raw items (stdout lines or JVM events); a context manager."""

    def __init__(self, address: tuple[str, int], parse: Callable[[Any], Report | None],
                 snapshot: Callable[[], Sequence[Any]],
                 wait: Callable[[Callable[[Any], bool], float], Any | None],
                 stop: Callable[[], None], diagnostics: Callable[[], str],
                 consume: Callable[[int], None] | None = None) -> None:
        self.address = address
        self._parse, self._snapshot, self._wait = parse, snapshot, wait
        self._stop, self._diagnostics, self._consume = stop, diagnostics, consume

    def consume(self, count: int) -> None:
        """``slow-consumer``: let the consumer take ``count`` more DATA."""
        if self._consume is None:
            raise ValueError("this implementation was not started with a slow consumer")
        self._consume(count)

    def reports(self) -> list[Report]:
        return [r for r in map(self._parse, self._snapshot()) if r is not None]

    def wait_report(self, kinds: frozenset[str], timeout: float) -> Report | None:
        """The first report of one of ``kinds`` (already made or still to come), or None at the deadline."""
        def wanted(raw: Any) -> bool:
            report = self._parse(raw)
            return report is not None and report.kind in kinds

        raw = self._wait(wanted, timeout)
        return None if raw is None else self._parse(raw)

    def diagnostics(self) -> str:
        return self._diagnostics()

    def __enter__(self) -> AbstractRunning:
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop()


# -- exec: ------------------------------------------------------------------------------------------

def parse_report_line(line: str) -> Report | None:
    """``ERROR <CONDITION> <text>`` / ``COMPLETED``; any other line (the handshake) is not a report."""
    words = line.split(maxsplit=2)
    if words[:1] == ["COMPLETED"]:
        return Report("completed")
    if words[:1] == ["ERROR"] and len(words) >= 2:
        condition = None if words[1] == "-" else words[1]
        return Report("error", condition, words[2] if len(words) > 2 else "")
    return None


class ExecTarget:
    """``exec:CMD``: CMD started once per case with the workload; capabilities as CMD declares them."""

    def __init__(self, command: str, description: str, auth: AuthConfig | None = None) -> None:
        """``auth``: the run is authenticated (the workload then carries the secret, see ``_start``)."""
        self.command = command
        self.description = description
        self.capabilities = with_auth(declared_capabilities(command, STARTUP_TIMEOUT_S), auth)

    def _start(self, workload: Workload, ctx: CaseContext, extra: Mapping[str, str],
               interactive: bool = False) -> tuple[ExecProcess, Path]:
        document = tempfile.NamedTemporaryFile("w", prefix="shuffle-workload-", suffix=".json", delete=False)
        content = workload.to_json()
        if ctx.options.auth is not None:
            content["auth"] = auth_to_json(ctx.options.auth)
        with document:
            json.dump(content, document)
        env = {ROLE_VARIABLE: workload.role, CASE_VARIABLE: workload.case, WORKLOAD_VARIABLE: document.name, **extra}
        return ExecProcess(self.command, env, interactive), Path(document.name)

    def _running(self, process: ExecProcess, document: Path, address: tuple[str, int],
                 consume: Callable[[int], None] | None = None) -> AbstractRunning:
        def stop() -> None:
            process.stop()
            document.unlink(missing_ok=True)

        return AbstractRunning(address, parse_report_line, process.lines, process.wait_line, stop,
                               lambda: f"stdout: {process.lines()}\nstderr: {process.stderr_tail()}", consume)

    def writer(self, workload: Workload, ctx: CaseContext) -> AbstractRunning:
        process, document = self._start(workload, ctx, {})
        try:
            port = process.wait_listening(min(ctx.remaining(), STARTUP_TIMEOUT_S))
        except BaseException:
            process.stop()
            document.unlink(missing_ok=True)
            raise
        return self._running(process, document, ("127.0.0.1", port))

    def reader(self, workload: Workload, peer: tuple[str, int], ctx: CaseContext) -> AbstractRunning:
        process, document = self._start(workload, ctx, {PEER_VARIABLE: f"{peer[0]}:{peer[1]}"}, workload.slow_consumer)

        def consume(count: int) -> None:
            process.send_line(f"CONSUME {count}")

        return self._running(process, document, peer, consume if workload.slow_consumer else None)

    def refusals(self, workloads: Sequence[Workload], ctx: CaseContext) -> list[Report | None]:
        """The writers are started together: a refusal costs a program's start, and the starts overlap."""
        started: list[tuple[ExecProcess, Path]] = []
        try:
            for workload in workloads:
                started.append(self._start(workload, ctx, {}))
            firsts = [process.line(0, min(ctx.remaining(), STARTUP_TIMEOUT_S)) for process, _ in started]
        finally:
            for process, document in started:
                process.stop()
                document.unlink(missing_ok=True)
        return [None if first is None else parse_report_line(first) for first in firsts]


def auth_to_json(auth: AuthConfig) -> dict[str, Any]:
    """The workload's ``auth`` object: what a target needs to run the handshake and cipher."""
    return {"secret": auth.secret.decode(), "app_id": auth.app_id, "cipher": auth.cipher.value,
            "version": auth.engine_version}


def auth_from_json(document: Mapping[str, Any]) -> AuthConfig:
    return AuthConfig(str(document["secret"]).encode(), str(document["app_id"]), CipherName.parse(document["cipher"]),
                      int(document["version"]))


def with_auth(capabilities: frozenset[str], auth: AuthConfig | None) -> frozenset[str]:
    """A target's capabilities in this run: ``auth`` joins them when the run is authenticated."""
    return capabilities | {AUTH} if auth is not None else capabilities


# -- tcp:// -----------------------------------------------------------------------------------------

class TcpTarget:
    """``tcp://HOST:PORT``: a writer already listening; it runs the default workload and reports nothing."""

    capabilities: Final = frozenset({WRITER})

    def __init__(self, spec: str) -> None:
        self.description = spec
        self.address = parse_tcp(spec)

    def writer(self, workload: Workload, ctx: CaseContext) -> AbstractRunning:
        if workload.for_case("") != DEFAULT_WRITER_WORKLOAD:
            raise ValueError("a tcp:// target only runs the default workload; the case must require 'workload'")
        return AbstractRunning(self.address, lambda raw: None, list, lambda pred, timeout: None,
                               lambda: None, lambda: "tcp:// target: no reports")

    def reader(self, workload: Workload, peer: tuple[str, int], ctx: CaseContext) -> AbstractRunning:
        raise ValueError("a tcp:// target cannot connect as a reader")

    def refusals(self, workloads: Sequence[Workload], ctx: CaseContext) -> list[Report | None]:
        raise ValueError("a tcp:// target cannot be given settings")


# -- spark-jvm --------------------------------------------------------------------------------------

def parse_spark_event(event: Event) -> Report | None:
    """Spark's ErrorNotifier errors and the writer's all-acks are reports; other events are not."""
    if event.get("event") == "error":
        return Report("error", event.get("condition"), f"{event.get('exception')}: {event.get('detail')}")
    if event.get("event") == "all_acks":
        return Report("completed")
    return None


class SparkTarget:
    """``spark-jvm``: Spark 4.3.0's own handlers; a writer's records go through Spark's write loop
    (:mod:`conformance.shuffle.spark_write_loop`), each payload one DATA."""

    CAPABILITIES: Final = frozenset({WRITER, READER, WORKLOAD, REPORTS, SLOW_CONSUMER, SETTINGS})
    """No ``traces``: Spark's handlers run on Netty's clock, which a trace cannot drive."""

    def __init__(self, spark: SparkJvm, auth: AuthConfig | None = None) -> None:
        self.spark = spark
        self.description = spark.description
        self.capabilities = with_auth(self.CAPABILITIES, auth)
        self.auth = None if auth is None else auth_to_json(auth)
        """Spark's AuthServerBootstrap / AuthClientBootstrap are installed on its transport with this."""

    @staticmethod
    def _running(peer: SparkPeer, address: tuple[str, int], stop: Callable[[], None] | None = None,
                 consume: Callable[[int], None] | None = None) -> AbstractRunning:
        return AbstractRunning(address, parse_spark_event, peer.events.snapshot, peer.events.wait_for,
                               stop or peer.close, lambda: f"events: {peer.events.snapshot()}\nlog: {peer.stderr_tail()}",
                               consume)

    def writer(self, workload: Workload, ctx: CaseContext) -> AbstractRunning:
        settings = workload.shuffle_settings
        peer = self.spark.writer(workload.writer_id, workload.num_readers, shuffle_id=workload.shuffle_id,
                                 connection_timeout_ms=settings.writer_connection_timeout_ms,
                                 checksum=settings.checksum_enabled, auth=self.auth)
        from conformance.shuffle.spark_write_loop import SparkWriteLoop

        loop = SparkWriteLoop(peer, workload.records, workload.num_readers, settings).start()

        def stop() -> None:
            loop.stop()
            peer.close()

        return self._running(peer, ("127.0.0.1", peer.port), stop)

    def reader(self, workload: Workload, peer: tuple[str, int], ctx: CaseContext) -> AbstractRunning:
        """One Spark client handler per writer, as StreamingShuffleReader opens them, each with its
        ``perWriterByteLimit = max(readerMaxMemory / M, 1)``; reports and consuming are the first writer's."""
        settings = workload.shuffle_settings
        quota = max(settings.reader_max_memory // (1 + len(workload.other_writers)), 1)
        addresses = {workload.writer_id: peer, **{w: parse_tcp(f"tcp://{a}") for w, a in workload.other_writers.items()}}
        readers = [self.spark.reader(host, port, writer_id, workload.reader_id, shuffle_id=workload.shuffle_id,
                                     quota=quota, checksum=settings.checksum_enabled,
                                     manual_consume=workload.slow_consumer, auth=self.auth)
                   for writer_id, (host, port) in addresses.items()]

        def stop() -> None:
            for spark_reader in readers:
                spark_reader.close()

        return self._running(readers[0], peer, stop, readers[0].consume if workload.slow_consumer else None)

    def refusals(self, workloads: Sequence[Workload], ctx: CaseContext) -> list[Report | None]:
        return [self._refusal(workload) for workload in workloads]

    def _refusal(self, workload: Workload) -> Report | None:
        answer = self.spark.settings({k: v for k, v in workload.settings.items()
                                      if k not in (ACK_TIMEOUT_KEY, MAX_RECORD_SIZE_KEY)})
        if "refused" not in answer:
            return None
        return Report("error", answer.get("condition"), f"{answer.get('exception')}: {answer.get('detail')}")


def starts_a_program_per_case(target: str) -> bool:
    """``reference`` and ``exec:``: each case starts its own program on its own ports, so cases are independent;
    ``spark-jvm`` drives every case through one JVM and ``tcp://`` is one running writer."""
    return target == "reference" or target.startswith("exec:")


@contextmanager
def open_target(options: RunOptions) -> Iterator[ExecTarget | TcpTarget | SparkTarget]:
    """The target named on the command line."""
    spec = options.target
    if spec == "reference":
        yield ExecTarget(REFERENCE_COMMAND, "reference (this project's runtime, reference.shuffle, via exec:)", options.auth)
    elif spec.startswith("exec:"):
        yield ExecTarget(spec[len("exec:"):], spec, options.auth)
    elif spec.startswith("tcp://"):
        if options.auth is not None:
            raise ValueError("a tcp:// target cannot be told the secret: run it authenticated yourself, or use exec:")
        yield TcpTarget(spec)
    elif spec == "spark-jvm":
        from conformance.shuffle.spark_jvm import SparkJvm

        with SparkJvm.open() as spark:
            yield SparkTarget(spark, options.auth)
    else:
        raise ValueError(f"unknown shuffle target {spec!r}; expected {TARGET_HELP}")

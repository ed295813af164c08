"""Live conformance cases for data-sync servers (Seafowl's protocol over Arrow Flight DoPut).

Targets:
- ``reference``: this project's server (``conformance.sync.reference_target``) started as a
  subprocess on a fresh store, flushing after every put, with every capability below;
- ``exec:CMD``: CMD is started with ``{store}`` replaced by a fresh directory; it must print
  ``LISTENING <port>`` first and flush after every put; capabilities ``store`` (tables are
  read from ``{store}/<path>`` as Delta, and a case may make a table impossible to create
  for a while by a directory named as its first commit file), ``restart`` (kill and start again) and ``flush-control`` (below),
  declared by ``--capabilities store,restart``, or by CMD printing ``CAPABILITIES <cap> ...``
  before ``LISTENING``, or else inferred (``store`` when CMD names ``{store}``, ``restart``);
- ``grpc://HOST:PORT`` or ``grpc+tls://HOST:PORT``: a running server; only cases needing
  no capability run.  ``?token_file=PATH&ca_file=PATH`` after it sends a bearer token
  on every call and trusts that CA (a server started with ``--token-file``/``--tls-cert``).
Every case uses its own origins and table paths and closes the transactions it opens.

``flush-control``: the runner chooses the flush policy and drives the clock it reads, so a
case can hold data back and flush it at exactly a threshold. The target's policy reads a
clock that starts at 0 and moves only when told; it reads lines on stdin and answers each
with one line on stdout:

- ``POLICY <lag_s> <count> <bytes>``: from now on flush a table once its oldest pending data
  is ``lag_s`` old, once it has ``count`` pending items, or once pending data reaches
  ``bytes`` (Seafowl's ``max_replication_lag_s``, ``max_syncs_per_url``,
  ``max_in_memory_bytes``), applying it at once; answer ``OK``. ``POLICY 0 ...`` is flushing after every put.
- ``ADVANCE <seconds>``: move the clock, then do what falls due by then, as the server's own timers
  say (the reference target wakes its flusher only at the deadline the server computed, so a
  deadline computed late shows); answer ``OK`` once done.
- ``PENDING``: answer ``PENDING <n>``, the pending bytes the size threshold is compared with.

``watermark``: ``POLICY`` takes a fifth word, the memory high-watermark in bytes (pending bytes a
put may bring pending data up to, not past: a put past it is answered ``accepted=false`` and nothing
of it is kept); without it the target's own high-watermark holds again.

``truncate``: the target implements streamwire's truncate extension (``DataSyncCommand.truncate``,
docs/sync.md).

``store-locations``: the target allows a client ``StorageLocation`` naming ``{store}/allowed`` or a
place below it (at a ``/`` boundary, without ``..`` segments) and refuses every other one.

``put-slots``: the target bounds the puts it serves at once (a put holds a slot from its first message to its
end); the line ``SLOTS`` is answered ``SLOTS <max concurrent puts> <puts holding a slot now>``, and a put past
the bound is refused busy (an error or ``accepted=false``).

``connections``: the target bounds the client connections it holds; the line ``CONNECTIONS`` is answered
``CONNECTIONS <max connections> <connections held now>``, and a newcomer at the bound evicts the connection
doing nothing for longest (a silent one, no handshake, oldest first) and is served: an unfinished handshake or an
idle connection (no stream; oldest first by the time each entered its use) before one whose streams wait for their
first message, never one carrying a request (``spec.admission.ConnectionAdmission``).

``put-bound``: the target refuses for good a put whose messages together pass its high-watermark (its bytes summed
over every message, each under it), ``RESOURCE_EXHAUSTED``, not ``accepted=false``: such a put could never be taken;
the line ``PUTBOUND`` is answered ``PUTBOUND <bytes>``, at most 64 MiB so that a case passes it cheaply.

``stream-deadlines``: the target's put streams end at their deadlines on the clock ``ADVANCE`` moves: a stream
without a message ``first_message_timeout_s`` after it opened, a put still running ``put_timeout_s`` after its
first message, each ``DEADLINE_EXCEEDED`` naming its setting (``--first-message-timeout-s``, ``--put-timeout-s``);
``ADVANCE`` answers once the streams due are ended.  The line ``STREAMS`` is answered ``STREAMS <first-message
timeout s> <put timeout s> <streams open without a message> <puts running>``.  The line ``STOP <grace_s>`` starts
a shutdown with that grace on the same clock (answered ``OK`` once it began): no new stream is taken, a put still
running once the grace ended ends ``UNAVAILABLE``; only a restart brings the target back.

``decode``: the target hands bytes to its own decoders (and values to its encoders) without a put: the line
``DECODE <json input>`` (one of ``conformance/sync/vectors/decode.json``'s inputs: a decoder of ``FlightData``, a
descriptor, a command, a response, an IPC message or a put's schema, with hex bytes or ``{"repeat": hex, "times":
n}``, or an encoder with a value) is answered ``DECODE <json>``: ``{"value": ...}`` as the decoder returns it, or
the typed error ``{"error": condition, "message": text}`` (``conformance.sync.decode.answer`` is the spec's).

``settings``: the line ``SETTINGS [name=value ...]`` (answered ``OK``) makes the target decide from now on by its
own settings with those named replaced, as a server started with them would (a ``POLICY`` set before is replaced
too; ``SETTINGS`` alone: its own again; a restart brings its own back): ``transaction_timeout_s``,
``write_lock_timeout_s``, ``flush_task_interval_s``, ``high_watermark_bytes`` (what a put's bytes and the memory
held are bounded by), ``max_replication_lag_s``, ``max_syncs_per_url``, ``max_in_memory_bytes``, and the failing
tables' retry waits ``initial_backoff_s`` and ``max_backoff_s`` (the wait doubles from the first up to the most).

``row-groups``: the ``SETTINGS`` line also names the store's row-group limits ``row_group_max_rows`` and
``row_group_max_bytes`` (``spec.sync.writer.RowGroupLimits``), which the files a flush writes from then on are cut by.

``drain``: the line ``DRAIN`` (answered ``OK``) makes the target drain as at a shutdown while it still serves
puts: it answers probes and refuses every other put; only a restart ends it.

``machines``: the line ``MACHINES <walk>`` (one walk of ``vectors/machine_walks.json`` as JSON: a machine, its
settings and the calls made on it) is answered ``MACHINES <answers>`` (a JSON list, one answer per call: what it
returned or raised and what the machine shows after it), each walk on a fresh machine of the target's
(conformance/sync/machines_target.py).

Seafowl appends a put to a table's last pending item when their schemas agree, so the cases
that count items alternate two column orders: every put is then an item of its own.
"""

from __future__ import annotations

import os
import select
import shlex
import shutil
import subprocess
import sys
import tempfile
import uuid
from collections.abc import Callable, Iterator, Sequence
from urllib.parse import parse_qs, urlsplit
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
import pyarrow.flight as flight

from conformance.framework import Case, CaseContext, Level, RunOptions, Suite, Verdict
from conformance.sync import (
    decode,
    derived,
    derived_axes,
    derived_connections,
    derived_model,
    derived_rules,
    derived_store,
    derived_streams,
    derived_writer,
    inputs,
    machine_walks,
    walks,
)
from reference.sync.credentials import ClientSecurity
from streamwire.cli import read_secret
from spec.clock import after
from spec.sync.messages import (
    COMMAND_TYPE_URL,
    ColumnDescriptor,
    ColumnRole,
    StorageLocation,
    SyncCommand,
    SyncResponse,
    decode_response,
)

STARTUP_TIMEOUT_S = 60.0
REFERENCE_CMD = f"{shlex.quote(sys.executable)} -m conformance.sync.reference_target --store {{store}}"
FLUSH_AFTER_EVERY_PUT = "POLICY 0 1000000 4611686018427387904"
HELD_S = 3600
"""A lag no case reaches: data waits for the threshold a case is about."""

OLD, NEW, CHANGED, VALUE = (int(r) for r in (ColumnRole.OLD_PK, ColumnRole.NEW_PK, ColumnRole.CHANGED, ColumnRole.VALUE))
DESCS = (ColumnDescriptor(role=OLD, name="id"), ColumnDescriptor(role=NEW, name="id"), ColumnDescriptor(role=VALUE,
                                                                                                        name="v"))
DESCS_CHANGED = DESCS + (ColumnDescriptor(role=CHANGED, name="v"), ColumnDescriptor(role=VALUE, name="w"))


DESCS_TWO_KEYS = (ColumnDescriptor(role=OLD, name="id"), ColumnDescriptor(role=OLD, name="k"),
                  ColumnDescriptor(role=NEW, name="id"), ColumnDescriptor(role=NEW, name="k"),
                  ColumnDescriptor(role=VALUE, name="v"))


def two_key_batch(rows: Sequence[tuple[Any, ...]]) -> pa.Table:
    """A change batch keyed on two columns: ``old_id, old_k, new_id, new_k, v``."""
    names = ("old_id", "old_k", "new_id", "new_k")
    cols = {n: pa.array([r[i] for r in rows], pa.int64()) for i, n in enumerate(names)}
    return pa.table(cols | {"v": pa.array([r[4] for r in rows], pa.string())})


def rows_batch(rows: Sequence[tuple[Any, ...]], changed: bool = False) -> pa.Table:
    """A change batch ``old_id, new_id, v`` (+ ``changed_v, w`` when ``changed``)."""
    cols: dict[str, pa.Array] = {
        "old_id": pa.array([r[0] for r in rows], pa.int64()),
        "new_id": pa.array([r[1] for r in rows], pa.int64()),
        "v": pa.array([r[2] for r in rows], pa.string()),
    }
    if changed:
        cols["changed_v"] = pa.array([r[3] for r in rows], pa.bool_())
        cols["w"] = pa.array([r[4] for r in rows], pa.string())
    return pa.table(cols)


@dataclass(frozen=True)
class PutOutcome:
    """A response, or the Flight error a put ended with."""

    response: SyncResponse | None
    error: Exception | None

    @property
    def error_text(self) -> str:
        return str(self.error) if self.error is not None else ""


def do_put(
    location: str, payload: bytes, batches: Sequence[pa.Table | pa.RecordBatch], *, timeout: float,
    security: ClientSecurity = ClientSecurity(), done: bool = True,
) -> PutOutcome:
    """One DoPut of ``batches`` under the descriptor ``payload``; ``done=False`` never ends the stream
    (the call then ends at its deadline, an interrupted put). A table's rows go as its record batches and an empty
    table as none; a record batch goes as it is, also an empty one."""
    client = security.connect(location)
    try:
        options = flight.FlightCallOptions(timeout=timeout, headers=security.call_headers())
        schema = batches[0].schema if batches else pa.schema([])
        writer, reader = client.do_put(flight.FlightDescriptor.for_command(payload), schema, options=options)
        for batch in batches:
            if isinstance(batch, pa.RecordBatch):
                writer.write_batch(batch)
            elif batch.num_rows:
                writer.write_table(batch)
        if done:
            writer.done_writing()
        buf = reader.read()
        writer.close()
    except (flight.FlightError, pa.ArrowException) as exc:
        return PutOutcome(None, exc)
    finally:
        client.close()
    if buf is None:
        return PutOutcome(None, RuntimeError("no PutResult"))
    return PutOutcome(decode_response(buf.to_pybytes()), None)


class SyncTarget:
    """A sync server under test, reachable over Flight."""

    def __init__(
        self, description: str, capabilities: frozenset[str], command: str | None, location: str | None,
        security: ClientSecurity = ClientSecurity(),
    ) -> None:
        self.description = description
        self.security = security
        self.capabilities = capabilities
        self._command = command
        self._store = tempfile.mkdtemp(prefix="sync-conformance-") if command else None
        self._proc: subprocess.Popen[str] | None = None
        self.location = location or ""
        self.declared: frozenset[str] | None = None
        """Capabilities the program printed (``CAPABILITIES store restart``) before ``LISTENING``."""
        self.now = 0.0
        """What the target's flush-control clock reads: it starts at 0 and moves only by ``ADVANCE`` (the contract), so
        a case can aim at an instant of its choosing."""

    @property
    def store(self) -> str:
        assert self._store is not None
        return self._store

    def start(self) -> None:
        assert self._command is not None
        argv = shlex.split(self._command.replace("{store}", shlex.quote(self.store)))
        self._proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        assert self._proc.stdout is not None
        line = self._proc.stdout.readline().split()
        if line[:1] == ["CAPABILITIES"]:  # the program declares what it can do before it listens
            self.declared = frozenset(line[1:])
            line = self._proc.stdout.readline().split()
        if len(line) != 2 or line[0] != "LISTENING":
            self.stop()
            raise RuntimeError(f"target did not print LISTENING <port>, got {line}")
        self.location = f"grpc://127.0.0.1:{int(line[1])}"
        self.now = 0.0

    def control(self, line: str, timeout: float = STARTUP_TIMEOUT_S) -> str:
        """Send one flush-control line; the target's one-line answer (RuntimeError if none comes)."""
        proc = self._proc
        assert proc is not None and proc.stdin is not None and proc.stdout is not None
        proc.stdin.write(line + "\n")
        proc.stdin.flush()
        ready, _, _ = select.select([proc.stdout], [], [], timeout)
        answer = proc.stdout.readline().strip() if ready else ""
        if not answer:
            raise RuntimeError(f"no answer to {line!r} within {timeout:.0f} s")
        words = line.split()
        if words[:1] == ["ADVANCE"] and len(words) == 2 and answer == "OK":
            self.now = after(self.now, float(words[1]))
        return answer

    def command(self, line: str) -> None:
        """A flush-control line that must be answered ``OK``."""
        answer = self.control(line)
        if answer != "OK":
            raise RuntimeError(f"{line!r} answered {answer!r}")

    def stop(self) -> None:
        if self._proc is not None:
            self._proc.kill()
            self._proc.wait(timeout=STARTUP_TIMEOUT_S)
            self._proc = None

    def restart(self) -> None:
        """Kill the server (no chance to flush) and start it again on the same store."""
        self.stop()
        self.start()

    def close(self) -> None:
        self.stop()
        if self._store is not None:
            shutil.rmtree(self._store, ignore_errors=True)

    def put(
        self, ctx: CaseContext, cmd: SyncCommand, batch: pa.Table | None = None, raw_cmd: bytes | None = None,
        timeout: float | None = None,
    ) -> PutOutcome:
        """One DoPut; ``raw_cmd`` replaces the encoded command bytes."""
        payload = raw_cmd if raw_cmd is not None else cmd.to_descriptor_cmd()
        ctx.wirelog.record("peer->impl", payload)
        out = do_put(self.location, payload, [batch] if batch is not None else [],
                     timeout=timeout or ctx.remaining(), security=self.security)
        if out.response is not None:
            ctx.wirelog.record("impl->peer", out.response.encode())
        return out

    def table(self, path: str) -> list[dict[str, Any]]:
        """Rows of the Delta table at ``path`` (deletion vectors applied) sorted by ``id``."""
        from reference.sync.store import read_delta

        rows: list[dict[str, Any]] = read_delta(f"{self.store}/{path}").to_pylist()
        return sorted(rows, key=lambda r: r["id"])


@contextmanager
def open_target(options: RunOptions) -> Iterator[SyncTarget]:
    """Start or reach the target named on the command line."""
    spec = options.target
    if spec.startswith(("grpc://", "grpc+tls://")):
        url = urlsplit(spec)
        query = {k: v[-1] for k, v in parse_qs(url.query).items()}
        token = read_secret(query["token_file"], "token_file") if "token_file" in query else None
        security = ClientSecurity(token=token, ca_file=query.get("ca_file"))
        location = f"{url.scheme}://{url.netloc}"
        target = SyncTarget(location, frozenset(), None, location, security)
    else:
        command = REFERENCE_CMD if spec == "reference" else spec[len("exec:"):] if spec.startswith("exec:") else None
        if command is None:
            raise ValueError(f"unknown sync target {spec!r}")
        target = SyncTarget(spec, frozenset(), command, None)
        target.start()
        inferred = frozenset({"restart"} | ({"store"} if "{store}" in command else set()))
        declared = options.capabilities if options.capabilities is not None else target.declared
        target.capabilities = inferred if declared is None else declared
    try:
        yield target
    finally:
        target.close()


# -- helpers -----------------------------------------------------------------
def _ids() -> tuple[str, str]:
    tag = uuid.uuid4().hex[:8]
    return f"origin-{tag}", f"conformance/t_{tag}"


def _cmd(path: str, origin: str, seq: int | None, descs: Sequence[ColumnDescriptor] = DESCS) -> SyncCommand:
    return SyncCommand(path=path, origin=origin, column_descriptors=tuple(descs), sequence_number=seq)


def _numbers(out: PutOutcome) -> str:
    if out.response is None:
        return f"error {out.error_text!r}"
    r = out.response
    return f"accepted={r.accepted} memory={r.memory_sequence_number} durable={r.durable_sequence_number} first={r.first}"


def _expect(out: PutOutcome, memory: int | None, durable: int | None) -> Verdict:
    want = f"accepted=True memory={memory} durable={durable}"
    got = _numbers(out)
    return Verdict(got.startswith(want + " "), want, got)


def _expect_error(out: PutOutcome, text: str) -> Verdict:
    ok = isinstance(out.error, pa.ArrowInvalid) and text in out.error_text
    return Verdict(ok, f"INVALID_ARGUMENT containing {text!r}", f"{type(out.error).__name__}: {out.error_text}" if out.error else _numbers(out))


# -- cases -------------------------------------------------------------------
def probe_empty(t: SyncTarget, ctx: CaseContext) -> Verdict:
    origin, path = _ids()
    return _expect(t.put(ctx, _cmd(path, origin, None, ())), None, None)


def probe_first_after_start(t: SyncTarget, ctx: CaseContext) -> Verdict:
    origin, path = _ids()
    t.restart()
    first = t.put(ctx, _cmd(path, origin, None, ()))
    second = t.put(ctx, _cmd(path, origin, None, ()))
    ok = first.response is not None and first.response.first and second.response is not None and not second.response.first
    return Verdict(ok, "first=True on the first response after a start, then first=False", f"{_numbers(first)}; {_numbers(second)}")


def probe_not_first_later(t: SyncTarget, ctx: CaseContext) -> Verdict:
    origin, path = _ids()
    t.put(ctx, _cmd(path, origin, None, ()))
    out = t.put(ctx, _cmd(path, origin, None, ()))
    return Verdict(out.response is not None and not out.response.first, "first=False", _numbers(out))


def tx_memory_after_last_put(t: SyncTarget, ctx: CaseContext) -> Verdict:
    origin, path = _ids()
    a = t.put(ctx, _cmd(path, origin, None), rows_batch([(None, 1, "a")]))
    b = t.put(ctx, _cmd(path, origin, 7), rows_batch([(None, 2, "b")]))
    ok = _expect(a, None, None).passed and b.response is not None and b.response.memory_sequence_number == 7
    return Verdict(ok, "memory None after the first put, 7 after the last", f"{_numbers(a)}; {_numbers(b)}")


def tx_memory_per_origin(t: SyncTarget, ctx: CaseContext) -> Verdict:
    (a, path), (b, _) = _ids(), _ids()
    t.put(ctx, _cmd(path, a, 5), rows_batch([(None, 1, "a")]))
    out = t.put(ctx, _cmd(path, b, None, ()))
    return _expect(out, None, None)


def tx_interleave_rejected(t: SyncTarget, ctx: CaseContext) -> Verdict:
    """Another origin's put is refused whether or not it would close its own transaction."""
    (a, path), (b, _) = _ids(), _ids()
    t.put(ctx, _cmd(path, a, None), rows_batch([(None, 1, "a")]))
    text = f"Transaction from a new origin ({b}) started without finishing the transaction from the previous one ({a})"
    verdicts = [_expect_error(t.put(ctx, _cmd(path, b, seq), rows_batch([(None, 2, "b")])), text) for seq in (None, 1)]
    t.put(ctx, _cmd(path, a, 1), rows_batch([(None, 3, "c")]))
    return Verdict(all(v.passed for v in verdicts), f"both puts (open, closing): {verdicts[0].expected}",
                   "; ".join(v.actual for v in verdicts))


def tx_empty_rejected(t: SyncTarget, ctx: CaseContext) -> Verdict:
    origin, path = _ids()
    out = t.put(ctx, _cmd(path, origin, 42), rows_batch([]))
    return _expect_error(out, f"Received empty transaction for origin {origin} with sequence number 42")


def tx_empty_put_closes(t: SyncTarget, ctx: CaseContext) -> Verdict:
    origin, path = _ids()
    t.put(ctx, _cmd(path, origin, None), rows_batch([(None, 1, "a")]))
    out = t.put(ctx, _cmd(path, origin, 9), rows_batch([]))
    ok = out.response is not None and out.response.accepted and out.response.memory_sequence_number == 9
    return Verdict(ok, "accepted, memory=9", _numbers(out))


def tx_probe_in_open_tx(t: SyncTarget, ctx: CaseContext) -> Verdict:
    (a, path), (b, _) = _ids(), _ids()
    t.put(ctx, _cmd(path, a, None), rows_batch([(None, 1, "a")]))
    out = t.put(ctx, _cmd(path, b, None, ()))
    t.put(ctx, _cmd(path, a, 2), rows_batch([(None, 2, "b")]))
    return _expect(out, None, None)


def msg_undecodable(t: SyncTarget, ctx: CaseContext) -> Verdict:
    from google.protobuf import any_pb2

    raw = any_pb2.Any(type_url=COMMAND_TYPE_URL, value=b"\x0a\xff\xff").SerializeToString()
    out = t.put(ctx, _cmd("", "", None, ()), None, raw_cmd=raw)
    return _expect_error(out, "Couldn't decode command")


def _schema_case(descs: Sequence[ColumnDescriptor], batch: pa.Table, text: str) -> Callable[[SyncTarget, CaseContext], Verdict]:
    def check(t: SyncTarget, ctx: CaseContext) -> Verdict:
        origin, path = _ids()
        return _expect_error(t.put(ctx, _cmd(path, origin, 1, descs), batch), "Invalid sync schema: " + text)

    return check


_B = rows_batch([(None, 1, "a")])


def durable_needs_complete_tx(t: SyncTarget, ctx: CaseContext) -> Verdict:
    origin, path = _ids()
    a = t.put(ctx, _cmd(path, origin, 1), rows_batch([(None, 1, "a")]))
    b = t.put(ctx, _cmd(path, origin, None), rows_batch([(None, 2, "b")]))
    t.put(ctx, _cmd(path, origin, 2), rows_batch([(None, 3, "c")]))
    ok = b.response is not None and b.response.durable_sequence_number in (None, 1) and b.response.memory_sequence_number == 1
    return Verdict(ok and a.error is None, "mid-transaction: memory=1, durable None or 1", _numbers(b))


def durable_not_above_memory(t: SyncTarget, ctx: CaseContext) -> Verdict:
    origin, path = _ids()
    seen = []
    for seq in range(1, 6):
        out = t.put(ctx, _cmd(path, origin, seq), rows_batch([(None, seq, str(seq))]))
        r = out.response
        if r is None or (r.durable_sequence_number is not None and (r.memory_sequence_number or -1) < r.durable_sequence_number):
            return Verdict(False, "durable <= memory on every response", _numbers(out))
        seen.append(_numbers(out))
    return Verdict(True, "durable <= memory on every response", "; ".join(seen))


def durable_after_flush(t: SyncTarget, ctx: CaseContext) -> Verdict:
    origin, path = _ids()
    out = t.put(ctx, _cmd(path, origin, 3), rows_batch([(None, 1, "a")]))
    return _expect(out, 3, 3)


def restart_first_and_durable(t: SyncTarget, ctx: CaseContext) -> Verdict:
    origin, path = _ids()
    t.put(ctx, _cmd(path, origin, 11), rows_batch([(None, 1, "a")]))
    t.restart()
    out = t.put(ctx, _cmd(path, origin, None, ()))
    ok = out.response is not None and out.response.first
    return Verdict(ok, "first=True after a restart", _numbers(out))


def restart_durable_restored(t: SyncTarget, ctx: CaseContext) -> Verdict:
    """Transaction 12 is durable; after a restart 12 is reported again as durable and as memory (a restored
    durable number is in memory too), so a put closing at 12 is a replay: acknowledged, not applied. (Nothing
    after the restart is flushed: a fresh process's first flush is the slowest step of a loaded machine.)"""
    origin, path = _ids()
    t.put(ctx, _cmd(path, origin, 12), rows_batch([(None, 1, "a")]))
    t.restart()
    probe = _numbers(t.put(ctx, _cmd(path, origin, None, ())))
    replay = _numbers(t.put(ctx, _cmd(path, origin, 12), rows_batch([(None, 2, "replayed")])))
    ids = [r["id"] for r in t.table(path)]
    ok = probe.startswith("accepted=True memory=12 durable=12 ") and replay.startswith(
        "accepted=True memory=12 durable=12 ") and ids == [1]
    return Verdict(ok, "after a restart: probe memory=12 durable=12 (beyond Seafowl, which forgets both); a replay "
                   "at 12 acknowledged, not applied; ids [1]", f"probe {probe}; replay {replay}; ids {ids}")


def replay_idempotent(t: SyncTarget, ctx: CaseContext) -> Verdict:
    origin, path = _ids()
    tx = rows_batch([(None, 1, "a"), (None, 2, "b")])
    t.put(ctx, _cmd(path, origin, 1), tx)
    t.restart()
    t.put(ctx, _cmd(path, origin, None, ()))
    t.put(ctx, _cmd(path, origin, 1), tx)
    got = t.table(path)
    want = [{"id": 1, "v": "a"}, {"id": 2, "v": "b"}]
    return Verdict(got == want, str(want), str(got))


def replay_in_one_batch(t: SyncTarget, ctx: CaseContext) -> Verdict:
    origin, path = _ids()
    t.put(ctx, _cmd(path, origin, 1), rows_batch([(None, 1, "a")]))
    t.put(ctx, _cmd(path, origin, 2), rows_batch([(None, 1, "a"), (1, 1, "b")]))
    got = t.table(path)
    want = [{"id": 1, "v": "b"}]
    return Verdict(got == want, str(want), str(got))


def _table_case(
    batches: Sequence[pa.Table], want: list[dict[str, Any]], descs: Sequence[ColumnDescriptor] = DESCS
) -> Callable[[SyncTarget, CaseContext], Verdict]:
    def check(t: SyncTarget, ctx: CaseContext) -> Verdict:
        origin, path = _ids()
        out = None
        for seq, batch in enumerate(batches, 1):
            out = t.put(ctx, _cmd(path, origin, seq, descs), batch)
            if out.error is not None:
                return Verdict(False, str(want), _numbers(out))
        got = t.table(path)
        return Verdict(got == want, str(want), str(got))

    return check


DESCS_V_W = DESCS + (ColumnDescriptor(role=VALUE, name="w"),)


def _vw(rows: Sequence[tuple[Any, ...]], *names: str) -> pa.Table:
    """A change batch ``old_id, new_id`` and the value columns ``names`` (strings), one tuple per row."""
    cols = {"old_id": pa.array([r[0] for r in rows], pa.int64()), "new_id": pa.array([r[1] for r in rows], pa.int64())}
    return pa.table(cols | {n: pa.array([r[2 + i] for r in rows], pa.string()) for i, n in enumerate(names)})


def _shaped_case(
    puts: Sequence[tuple[Sequence[ColumnDescriptor], pa.Table]], want: list[dict[str, Any]], held: bool = False,
) -> Callable[[SyncTarget, CaseContext], Verdict]:
    """Puts of different column sets to one table, each its own transaction (after the first, ``held``: flushed
    together); the table as ``want``."""
    def check(t: SyncTarget, ctx: CaseContext) -> Verdict:
        origin, path = _ids()
        answers = [t.put(ctx, _cmd(path, origin, 1, puts[0][0]), puts[0][1])]
        with _policy(t) if held else nullcontext():
            answers += [t.put(ctx, _cmd(path, origin, seq, descs), batch)
                        for seq, (descs, batch) in enumerate(puts[1:], 2)]
        refused = [f"put {seq}: {_numbers(out)}" for seq, out in enumerate(answers, 1) if out.error is not None]
        if refused:
            return Verdict(False, str(want), "; ".join(refused))
        got = t.table(path)
        return Verdict(got == want, str(want), str(got))

    return check


_STORED_VW = (DESCS_V_W, _vw([(None, 1, "a", "x"), (None, 2, "b", "y")], "v", "w"))


def partly_null_key_refused(t: SyncTarget, ctx: CaseContext) -> Verdict:
    origin, path = _ids()
    out = t.put(ctx, _cmd(path, origin, 1, DESCS_TWO_KEYS), two_key_batch([(None, None, 1, 1, "a"), (None, None, 2, None, "b")]))
    return _expect_error(out, "")


def key_columns_must_match_table(t: SyncTarget, ctx: CaseContext) -> Verdict:
    """A table keyed on (id, k) refuses a put keyed on id alone (its k a plain value)."""
    origin, path = _ids()
    first = t.put(ctx, _cmd(path, origin, 1, DESCS_TWO_KEYS), two_key_batch([(None, None, 1, 1, "a")]))
    descs = (ColumnDescriptor(role=OLD, name="id"), ColumnDescriptor(role=NEW, name="id"),
             ColumnDescriptor(role=VALUE, name="k"), ColumnDescriptor(role=VALUE, name="v"))
    batch = pa.table({"old_id": pa.array([1], pa.int64()), "new_id": pa.array([1], pa.int64()),
                      "k": pa.array([2], pa.int64()), "v": pa.array(["b"], pa.string())})
    out = t.put(ctx, _cmd(path, origin, 2, descs), batch)
    verdict = _expect_error(out, "")
    return Verdict(first.error is None and verdict.passed, verdict.expected, f"first: {_numbers(first)}; then {verdict.actual}")


def value_type_must_match_table(t: SyncTarget, ctx: CaseContext) -> Verdict:
    """A table whose v is a string refuses a put whose v is an int64."""
    origin, path = _ids()
    first = t.put(ctx, _cmd(path, origin, 1), rows_batch([(None, 1, "a")]))
    batch = pa.table({"old_id": pa.array([None], pa.int64()), "new_id": pa.array([2], pa.int64()),
                      "v": pa.array([2], pa.int64())})
    verdict = _expect_error(t.put(ctx, _cmd(path, origin, 2), batch), "")
    return Verdict(first.error is None and verdict.passed, verdict.expected, f"first: {_numbers(first)}; then {verdict.actual}")


def _float_keys(rows: Sequence[tuple[Any, ...]]) -> pa.Table:
    return pa.table({"old_id": pa.array([r[0] for r in rows], pa.float64()),
                     "new_id": pa.array([r[1] for r in rows], pa.float64()), "v": pa.array([r[2] for r in rows])})


def _expect_status(out: PutOutcome, error: type[Exception], text: str) -> Verdict:
    ok = isinstance(out.error, error) and text in out.error_text
    got = f"{type(out.error).__name__}: {out.error_text}" if out.error else _numbers(out)
    return Verdict(ok, f"{error.__name__} containing {text!r}", got)


def _confined(path: str, text: str) -> Callable[[SyncTarget, CaseContext], Verdict]:
    def check(t: SyncTarget, ctx: CaseContext) -> Verdict:
        origin, _ = _ids()
        out = t.put(ctx, _cmd(path, origin, 1), rows_batch([(None, 1, "a")]))
        return _expect_status(out, pa.ArrowInvalid, text)

    return check


def segment_length_bound(t: SyncTarget, ctx: CaseContext) -> Verdict:
    """A segment of exactly 255 bytes is a table name; one of 256 is not."""
    origin, path = _ids()
    longest = path + "a" * (255 - len(path.split("/")[-1]))
    kept = t.put(ctx, _cmd(longest, origin, 1), rows_batch([(None, 1, "a")]))
    refused = _expect_status(t.put(ctx, _cmd(longest + "a", origin, 2), rows_batch([(None, 2, "b")])),
                             pa.ArrowInvalid, "")
    ok = _expect(kept, 1, None).passed or _expect(kept, 1, 1).passed
    return Verdict(ok and refused.passed, f"255 bytes: accepted memory=1; 256 bytes: {refused.expected}",
                   f"255 bytes: {_numbers(kept)}; 256 bytes: {refused.actual}")


def store_location_refused(t: SyncTarget, ctx: CaseContext) -> Verdict:
    origin, path = _ids()
    cmd = SyncCommand(path=path, origin=origin, column_descriptors=DESCS, sequence_number=1,
                      store=StorageLocation(location=f"file:///tmp/sync-conformance-{origin}"))
    return _expect_status(t.put(ctx, cmd, rows_batch([(None, 1, "a")])), flight.FlightUnauthorizedError, "")


def interrupted_put_dropped(t: SyncTarget, ctx: CaseContext) -> Verdict:
    origin, path = _ids()
    payload = _cmd(path, origin, 1).to_descriptor_cmd()
    cut = do_put(t.location, payload, [rows_batch([(None, 1, "a")])], timeout=0.5, security=t.security, done=False)
    after = t.put(ctx, _cmd(path, origin, None, ()))
    replay = t.put(ctx, _cmd(path, origin, 1), rows_batch([(None, 1, "a"), (None, 2, "b")]))
    ok = cut.response is None and _expect(after, None, None).passed and replay.response is not None \
        and replay.response.memory_sequence_number == 1
    return Verdict(ok, "cut-off put leaves memory unset; its replay is taken (memory=1)",
                   f"cut: {_numbers(cut)}; probe: {_numbers(after)}; replay: {_numbers(replay)}")


def interrupted_put_replay_lands(t: SyncTarget, ctx: CaseContext) -> Verdict:
    origin, path = _ids()
    payload = _cmd(path, origin, 1).to_descriptor_cmd()
    do_put(t.location, payload, [rows_batch([(None, 1, "a")])], timeout=0.5, security=t.security, done=False)
    t.put(ctx, _cmd(path, origin, 1), rows_batch([(None, 1, "a"), (None, 2, "b")]))
    got, want = t.table(path), [{"id": 1, "v": "a"}, {"id": 2, "v": "b"}]
    return Verdict(got == want, str(want), str(got))


def sequence_never_backwards(t: SyncTarget, ctx: CaseContext) -> Verdict:
    origin, path = _ids()
    t.put(ctx, _cmd(path, origin, None), rows_batch([(None, 1, "a")]))
    before = t.put(ctx, _cmd(path, origin, 10), rows_batch([(None, 2, "b")]))
    out = t.put(ctx, _cmd(path, origin, 5), rows_batch([(None, 3, "c")]))
    after = t.put(ctx, _cmd(path, origin, None, ()))
    durable = before.response.durable_sequence_number if before.response is not None else None
    if durable is not None and durable >= 5:
        taken = _expect(out, 10, durable).passed  # a replay of a durable transaction
    else:
        taken = isinstance(out.error, pa.ArrowInvalid)
    ok = taken and after.response is not None and after.response.memory_sequence_number == 10
    return Verdict(ok, "refused above durable, acknowledged at or below it; memory stays 10",
                   f"{_numbers(before)}; {_numbers(out)}; then {_numbers(after)}")


def _durable_replay(replayed: int) -> Callable[[SyncTarget, CaseContext], Verdict]:
    """Transaction 10 is durable; one closing at ``replayed`` (at or below 10) is a replay, not applied."""
    def check(t: SyncTarget, ctx: CaseContext) -> Verdict:
        origin, path = _ids()
        t.put(ctx, _cmd(path, origin, 10), rows_batch([(None, 1, "a")]))
        out = t.put(ctx, _cmd(path, origin, replayed), rows_batch([(None, 2, "replayed")]))
        got = t.table(path)
        ok = _expect(out, 10, 10).passed and got == [{"id": 1, "v": "a"}]
        return Verdict(ok, "accepted memory=10 durable=10, table unchanged", f"{_numbers(out)}; table {got}")

    return check


# -- cases driving the flush policy (flush-control) ---------------------------
@contextmanager
def _policy(t: SyncTarget, lag: float = HELD_S, count: int = 1_000_000, size: int = 2**62) -> Iterator[None]:
    """Flush by these thresholds for the case, then flush after every put again (leftovers at once)."""
    t.command(f"POLICY {lag:g} {count} {size}")
    try:
        yield
    finally:
        t.command(FLUSH_AFTER_EVERY_PUT)
        t.command("ADVANCE 0")


DESCS_SWAPPED = (ColumnDescriptor(role=NEW, name="id"), ColumnDescriptor(role=OLD, name="id"),
                 ColumnDescriptor(role=VALUE, name="v"))


def _item_put(t: SyncTarget, ctx: CaseContext, path: str, origin: str, seq: int | None, key: int) -> PutOutcome:
    """An insert of ``key``; odd keys in the swapped column order, so no two consecutive puts share an item."""
    if key % 2:
        batch = pa.table({"new_id": pa.array([key], pa.int64()), "old_id": pa.array([None], pa.int64()),
                          "v": pa.array([str(key)], pa.string())})
        return t.put(ctx, _cmd(path, origin, seq, DESCS_SWAPPED), batch)
    return t.put(ctx, _cmd(path, origin, seq), rows_batch([(None, key, str(key))]))


def _probe(t: SyncTarget, ctx: CaseContext, origin: str) -> str:
    return _numbers(t.put(ctx, _cmd("conformance/probe", origin, None, ())))


def _steps(want: Sequence[str], got: Sequence[str]) -> Verdict:
    """Each step's numbers start with what it wants."""
    ok = len(got) == len(want) and all(g.startswith(w + " ") for w, g in zip(want, got))
    return Verdict(ok, "; ".join(want), "; ".join(got))


def flush_at_lag(t: SyncTarget, ctx: CaseContext) -> Verdict:
    origin, path = _ids()
    with _policy(t, lag=10):
        got = [_numbers(t.put(ctx, _cmd(path, origin, 1), rows_batch([(None, 1, "a")])))]
        t.command("ADVANCE 9")
        got.append(_probe(t, ctx, origin))
        t.command("ADVANCE 1")
        got.append(_probe(t, ctx, origin))
    return _steps(["accepted=True memory=1 durable=None", "accepted=True memory=1 durable=None",
                   "accepted=True memory=1 durable=1"], got)


def flush_at_count(t: SyncTarget, ctx: CaseContext) -> Verdict:
    origin, path = _ids()
    with _policy(t, count=3):
        got = [_numbers(_item_put(t, ctx, path, origin, seq, seq)) for seq in (1, 2, 3)]
    return _steps(["accepted=True memory=1 durable=None", "accepted=True memory=2 durable=None",
                   "accepted=True memory=3 durable=3"], got)


def _pending_bytes(t: SyncTarget) -> int:
    """The target's pending bytes (``PENDING``); RuntimeError for any other answer."""
    answer = t.control("PENDING")
    words = answer.split()
    if words[:1] != ["PENDING"] or len(words) != 2 or not words[1].isdigit():
        raise RuntimeError(f"'PENDING' answered {answer!r}, not PENDING <bytes>")
    return int(words[1])


def flush_at_size(t: SyncTarget, ctx: CaseContext) -> Verdict:
    origin, path = _ids()
    with _policy(t):
        t.put(ctx, _cmd(path, origin, 1), rows_batch([(None, 1, "a")]))
        pending = _pending_bytes(t)
        got = []
        for size in (pending + 1, pending):
            t.command(f"POLICY {HELD_S} 1000000 {size}")
            t.command("ADVANCE 0")
            got.append(_probe(t, ctx, origin))
    verdict = _steps(["accepted=True memory=1 durable=None", "accepted=True memory=1 durable=1"], got)
    return Verdict(verdict.passed, f"{pending} pending bytes; threshold {pending + 1}, then {pending}: {verdict.expected}",
                   verdict.actual)


SQUASHED_AWAY_ROWS = 1000
"""Keys inserted by one put and deleted by the next: enough that what an empty batch costs is far under a
quarter of their bytes in any implementation's measure."""


def flush_at_size_after_squash(t: SyncTarget, ctx: CaseContext) -> Verdict:
    """Keys inserted and deleted again (two transactions, one column order, so Seafowl holds them as one
    item): at a size threshold of a quarter of their pending bytes the table is squashed first, the
    inserts and their deletes vanish, and nothing is flushed (Seafowl's ``flush_ready``); later, flushed by
    the lag, both transactions are durable."""
    origin, path = _ids()
    keys = range(SQUASHED_AWAY_ROWS)
    with _policy(t):
        t.put(ctx, _cmd(path, origin, 1), rows_batch([(None, k, "a") for k in keys]))
        t.put(ctx, _cmd(path, origin, 2), rows_batch([(k, None, None) for k in keys]))
        pending = _pending_bytes(t)
        threshold = max(1, pending // 4)
        t.command(f"POLICY {HELD_S} 1000000 {threshold}")
        t.command("ADVANCE 0")
        got = [_probe(t, ctx, origin)]
    got.append(_probe(t, ctx, origin))
    verdict = _steps(["accepted=True memory=2 durable=None", "accepted=True memory=2 durable=2"], got)
    return Verdict(verdict.passed, f"{pending} pending bytes; threshold {threshold}: {verdict.expected}",
                   verdict.actual)


def seafowl_worked_example(t: SyncTarget, ctx: CaseContext) -> Verdict:
    """Seafowl's doc comment: puts (t1, seq1 part), (t2, seq1), (t3, seq2), (t1, seq3 part), (t2, seq3), tables
    flushed one at a time in the order of their oldest data: durable after each flush none, 1, 3."""
    origin, t1 = _ids()
    t2, t3 = f"{t1}_2", f"{t1}_3"
    with _policy(t, lag=10):
        for table, seq, key in ((t1, None, 1), (t2, 1, 2), (t3, 2, 3)):
            t.put(ctx, _cmd(table, origin, seq), rows_batch([(None, key, "a")]))
            t.command("ADVANCE 1")
        t.put(ctx, _cmd(t1, origin, None), rows_batch([(None, 4, "b")]))
        t.put(ctx, _cmd(t2, origin, 3), rows_batch([(None, 5, "b")]))
        got = []
        for step in (7, 1, 1):  # each table's oldest data reaches the lag in turn: t1, t2, t3
            t.command(f"ADVANCE {step}")
            got.append(_probe(t, ctx, origin))
    return _steps([f"accepted=True memory=3 durable={d}" for d in ("None", "1", "3")], got)


def key_swap_across_puts(t: SyncTarget, ctx: CaseContext) -> Verdict:
    """Two puts flushed together: inserts of 1 and 2, then a swap of their keys through key 3."""
    origin, path = _ids()
    with _policy(t, lag=10):
        t.put(ctx, _cmd(path, origin, 1), rows_batch([(None, 1, "a"), (None, 2, "b")]))
        t.put(ctx, _cmd(path, origin, 2), rows_batch([(1, 3, "x"), (2, 1, "y"), (3, 2, "z")]))
        t.command("ADVANCE 10")
    got, want = t.table(path), [{"id": 1, "v": "y"}, {"id": 2, "v": "z"}]
    return Verdict(got == want, str(want), str(got))


def equal_to_memory_refused(t: SyncTarget, ctx: CaseContext) -> Verdict:
    """Transaction 10 received, not yet durable: another closing at 10 is neither new nor a replay."""
    origin, path = _ids()
    with _policy(t):
        first = t.put(ctx, _cmd(path, origin, 10), rows_batch([(None, 1, "a")]))
        again = t.put(ctx, _cmd(path, origin, 10), rows_batch([(None, 2, "b")]))
        after = _probe(t, ctx, origin)
    refused = _expect_error(again, "")
    ok = _expect(first, 10, None).passed and refused.passed and after.startswith("accepted=True memory=10 ")
    return Verdict(ok, f"memory=10 durable=None; then {refused.expected}; memory stays 10",
                   f"{_numbers(first)}; then {refused.actual}; then {after}")


def failed_flush_not_durable(t: SyncTarget, ctx: CaseContext) -> Verdict:
    """A put is held back; then a directory takes the name of the table's first Delta commit file, so no
    writer can create the table (commit files are put-if-absent) until it is gone."""
    origin, path = _ids()
    blocker = os.path.join(t.store, path, "_delta_log", f"{0:020}.json")
    with _policy(t, lag=10):
        held = _numbers(t.put(ctx, _cmd(path, origin, 1), rows_batch([(None, 1, "a")])))
        os.makedirs(blocker)
        try:
            t.command("ADVANCE 10")
            during = _probe(t, ctx, origin)
        finally:
            os.rmdir(blocker)
        t.command("ADVANCE 600")  # past any retry wait
        after = _probe(t, ctx, origin)
    rows = t.table(path)
    verdict = _steps(["accepted=True memory=1 durable=None"] * 2 + ["accepted=True memory=1 durable=1"],
                     [held, during, after])
    return Verdict(verdict.passed and rows == [{"id": 1, "v": "a"}], f"{verdict.expected}; table [{{'id': 1, 'v': 'a'}}]",
                   f"{verdict.actual}; table {rows}")


def _half_flushed_restart(t: SyncTarget, ctx: CaseContext, path: str, origin: str,
                          t1_rows: Sequence[tuple[Any, ...]]) -> None:
    """Transaction 1 puts ``t1_rows`` (and closes) into table ``path``, then closes in ``path``_2; only ``path``
    is flushed before the server is killed, so it holds transaction 1 although 1 is not durable. Then the
    client replays transaction 1, as it does after a restart, with the flush held back (inside ``_policy``)."""
    for replay in (False, True):
        t.put(ctx, _cmd(path, origin, None), rows_batch([(None, 1, "a")]))
        t.command("ADVANCE 1")
        t.put(ctx, _cmd(f"{path}_2", origin, 1), rows_batch([(None, 9, "a")]))
        for seq, row in enumerate(t1_rows, 2):
            if not replay:
                t.put(ctx, _cmd(path, origin, seq), rows_batch([row]))
        if not replay:
            t.command("ADVANCE 9")  # path's data is 10 s old, path_2's 9 s
            t.restart()
            t.command(f"POLICY 10 1000000 {2**62}")


def replay_squashed_with_applied(t: SyncTarget, ctx: CaseContext) -> Verdict:
    """After the replay of transaction 1 (in the table already), transaction 2 is squashed with it before the
    flush: its row must land."""
    origin, path = _ids()
    with _policy(t, lag=10):
        _half_flushed_restart(t, ctx, path, origin, [])
        t.put(ctx, _cmd(path, origin, 2), rows_batch([(None, 2, "b")]))
        t.command(f"POLICY {HELD_S} 1000000 1")  # over the size threshold: squash the largest table, flush
        t.command("ADVANCE 0")
        after = _probe(t, ctx, origin)
    got, want = t.table(path), [{"id": 1, "v": "a"}, {"id": 2, "v": "b"}]
    ok = got == want and after.startswith("accepted=True memory=2 durable=2 ")
    return Verdict(ok, f"{want}; memory=2 durable=2", f"{got}; {after}")


def replay_of_applied_not_reapplied(t: SyncTarget, ctx: CaseContext) -> Verdict:
    """The table holds transactions 1 and 2, durable is none: after the replay of 1 is flushed (skipped
    there), a replay of 2 carrying other rows is not applied to it either."""
    origin, path = _ids()
    with _policy(t, lag=10):
        _half_flushed_restart(t, ctx, path, origin, [(None, 2, "b")])
        t.command("ADVANCE 10")
        middle = _probe(t, ctx, origin)
        t.put(ctx, _cmd(path, origin, 2), rows_batch([(None, 2, "replayed")]))
        t.command("ADVANCE 10")
        after = _probe(t, ctx, origin)
    got, want = t.table(path), [{"id": 1, "v": "a"}, {"id": 2, "v": "b"}]
    verdict = _steps(["accepted=True memory=1 durable=1", "accepted=True memory=2 durable=2"], [middle, after])
    return Verdict(verdict.passed and got == want, f"{verdict.expected}; table {want}", f"{verdict.actual}; table {got}")


def _c(i: str, level: Level, req: str, check: Callable[[SyncTarget, CaseContext], Verdict], *requires: str) -> Case:
    return Case(i, level, "server", req, check, frozenset(requires))


MUST, SHOULD = Level.MUST, Level.SHOULD

CHAIN_LAYOUTS = (
    ("one-put", "in one put", derived.one_put, ()),
    ("put-per-change", "change i of each in transaction i, each flushed after its put", derived.put_per_change, ()),
    ("flushed-together", "change i of each in transaction i, flushed together", derived.flushed_together,
     ("flush-control",)),
    ("one-transaction", "change i of each in put i of one transaction, flushed together", derived.one_transaction,
     ("flush-control",)),
)
CHAIN_SHAPES = (
    ("left-out", "with the table's second value column left out of every change (kept on its row, none on a row "
     "the chain inserts)"),
    ("reordered", "with the columns in another order (new key, value, old key) and a null value at every other step"),
    ("two-key", "keyed on two columns, the two keys of a chain sharing the first"),
)


def _shaped_chain_cases() -> list[Case]:
    """Every chain crossed with the put shapes of :data:`CHAIN_SHAPES`, in each layout of :data:`CHAIN_LAYOUTS`."""
    return [_c(f"squash/derived-chains-{shape}-{layout}", MUST, f"Every chain of up to 4 changes {what}, {where}, "
               "lands as the model says", derived.chain_case(run, shape), *requires, "store")
            for shape, what in CHAIN_SHAPES for layout, where, run, requires in CHAIN_LAYOUTS]


SUITE = Suite(
    name="sync",
    roles=("server",),
    target_help="reference | exec:CMD (with {store}; prints LISTENING <port>) | grpc://HOST:PORT",
    open_target=open_target,
    cases=(
        _c("probe/empty-numbers", MUST, "A probe for an unknown origin is accepted with no numbers", probe_empty),
        _c("probe/first-after-start", MUST, "The first response after a start has first=true, later ones false", probe_first_after_start, "restart"),
        _c("probe/first-once", MUST, "Responses after the first have first=false", probe_not_first_later),
        _c("transactions/memory-on-last-put", MUST, "memory_sequence_number moves only on a transaction's last put", tx_memory_after_last_put),
        _c("transactions/numbers-per-origin", MUST, "Numbers are kept per origin", tx_memory_per_origin),
        _c("transactions/interleave-rejected", MUST, "A put from another origin inside an open transaction is INVALID_ARGUMENT with Seafowl's text", tx_interleave_rejected),
        _c("transactions/empty-rejected", MUST, "A transaction opened with zero rows and a sequence is INVALID_ARGUMENT with Seafowl's text", tx_empty_rejected),
        _c("transactions/empty-put-closes", MUST, "A zero-row put with a sequence closes an open transaction", tx_empty_put_closes),
        _c("transactions/probe-inside-open", SHOULD, "A probe is answered while another origin's transaction is open", tx_probe_in_open_tx),
        _c("messages/undecodable-command", MUST, "An undecodable DataSyncCommand is INVALID_ARGUMENT", msg_undecodable),
        _c("schema/descriptor-count", MUST, "Descriptor count must match the batch", _schema_case(DESCS[:2], _B, "Column descriptors do not match the schema")),
        _c("schema/struct-children-counted", MUST, "A struct column's children count as columns (arrow-rs "
           "flattened_fields): one descriptor per top-level column is too few", _schema_case(
            DESCS + (ColumnDescriptor(role=VALUE, name="s"),),
            _B.append_column("s", pa.array([{"a": 1, "b": 2}], pa.struct([("a", pa.int64()), ("b", pa.int64())]))),
            "Column descriptors do not match the schema")),
        _c("schema/changed-not-boolean", MUST, "A CHANGED column must be boolean", _schema_case(
            DESCS + (ColumnDescriptor(role=CHANGED, name="v"),), _B.append_column("cv", pa.array([1], pa.int32())),
            "Field for column cv with `Changed` role must be of type boolean, got Int32")),
        _c("schema/changed-without-value", MUST, "A CHANGED column needs a VALUE of the same name", _schema_case(
            DESCS + (ColumnDescriptor(role=CHANGED, name="zz"),), _B.append_column("cz", pa.array([True])),
            "Column with `Changed` role must point to an existing column with `Value` role: zz")),
        _c("schema/changed-points-at-key", MUST, "A CHANGED column must name a VALUE column, not a key column",
           _schema_case(DESCS + (ColumnDescriptor(role=CHANGED, name="id"),), _B.append_column("cid", pa.array([True])),
                        "Column with `Changed` role must point to an existing column with `Value` role: id")),
        _c("schema/missing-pk", MUST, "Old and new PK columns are required", _schema_case(
            (ColumnDescriptor(role=VALUE, name="id"), ColumnDescriptor(role=NEW, name="id"),
             ColumnDescriptor(role=VALUE, name="v")), _B,
            "Change requested but batches do not contain old/new PK columns")),
        _c("schema/pk-mismatch", MUST, "Old and new PK columns must agree in names and types", _schema_case(
            (ColumnDescriptor(role=OLD, name="id"), ColumnDescriptor(role=NEW, name="key"),
             ColumnDescriptor(role=VALUE, name="v")), _B,
            "Change requested but old and new PK columns are not the same")),
        _c("schema/partly-null-key", SHOULD, "A row whose two-column key is null in one column only is "
           "INVALID_ARGUMENT (it names no row)", partly_null_key_refused),
        _c("schema/key-columns-match-table", SHOULD, "A put keyed on a subset of the table's key columns is "
           "INVALID_ARGUMENT", key_columns_must_match_table),
        _c("durable/needs-complete-transaction", MUST, "An open transaction is never reported durable", durable_needs_complete_tx),
        _c("durable/not-above-memory", MUST, "durable <= memory on every response", durable_not_above_memory),
        _c("durable/after-flush", SHOULD, "A flushed complete transaction is reported durable", durable_after_flush, "store"),
        _c("restart/first", MUST, "After a restart the first response has first=true", restart_first_and_durable, "restart"),
        _c("restart/durable-restored", SHOULD, "A restarted server reports the durable numbers its tables record, as durable and as memory numbers", restart_durable_restored, "restart", "store"),
        _c("replay/idempotent-after-restart", MUST, "Replaying an applied transaction does not duplicate rows", replay_idempotent, "restart", "store"),
        _c("replay/duplicate-in-one-flush", MUST, "An insert repeated before a flush leaves one row", replay_in_one_batch, "store"),
        _c("squash/pk-chain", MUST, "A key chain 1->2->3 inside a batch lands as key 3", _table_case(
            [rows_batch([(None, 1, "a"), (1, 2, "b"), (2, 3, "c")])], [{"id": 3, "v": "c"}]), "store"),
        _c("squash/pk-cycle", MUST, "A key cycle 1->2->1 is an update of key 1", _table_case(
            [rows_batch([(None, 1, "a")]), rows_batch([(1, 2, "b"), (2, 1, "c")])], [{"id": 1, "v": "c"}]), "store"),
        _c("squash/pk-chain-on-stored-row", MUST, "A chain 1->2->3 of one put on a stored key 1 replaces it by key 3 "
           "(the chain's old key is its first row's)", _table_case(
            [rows_batch([(None, 1, "a")]), rows_batch([(1, 2, "b"), (2, 3, "c")])], [{"id": 3, "v": "c"}]), "store"),
        _c("squash/changed-false-in-one-put", MUST, "Inside one put a value is taken from the last row where its "
           "CHANGED flag is true, other values from the last row", _table_case(
            [rows_batch([(None, 1, "a", True, "x"), (1, 1, None, False, "y")], changed=True)],
            [{"id": 1, "v": "a", "w": "y"}], DESCS_CHANGED), "store"),
        _c("squash/key-continues-one-chain", SHOULD, "A key moved away is not continued again: a later row naming it "
           "starts a change of its own (Seafowl's squash)", _table_case(
            [rows_batch([(None, 1, "a"), (1, 2, "b"), (1, 3, "c")])], [{"id": 2, "v": "b"}, {"id": 3, "v": "c"}]), "store"),
        _c("squash/insert-then-delete", MUST, "An insert deleted in the same batch vanishes", _table_case(
            [rows_batch([(None, 1, "a"), (None, 2, "b"), (1, None, None)])], [{"id": 2, "v": "b"}]), "store"),
        _c("squash/changed-false-keeps-value", MUST, "CHANGED=false keeps the stored value", _table_case(
            [rows_batch([(None, 1, "a", True, "x")], changed=True), rows_batch([(1, 1, None, False, "y")], changed=True)],
            [{"id": 1, "v": "a", "w": "y"}], DESCS_CHANGED), "store"),
        _c("confinement/parent-segment", MUST, "A table path with '..' segments is INVALID_ARGUMENT", _confined(
            "../escape", "'..' segments are not allowed")),
        _c("confinement/absolute-path", MUST, "An absolute table path is INVALID_ARGUMENT", _confined(
            "/tmp/escape", "absolute paths are not allowed")),
        _c("confinement/empty-path", MUST, "An empty table path is INVALID_ARGUMENT", _confined("", "empty")),
        _c("confinement/control-characters", MUST, "A table path with control characters is INVALID_ARGUMENT",
           _confined("t\x00x", "control characters")),
        _c("confinement/underscore-segment", MUST, "A table path segment starting with '_' (Delta's _delta_log, "
           "_change_data) is INVALID_ARGUMENT", _confined("conformance/_change_data", "may not start with '_'")),
        _c("confinement/segment-length", SHOULD, "A table path segment of 255 bytes is accepted, one of 256 is "
           "INVALID_ARGUMENT", segment_length_bound),
        _c("confinement/store-location-refused", SHOULD,
           "A client StorageLocation outside the server's allow-list is PERMISSION_DENIED", store_location_refused),
        _c("atomicity/interrupted-put", MUST, "A put whose stream is cut off leaves no trace; its replay is taken",
           interrupted_put_dropped),
        _c("atomicity/replay-lands-in-full", MUST, "The replay of a cut-off put lands all of its rows",
           interrupted_put_replay_lands, "store"),
        _c("sequence/never-backwards", SHOULD, "A number at or below memory never moves the numbers back: "
           "INVALID_ARGUMENT above durable, acknowledged without applying at or below it", sequence_never_backwards),
        _c("sequence/durable-replay", SHOULD, "A number at or below durable is acknowledged and not applied again",
           _durable_replay(4), "store"),
        _c("sequence/durable-replay-at-durable", SHOULD, "A number equal to durable (and memory) is a replay: "
           "acknowledged, not applied, not taken as new", _durable_replay(10), "store"),
        _c("apply/insert-of-stored-key-overwrites", MUST, "An insert of a stored key (a replay) overwrites the row, "
           "also with CHANGED columns", _table_case(
            [rows_batch([(None, 1, "a", True, "x")], changed=True), rows_batch([(None, 1, "b", True, "y")], changed=True)],
            [{"id": 1, "v": "b", "w": "y"}], DESCS_CHANGED), "store"),
        _c("flush/at-lag", MUST, "Pending data is flushed once exactly max_replication_lag_s old, not a second "
           "before", flush_at_lag, "flush-control"),
        _c("flush/at-count", MUST, "A table is flushed once it has exactly max_syncs_per_url pending items, not one "
           "before", flush_at_count, "flush-control"),
        _c("flush/at-size", MUST, "Pending data is flushed once it reaches exactly max_in_memory_bytes, not a byte "
           "before", flush_at_size, "flush-control"),
        _c("flush/size-after-squash", MUST, "At the size threshold the largest table is squashed first and "
           "flushed only if still at or above it (Seafowl's flush_ready): inserts deleted again squash to nothing "
           "and wait", flush_at_size_after_squash, "flush-control"),
        _c("durable/seafowl-worked-example", MUST, "A transaction is durable once all its tables are flushed and "
           "every earlier one of its origin is durable (Seafowl's example: none, 1, 3)", seafowl_worked_example,
           "flush-control"),
        _c("durable/failed-flush", MUST, "Nothing is reported durable while its table cannot be written; once it "
           "can, the data lands and is reported durable", failed_flush_not_durable, "flush-control", "store"),
        _c("squash/key-swap-across-puts", MUST, "Puts flushed together apply in order: a swap of keys 1 and 2 "
           "(through key 3) after their inserts", key_swap_across_puts, "flush-control", "store"),
        _c("sequence/equal-to-memory-refused", SHOULD, "A number equal to memory but above durable is "
           "INVALID_ARGUMENT and moves nothing", equal_to_memory_refused, "flush-control"),
        _c("replay/squashed-with-applied", MUST, "After a restart, a new transaction squashed with the replay of "
           "one a table already holds still lands", replay_squashed_with_applied, "flush-control", "store", "restart"),
        _c("replay/applied-not-reapplied", SHOULD, "After a restart, a replayed transaction a table already holds "
           "is not applied to it again, also after an earlier replay was skipped there",
           replay_of_applied_not_reapplied, "flush-control", "store", "restart"),
        _c("apply/delete", MUST, "A delete removes the stored row", _table_case(
            [rows_batch([(None, 1, "a"), (None, 2, "b")]), rows_batch([(1, None, None)])], [{"id": 2, "v": "b"}]), "store"),
        _c("squash/derived-chains-one-put", MUST, "Every chain of up to 4 changes on 1-2 keys (from an empty table, "
           "key 1 stored, both stored) in one put lands as the model says", derived.chain_case(derived.one_put), "store"),
        _c("squash/derived-chains-put-per-change", MUST, "The same chains, change i of each in transaction i, "
           "each flushed after its put, land as the model says", derived.chain_case(derived.put_per_change), "store"),
        _c("squash/derived-chains-flushed-together", MUST, "The same chains, change i of each in transaction i, "
           "held back and flushed together, land as the model says", derived.chain_case(derived.flushed_together),
           "flush-control", "store"),
        _c("flush/derived-lag-boundaries", MUST, "Pending data is flushed at exactly the lag after the table's "
           "oldest pending data arrived, not one tick before, also with later puts and after a flush",
           derived.lag_boundaries, "flush-control"),
        _c("flush/derived-lag-after-failed-flush", MUST, "Once a failed flush was retried, the table's new data "
           "again waits exactly the lag", derived.lag_after_failed_flush, "flush-control", "store"),
        _c("flush/derived-retry-at-its-instants", SHOULD, "A table whose flush failed is retried at exactly the "
           "instant its wait ends (1 s, doubling up to 5 s), after one to four failures in a row",
           derived.retry_at_its_instants, "flush-control", "store"),
        _c("flush/derived-lag-at-inexact-instants", MUST, "Pending data is flushed at exactly the lag after it "
           "arrived, not a ms before, also where the put's instant plus the lag (0.2 s, 0.7 s) summed as float seconds "
           "lands past it (the instant derived by search from where ADVANCE left the clock)",
           derived.lag_at_inexact_instants, "flush-control"),
        _c("flush/derived-retry-at-inexact-instants", SHOULD, "A table whose flush failed is retried at exactly the "
           "instant its wait ends, not a ms before, also where the failure's instant plus the wait summed as float "
           "seconds lands past it (the instant derived by search)", derived.retry_at_inexact_instants,
           "flush-control", "store"),
        _c("transactions/derived-timeout-at-its-instant", SHOULD, "A silent open transaction is discarded at "
           "exactly transaction_timeout_s (300 s), not a tick before; its origin's next put is refused once, the "
           "replay after it is taken", derived.transaction_timeout_at_its_instant, "flush-control"),
        _c("transactions/derived-closing-put-on-each-table", MUST, "A zero-row closing put touches no table: "
           "closed on its own table, on another with nothing pending or on one that does not exist, the "
           "transaction is durable once its rows are flushed", derived.closing_put_on_each_table, "store"),
        _c("schema/derived-descriptor-count-off-by-one", MUST, "One descriptor too few and one too many are "
           "each refused with Seafowl's text", derived.descriptor_count_off_by_one),
        _c("schema/derived-partly-null-key-each-side", SHOULD, "A two-column key null in one column only is "
           "INVALID_ARGUMENT on the old and the new side, in either column", derived.partly_null_key_each_side),
        _c("apply/derived-duplicate-keys-last-wins", MUST, "A key inserted twice in one put holds the second "
           "insert's values (empty table, stored row, with CHANGED columns)", derived.duplicate_keys_last_wins,
           "store"),
        _c("flush/derived-size-picks-largest", MUST, "At the size threshold the largest table is flushed, "
           "whether it is the older or the newer", derived.size_rule_picks_largest, "flush-control"),
        _c("restart/derived-durable-from-newest-table", SHOULD, "After a restart an origin's durable number is "
           "the largest its tables record, also when the older record is read last",
           derived.restart_durable_from_newest_table, "restart", "store"),
        _c("schema/derived-seafowl-rules-at-their-bounds", MUST, "Each of Seafowl's rules of a put (roles, key "
           "columns, CHANGED, the command's type, uint64 sequence numbers) at its smallest violating input is "
           "refused and at its nearest valid one accepted", derived_rules.rows_case(derived_rules.SEAFOWL_ROWS)),
        _c("schema/derived-storable-rules-at-their-bounds", SHOULD, "Each rule of what a table can store (column "
           "names, types, unsigned values, NaN keys) at its smallest violating input is INVALID_ARGUMENT and at its "
           "nearest valid one accepted", derived_rules.rows_case(derived_rules.STORABLE_ROWS)),
        _c("confinement/derived-names-at-their-bounds", MUST, "Each rule of a table name (characters, segments, "
           "1,024 bytes) and of the format at its smallest violating input is refused and at its nearest valid one "
           "accepted", derived_rules.rows_case(derived_rules.NAME_ROWS)),
        _c("schema/derived-evolution-accepted", SHOULD, "Every valid evolution of a table is taken: a put "
           "bringing a value column the table lacks (earlier rows null), also placed first among the values, then "
           "a put leaving it out (its values kept); the same column of another type is refused",
           derived_rules.schema_evolution_accepted, "store"),
        _c("confinement/derived-store-location-boundary", SHOULD, "A store location is allowed at and below the "
           "allowed one at a '/' boundary, refused beside it (a longer name with the same prefix) or through '..'",
           derived_rules.rows_case(derived_rules.LOCATION_ROWS), "store-locations"),
        _c("squash/derived-chains-one-transaction", MUST, "The same chains, change i of each in put i of one "
           "transaction, held back and flushed together, land as the model says",
           derived.chain_case(derived.one_transaction), "flush-control", "store"),
        _c("squash/derived-chains-changed-one-put", MUST, "Every chain, twice, with v's CHANGED flag false on "
           "alternate updates and key changes (the value of the row changed is kept) in one put, lands as the "
           "model says", derived.chain_case(derived.one_put, "changed"), "store"),
        _c("squash/derived-chains-changed-put-per-change", MUST, "The same chains with CHANGED flags, change i "
           "of each in transaction i, each flushed after its put, land as the model says",
           derived.chain_case(derived.put_per_change, "changed"), "store"),
        _c("squash/derived-chains-changed-flushed-together", MUST, "The same chains with CHANGED flags, change "
           "i of each in transaction i, held back and flushed together, land as the model says",
           derived.chain_case(derived.flushed_together, "changed"), "flush-control", "store"),
        _c("squash/derived-chains-changed-one-transaction", MUST, "The same chains with CHANGED flags, change i "
           "of each in put i of one transaction, flushed together, land as the model says",
           derived.chain_case(derived.one_transaction, "changed"), "flush-control", "store"),
        *_shaped_chain_cases(),
        _c("admission/derived-watermark-at-its-bound", SHOULD, "A put bringing pending data to exactly the "
           "high-watermark is taken; one byte past it is accepted=false and keeps nothing; taken once it fits",
           derived_writer.watermark_at_its_bound, "flush-control", "watermark"),
        _c("transactions/derived-timeout-from-last-put", SHOULD, "The transaction timeout counts from the open "
           "transaction's last put, not its first; what a discarded transaction put never lands",
           derived_writer.timeout_from_last_put, "flush-control", "store"),
        _c("transactions/derived-replay-closes-open", SHOULD, "A replay (at durable) closing an open transaction "
           "closes it and drops what it put", derived_writer.replay_closes_open_transaction, "flush-control", "store"),
        _c("flush/derived-backoff-restarts-after-success", SHOULD, "After a flush succeeded, the table's next "
           "failure waits the first backoff (1 s) again", derived_writer.backoff_restarts_after_success,
           "flush-control", "store"),
        _c("flush/derived-failing-table-waits", MUST, "A table whose flush failed is not flushed by the policy "
           "before its retry wait ends, and is at its end", derived_writer.failing_table_waits, "flush-control",
           "store"),
        _c("flush/derived-two-failing-tables", SHOULD, "Of two failing tables, each is retried at its own "
           "instant: the earlier retry is not put off to the later", derived_writer.two_failing_tables,
           "flush-control", "store"),
        _c("flush/derived-newer-failing-table-retried", SHOULD, "Of two failing tables, the newer is retried at "
           "its own instant while the older still fails", derived_writer.newer_failing_table_retried,
           "flush-control", "store"),
        _c("flush/derived-discarded-failing-table", SHOULD, "A failed table whose data was discarded keeps no "
           "retry: new data to it waits its full lag", derived_writer.discarded_failing_table, "flush-control",
           "store"),
        _c("apply/derived-row-group-bounds", MUST, "A flush of one row more than a row group holds lands every "
           "row and reads kept values back on each side of the row-group boundary", derived_writer.row_group_bounds,
           "store"),
        _c("apply/derived-row-groups-at-their-limits", SHOULD, "A flush's rows, in key order, are cut into row groups "
           "of at most max_rows rows and max_bytes bytes, never empty: each limit at its bound, a row under and "
           "over, a row of max_bytes and one byte more, the limit reached first of the two",
           derived_store.row_groups_at_their_limits, "row-groups", "store"),
        _c("apply/derived-table-schema-fit", MUST, "A put against a table written before: columns added (after the "
           "table's own, null in its rows), left out (kept), in another order, of another type, renamed in case, "
           "not nullable, keys added, renamed or in another order: refused with the spec's problems, or the table's "
           "columns and rows as the spec's fit leaves them", derived_store.table_schema_fit, "store"),
        _c("apply/derived-pending-table-schema-fit", MUST, "The same puts against a table whose first put is still "
           "pending: the same refusals, columns and rows once both are flushed", derived_store.pending_table_schema_fit,
           "flush-control", "store"),
        _c("apply/truncate-at-its-place", SHOULD, "A truncating put (streamwire's extension) empties its table at "
           "its place in the stream, with or without rows of its own, also flushed with puts around it",
           derived_writer.truncate_at_its_place, "truncate", "flush-control", "store"),
        _c("flush/derived-count-on-each-table", MUST, "The count rule flushes the table that reaches "
           "max_syncs_per_url, also when it is not the oldest, and no other", derived_axes.count_on_each_table,
           "flush-control"),
        _c("flush/derived-lag-after-queue-emptied", MUST, "After a table's only pending data went away without a "
           "flush (a replay closing its transaction, the transaction discarded at its timeout), new data to it "
           "waits its own full lag", derived_axes.lag_after_queue_emptied, "flush-control"),
        _c("flush/derived-policy-at-its-smallest-values", MUST, "max_syncs_per_url 1, max_replication_lag_s 0 "
           "and max_in_memory_bytes 1 flush a put at once; a lag of one tick waits that tick",
           derived_axes.policy_at_smallest_values, "flush-control"),
        _c("admission/derived-put-bound-over-messages", SHOULD, "A put whose messages, each under the high-watermark, "
           "together pass it is refused for good (RESOURCE_EXHAUSTED), not answered accepted=false; together under "
           "it, it is taken", derived_axes.put_bound_over_messages, "put-bound"),
        _c("admission/derived-put-slots-at-their-bound", SHOULD, "With every put slot but one held a put is "
           "served; with every slot held it is refused busy; once one is freed a put is served again",
           derived_axes.put_slots_at_their_bound, "put-slots"),
        _c("admission/derived-connections-at-their-bound", SHOULD, "With max_connections - 1 silent connections "
           "held a put is served and evicts none; at the cap a put is served and evicts the oldest silent one",
           derived_axes.connections_at_their_bound, "connections"),
        _c("admission/derived-connection-ranks-at-their-bound", SHOULD, "At max_connections a newcomer evicts the "
           "connection the spec's table names: an unfinished handshake or an idle one (oldest first, a use entered "
           "anew the youngest, the same use reported again keeping its place) before one waiting for a first "
           "message, never one carrying a request; one under the bound, none", derived_connections.connection_ranks_at_their_bound, "connections", "put-slots"),
        _c("admission/derived-stream-deadlines-at-their-bounds", SHOULD, "A stream's first message is taken a "
           "tick before first_message_timeout_s from its opening and the stream ends DEADLINE_EXCEEDED at it; a put "
           "completes a tick before put_timeout_s from its first message and ends DEADLINE_EXCEEDED at it",
           derived_streams.stream_deadlines_at_their_bounds, "stream-deadlines"),
        _c("admission/derived-stream-deadlines-at-inexact-instants", SHOULD, "The same a ms either side of each "
           "deadline, the streams opened and the first messages sent where the instant plus the timeout summed as "
           "float seconds lands past the deadline (the instants derived by search from where ADVANCE left the clock)",
           derived_streams.stream_deadlines_at_inexact_instants, "stream-deadlines"),
        _c("admission/derived-stop-grace-at-its-bound", SHOULD, "A put completed a tick before a stop's grace ends "
           "is answered; one still running at its end ends UNAVAILABLE", derived_streams.stop_grace_at_its_bound,
           "stream-deadlines", "restart"),
        _c("admission/derived-draining-answers-probes-only", SHOULD, "A draining server answers probes with the "
           "numbers it holds and refuses every other put (with rows, closing without rows, a replay)",
           derived_axes.draining_answers_probes_only, "drain", "restart", "store"),
        _c("apply/derived-equivalent-inputs-same-rows", MUST, "The same change with key or value columns in "
           "another order, split over record batches, as puts of one transaction or as transactions, or to another "
           "name of the grammar, is accepted and leaves the same rows", derived_axes.equivalent_inputs_same_rows,
           "store"),
        _c("schema/derived-rule-at-each-position", SHOULD, "A row breaking a rule (a partly null key, a NaN key, "
           "an unsigned value past its signed type) is refused wherever it is: first, middle or last row, the "
           "second record batch, the second put of a transaction; nothing of the put lands",
           derived_axes.rule_at_each_position, "store"),
        _c("flush/derived-squash-leaves-open-transaction", SHOULD, "At the size threshold only closed transactions "
           "are squashed: an open one's put stays apart, and once it is discarded the closed ones still land",
           derived_axes.squash_leaves_open_transaction, "flush-control", "store"),
        _c("responses/derived-first-once-per-server", MUST, "first=true is one response in a server's life: new "
           "origins' probes and puts after it have first=false", derived_axes.first_once_per_server),
        _c("responses/derived-first-on-any-kind-of-answer", MUST, "first=true is on the first answer of a server's "
           "life whatever its kind: a busy answer (accepted=false), a new origin's put; the next answer has "
           "first=false", derived_axes.first_on_any_kind_of_answer, "restart", "flush-control", "watermark"),
        _c("responses/derived-numbers-at-their-bounds", MUST, "Sequence numbers 0 and 2^64-1 are answered as memory "
           "and durable numbers like any other, and a replay at each is acknowledged, not applied",
           derived_axes.numbers_at_their_bounds, "store"),
        _c("responses/derived-numbers-against-the-model", SHOULD, "Seeded walks of puts (new, open, at memory, at "
           "durable, another origin inside a transaction, closing without rows), probes, failing tables and the "
           "clock moved to each deadline: every answer, the numbers after every move and the tables' rows equal "
           "the spec endpoint's", derived_model.numbers_against_the_model, "flush-control", "store"),
        *(_c(f"walks/{name}", MUST, f"The {len(ids)} {name.rsplit('-', 1)[0] if name[-1].isdigit() else name} walks "
             "of the corpus kept by operator mutants (vectors/walks.json) answer every step as recorded",
             walks.replay_case(ids), "flush-control", "store") for name, ids in walks.groups()),
        *(_c(f"inputs/{name}", MUST, f"The {len(ids)} single requests of the input corpus kept by operator mutants of "
             "the decode and validate rules (vectors/inputs.json) are answered as recorded",
             inputs.replay_case(ids), "store") for name, ids in inputs.groups()),
        _c("machines/every-walk", MUST, "The walks of calls on one sans-IO machine each (a client and its requests' "
           "tries, the memory budget, put slots and puts in flight at once, commit stamps, responses, the settings, "
           "the refusal texts, a put's split into messages) "
           "kept by operator mutants (vectors/machine_walks.json) are answered as recorded",
           machine_walks.replay_case, "machines"),
        _c("decode/recorded", MUST, "Bytes no Flight client sends (overlong and cut varints, unknown field numbers and "
           "wire types, absent, empty and repeated fields, cut IPC headers, every Arrow type in a put's schema) are "
           "decoded, or refused with the typed error, as recorded (vectors/decode.json)", decode.replay, "decode"),
        _c("atomicity/derived-noops-write-nothing", MUST, "Probes, replays at or below durable and refused puts "
           "leave the table's files as they were", derived.noops_write_nothing, "store"),
    ),
)

"""The sync walk corpus (issue 43): seeded walks over the live target's inputs, kept by the operator mutants they kill.

A walk is a short list of steps an outside server can be driven with through the suite's ``exec:`` interface
(:mod:`conformance.sync.suite`): a put over Flight (``put``: table, origin, sequence number, rows, column
layout, store location, format, truncate; the record batches its rows are cut into, or the command's bytes as they
are, when it names them), a flush-control line (``control``: ``POLICY``, ``ADVANCE``,
``PENDING``), a table read from the store (``read``), a table made impossible to create and possible again
(``block``/``unblock``: a directory named as its first commit file, the ``store`` capability) and a restart
(``restart``). Every step has one plain-JSON answer: the put's numbers or its error (gRPC kind and message),
the control line's answer, the table's rows. :func:`run_walk` is the one code path: the selection runs it on
an in-process copy of the reference target (:func:`conformance.sync.reference_target.serve`), the suite's
``walks/replay`` case runs it on the target under test. :func:`candidates` generates the walks from a seed,
biased as a tester would (every threshold at its exact value and a tick either side, sequence numbers at
memory, durable, one either side, 0 and the max, two faults at once, refusals followed by fresh traffic), then walks
derived from the spec's tables after them (every squash chain shape at the size threshold, a value of every nested
type, two tables failing at once, runs of items to squash starting at a truncate, a table format either side of
Delta's, chains of any two changes, two truncates in one flush, transactions replayed across a restart, an open
transaction dropped, a failing table under each policy, unsigned values at their bound, puts of two schemas in turn:
:data:`DERIVED`);
``python -m conformance.sync.walks select`` keeps those that tell :data:`MODULES`' operator mutants apart
(:func:`conformance.operator_mutants.select`), ``select-unjudged`` those that tell apart the mutants of every family the
recorded selection does not judge yet (:func:`conformance.operator_mutants.select_unjudged`), ``select-derived`` those
of its gaps the derived walks tell apart (:func:`select_derived_part`), and ``record`` writes
``vectors/walks.json`` and ``docs/walks/sync.md``.
"""

from __future__ import annotations

import argparse
import ctypes
import importlib
import json
import logging
import os
import random
import shutil
import sys
import tempfile
import threading
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final, Protocol

import pyarrow as pa
from pyarrow import flight

from conformance import operator_mutants, vectorgen
from conformance.corpus_record import Rule, told_apart_elsewhere, told_apart_in_file
from conformance.operator_mutants import (ROOT, OperatorMutant, Selection, at_import, committed_source, every_mutant,
                                          judged_by, module_path, mutants_of, select, select_unjudged)
from conformance.framework import CaseContext, Verdict
from reference.sync.credentials import ClientSecurity
from reference.sync.store import read_delta
from spec.sync.flight import FlightData
from spec.sync.messages import ColumnDescriptor, ColumnRole, StorageLocation, SyncCommand, SyncResponse, decode_response
from spec.sync.schema import SyncSchema
from spec.sync.squash import SquashedChange

if TYPE_CHECKING:
    from conformance.sync.suite import SyncTarget

SEED: Final = 43
CANDIDATES: Final = 1500
SETTINGS_CANDIDATES: Final = 600
"""Walks with settings off their defaults, after the others (:data:`SETTING_EDGES`)."""
MODULES: Final = ("spec.sync.server", "spec.sync.writer", "spec.sync.squash", "spec.sync.admission",
                  "spec.sync.responses", "spec.sync.client", "spec.sync.flush_failures", "spec.sync.errors",
                  "spec.sync.commit_time")
"""The stateful rules this corpus is selected for (``spec.sync.client`` is the client's only: no walk reaches it, it is
counted to say so). The decode and validation rules (``messages``, ``schema``, ``flight``, ``confinement``) have an
input corpus of their own (``conformance.sync.inputs``)."""
PREFIXES: Final = ("spec.", "reference.sync", "conformance.sync")
HELD: Final = 3600
"""A lag no walk reaches."""
FLUSH_NOW: Final = "POLICY 0 1000000 4611686018427387904"
"""Flush after every put (what the target starts with): every pending table is flushed at once."""
TICK: Final = 1 / 1024
CLEAR_S: Final = 7200
"""How far a walk moves the clock when it ends: past every retry wait and transaction timeout it started."""
U64_MAX: Final = 2**64 - 1
PUT_TIMEOUT_S: Final = 10.0
CLOSE_WAIT_S: Final = 10.0
"""How long an in-process target's shutdown may take before it is left behind."""
SCRATCH: Final = "/dev/shm"
"""Where an in-process target keeps its store when the machine has it: memory, as a walk's tables are small."""

Step = dict[str, Any]
Walk = dict[str, Any]
"""``{"steps": [...]}``; the answers are a list with one entry per step."""


class WalkTarget(Protocol):
    """What a walk drives: the live target (:class:`conformance.sync.suite.SyncTarget`) or the in-process one."""

    location: str
    security: ClientSecurity

    @property
    def store(self) -> str: ...

    def control(self, line: str, timeout: float = ...) -> str: ...

    def restart(self) -> None: ...


# -- column layouts ---------------------------------------------------------------------------------------------

OLD, NEW, CHANGED, VALUE = 0, 1, 2, 3
"""``spec.sync.messages.ColumnRole`` by number: the walk vectors name roles as the wire does."""
DERIVED_LAYOUTS: Final[dict[str, tuple[tuple[tuple[int, str], ...], tuple[tuple[str, str], ...]]]] = {
    # the derived walks' only (the seeded walks draw from LAYOUTS' others, so their candidates stay what they were)
    "keys-only": (((OLD, "id"), (NEW, "id")), (("old_id", "int64"), ("new_id", "int64"))),
    **{f"uint{width}-column": (((OLD, "id"), (NEW, "id"), (VALUE, "u")),
                               (("old_id", "int64"), ("new_id", "int64"), ("u", f"uint{width}")))
       for width in (8, 16, 32, 64)},
}
"""A table of keys alone (every table column written whole by a new key) and a value of each unsigned width (what
``spec.sync.admission.admit_rows`` bounds by the signed type of that width): :func:`derived_vocabulary_walks`."""
LAYOUTS: Final[dict[str, tuple[tuple[tuple[int, str], ...], tuple[tuple[str, str], ...]]]] = {
    # name: (descriptors as (role, column), arrow columns as (name, type)); rows carry the columns in order
    "plain": (((OLD, "id"), (NEW, "id"), (VALUE, "v")), (("old_id", "int64"), ("new_id", "int64"), ("v", "string"))),
    "swapped": (((NEW, "id"), (OLD, "id"), (VALUE, "v")), (("new_id", "int64"), ("old_id", "int64"), ("v", "string"))),
    "changed": (((OLD, "id"), (NEW, "id"), (VALUE, "v"), (CHANGED, "v"), (VALUE, "w")),
                (("old_id", "int64"), ("new_id", "int64"), ("v", "string"), ("changed_v", "bool"), ("w", "string"))),
    "two-key": (((OLD, "id"), (OLD, "k"), (NEW, "id"), (NEW, "k"), (VALUE, "v")),
                (("old_id", "int64"), ("old_k", "int64"), ("new_id", "int64"), ("new_k", "int64"), ("v", "string"))),
    "vw": (((OLD, "id"), (NEW, "id"), (VALUE, "v"), (VALUE, "w")),
           (("old_id", "int64"), ("new_id", "int64"), ("v", "string"), ("w", "string"))),
    # refused layouts, each at its smallest violation
    "one-descriptor-short": (((OLD, "id"), (NEW, "id")), (("old_id", "int64"), ("new_id", "int64"), ("v", "string"))),
    "one-descriptor-over": (((OLD, "id"), (NEW, "id"), (VALUE, "v"), (VALUE, "x")),
                            (("old_id", "int64"), ("new_id", "int64"), ("v", "string"))),
    "no-old-key": (((NEW, "id"), (VALUE, "v"), (VALUE, "u")), (("new_id", "int64"), ("v", "string"), ("u", "string"))),
    "no-new-key": (((OLD, "id"), (VALUE, "v"), (VALUE, "u")), (("old_id", "int64"), ("v", "string"), ("u", "string"))),
    "key-names-differ": (((OLD, "id"), (NEW, "jd"), (VALUE, "v")),
                         (("old_id", "int64"), ("new_jd", "int64"), ("v", "string"))),
    "key-types-differ": (((OLD, "id"), (NEW, "id"), (VALUE, "v")),
                         (("old_id", "int64"), ("new_id", "int32"), ("v", "string"))),
    "changed-not-bool": (((OLD, "id"), (NEW, "id"), (VALUE, "v"), (CHANGED, "v")),
                         (("old_id", "int64"), ("new_id", "int64"), ("v", "string"), ("changed_v", "int64"))),
    "changed-names-key": (((OLD, "id"), (NEW, "id"), (VALUE, "v"), (CHANGED, "id")),
                          (("old_id", "int64"), ("new_id", "int64"), ("v", "string"), ("changed_id", "bool"))),
    "changed-names-nothing": (((OLD, "id"), (NEW, "id"), (VALUE, "v"), (CHANGED, "z")),
                              (("old_id", "int64"), ("new_id", "int64"), ("v", "string"), ("changed_z", "bool"))),
    "value-twice": (((OLD, "id"), (NEW, "id"), (VALUE, "v"), (VALUE, "v")),
                    (("old_id", "int64"), ("new_id", "int64"), ("v", "string"), ("v2", "string"))),
    "struct-value": (((OLD, "id"), (NEW, "id"), (VALUE, "s")),
                     (("old_id", "int64"), ("new_id", "int64"), ("s", "struct"))),
    # a value of every other nested type (``spec.sync.admission._NESTED``), the derived walks' (nested_type_walks)
    **{f"{kind}-value": (((OLD, "id"), (NEW, "id"), (VALUE, "s")),
                         (("old_id", "int64"), ("new_id", "int64"), ("s", kind)))
       for kind in ("list", "large_list", "fixed_size_list", "map", "union")},
    **DERIVED_LAYOUTS,
}
VALID_LAYOUTS: Final = ("plain", "swapped", "changed", "two-key", "vw")
NESTED_LAYOUTS: Final = tuple(name for name, (_, columns) in LAYOUTS.items() if columns[-1][1] != "string"
                              and name.endswith("-value"))
REFUSED_LAYOUTS: Final = tuple(name for name in LAYOUTS if name not in VALID_LAYOUTS and name not in DERIVED_LAYOUTS
                               and (name == "struct-value" or name not in NESTED_LAYOUTS))
"""The refused layouts the seeded walks draw from (the nested ones but the struct value are the derived walks')."""


def _array(values: list[Any], kind: str) -> pa.Array:
    if kind == "struct":
        return pa.array([None if v is None else {"a": v, "b": v} for v in values],
                        pa.struct([("a", pa.string()), ("b", pa.string())]))
    listed = {"list": pa.list_(pa.string()), "large_list": pa.large_list(pa.string()),
              "fixed_size_list": pa.list_(pa.string(), 1)}
    if kind in listed:
        return pa.array([None if v is None else [v] for v in values], listed[kind])
    if kind == "map":
        return pa.array([None if v is None else [(v, v)] for v in values], pa.map_(pa.string(), pa.string()))
    if kind == "union":
        return pa.UnionArray.from_sparse(pa.array([0] * len(values), pa.int8()), [pa.array(values, pa.string())])
    return pa.array(values, {"int64": pa.int64(), "int32": pa.int32(), "string": pa.string(), "bool": pa.bool_(),
                             **{f"uint{w}": getattr(pa, f"uint{w}")() for w in (8, 16, 32, 64)}}[kind])


def put_batch(put: Step) -> pa.Table:
    """The put's rows as the Arrow table it sends (column values in the layout's order), one record batch of each
    of its ``batches`` row counts when it names them (else one)."""
    columns = LAYOUTS[put["layout"]][1]
    rows: list[list[Any]] = put["rows"]
    table = pa.table({name: _array([r[i] if i < len(r) else None for r in rows], kind)
                      for i, (name, kind) in enumerate(columns)})
    if "batches" not in put:
        return table
    starts = [sum(put["batches"][:i]) for i in range(len(put["batches"]))]
    return pa.concat_tables([table.slice(start, n) for start, n in zip(starts, put["batches"])])


def put_command(put: Step) -> bytes:
    """The put's descriptor command: its fields encoded, or the bytes it names (``command``, hex) as they are."""
    if "command" in put:
        return bytes.fromhex(put["command"])
    store = put.get("store")
    return SyncCommand(
        path=put["table"], origin=put["origin"],
        column_descriptors=tuple(ColumnDescriptor(role=ColumnRole(r), name=n) for r, n in LAYOUTS[put["layout"]][0]),
        sequence_number=put["seq"], format=put.get("format", 0), truncate=put.get("truncate", False),
        store=None if store is None else StorageLocation(location=store, options={}, name="walks"),
    ).to_descriptor_cmd()


# -- running a walk ---------------------------------------------------------------------------------------------

def _flight_message(error: Exception) -> str:
    """The server's own words of a Flight error, without the client library's context."""
    text = str(error)
    text = text.split("with message: ", 1)[-1]
    return text.split(". gRPC client debug context", 1)[0].split(". Detail:", 1)[0]


Answer = SyncResponse | str
"""What a put got: the server's response, or its error as one line."""
Sender = Callable[[WalkTarget, bytes, pa.Table], Answer]
"""How a walk's put reaches the target: over Flight (:func:`flight_put`) or straight to the driver (:func:`direct_put`)."""


def flight_put(target: WalkTarget, command: bytes, batch: pa.Table) -> Answer:
    """The put over Flight, as any client sends it."""
    from conformance.sync.suite import do_put  # the suite imports this module for its cases

    outcome = do_put(target.location, command, [batch], timeout=getattr(target, "put_timeout_s", PUT_TIMEOUT_S),
                     security=target.security)
    if outcome.response is None:
        error = outcome.error
        return f"{type(error).__name__}: {_flight_message(error) if error is not None else ''}"
    return outcome.response


def _put(target: WalkTarget, put: Step, store_prefix: str, restarted: bool, send: Sender) -> Any:
    """The put's answer; ``first`` only once the walk restarted the target (before, earlier traffic decides it)."""
    if put.get("store") is not None:
        put = dict(put, store=os.path.join(target.store, put["store"]) if put["store"].startswith(store_prefix)
                   else put["store"])
    r = send(target, put_command(put), put_batch(put))
    if isinstance(r, str):
        return {"error": r.replace(target.store, "{store}")}  # a refused location is named; the store is the run's
    numbers = {"accepted": r.accepted, "memory": r.memory_sequence_number, "durable": r.durable_sequence_number}
    return numbers | {"first": r.first} if restarted else numbers


def _read(target: WalkTarget, table: str) -> Any:
    path = os.path.join(target.store, table)
    log = os.path.join(path, "_delta_log")
    if not os.path.isdir(log) or not any(name.endswith(".json") and os.path.isfile(os.path.join(log, name))
                                         for name in os.listdir(log)):
        return None  # no table (a blocked one has a directory where its first commit would be)
    rows = read_delta(path).to_pylist()
    return sorted(([[k, row[k]] for k in sorted(row)] for row in rows), key=repr)


def _blocker(target: WalkTarget, table: str) -> str:
    return os.path.join(target.store, table, "_delta_log", f"{0:020}.json")


def run_walk(target: WalkTarget, walk: Walk, send: Sender = flight_put) -> list[Any]:
    """Every step's answer on ``target``; a step the target fails to answer ends the walk with its error."""
    answers: list[Any] = []
    restarted = False
    for step in walk["steps"]:
        if "put" in step:
            answers.append(_put(target, step["put"], "allowed", restarted, send))
        elif "control" in step:
            answers.append(target.control(step["control"]))
        elif "read" in step:
            answers.append(_read(target, step["read"]))
        elif "block" in step:
            os.makedirs(_blocker(target, step["block"]), exist_ok=True)
            answers.append("OK")
        elif "unblock" in step:
            shutil.rmtree(_blocker(target, step["unblock"]), ignore_errors=True)
            answers.append("OK")
        elif "restart" in step:
            target.restart()
            restarted = True
            answers.append("OK")
        else:
            raise ValueError(f"unknown step {step!r}")
    return answers


def requires(walk: Walk) -> frozenset[str]:
    """The capabilities a walk needs beyond ``flush-control`` and ``store``."""
    needed: set[str] = set()
    for step in walk["steps"]:
        put = step.get("put", {})
        if put.get("truncate"):
            needed.add("truncate")
        if put.get("store") is not None:
            needed.add("store-locations")
        if "restart" in step:
            needed.add("restart")
        if len(step.get("control", "").split()) == 5:
            needed.add("watermark")
        if step.get("control") == "DRAIN":
            needed.add("drain")
        if step.get("control", "").startswith("SETTINGS"):
            needed.add("settings")
    return frozenset(needed)


class InProcessTarget:
    """The reference target in this process, on a store of its own (what the selection runs walks on)."""

    security = ClientSecurity()
    put_timeout_s = 3.0
    """Under the selection's alarm per walk, so a mutant that never answers a put ends the walk."""

    def __init__(self, store: str) -> None:
        from conformance.sync.reference_target import serve

        self._store = store
        self._serve = serve
        self.server, self.endpoint, self.clock = serve(store)
        self.location = f"grpc://127.0.0.1:{self.server.port}"

    @property
    def store(self) -> str:
        return self._store

    def control(self, line: str, timeout: float = 0.0) -> str:
        from conformance.sync.reference_target import answer

        return answer(self.endpoint, self.clock, line, self.server)

    def restart(self) -> None:
        self.server.shutdown(grace_s=0)
        self.server, self.endpoint, self.clock = self._serve(self._store)
        self.location = f"grpc://127.0.0.1:{self.server.port}"

    def close(self) -> None:
        """Shut the server down, waiting at most CLOSE_WAIT_S: a mutant's server that does not stop is left behind
        rather than holding up the selection (the walk's time limit has already fired when this runs after it)."""
        stopping = threading.Thread(target=self.server.shutdown, kwargs={"grace_s": 0}, name="sync-walk-close",
                                    daemon=True)
        stopping.start()
        stopping.join(CLOSE_WAIT_S)


@contextmanager
def in_process() -> Iterator[InProcessTarget]:
    store = tempfile.mkdtemp(prefix="sync-walk-", dir=SCRATCH if os.path.isdir(SCRATCH) else None)
    target = None
    try:
        target = InProcessTarget(store)
        yield target
    finally:
        if target is not None:
            target.close()
        shutil.rmtree(store, ignore_errors=True)


def run_in_process(walk: Walk) -> list[Any]:
    """The walk on a fresh in-process reference target, its puts over Flight: the answers recorded."""
    with in_process() as target:
        return run_walk(target, walk)


def flight_messages(command: bytes, batch: pa.Table) -> list[FlightData]:
    """The messages a Flight client sends for one put: the descriptor with the schema, then each batch with rows
    (:func:`conformance.sync.suite.do_put` sends an empty table as its schema alone)."""
    descriptor = flight.FlightDescriptor.for_command(command).serialize()
    encoded = [batch.schema.serialize()] + [b.serialize() for b in batch.to_batches() if b.num_rows]
    messages = [pa.ipc.read_message(e) for e in encoded]
    return [FlightData(descriptor if i == 0 else None, memoryview(m.metadata), memoryview(m.body))
            for i, m in enumerate(messages)]


def direct_put(target: WalkTarget, command: bytes, batch: pa.Table) -> Answer:
    """The put handed straight to the reference driver (``SyncServer.on_put``), as its transport hands a whole,
    claimable stream: every decision the same, without gRPC. An error is its status and one-line wire text."""
    assert isinstance(target, InProcessTarget)
    errors = importlib.import_module("spec.sync.errors")  # the server's own (a selection imports it afresh)
    try:
        return decode_response(target.server.on_put(iter(flight_messages(command, batch)), lambda: True))
    except errors.SyncError as error:
        return f"{error.status}: {errors.wire_text(error)}"
    except Exception:  # noqa: BLE001 - what the transport answers INTERNAL
        return "INTERNAL"


def run_directly(walk: Walk) -> list[Any]:
    """The selection's runner: the walk on a fresh in-process reference target, its puts straight to its driver
    (fast enough to try every candidate that reaches a mutant; each kept walk is confirmed over Flight after)."""
    before = set(threading.enumerate())
    with in_process() as target:
        try:
            return run_walk(target, walk, direct_put)
        except BaseException:
            _end_flushers(before)
            raise


def _end_flushers(before: set[threading.Thread]) -> None:
    """End the flusher threads the walk started: a mutant's flusher caught in a loop (the walk ran past its time limit)
    would outlive the walk, holding its lock, and slow every later walk of the selection."""
    for thread in set(threading.enumerate()) - before:
        if thread.name == "sync-flusher" and thread.ident is not None:
            ctypes.pythonapi.PyThreadState_SetAsyncExc(ctypes.c_ulong(thread.ident), ctypes.py_object(SystemExit))


# -- generating walks -------------------------------------------------------------------------------------------

class _Gen:
    """One walk being generated: its names, the numbers a tester keeps in mind, its steps."""

    def __init__(self, rng: random.Random, tag: str) -> None:
        self.rng = rng
        self.tag = tag
        self.steps: list[Step] = []
        self.last: dict[str, int] = {}

    def table(self, name: str = "a") -> str:
        return f"walks/{self.tag}/{name}"

    def origin(self, name: str = "o1") -> str:
        return f"{self.tag}-{name}"

    def put(self, table: str = "a", origin: str = "o1", seq: int | None = None, rows: Sequence[Sequence[Any]] = (),
            layout: str = "plain", **extra: Any) -> None:
        self.steps.append({"put": {"table": self.table(table), "origin": self.origin(origin), "seq": seq,
                                   "rows": [list(r) for r in rows], "layout": layout, **extra}})
        if seq is not None:
            self.last[origin] = max(self.last.get(origin, seq), seq)

    def raw_put(self, table: str, **fields: Any) -> None:
        put = {"table": table, "origin": self.origin(), "seq": 1, "rows": [[None, 1, "a"]], "layout": "plain"}
        self.steps.append({"put": put | fields})

    def control(self, line: str) -> None:
        self.steps.append({"control": line})

    def policy(self, lag: float = HELD, count: int = 1_000_000, size: int = 2**62, watermark: int | None = None) -> None:
        self.control(f"POLICY {lag:g} {count} {size}" + (f" {watermark}" if watermark is not None else ""))

    def advance(self, seconds: float) -> None:
        self.control(f"ADVANCE {seconds!r}")

    def read(self, table: str = "a") -> None:
        self.steps.append({"read": self.table(table)})

    def seq_near(self, origin: str = "o1") -> int | None:
        """A sequence number a tester would try next for ``origin``: new, at, one below, 0, the max, none."""
        last = self.last.get(origin)
        if last is None:
            return self.rng.choice([None, 0, 1, 1, 2, U64_MAX])
        near = [None, last + 1, last + 1, last + 2, last, last - 1 if last else 0, 0, U64_MAX]
        return self.rng.choice([n if n is None else min(n, U64_MAX) for n in near])

    def rows(self, keys: Sequence[int] = (1, 2, 3), most: int = 3, value: str = "v") -> list[list[Any]]:
        out: list[list[Any]] = []
        for i in range(self.rng.randint(0, most)):
            kind = self.rng.choice(["insert", "insert", "update", "delete", "move"])
            k, j = self.rng.choice(keys), self.rng.choice(keys)
            old, new = {"insert": (None, k), "update": (k, k), "delete": (k, None), "move": (k, j)}[kind]
            out.append([old, new, None if new is None else f"{value}{i}"])
        return out

    def finish(self, tables: Sequence[str] = ("a",)) -> Walk:
        for name in tables:
            self.read(name)
        self.control(FLUSH_NOW)  # nothing of this walk is left pending for the next one on a live target
        self.advance(CLEAR_S)
        return {"steps": self.steps}


def _sequence_walk(g: _Gen) -> None:
    """Puts of two origins to two tables with sequence numbers around memory and durable, flushed on the way."""
    g.policy(g.rng.choice([HELD, 5]))
    for _ in range(g.rng.randint(3, 7)):
        move = g.rng.choice(["put", "put", "put", "other", "flush", "probe", "pending", "advance"])
        if move == "put":
            g.put(g.rng.choice("ab"), "o1", g.seq_near("o1"), g.rows(), g.rng.choice(["plain", "plain", "swapped"]))
        elif move == "other":
            g.put(g.rng.choice("ab"), "o2", g.seq_near("o2"), g.rows())
        elif move == "flush":
            g.control(FLUSH_NOW)
            g.policy(g.rng.choice([HELD, 5]))
        elif move == "probe":
            g.put("a", g.rng.choice(["o1", "o2"]))
        elif move == "pending":
            g.control("PENDING")
        else:
            g.advance(g.rng.choice([5 - TICK, 5, 5 + TICK, 1]))
    g.put("a", "o1")
    g.put("a", "o2")
    g.control(FLUSH_NOW)
    g.put("a", "o1")


def _lag_walk(g: _Gen) -> None:
    """Pending data flushed at exactly the lag after the oldest of it arrived: a tick before, at, after."""
    lag = g.rng.choice([1, 2, 10, 0.5])
    g.policy(lag, g.rng.choice([1_000_000, 2, 3]))
    g.put("a", "o1", 1, [[None, 1, "a"]])
    if g.rng.random() < 0.5:
        first = g.rng.choice([lag / 2, TICK, lag - TICK])
        g.advance(first)
        g.put(g.rng.choice("ab"), "o1", g.rng.choice([None, 2]), [[None, 2, "b"]], "swapped")
        left = lag - first
    else:
        left = lag
    for delta in (left - TICK, TICK, TICK):
        g.advance(delta)
        g.put("a", "o1")
        g.control("PENDING")
    if g.rng.random() < 0.5:  # fresh traffic after the flush waits its own lag
        g.put("a", "o1", g.last.get("o1", 0) + 1, [[1, 1, "c"]])
        g.advance(lag - TICK)
        g.put("a", "o1")
        g.advance(TICK)
        g.put("a", "o1")


def _count_walk(g: _Gen) -> None:
    """A table flushed at exactly max_syncs_per_url pending items (puts alternate two column orders)."""
    count = g.rng.choice([1, 2, 3, 4])
    g.policy(HELD, count)
    tables = "ab" if g.rng.random() < 0.3 else "a"
    for i in range(count + g.rng.choice([-1, 0, 1])):
        layout = "swapped" if i % 2 else "plain"
        row = [None, i + 1, f"r{i}"] if layout == "plain" else [i + 1, None, f"r{i}"]
        g.put(g.rng.choice(tables), "o1", g.rng.choice([i + 1, None]), [row], layout)
        g.control("PENDING")
    g.put("a", "o1")


def put_bytes(rows: Sequence[Sequence[Any]], layout: str = "plain") -> int:
    """The pending bytes one valid put adds (the size of its change as the spec queues it)."""
    batch = put_batch({"rows": [list(r) for r in rows], "layout": layout})
    schema = SyncSchema.validate([ColumnDescriptor(role=ColumnRole(r), name=n) for r, n in LAYOUTS[layout][0]],
                                 batch.schema)
    size: int = SquashedChange.of_put(schema, [batch], False).batch.nbytes
    return size


def _size_walk(g: _Gen) -> None:
    """Pending bytes at the size threshold and the high-watermark: exactly, a byte under, a byte over."""
    puts = [[[None, k, f"value-{k}" * g.rng.randint(1, 3)]] for k in range(1, g.rng.randint(2, 4))]
    sizes = [put_bytes(rows) for rows in puts]
    total = sum(sizes)
    bound = total + g.rng.choice([-1, 0, 1, -sizes[-1], 1 - sizes[-1]])
    if g.rng.random() < 0.5:
        g.policy(HELD, 1_000_000, bound)
    else:  # the watermark: a put past it is answered accepted=false and nothing of it is kept
        g.policy(HELD, 1_000_000, 2**62, max(bound, 0))
    for i, rows in enumerate(puts):
        g.put(g.rng.choice("ab"), "o1", i + 1, rows)
        g.control("PENDING")
    g.put("a", "o1", len(puts) + 1, [[None, 9, "after"]])
    g.control("PENDING")


def _refusal_walk(g: _Gen) -> None:
    """A refused put (one fault, or two at once) writes nothing; the same origin's fresh traffic is served."""
    g.policy(g.rng.choice([HELD, 0]))
    if g.rng.random() < 0.5:
        g.put("a", "o1", 1, [[None, 1, "stored"]], "vw" if g.rng.random() < 0.3 else "plain")
        g.control(FLUSH_NOW)
        g.policy(HELD)
    layout = g.rng.choice(REFUSED_LAYOUTS)
    rows: list[list[Any]] = [[None, 2, "x"] + [None] * (len(LAYOUTS[layout][1]) - 3)]
    if layout in ("changed-not-bool", "changed-names-key", "changed-names-nothing"):
        rows = [[None, 2, "x", 1 if layout == "changed-not-bool" else True]]
    if len(LAYOUTS[layout][1]) == 3 and layout.startswith("no-"):
        rows = [[2, "x", "y"]]
    faults: dict[str, Any] = {}
    second = g.rng.choice(["none", "none", "path", "format", "seq-replay", "interleave", "partly-null", "store"])
    if second == "path":
        faults["table"] = g.rng.choice(["../x", "/abs", "", "a/_delta_log", "a\x01b", "x" * 256])
    elif second == "format":
        faults["format"] = 1
    elif second == "store":
        faults["store"] = g.rng.choice(["elsewhere", "allowed/../x"])
    seq: int | None = g.rng.choice([2, None, 0])
    if second == "seq-replay":
        seq = 1
    if second == "interleave":
        g.put("a", "o2", None, [[None, 5, "open"]])
    step = {"table": g.table("a"), "origin": g.origin("o1"), "seq": seq, "rows": rows, "layout": layout} | faults
    g.steps.append({"put": step})
    if second == "partly-null":
        g.put("a", "o1", 2, [[None, None, 2, None, "x"]], "two-key")
    g.control("PENDING")
    g.control(FLUSH_NOW)
    g.put("a", "o1")
    g.put("a", "o1", 3, [[None, 3, "fresh"]])
    if second == "interleave":
        g.put("a", "o2", 6, [])


def _schema_walk(g: _Gen) -> None:
    """Rows and layouts each valid on its own, judged against the table as stored and against each other."""
    g.policy(g.rng.choice([HELD, 0]))
    first = g.rng.choice(VALID_LAYOUTS)
    second = g.rng.choice(VALID_LAYOUTS)

    def row(layout: str, key: int, value: str) -> list[Any]:
        return {"plain": [None, key, value], "swapped": [key, None, value], "changed": [None, key, value, True, "w"],
                "two-key": [None, None, key, key, value], "vw": [None, key, value, "w"]}[layout]

    g.put("a", "o1", 1, [row(first, 1, "one")], first)
    if g.rng.random() < 0.5:
        g.control(FLUSH_NOW)
        g.policy(HELD)
    rows = [row(second, 2, "two")]
    if g.rng.random() < 0.4:  # a key twice, a null key, a partly null key
        rows.append(g.rng.choice([row(second, 2, "again"), row(second, 3, "x")]))
        if second == "two-key" and g.rng.random() < 0.5:
            rows[-1] = g.rng.choice([[None, None, 3, None, "half"], [3, None, 3, 3, "half-old"]])
        elif second == "plain" and g.rng.random() < 0.5:
            rows[-1] = [None, None, "no key"]
    g.put("a", "o1", 2, rows, second)
    g.control(FLUSH_NOW)
    g.put("a", "o1")


def _chain_walk(g: _Gen) -> None:
    """A squash chain of up to four changes on two keys, in one put or several, flushed together or apart."""
    stored = g.rng.choice([(), (1,), (1, 2)])
    layout = g.rng.choice(["plain", "plain", "changed", "swapped"])

    def row(old: int | None, new: int | None, value: str | None, changed: bool = True) -> list[Any]:
        if layout == "changed":
            return [old, new, value, changed, None if new is None else f"w{value}"]
        if layout == "swapped":
            return [new, old, value]
        return [old, new, value]

    g.policy(HELD)
    if stored:
        g.put("a", "o1", 1, [row(None, k, f"s{k}") for k in stored], layout)
        g.control(FLUSH_NOW)
        g.policy(HELD)
    present = set(stored)
    changes: list[list[Any]] = []
    for i in range(g.rng.randint(1, 4)):
        options: list[tuple[int | None, int | None]] = [(None, k) for k in (1, 2) if k not in present]
        for k in sorted(present):
            options += [(k, k), (k, None)] + [(k, j) for j in (1, 2) if j not in present]
        old, new = g.rng.choice(options)
        if old is not None:
            present.discard(old)
        if new is not None:
            present.add(new)
        changes.append(row(old, new, None if new is None else f"c{i}", changed=g.rng.random() < 0.6))
    how = g.rng.choice(["one-put", "put-per-change", "flushed-apart"])
    if how == "one-put":
        g.put("a", "o1", 2, changes, layout)
    else:
        for i, change in enumerate(changes):
            g.put("a", "o1", 2 + i, [change], layout)
            if how == "flushed-apart":
                g.control(FLUSH_NOW)
                g.policy(HELD)
    if g.rng.random() < 0.3:  # the replay of the whole chain after it landed
        g.control(FLUSH_NOW)
        g.put("a", "o1", 2, changes[:1], layout)


def _timeout_walk(g: _Gen) -> None:
    """A silent open transaction discarded at exactly its timeout (300 s), a tick before, a tick after."""
    g.policy(HELD)
    g.put("a", "o1", None, [[None, 1, "open"]])
    if g.rng.random() < 0.5:
        g.advance(100)
        g.put("a", "o1", None, [[None, 2, "more"]], "swapped")
        wait = 300.0
    else:
        wait = 300.0 + 0
        if g.rng.random() < 0.5:
            g.advance(100)
            wait = 200.0
    g.advance(wait + g.rng.choice([-TICK, 0, TICK]))
    g.control("PENDING")
    g.put("a", "o2", 7, [[None, 3, "other"]])
    g.put("a", "o1", g.rng.choice([1, None, 2]), g.rng.choice([[], [[None, 4, "fresh"]]]))
    g.put("a", "o1", 5, [[None, 5, "fresh"]])
    g.control(FLUSH_NOW)


def _failure_walk(g: _Gen) -> None:
    """A table that cannot be created for a while: retried after each wait, nothing durable before it lands."""
    g.policy(g.rng.choice([0, 2]))
    g.steps.append({"block": g.table("a")})
    g.put("a", "o1", 1, [[None, 1, "a"]])
    if g.rng.random() < 0.5:
        g.put("b", "o1", 2, [[None, 2, "b"]])
    for _ in range(g.rng.randint(1, 3)):
        g.advance(g.rng.choice([1, 2, 4, 8, 16, 1 - TICK, 2 - TICK, 60, 4 - TICK, 5 - TICK, 5, 5 + TICK]))
        g.put("a", "o1")
    g.steps.append({"unblock": g.table("a")})
    for wait in (g.rng.choice([1, 2, 4, 8, 30]), g.rng.choice([TICK, 60, 600])):
        g.advance(wait)
        g.put("a", "o1")
    g.put("a", "o1", 3, [[1, 1, "after"]])
    g.control(FLUSH_NOW)
    g.put("a", "o1")


def _confinement_walk(g: _Gen) -> None:
    """Table paths and store locations at the confinement rules' bounds, then a put that must be served."""
    segment = g.rng.choice([254, 255, 256])
    path = g.rng.choice([
        g.table("x" * segment), g.table("_change_data"), g.table("_delta_log"), g.table("a/../b"), g.table("a//b"),
        g.table("a\x7fb"), g.table("a\tb"), "/" + g.table("a"), g.table("a/"), g.table(".") , g.table("a.b"),
        g.table("-a"), g.table("é"), "walks/" + "y" * 255 + "/" + "z" * 255 + "/" + "w" * 255 + "/" + "v" * 250,
        "walks/" + "y" * 255 + "/" + "z" * 255 + "/" + "w" * 255 + "/" + "v" * 255])
    store = g.rng.choice([None, None, "allowed", "allowed/sub", "allowed/../x", "allowedx", "elsewhere", "allowed/"])
    g.policy(0)
    g.raw_put(path, store=store)
    g.put("a", "o1", 2, [[None, 2, "ok"]])
    g.put("a", "o1")


def _truncate_walk(g: _Gen) -> None:
    """The truncate extension: a table emptied before the put's rows, also with no rows, also held back."""
    g.policy(0)
    g.put("a", "o1", 1, [[None, 1, "a"], [None, 2, "b"]])
    g.policy(g.rng.choice([0, HELD]))
    if g.rng.random() < 0.5:
        g.put("a", "o1", 2, [[1, 1, "before"]])
    g.put("a", "o1", g.rng.choice([3, None]), g.rng.choice([[], [[None, 3, "c"]], [[2, 2, "d"]]]), truncate=True)
    if g.rng.random() < 0.5:
        g.put("a", "o1", 4, [[None, 4, "after"]])
    g.control(FLUSH_NOW)
    g.put("a", "o1")


def _restart_walk(g: _Gen) -> None:
    """A restart: the durable numbers the tables record come back; a replay is taken, fresh traffic served."""
    g.policy(0)
    g.put("a", "o1", 1, [[None, 1, "a"]])
    g.put("b", "o1", 2, [[None, 2, "b"]])
    if g.rng.random() < 0.5:
        g.policy(HELD)
        g.put("a", "o1", 3, [[None, 3, "lost"]])
    g.steps.append({"restart": True})
    g.control(FLUSH_NOW)
    g.put("a", "o1")
    g.put("a", "o1", g.rng.choice([1, 2, 3]), [[None, 1, "replay"]])
    g.put("a", "o1", 4, [[1, 1, "fresh"]])


def _probe_walk(g: _Gen) -> None:
    """The probe rule (zero rows, no sequence number, no truncate) against every kind of request a step away from a
    probe, each with a fault a probe is answered past (format, path, store, layout), and on a draining server."""
    g.policy(g.rng.choice([HELD, 0]))
    if g.rng.random() < 0.6:
        g.put("a", "o1", g.rng.choice([0, 1, 2, U64_MAX - 1]), [[None, 1, "a"]])
    for _ in range(g.rng.randint(2, 4)):
        kind = g.rng.choice(["probe", "empty-at", "rows-open", "truncate-empty", "format", "path", "store", "layout",
                             "other-origin", "seq-0", "seq-max"])
        seq = None if kind in ("probe", "rows-open", "truncate-empty", "format", "path", "store", "layout",
                               "other-origin") else {"seq-0": 0, "seq-max": U64_MAX}.get(kind, g.seq_near("o1"))
        rows = [[None, 2, "b"]] if kind == "rows-open" or (kind == "truncate-empty" and g.rng.random() < 0.3) else []
        extras: dict[str, dict[str, Any]] = {"truncate-empty": {"truncate": True}, "format": {"format": 1},
                                             "store": {"store": g.rng.choice(["elsewhere", "allowed/../x"])}}
        extra = extras.get(kind, {})
        if kind == "path":
            g.raw_put(g.rng.choice(["../x", "", g.table("_delta_log")]), rows=[], seq=None)
        else:
            g.put("a", "o2" if kind == "other-origin" else "o1", seq, rows,
                  g.rng.choice(REFUSED_LAYOUTS) if kind == "layout" else "plain", **extra)
    if g.rng.random() < 0.3:  # a draining server answers probes only; a restart ends the drain
        g.control("DRAIN")
        g.put("a", "o1")
        g.put("a", "o1", min(g.last.get("o1", 0) + 1, U64_MAX), g.rng.choice([[], [[None, 3, "c"]]]))
        g.steps.append({"restart": True})
    g.put("a", "o1")
    g.put("a", "o1", min(g.last.get("o1", 0) + 1, U64_MAX), [[None, 4, "fresh"]])


def _order_walk(g: _Gen) -> None:
    """Duplicate, reordered and late puts around 0 and the largest sequence number, flushed or not between, maybe
    across a restart: a replay is answered, a step back refused, fresh traffic served."""
    g.policy(g.rng.choice([HELD, 0, 5]))
    base = g.rng.choice([0, 1, 2, U64_MAX - 3])
    pattern = g.rng.choice([(1, 1), (2, 1), (1, None, 1), (1, 3, 2), (None, None, 1, 1), (0, 0), (1, 2, 2, 1)])
    for i, offset in enumerate(pattern):
        seq = None if offset is None else min(base + offset, U64_MAX)
        g.put(g.rng.choice("aab"), "o1", seq, [[None, i + 1, f"p{i}"]] if g.rng.random() < 0.8 else [])
        move = g.rng.choice(["none", "none", "flush", "advance", "pending"])
        if move == "flush":
            g.control(FLUSH_NOW)
            g.policy(HELD)
        elif move == "advance":
            g.advance(g.rng.choice([5 - TICK, 5, 5 + TICK]))
        elif move == "pending":
            g.control("PENDING")
    if g.rng.random() < 0.4:
        g.steps.append({"restart": True})
        g.put("a", "o1")
    g.put("a", "o1", min(base + g.rng.choice([1, 2, 4]), U64_MAX), [[None, 9, "again"]])
    g.put("a", "o1", min(base + 5, U64_MAX), [[None, 8, "fresh"]])


def _defaults_walk(g: _Gen) -> None:
    """No settings given (the target's own: every put flushed, the transaction timeout and retry backoff by default):
    an open transaction at its timeout, a failing table retried at each backoff's exact tick, a tick either side."""
    if g.rng.random() < 0.5:
        g.steps.append({"block": g.table("a")})
        g.put("a", "o1", 1, [[None, 1, "a"]])
        for wait in (1, 2, 4, 5, 5)[:g.rng.randint(1, 5)]:
            g.advance(wait + g.rng.choice([-TICK, 0, 0, TICK]))
            g.put("a", "o1")
        g.steps.append({"unblock": g.table("a")})
        g.advance(g.rng.choice([TICK, 1, 5, 5 + TICK]))
        g.put("a", "o1")
    else:
        g.put("a", "o1", None, [[None, 1, "open"]])
        g.advance(300 + g.rng.choice([-TICK, 0, TICK]))
        g.put("a", "o1", g.rng.choice([None, 1, 2]), g.rng.choice([[], [[None, 2, "late"]]]))
    g.put("a", "o1", g.rng.choice([2, 3]), [[None, 3, "fresh"]])
    g.read()


Rows = list[list[list[Any]]]
"""The rows of a walk's puts, one list per put."""
SettingEdge = Callable[["_Gen", dict[str, float], int, Rows], None]
"""Walk steps putting an event at a setting's edge: the settings given, the side (-1: a tick or byte before, 0: at
the instant, 1: after), the puts a size was set from; the steps start once the target decides by those settings."""


def _lag_edge(g: _Gen, given: dict[str, float], side: int, rows: Rows) -> None:
    """Pending data flushed at exactly the lag after it arrived (the lag reached in one move or two)."""
    lag = given["max_replication_lag_s"]
    g.put("a", "o1", 1, [[None, 1, "held"]])
    if g.rng.random() < 0.5:
        g.advance(lag / 2)
        g.put("b", "o1", None, [[None, 2, "later"]])
        g.advance(lag / 2 + side * TICK)
    else:
        g.advance(lag + side * TICK)
    g.control("PENDING")
    g.read()


def _count_edge(g: _Gen, given: dict[str, float], side: int, rows: Rows) -> None:
    """A table flushed at exactly its count of pending items (puts alternate two column orders)."""
    for i in range(int(given["max_syncs_per_url"]) + side):
        layout = "swapped" if i % 2 else "plain"
        g.put("a", "o1", i + 1, [[None, i + 1, f"r{i}"] if layout == "plain" else [i + 1, None, f"r{i}"]], layout)
        g.control("PENDING")
    g.read()


def _sized(g: _Gen) -> Rows:
    return [[[None, k, f"value-{k}" * g.rng.randint(1, 3)]] for k in range(1, g.rng.randint(2, 4))]


def _size_edge(g: _Gen, given: dict[str, float], side: int, rows: Rows) -> None:
    """Pending bytes at exactly the size threshold (set from the walk's own puts, so ``given`` has it last)."""
    for i, put in enumerate(rows):
        g.put("a", "o1", i + 1, put)
        g.control("PENDING")
    g.read()


def _watermark_edge(g: _Gen, given: dict[str, float], side: int, rows: Rows) -> None:
    """Puts against a high-watermark at exactly a put's bytes, pending bytes plus a put's message bytes (the memory
    budget) or plus its change's bytes (the endpoint): the bound on what is received and held."""
    for i, put in enumerate(rows):
        g.put("a", "o1", i + 1, put)
        g.control("PENDING")
    g.put("a", "o1")
    g.read()


def _quiet_edge(g: _Gen, given: dict[str, float], side: int, rows: Rows) -> None:
    """An open transaction discarded at exactly its timeout after its last put (a probe in between moves nothing)."""
    timeout = given["transaction_timeout_s"]
    g.put("a", "o1", None, [[None, 1, "open"]])
    since = 0.0
    if g.rng.random() < 0.5:
        g.advance(timeout / 2)
        if g.rng.random() < 0.5:
            g.put("a", "o1", None, [[None, 2, "more"]], "swapped")
        else:
            g.put("a", "o1")
            since = timeout / 2
    g.advance(timeout - since + side * TICK)
    g.control("PENDING")
    g.put("a", "o1", 1, g.rng.choice([[], [[None, 3, "commit"]]]))
    g.put("a", "o1", 2, [[None, 4, "fresh"]])
    g.read()


def _wake_edge(g: _Gen, given: dict[str, float], side: int, rows: Rows) -> None:
    """The flusher's interval passed with data held (it flushes nothing), then the lag reached at its own instant."""
    interval = given["flush_task_interval_s"]
    g.put("a", "o1", 1, [[None, 1, "held"]])
    g.advance(interval + side * TICK)
    g.control("PENDING")
    g.read()
    lag = given.get("max_replication_lag_s", HELD)
    if lag < HELD:
        g.advance(lag - interval - side * TICK + g.rng.choice([-TICK, 0, TICK]))
        g.control("PENDING")
        g.read()


def _retry_edge(g: _Gen, given: dict[str, float], side: int, rows: Rows) -> None:
    """A table that cannot be created, retried at each wait's exact end (still failing) until, healed, a retry lands
    at the chosen side of its instant."""
    first, most = given.get("initial_backoff_s", 1.0), given.get("max_backoff_s", 5.0)
    g.steps.append({"block": g.table("a")})
    g.put("a", "o1", 1, [[None, 1, "a"]])
    now, retry = 0.0, min(first, most)
    heal = g.rng.randint(1, 4)
    for failures in range(1, heal):
        g.advance(retry - TICK - now)
        g.put("a", "o1")
        g.advance(TICK)
        now, retry = retry, retry + min(first * 2 ** failures, most)
    g.steps.append({"unblock": g.table("a")})
    g.advance(retry + side * TICK - now)
    g.put("a", "o1")
    if side < 0:
        g.advance(TICK)
        g.put("a", "o1")
    g.read()


def _served_edge(g: _Gen, given: dict[str, float], side: int, rows: Rows) -> None:
    """Puts served as ever: no put contends for the write lock one at a time (its edge is a wall-clock race)."""
    del side, rows
    g.put("a", "o1", 1, [[None, 1, "a"]])
    g.put("a", "o1")
    g.control("PENDING")
    g.read()


HELD_LAG: Final[dict[str, float]] = {"max_replication_lag_s": HELD}
SETTING_EDGES: Final[dict[str, tuple[tuple[float, ...], SettingEdge, dict[str, float]]]] = {
    # setting: (values off its default, the event at its edge, settings given with it)
    "max_in_memory_bytes": ((), _size_edge, HELD_LAG),
    "max_replication_lag_s": ((0.5, 7.0), _lag_edge, {}),
    "max_syncs_per_url": ((1, 3), _count_edge, HELD_LAG),
    "write_lock_timeout_s": ((0.25, 30.0), _served_edge, {}),
    "flush_task_interval_s": ((0.5, 7.0), _wake_edge, HELD_LAG),
    "high_watermark_bytes": ((), _watermark_edge, HELD_LAG),
    "transaction_timeout_s": ((0.5, 7.0, 45.0), _quiet_edge, HELD_LAG),
    "initial_backoff_s": ((0.5, 3.0), _retry_edge, {}),
    "max_backoff_s": ((0.5, 3.0, 12.0), _retry_edge, {}),
}
"""Every setting of the sync server (``spec.sync.writer.SyncSettings`` and the retry backoff,
``conformance.sync.reference_target.SETTING_NAMES``; a test holds the two equal) with the values off its default a
walk sets it to (none: sized from the walk's puts), the event put at its edge and what is given with it."""


def _noop(g: _Gen) -> None:
    """What must write nothing: a probe, a replay of the last number taken (answered, not applied again), the
    pending bytes and the table as read."""
    g.put("a", "o1")
    if "o1" in g.last:
        g.put("a", "o1", g.last["o1"], [[None, 99, "replayed"]])
    g.control("PENDING")
    g.read()


def _settings_walk(g: _Gen) -> None:
    """One setting off its default (sometimes two), an event at its edge: a tick or byte before, at the instant,
    after; a no-op that must write nothing; the target's own settings back."""
    name = g.rng.choice(sorted(SETTING_EDGES))
    values, edge, besides = SETTING_EDGES[name]
    side = g.rng.choice([-1, 0, 1])
    given: dict[str, float] = dict(besides)
    if values:
        given[name] = g.rng.choice(values)
    if name == "flush_task_interval_s" and g.rng.random() < 0.5:
        given["max_replication_lag_s"] = given[name] * 2.25  # the lag, between two wakes, at its own instant
    if edge is _retry_edge and g.rng.random() < 0.4:  # both waits off their defaults
        other = "max_backoff_s" if name == "initial_backoff_s" else "initial_backoff_s"
        given[other] = g.rng.choice(SETTING_EDGES[other][0])
    if edge is _served_edge and g.rng.random() < 0.5:
        given["max_replication_lag_s"] = HELD
    rows = _sized(g)
    if not values:  # sized: at a byte of the puts' own measures
        if name == "max_in_memory_bytes":
            given[name] = max(sum(put_bytes(r) for r in rows) + side + g.rng.choice([0, -put_bytes(rows[-1])]), 1)
        else:
            pending = sum(put_bytes(r) for r in rows[:-1])
            given[name] = max(g.rng.choice([message_bytes(rows[0]), pending + message_bytes(rows[-1]),
                                            pending + put_bytes(rows[-1])]) + side, 0)
    words = " ".join(f"{k}={v!r}" if isinstance(v, float) else f"{k}={v}" for k, v in given.items())
    g.control(f"SETTINGS {words}")
    if g.rng.random() < 0.3:
        _noop(g)
    edge(g, given, side, rows)
    if g.rng.random() < 0.5:
        _noop(g)
    g.control("SETTINGS")


def message_bytes(rows: Sequence[Sequence[Any]], layout: str = "plain") -> int:
    """The message bytes one put's batches carry (what the high-watermark bounds as it receives them)."""
    batch = put_batch({"rows": [list(r) for r in rows], "layout": layout})
    return sum(len(m.body) for m in flight_messages(b"", batch))


Change = tuple[int | None, int | None]
"""A change of a chain as ``(old key, new key)``: an insert, an update, a delete or a move."""
CHAIN_KEYS: Final = (1, 2)
CHAIN_LENGTH: Final = 3
CHAIN_STORED: Final = ((), (1,), (1, 2))
CHAIN_DELIVERIES: Final = ("plain", "changed", "alternating", "truncating")
"""How a derived chain's puts are laid out: every put ``plain``; ``changed`` (its CHANGED flag off on every second
change: a value kept from the chain's earlier row or the stored one); for chains of two, ``alternating`` (the second
put ``swapped``: two runs of one schema each, merged apart) and ``truncating`` (the second put empties the table first:
a run starts there)."""


def chains(stored: Sequence[int], length: int = CHAIN_LENGTH) -> Iterator[list[Change]]:
    """Every chain of 1 to ``length`` changes on :data:`CHAIN_KEYS` from the keys ``stored``: each an insert of an
    absent key, an update or a delete of a present one, or a move of a present key to an absent one."""

    def grow(present: frozenset[int], chain: list[Change]) -> Iterator[list[Change]]:
        if chain:
            yield chain
        if len(chain) == length:
            return
        options: list[Change] = [(None, k) for k in CHAIN_KEYS if k not in present]
        for k in sorted(present):
            options += [(k, k), (k, None)] + [(k, j) for j in CHAIN_KEYS if j not in present]
        for old, new in options:
            yield from grow((present - {old}) | ({new} if new is not None else set()), [*chain, (old, new)])

    yield from grow(frozenset(stored), [])


def _chain_put(change: Change, i: int, delivery: str) -> tuple[list[Any], str, bool]:
    """The row, layout and truncate flag of a derived chain's ``i``-th put."""
    old, new = change
    value = None if new is None else f"c{i}"
    if delivery == "changed":
        return [old, new, value, i % 2 == 0, None if new is None else f"w{i}"], "changed", False
    if delivery == "alternating" and i == 1:
        return [new, old, value], "swapped", False
    truncates = (delivery == "truncating" and i == 1) or (delivery == "truncating-first" and i == 0)
    return [old, new, value], "plain", truncates


@cache
def _row_bytes(row: tuple[Any, ...], layout: str) -> int:
    return put_bytes([row], layout)


def _chain_walk_at_threshold(tag: str, stored: Sequence[int], chain: Sequence[Change], delivery: str,
                             reached_by: str, shape: str) -> Walk:
    """``chain`` from the keys ``stored``, each change its own put laid out by ``delivery``, the size threshold at its
    pending bytes reached by its ``last`` put or the one ``before-last``, read then, and once all is flushed."""
    puts = [_chain_put(change, i, delivery) for i, change in enumerate(chain)]
    sizes = [_row_bytes(tuple(row), layout) for row, layout, _ in puts]
    g = _Gen(random.Random(0), tag)
    threshold = sum(sizes) - (sizes[-1] if reached_by == "before-last" else 0)
    g.policy(HELD, 1_000_000, max(threshold, 1))
    if stored:
        g.put("a", "o1", 1, [[None, k, f"s{k}"] for k in stored])
        g.control(FLUSH_NOW)
        g.policy(HELD, 1_000_000, max(threshold, 1))
    for i, (row, layout, truncate) in enumerate(puts):
        g.put("a", "o1", 2 + i, [row], layout, **({"truncate": True} if truncate else {}))
        g.control("PENDING")
    g.read()  # what the threshold flushed, if it did
    g.control(FLUSH_NOW)
    walk = g.finish(("a",))  # and the rest
    walk["shape"] = shape
    return walk


def squash_edge_walks() -> list[Walk]:
    """Derived walks (after the seeded ones): every chain (:func:`chains`) from every stored state
    (:data:`CHAIN_STORED`), each change its own put (a pending item), in every delivery (:data:`CHAIN_DELIVERIES`),
    the size threshold at the chain's pending bytes, reached by its last put or by the one before: at the threshold the
    server squashes the table's items first (``SyncWriter.next_action``: ``SquashTable``), and flushes only when the
    squashed items are still at or over it (the bytes a squash saves show in ``PENDING``, the flush in a read)."""
    walks: list[Walk] = []
    for stored in CHAIN_STORED:
        for chain in chains(stored):
            for delivery in CHAIN_DELIVERIES:
                if delivery in ("alternating", "truncating") and len(chain) != 2:
                    continue
                for reached_by in ("last", "before-last"):
                    walks.append(_chain_walk_at_threshold(f"d{len(walks)}", stored, chain, delivery, reached_by,
                                                          "squash_edge"))
    return walks


def truncating_run_walks() -> list[Walk]:
    """Derived walks (after the two failing tables): every chain of three changes from a stored state, its first or
    its second put truncating and followed by another of the same schema, so a run of items to squash starts at a
    truncate (``runs_by_schema``, ``merge_changes``: the run empties the table, whichever item of it is read), the
    threshold reached by its last put."""
    return [_chain_walk_at_threshold(f"r{n}", stored, chain, delivery, "last", "truncating_run")
            for n, (stored, chain, delivery) in enumerate(
                (stored, chain, delivery) for stored in CHAIN_STORED[1:] for chain in chains(stored)
                if len(chain) == CHAIN_LENGTH for delivery in ("truncating", "truncating-first"))]


def nested_type_walks() -> list[Walk]:
    """Derived walks (after the squash chains): a put of a value of each nested type but the struct (a struct's
    children count as columns: the schema refuses it first) at its smallest, one row, refused by its type
    (``spec.sync.admission._NESTED``), then the same table with a plain put, which nothing of the refused one precedes.
    A dictionary-encoded column is refused as Flight data before (``spec.sync.flight``)."""
    walks: list[Walk] = []
    for layout in NESTED_LAYOUTS:
        if layout == "struct-value":
            continue
        g = _Gen(random.Random(0), f"n{len(walks)}")
        g.control(FLUSH_NOW)
        g.put("a", "o1", 1, [[None, 1, "a"]], layout)
        g.put("a", "o1", 1, [[None, 1, "a"]])
        walk = g.finish(("a",))
        walk["shape"] = "nested_type"
        walks.append(walk)
    return walks


def two_failing_walks() -> list[Walk]:
    """Derived walks (after the nested types): two tables that cannot be created, their retries a quarter second apart
    (the default waits: 1 s, then 2 s); the first healed before its retry, which lands at its instant (the flusher
    wakes at the earlier of the two, ``FlushFailures.next_retry``), the second still failing at its own and landing
    at the next; either table first."""
    walks: list[Walk] = []
    for first, second in (("a", "b"), ("b", "a")):
        g = _Gen(random.Random(0), f"f{len(walks)}")
        g.control(FLUSH_NOW)
        for table in (first, second):
            g.steps.append({"block": g.table(table)})
        g.put(first, "o1", 1, [[None, 1, first]])
        g.advance(0.25)
        g.put(second, "o1", 2, [[None, 2, second]])
        g.steps.append({"unblock": g.table(first)})
        g.advance(0.75)  # the first's retry instant
        g.read(first)
        g.put(first, "o1")
        g.advance(0.25)  # the second's, still failing: its next wait is 2 s
        g.steps.append({"unblock": g.table(second)})
        g.advance(2 - TICK)
        g.read(second)
        g.advance(TICK)
        walk = g.finish((first, second))
        walk["shape"] = "two_failing"
        walks.append(walk)
    return walks


def format_walks() -> list[Walk]:
    """Derived walks (after the truncating runs): a put with rows in a table format other than Delta, one above it and
    one below (``SyncServerEndpoint.destination``: Delta only), refused as not implemented, then the same put in Delta,
    which nothing of the refused one precedes."""
    walks: list[Walk] = []
    for table_format in (1, -1):
        g = _Gen(random.Random(0), f"t{len(walks)}")
        g.control(FLUSH_NOW)
        g.put("a", "o1", 1, [[None, 1, "a"]], format=table_format)
        g.put("a", "o1", 1, [[None, 1, "a"]])
        walk = g.finish(("a",))
        walk["shape"] = "format"
        walks.append(walk)
    return walks


def _flushed_walk(g: _Gen, tables: Sequence[str], shape: str) -> Walk:
    """``g``'s walk of ``shape`` once every pending table is flushed, its ``tables`` read (:meth:`_Gen.finish`)."""
    g.control(FLUSH_NOW)
    walk = g.finish(tables)
    walk["shape"] = shape
    return walk


ANY_CHANGE: Final[tuple[Change, ...]] = tuple((old, new) for old in (None, *CHAIN_KEYS) for new in (None, *CHAIN_KEYS))
"""Every change on :data:`CHAIN_KEYS` whatever is stored: besides :func:`chains`' an insert of a present key (a replayed
insert), an update, move or delete of an absent one (a replay of what the table already holds), and a row with no key
at all (a temporary row)."""


def any_chain_walks() -> list[Walk]:
    """Derived walks (after the table formats): every chain of two of :data:`ANY_CHANGE` from every stored state, each
    change its own put, plain or with CHANGED flags, the size threshold reached by its last put (the squash merges the
    two puts' changes, ``merge_squashed``, and the flush applies them, ``apply_squashed``: by Arrow kernels when no
    stored value is needed, else row by row); then the same chains in one put, with a temporary row after them (one
    put's rows are squashed on arrival, ``SquashedChange.of_put``), in a table of keys alone (every table column
    written whole by a new key: the fast path's sources, ``_full_value_sources``)."""
    walks: list[Walk] = []
    for stored in CHAIN_STORED:
        for chain in ((a, b) for a in ANY_CHANGE for b in ANY_CHANGE):
            for delivery in ("plain", "changed"):
                walks.append(_chain_walk_at_threshold(f"x{len(walks)}", stored, chain, delivery, "last", "any_chain"))
    for stored in CHAIN_STORED:
        for chain in ((a, b) for a in ANY_CHANGE for b in ANY_CHANGE):
            g = _Gen(random.Random(0), f"x{len(walks)}")
            g.policy(HELD)
            if stored:
                g.put("a", "o1", 1, [[None, k] for k in stored], "keys-only")
                g.control(FLUSH_NOW)
                g.policy(HELD)
            g.put("a", "o1", 2, [[old, new] for old, new in [*chain, (None, None)]], "keys-only")
            g.control("PENDING")
            walks.append(_flushed_walk(g, ("a",), "any_chain"))
    return walks


def two_truncate_walks() -> list[Walk]:
    """Derived walks (after the chains of any change): a table holding rows, then a put, two truncating puts with or
    without rows and a put after them, flushed at once: the flush applies what follows the *last* truncate alone
    (``after_last_truncate``)."""
    walks: list[Walk] = []
    for first, second in ((a, b) for a in ([], [[None, 4, "t1"]]) for b in ([], [[None, 5, "t2"]])):
        g = _Gen(random.Random(0), f"y{len(walks)}")
        g.control(FLUSH_NOW)
        g.put("a", "o1", 1, [[None, 1, "s1"], [None, 2, "s2"]])
        g.policy(HELD)
        g.put("a", "o1", 2, [[1, 1, "before"]])
        g.put("a", "o1", 3, first, truncate=True)
        g.put("a", "o1", 4, second, truncate=True)
        g.put("a", "o1", 5, [[None, 6, "after"]])
        walks.append(_flushed_walk(g, ("a",), "two_truncate"))
    return walks


BIG: Final = "v" * 200
"""A value that makes one put's change larger than a few small ones (:func:`replayed_flush_walks`' size threshold)."""


def replayed_flush_walks() -> list[Walk]:
    """Derived walks (after the two truncates): an origin's transactions each across two tables, the one with the
    larger change flushed by size (its rows and its mark in the table; the origin not durable: the other table
    pending), maybe another origin's change to the same key flushed after; a restart (the pending table lost); the
    origin replays its transactions. Its flush of the first table skips what the table's marks already hold
    (``SyncWriter.plan_flush``: never applied twice, so the other origin's later value stays), and writes the marks
    and durable numbers as they were planned."""
    walks: list[Walk] = []
    threshold = put_bytes([[None, 1, BIG + "1"]])
    fresh_row = [None, 2, "fresh"]
    with_fresh = put_bytes([[None, 11, "b1"]]) + threshold + put_bytes([fresh_row])
    for transactions, overwritten, fresh in ((1, False, False), (1, True, False), (2, False, False), (2, True, False),
                                             (1, True, True)):
        g = _Gen(random.Random(0), f"p{len(walks)}")

        def transactions_of_o1(g: _Gen = g, count: int = transactions) -> None:
            for seq in range(1, count + 1):
                g.put("b", "o1", None, [[None, 10 + seq, f"b{seq}"]])
                g.put("a", "o1", seq, [[None, 1, f"{BIG}{seq}"]])
                g.control("PENDING")

        g.policy(HELD, 1_000_000, threshold)
        transactions_of_o1()
        if overwritten:
            g.put("a", "o2", 1, [[1, 1, f"{BIG}x"]])
        g.read("a")
        g.steps.append({"restart": True})
        g.policy(HELD, 1_000_000, with_fresh if fresh else threshold)
        transactions_of_o1()
        if fresh:  # a new transaction, squashed with the replayed one into one item: not skipped, as not all of it is held
            g.put("a", "o1", transactions + 1, [fresh_row])
            g.control("PENDING")
        g.read("a")
        g.put("a", "o1")
        walks.append(_flushed_walk(g, ("a", "b"), "replayed_flush"))
    return walks


def dropped_open_walks() -> list[Walk]:
    """Derived walks (after the replayed flushes): an open transaction dropped from a table that holds other data, by
    its timeout or by a replay closing it (``SyncWriter._drop``: the other data stays, and is flushed); and one dropped
    from a table that cannot be created, so nothing is left to retry at its retry instant (``FlushFailures.
    nothing_left``: the server forgets the failure, no retry is due)."""
    walks: list[Walk] = []
    for failing, hows in ((False, ("timeout", "replay")), (True, ("replay", "timeout"))):
        for how in hows:
            g = _Gen(random.Random(0), f"o{len(walks)}")
            g.control(FLUSH_NOW)
            g.put("b", "o1", 1, [[None, 1, "durable"]])
            if failing:
                g.steps.append({"block": g.table("a")})
            else:
                g.policy(HELD)
                g.put("a", "o2", 5, [[None, 5, "other"]])
            g.put("a", "o1", None, [[None, 2, "open"]])
            if how == "timeout":
                if failing:
                    g.policy(HELD)
                g.advance(300)
            else:
                g.put("a", "o1", 1, [])
            if failing:
                g.steps.append({"unblock": g.table("a")})
                g.advance(1)  # the failed flush's retry instant, nothing left to retry
            g.control("PENDING")
            if failing:
                g.put("a", "o1", 2, [[None, 3, "fresh"]])
            else:
                g.put("a", "o2")
            walks.append(_flushed_walk(g, ("a", "b"), "dropped_open"))
    return walks


def failing_policy_walks() -> list[Walk]:
    """Derived walks (after the dropped transactions): a table that cannot be created while the size threshold is
    passed (the policy leaves a waiting table out, so nothing is flushed: ``SyncWriter.next_action``), then healed and
    retried at its instant; and one whose policy is raised while it waits, so only its retry flushes it, at exactly
    its instant (``FlushFailures.due``)."""
    walks: list[Walk] = []
    for raised in (False, True):
        g = _Gen(random.Random(0), f"q{len(walks)}")
        g.policy(0 if raised else HELD, 1_000_000, 2**62 if raised else 1)
        g.steps.append({"block": g.table("a")})
        g.put("a", "o1", 1, [[None, 1, "a"]])
        if raised:
            g.policy(HELD)
        else:
            g.put("a", "o1", 2, [[None, 2, "b"]])
        g.steps.append({"unblock": g.table("a")})
        g.advance(1 - TICK)
        g.read("a")
        g.advance(TICK)
        g.read("a")
        g.put("a", "o1")
        walk = g.finish(("a",))
        walk["shape"] = "failing_policy"
        walks.append(walk)
    return walks


def derived_vocabulary_walks() -> list[Walk]:
    """Derived walks (after the failing policies): a value of each unsigned width at the largest its signed type holds
    and one past (``spec.sync.admission._signed_max``); a put of two record batches whose second continues the first's
    chain (``admit_rows`` keeps their order); a command that is no ``DataSyncCommand`` (``CommandDecodeError``: its
    condition and status in the refusal). Each followed by a plain put to the same table."""
    walks: list[Walk] = []

    def walk_of(steps: Callable[[_Gen], None]) -> None:
        g = _Gen(random.Random(0), f"u{len(walks)}")
        g.control(FLUSH_NOW)
        steps(g)
        g.put("a", "o1", 9, [[None, 9, "after"]])
        walks.append(_flushed_walk(g, ("a",), "derived_vocabulary"))

    def unsigned(width: int, value: int) -> Callable[[_Gen], None]:
        return lambda g: g.put("a", "o1", 1, [[None, 1, value]], f"uint{width}-column")

    for width in (8, 16, 32, 64):
        for value in (2 ** (width - 1) - 1, 2 ** (width - 1)):
            walk_of(unsigned(width, value))
    walk_of(lambda g: g.put("a", "o1", 1, [[None, 1, "a"], [1, 2, "b"], [2, 2, "c"]], batches=[1, 2]))
    walk_of(lambda g: g.put("a", "o1", 1, [[None, 1, "a"]], command="0a0178"))  # an Any naming no DataSyncCommand
    return walks


SCHEMA_RUNS: Final = (("plain", "vw"), ("plain", "vw", "plain"), ("plain", "plain", "vw"), ("vw", "plain", "plain"),
                       ("vw", "vw", "plain", "plain"))
"""Schemas of a table's pending items in turn (two column sets): runs of one schema and runs of two."""


def schema_run_walks() -> list[Walk]:
    """Derived walks (after the derived vocabulary): a key inserted and updated by puts of two schemas in turn
    (:data:`SCHEMA_RUNS`), the size threshold reached by the last: the squash merges each run of one schema into one
    item and keeps a run of one as it is (``squash_pending``, ``merge_changes``); the items left are more than one, so
    the table is flushed after one squash (``SyncWriter.next_action``: squashed at most once between flushes)."""
    walks: list[Walk] = []
    for runs in SCHEMA_RUNS:
        puts = [([[None if i == 0 else 1, 1, f"c{i}"] + (["w"] if layout == "vw" else [])], layout)
                for i, layout in enumerate(runs)]
        g = _Gen(random.Random(0), f"s{len(walks)}")
        g.policy(HELD, 1_000_000, sum(put_bytes(rows, layout) for rows, layout in puts))
        for i, (rows, layout) in enumerate(puts):
            g.put("a", "o1", i + 1, rows, layout)
            g.control("PENDING")
        g.read()
        walks.append(_flushed_walk(g, ("a",), "schema_run"))
    return walks


DERIVED: Final = (squash_edge_walks, nested_type_walks, two_failing_walks, truncating_run_walks, format_walks,
                  any_chain_walks, two_truncate_walks, replayed_flush_walks, dropped_open_walks, failing_policy_walks,
                  derived_vocabulary_walks, schema_run_walks)
"""The derived walk families, in the order they follow the seeded walks (a new one goes last: a recorded walk is
named by its index)."""
SHAPES: Final = (_sequence_walk, _lag_walk, _count_walk, _size_walk, _refusal_walk, _schema_walk, _chain_walk,
                 _timeout_walk, _failure_walk, _confinement_walk, _truncate_walk, _restart_walk, _probe_walk,
                 _order_walk, _defaults_walk)


def candidates(seed: int = SEED, count: int = CANDIDATES, settings: int = SETTINGS_CANDIDATES) -> list[Walk]:
    """The seeded candidate walks: ``count`` of the shapes in turn, then ``settings`` with settings off their
    defaults (:func:`_settings_walk`, drawn on from the same seed, so the first ``count`` stay what they were);
    walk ``i`` names its tables and origins ``w<i>``; then the derived ones (:func:`squash_edge_walks`, ``d<i>``;
    :func:`nested_type_walks`, ``n<i>``; :func:`two_failing_walks`, ``f<i>``; :func:`truncating_run_walks`,
    ``r<i>``; :func:`format_walks`, ``t<i>``)."""
    rng = random.Random(seed)
    walks = []
    for i in range(count + settings):
        g = _Gen(random.Random(rng.getrandbits(64)), f"w{i}")
        shape = SHAPES[i % len(SHAPES)] if i < count else _settings_walk
        shape(g)
        walk = g.finish(("a", "b"))
        walk["shape"] = shape.__name__.strip("_")
        walks.append(walk)
    return walks + [walk for family in DERIVED for walk in family()]


# -- selecting, recording and reporting --------------------------------------------------------------------------

VECTOR_FILE: Final = Path(__file__).resolve().parent / "vectors" / "walks.json"
REPORT_FILE: Final = Path(__file__).resolve().parents[2] / "docs" / "walks" / "sync.md"
SERVER_PREFIXES: Final = ("spec.", "reference.sync", "conformance.sync.reference_target", "conformance.sync.clock")
"""What a mutant's run imports afresh: the target's side only. This module, the suite's put and the Delta reader
stay as first imported, so the judge of a mutant is the unmutated one, as with an ``exec:`` target."""
MAX_TRIES: Final = 150
"""Candidates that run a mutant's lines tried on it before it is called a survivor (the walks kept so far first, then
in candidate order, which takes the shapes in turn): a survivor in code every walk runs costs this many walks."""
SETTINGS_TRIES: Final = 250
"""Walks with settings off their defaults tried on a mutant the others did not tell apart (some 25 ms each)."""
PER_WALK_S: Final = 3.0
"""A walk's time limit in the selection (doubled for its second try): a walk takes some 50 ms handed to the driver."""
CONFIRM_WORKERS: Final = 2
"""Planted ``exec:`` targets confirmed side by side, each on a copy of the tree of its own."""


def _rule(mutant_name: str) -> str:
    """``function: operator`` of a mutant's name (``module:function:line: operator``), without the line."""
    module, function, _, operator = mutant_name.split(":", 3)
    return f"{module.rsplit('.', 1)[-1]}.{function}: {operator.strip()}"


def _say(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


def confirm(walks: Sequence[Walk], killed_by: dict[str, int], mutants: Sequence[OperatorMutant],
            workers: int = CONFIRM_WORKERS) -> list[str]:
    """The mutants whose kill the real path does not reproduce: each planted in a copy of the tree, served by the
    reference target as an ``exec:`` target (a process, gRPC and all), its walk replayed as the suite's walks case
    does and compared with the answers recorded (:func:`run_in_process`)."""
    from conformance.mutation import copy_tree, exec_target_in
    from conformance.sync.suite import SyncTarget

    by_name = {m.name: m for m in mutants}
    recorded_answers = {i: run_in_process(walks[i]) for i in sorted(set(killed_by.values()))}
    names = sorted(killed_by)
    shares = [names[k::workers] for k in range(workers)]
    unconfirmed: list[str] = []

    def work(share: list[str]) -> None:
        with tempfile.TemporaryDirectory(prefix="sync-walk-confirm-") as scratch:
            copy = copy_tree(Path(scratch) / "tree")
            command = exec_target_in(copy, "-m conformance.sync.reference_target --store {store}")[len("exec:"):]
            for done, name in enumerate(share, 1):
                mutant, index = by_name[name], killed_by[name]
                path = copy / module_path(mutant.module).relative_to(ROOT)
                original = path.read_text()
                path.write_text(mutant.source(original))
                target = SyncTarget("planted", frozenset(), command, None)
                try:
                    target.start()
                    got: Any = run_walk(target, walks[index])
                except Exception as error:  # noqa: BLE001 - a target that fails a walk is told apart
                    got = f"raised {type(error).__name__}"
                finally:
                    target.close()
                    path.write_text(original)
                if got == recorded_answers[index]:
                    unconfirmed.append(name)
                if done % 50 == 0:
                    _say(f"confirmed {done}/{len(share)} of a share, {len(unconfirmed)} not reproduced")

    threads = [threading.Thread(target=work, args=(share,)) for share in shares]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return sorted(unconfirmed)


def select_part(modules: Sequence[str], seed: int, count: int, max_tries: int | None = MAX_TRIES) -> dict[str, Any]:
    """Run the selection over ``modules``' mutants at once, every candidate that runs a mutant's lines tried on it,
    each put handed straight to the driver (:func:`run_directly`); then confirm every kill through the ``exec:``
    target (:func:`confirm`). The figures per module and, per mutant told apart and confirmed, its walk."""
    logging.disable(logging.CRITICAL)  # a planted mutant's server logs its failures; the answers say enough
    mutants = {module: mutants_of(module) for module in modules}
    every = [m for found in mutants.values() for m in found]
    walks = candidates(seed, count)
    result = select(walks, lambda: run_directly, SERVER_PREFIXES, every, per_walk_s=PER_WALK_S, progress=_say,
                    max_tries=max_tries, carried=[({"steps": t["steps"], "shape": t["shape"]}, None) for t in recorded()])
    unconfirmed = confirm(walks, result.killed_by, every)
    return {"seed": seed, "candidates": count, "maxTries": max_tries, "modules": _figures(mutants, result, unconfirmed),
            "killedBy": {n: i for n, i in result.killed_by.items() if n not in unconfirmed}}


def _figures(mutants: dict[str, list[OperatorMutant]], result: Selection, unconfirmed: Sequence[str]
             ) -> dict[str, Any]:
    """A selection's figures per module, its kills not reproduced through the ``exec:`` target (``unconfirmed``) left
    out of those told apart and listed apart."""
    figures: dict[str, Any] = {}
    for module, found in mutants.items():
        names = {m.name for m in found}
        figures[module] = {"mutants": len(found), "toldApart": len((names & result.killed_by.keys()) - set(unconfirmed)),
                           "broken": len(names & set(result.broken)),
                           "timedOut": sorted(_rule(n) for n in result.timed_out if n in names),
                           "unconfirmed": sorted(_rule(n) for n in unconfirmed if n in names),
                           "survivors": sorted(_rule(n) for n in result.survivors if n in names)}
    return figures


def record_problems(selection: dict[str, Any]) -> list[str]:
    """What makes a recorded selection stale (:func:`conformance.operator_mutants.record_problems`): it judges every
    family's mutants of :data:`MODULES` now, each by rule, the broken ones counted without their names."""
    return operator_mutants.selection_problems([m for module in MODULES for m in every_mutant(module)], selection)


UNJUDGED_TRIES: Final = 40
"""Walks (the kept ones first) tried on a mutant the recorded selection had not judged, of the candidates and again of
the settings walks: ``select-unjudged`` tries some 600 mutants in the time ``MAX_TRIES`` gives 150."""
UNJUDGED_WALK_S: Final = 1.0
"""A walk's time limit in ``select-unjudged`` (doubled for its second try): a hang costs 3 s, not 9."""


def select_unjudged_part(recorded_selection: dict[str, Any], modules: Sequence[str] = MODULES,
                         tries: int = UNJUDGED_TRIES) -> dict[str, Any]:
    """The recorded selection carried on over the mutants of every family it did not judge
    (:func:`conformance.operator_mutants.select_unjudged`: by name, or under the name it judged before the module's
    lines moved, on the source of the commit that last wrote the record; those it did not confirm are tried again),
    every walk it kept tried first, at most ``tries`` walks each: the candidates that run a mutant's lines; for one
    outside every function (a class's constants, run at import: on no walk's lines) any candidate; then, for one
    inside a function none of those told apart, the walks with settings off their defaults that run its lines. Every
    new kill confirmed through the ``exec:`` target (:func:`confirm`). The merged selection, every mutant named as it
    is now."""
    logging.disable(logging.CRITICAL)
    seed, count = recorded_selection["seed"], recorded_selection["candidates"]
    walks = candidates(seed, count, recorded_selection["settingsCandidates"])
    mutants = {module: every_mutant(module) for module in modules}
    every = [m for found in mutants.values() for m in found]
    figures = [recorded_selection["modules"][module] for module in modules if module in recorded_selection["modules"]]
    listed = {key: [rule for f in figures for rule in f[key]] for key in ("survivors", "timedOut")}
    killed_before = {n: i for n, i in recorded_selection["killedBy"].items() if n.split(":", 1)[0] in modules}
    judged = judged_by(every, [*killed_before, *listed["survivors"], *listed["timedOut"]], committed_source(VECTOR_FILE))
    earlier = Selection(sorted(set(killed_before.values())), killed_before, listed["survivors"], [], listed["timedOut"])
    _say(f"{len(every)} mutants, {len(judged)} judged by the record, {len(every) - len(judged)} to try")
    first = select_unjudged(walks, lambda: run_directly, SERVER_PREFIXES, every, earlier, judged,
                            per_walk_s=UNJUDGED_WALK_S, progress=_say, max_tries=tries)
    left = [m for m in every if m not in judged and m.name in set(first.survivors)]
    imported = at_import(left)
    second = select(walks, lambda: run_directly, SERVER_PREFIXES, imported, per_walk_s=UNJUDGED_WALK_S,
                    progress=_say, max_tries=tries, traced=False, carried=[(walks[i], None) for i in first.kept])
    on_lines = [m for m in left if m not in imported]
    third = select(walks[count:], lambda: run_directly, SERVER_PREFIXES, on_lines, per_walk_s=UNJUDGED_WALK_S,
                   progress=_say, max_tries=tries, carried=[(walks[i], None) for i in first.kept if i >= count])
    fresh_kills = second.killed_by | {name: count + i for name, i in third.killed_by.items()}
    retried = {m.name for m in left}
    result = Selection(first.kept + [i for i in fresh_kills.values() if i not in first.kept],
                       first.killed_by | fresh_kills,
                       [n for n in first.survivors if n not in retried] + second.survivors + third.survivors,
                       first.broken + second.broken + third.broken,
                       first.timed_out + second.timed_out + third.timed_out)
    new_kills = {name: index for name, index in result.killed_by.items() if name not in {m.name for m in judged}}
    unconfirmed = confirm(walks, new_kills, every)
    return {"seed": seed, "candidates": count, "settingsCandidates": recorded_selection["settingsCandidates"],
            "maxTries": recorded_selection["maxTries"],
            "settingsTries": recorded_selection["settingsTries"], "families": "every", "unjudgedTries": tries,
            **{key: recorded_selection[key] for key in ("derivedCandidates", "derivedTries") if key in recorded_selection},
            "modules": _figures(mutants, result, unconfirmed),
            "killedBy": {n: i for n, i in result.killed_by.items() if n not in unconfirmed}}


DERIVED_TRIES: Final = 150
"""Derived walks (the squash chains at the size threshold) tried on a gap, among those that run its lines."""


def select_derived_part(recorded_selection: dict[str, Any], modules: Sequence[str] = MODULES,
                        tries: int = DERIVED_TRIES, families: Sequence[str] = (),
                        walk_s: float = UNJUDGED_WALK_S) -> dict[str, Any]:
    """The recorded selection carried on over the derived walks (:data:`DERIVED`, after the seeded ones): each mutant
    it left a gap (a survivor :data:`JUDGED` does not judge) tried on at most ``tries`` of those that run its lines
    (the smaller families first: a family derived for a rule is not crowded out by a larger one), one run at import
    (a table's entry, a class's constant) on the first ``tries`` of that order; every new kill confirmed through the
    ``exec:`` target (:func:`confirm`); ``families``: the derived families of those names alone, tried on the suite's
    true gaps (those no other corpus of the sync suite tells apart), every walk of theirs that runs a gap's lines
    (families added after a selection: the recorded ``derivedTries`` stays the earlier families'); a gap a walk of
    theirs ran past ``walk_s`` twice on is listed as timed out. What it told apart, and every walk it kept,
    stays: it only adds. A part of a selection, of ``modules`` only (``record`` merges parts)."""
    logging.disable(logging.CRITICAL)
    seed, count, settings = (recorded_selection[k] for k in ("seed", "candidates", "settingsCandidates"))
    walks = candidates(seed, count, settings)
    first = count + settings
    gaps = [(module, rule) for module in modules for rule in recorded_selection["modules"][module]["survivors"]
            if judgement(rule)[0] == "gap"]
    if families:  # the suite's true gaps: those no other corpus of the sync suite tells apart
        others = told_apart_elsewhere(gaps, [m for module in modules for m in every_mutant(module)],
                                      told_apart_by_others())
        gaps = [gap for gap, other in zip(gaps, others) if other is None]
    tried = [m for module in modules for m in every_mutant(module)
             if (module, _rule(m.name)) in set(gaps) and m.name not in recorded_selection["killedBy"]]
    _say(f"{len(tried)} mutants left gaps, tried on {len(walks) - first} derived walks")
    imported = at_import(tried)
    spans: dict[str, range] = {}
    start = first
    for family in DERIVED:
        spans[family.__name__] = range(start, start + len(family()))
        start = spans[family.__name__].stop
    unknown = set(families) - spans.keys()
    if unknown:
        raise ValueError(f"no derived family {sorted(unknown)}")
    chosen = [span for name, span in spans.items() if not families or name in families]
    order = [i for span in sorted(chosen, key=len) for i in span]  # the smaller families first
    most = None if families else tries
    result = select([walks[i] for i in order], lambda: run_directly, SERVER_PREFIXES,
                    [m for m in tried if m not in imported], per_walk_s=walk_s, progress=_say, max_tries=most)
    # a table's entries or a class's constants, run at import, on no walk's lines: the first walks of that order
    of_tables = select([walks[i] for i in order[:tries]], lambda: run_directly, SERVER_PREFIXES, imported,
                       per_walk_s=walk_s, progress=_say, traced=False)
    kills = {name: order[index] for name, index in (result.killed_by | of_tables.killed_by).items()}
    unconfirmed = set(confirm(walks, kills, tried))
    selection: dict[str, Any] = json.loads(json.dumps(recorded_selection))
    # mutants share a name (two constants 0 of one line): each told apart or timed out leaves the survivors once
    left = Counter(result.survivors + of_tables.survivors + result.broken + of_tables.broken + list(unconfirmed))
    timed_out = Counter(result.timed_out + of_tables.timed_out)
    if not families:  # a selection of every family keeps a gap it timed out on a survivor
        left, timed_out = left + timed_out, Counter()
    for name, count in Counter(m.name for m in tried).items():
        figures = selection["modules"][name.split(":", 1)[0]]
        for _ in range(count - left[name]):
            figures["survivors"].remove(_rule(name))
            if timed_out[name]:
                timed_out[name] -= 1
                figures["timedOut"] = sorted([*figures["timedOut"], _rule(name)])
            else:
                figures["toldApart"] += 1
                selection["killedBy"][name] = kills[name]
    return selection | {"derivedCandidates": len(walks) - first,
                        "derivedTries": recorded_selection["derivedTries"] if families else tries,
                        "modules": {m: f for m, f in selection["modules"].items() if m in modules},
                        "killedBy": {n: i for n, i in selection["killedBy"].items() if n.split(":", 1)[0] in modules}}


def select_more(recorded_selection: dict[str, Any], modules: Sequence[str], max_tries: int = SETTINGS_TRIES,
                again_only: bool = False, settings_only: bool = False, again_pool: int | None = None,
                retry: Sequence[str] = ()) -> dict[str, Any]:
    """The recorded selection carried on over ``modules``: the mutants it did not tell apart tried again, those not
    confirmed through the ``exec:`` target or timed out on the candidates it tried ``MAX_TRIES`` of, the others
    (unless ``again_only``: they stay survivors) on up to ``max_tries`` of the walks with settings off their
    defaults that run their lines (every candidate before them was tried on them already, up to ``MAX_TRIES``);
    every new kill confirmed (:func:`confirm`); ``settings_only``: every mutant left on the settings walks alone;
    ``again_pool``: those retried are tried on every walk kept and the first ``again_pool`` candidates only;
    ``retry``: rules retried besides (those an earlier selection timed out on).
    What it told apart stays so (its mutants' lines have not moved: a mutant is named by its line)."""
    logging.disable(logging.CRITICAL)
    seed, count = recorded_selection["seed"], recorded_selection["candidates"]
    walks = candidates(seed, count)
    told = set(recorded_selection["killedBy"])
    before = set(retry) | (set() if settings_only else {rule for f in recorded_selection["modules"].values()
                                                        for rule in f["unconfirmed"] + f["timedOut"]})
    mutants = {module: mutants_of(module) for module in modules}
    fresh = [m for found in mutants.values() for m in found if m.name not in told]
    again, rest = [m for m in fresh if _rule(m.name) in before], [m for m in fresh if _rule(m.name) not in before]
    pool = list(range(count))
    if again_pool is not None:  # the kept walks and the first ``again_pool``, each tried (no tracing: a short pool)
        pool = sorted(set(recorded_selection["killedBy"].values()) | set(range(again_pool)))
    first = select([walks[i] for i in pool], lambda: run_directly, SERVER_PREFIXES, again, per_walk_s=PER_WALK_S,
                   progress=_say, max_tries=recorded_selection["maxTries"] if again_pool is None else None,
                   traced=again_pool is None) if again else Selection([], {}, [], [], [])
    first = Selection([pool[i] for i in first.kept], {n: pool[i] for n, i in first.killed_by.items()},
                      first.survivors, first.broken, first.timed_out)
    second = select(walks[count:], lambda: run_directly, SERVER_PREFIXES, rest, per_walk_s=PER_WALK_S,
                    progress=_say, max_tries=max_tries) if not again_only else Selection([], {}, [m.name for m in rest],
                                                                                        [], [])
    killed = first.killed_by | {name: count + i for name, i in second.killed_by.items()}
    unconfirmed = set(confirm(walks, killed, fresh))
    timed_out, survivors = first.timed_out + second.timed_out, first.survivors + second.survivors
    figures: dict[str, Any] = {}
    for module, found in mutants.items():
        names = {m.name for m in found}
        figures[module] = {
            "mutants": len(found),
            "toldApart": len(names & told) + len((names & killed.keys()) - unconfirmed),
            "broken": len(names & set(first.broken + second.broken)) + recorded_selection["modules"][module]["broken"],
            "timedOut": sorted(_rule(n) for n in timed_out if n in names),
            "unconfirmed": sorted(_rule(n) for n in unconfirmed if n in names),
            "survivors": sorted(_rule(n) for n in survivors if n in names)}
    return {"seed": seed, "candidates": count, "settingsCandidates": SETTINGS_CANDIDATES,
            "maxTries": recorded_selection["maxTries"], "settingsTries": max_tries, "modules": figures,
            "killedBy": {n: i for n, i in recorded_selection["killedBy"].items() if n.split(":", 1)[0] in modules}
            | {n: i for n, i in killed.items() if n not in unconfirmed}}


def document(selection: dict[str, Any]) -> dict[str, Any]:
    """The vector file: each kept walk once, with the first rule it was kept for and its answers now."""
    walks = candidates(selection["seed"], selection["candidates"], selection.get("settingsCandidates", 0))
    rules: dict[int, list[str]] = {}
    for name, index in sorted(selection["killedBy"].items()):
        rules.setdefault(index, []).append(_rule(name))
    tests = []
    for n, index in enumerate(sorted(rules), 1):
        walk = walks[index]
        tests.append({"tcId": n, "comment": rules[index][0], "walk": index, "shape": walk["shape"],
                      "killed": len(rules[index]), "requires": sorted(requires(walk)), "steps": walk["steps"],
                      "expected": run_in_process(walk)})
    return {
        "algorithm": "seafowl-data-sync/walks",
        "schema": "sync_walks_schema.json",
        "numberOfTests": len(tests),
        "header": [
            "Seeded walks over the sync target's inputs, each kept because it tells the spec apart from one of its "
            "operator mutants (conformance/operator_mutants.py).",
            "Regenerate: python -m conformance.sync.walks select (minutes), then python -m conformance.sync.walks.",
        ],
        "notes": {"comment": "module.function: operator of the first mutant the walk was kept for (of `killed`)"},
        "selection": {k: selection[k] for k in ("seed", "candidates", "settingsCandidates", "maxTries", "settingsTries",
                                                "families", "unjudgedTries", "derivedCandidates", "derivedTries",
                                                "modules", "killedBy")
                      if k in selection},
        "testGroups": [{"type": "SyncWalk", "tests": tests}],
    }


_HELD: Final = "; the machine walks drive it alone (docs/walks/sync-machines.md)"
_CONCURRENT: Final = "puts in flight at once (a walk's puts are one at a time)" + _HELD
_STREAM: Final = "a put stream held open, slow or cut (a walk sends each put whole)"
_ATTRIBUTE: Final = "an attribute no answer carries (a refusal is its text and condition, spec.sync.errors.wire_text)"
_LIFE: Final = ("a put naming a server life (the server-life extension): the target's endpoint draws none, and no "
                "walk's command names one")
_PEAK: Final = "the peak of pending bytes: a server's statistics, not an answer"
_EMPTY_BATCH: Final = ("a put whose record batches hold no rows: a walk's client sends a put without rows as its "
                       "schema alone, and a put with no batch has no schema (put_schema)")
_IDS: Final = "a transaction's id is the writer's own: only that ids differ matters"
_HEALED: Final = ("the flush that heals a table is followed by the schedule's next step (the driver asks until "
                  "nothing is due, under the lock), which finds it due with nothing pending and forgets its failure "
                  "(nothing_left) before anything else can reach it")
_BASE: Final = ("the base class's: every refusal a server sends is of a class naming its own condition and status "
                "(StaleFlushPlan, naming no status, never leaves the server)")
_CALLER: Final = ("a ValueError for a caller's bug: the server endpoint answers a probe itself (admit), gives every "
                  "put with rows its change, and squashes a table's items keeping their transactions in order "
                  "(squash_pending)")
_SAME_TRANSACTIONS: Final = ("the check of a caller's bug that never fails: squash_pending keeps every transaction of "
                              "the items it squashes, in order (equal lists are neither < nor >)")
_KEY_NULLS: Final = ("admission refuses a key null in some of its columns only (SyncSchema.check_keys, from "
                     "admit_rows) and a table's keys are written from non-null new keys: a key's columns are null "
                     "together, so which of them is read, and whether a mixed one is looked for, changes nothing")
_SAME_ROWS: Final = ("a fast path given up falls back to _apply_by_rows, which gives the same rows "
                     "(tests/sync/test_sync_squash_props.py::test_arrow_paths_equal_the_row_by_row_paths)")
_ROW_ORDER: Final = ("the order of the rows it keeps: a Delta table keeps none (a walk reads the rows back sorted, the "
                     "store writes them in key order); the same rows either way")
_COMMUTES: Final = "the Arrow kernel's arguments commute"
_STALE: Final = ("a flush plan completed with a queue other than its own: the server plans and completes a flush under "
                 "one hold of the write lock (reference/sync/server.py _flush), and on its own queue every mutant of "
                 "the check says it covers it, as the check does")
_ONE_ITEM: Final = ("a squash of a table's one squashable item (or none) leaves it as it was (squash_pending keeps a "
                    "run of one), and the table is flushed next as it would have been")
_LOGGED: Final = "read only by the server's log line"
_RUN_OF_ONE: Final = ("a run of one change merged is that change: merge_squashed of one squashed batch is one segment, "
                      "where no row continues another and none is temporary (squashing left none), and run[-1] is "
                      "run[0] (the walks of two schemas in turn, schema_run_walks, show the same pending bytes)")
JUDGED: Final[dict[str, tuple[str, str]]] = {
    "squash._keys: all((v is None": ("equivalent", _KEY_NULLS),
    "squash._all_null": ("equivalent", _KEY_NULLS),
    "squash._apply_full_values: drop _all_null(": ("equivalent", _KEY_NULLS),
    "squash._chainless: produced.num_rows and consumed.num_rows": ("equivalent", "produced is consumed (no rows) when "
                                                                   "consumed has none, and a join with a table of no "
                                                                   "rows pairs none: the check only saves the join"),
    "squash._chainless: swap arguments no_old / no_new": ("equivalent", _COMMUTES),
    "squash._squash: changes.num_rows and": ("equivalent", "a batch of no rows is squashed to itself either way "
                                             "(_chainless marks none, _without returns it)"),
    "squash._same_as_next: swap arguments": ("equivalent", _COMMUTES),
    "squash._same_as_next: 0 -> -1": ("equivalent", "its columns are a table's (one length), never without rows "
                                      "(sorted_distinct returns first, _last_per_key and _untouched pass one row at "
                                      "least), where max(n - 1, 0) and max(n - 1, -1) differ"),
    "squash._sorted: 'then'": ("equivalent", "the column's name is only the sort key's, read back from the same table"),
    "squash._last_per_key": ("equivalent", _ROW_ORDER + " (np.insert puts its one extra True elsewhere: as many "
                             "positions, read only by argsort; one row, or rows of distinct keys, are returned as they "
                             "are, as the general path would; NumPy reads a sort kind by its first letter, in any case)"),
    "squash._untouched: 0 -> -1": ("equivalent", "touched has one column per key name, all of one length"),
    "squash._untouched: negate if np.any(": ("equivalent", _SAME_ROWS),
    "squash._untouched: remove check if np.any(": ("equivalent", "two stored rows never share a key: every write is "
                                                   "keyed"),
    "squash._untouched: remove check if not stored.num_rows": ("equivalent", "with no stored rows the general path "
                                                               "keeps none either"),
    "squash._untouched: tags[positions] == 0: == -> <=": ("equivalent", "a tag is 0 or 1"),
    "squash._apply_full_values: kept is None": ("equivalent", _SAME_ROWS),
    "squash._apply_full_values: negate if kept is None": ("equivalent", _SAME_ROWS),
    "squash._apply_full_values: remove check if kept is None": ("equivalent", "kept is None only when two stored rows "
                                                                "share a key, which no keyed write leaves"),
    "squash._apply_full_values: swap arguments changes / no_new": ("equivalent", "the mask and the table swapped raise "
                                                                   "ArrowTypeError, an ArrowException: " + _SAME_ROWS),
    "squash.apply_squashed: swap arguments stored / changes": (
        "equivalent", "the change's field names read as a table's columns: a change carries an old and a new key "
                      "column of each key name, which cannot both bear it, so some column is not written whole and "
                      "the fast path is given up: " + _SAME_ROWS),
    "squash.needs_stored_values: set(table_columns) <=": ("equivalent", "< and <= differ only when the table's columns "
                                                          "are all the change's whole-value columns, where the mutant "
                                                          "gives the fast path up: " + _SAME_ROWS),
    "squash._squash_by_rows: col.role in (ColumnRole.CHANGED, ColumnRole.VALUE) and co...: drop operand col.role": (
        "equivalent", "a CHANGED column names a value column, never a key (the schema refuses it: changed-names-key), "
                      "so only CHANGED and VALUE columns bear the names it looks up"),
    "squash._apply_by_rows: old is not None and old in by_key: drop operand old is not None": (
        "equivalent", "None is no stored key"),
    "squash.runs_by_schema: 0 -> -1": ("equivalent", "every value of a run has the run's schema"),
    "squash.merge_changes": ("equivalent", _RUN_OF_ONE),
    "squash.squash_pending": ("equivalent", _RUN_OF_ONE + "; rebuilt as an item of the same transactions and bytes "
                                            "(its row count is read by nothing)"),
    "writer.FlushPlan.covers": ("unreachable", _STALE),
    "writer.SyncWriter.complete_flush: q is None or not plan.covers": ("unreachable", _STALE),
    "writer.SyncWriter.complete_flush: remove check if q is None or": ("unreachable", _STALE),
    "writer.FlushPlan.skipped": ("equivalent", _LOGGED),
    "writer.SyncWriter.__init__: durable or {}": ("unreachable", "a writer made without durable numbers: the server "
                                                  "is always given those its store records (reference/sync/server.py)"),
    "writer.SyncWriter._drop: drop self._retire_complete()": (
        "equivalent", "the dropped transaction is the open one, the newest (_open_transaction): no transaction after "
                      "it waits on it (_durable_now holds back only later ones of its origin), so none becomes "
                      "durable by its removal"),
    "writer.SyncWriter._is_replay: swap checks": ("equivalent", "memory >= durable always (a restored durable number "
                                                  "is memory's too): a number at or below durable is not above memory"),
    "writer.SyncWriter.next_action: 1 -> 0": ("equivalent", _ONE_ITEM),
    "writer.SyncWriter.next_action: len(self.squashable_items(table)) > 1: > -> >=": ("equivalent", _ONE_ITEM),
    "writer.SyncWriter.next_action: not tables[table].squashed and len(self.squashable_items(...: drop operand len(": (
        "equivalent", _ONE_ITEM),
    "writer.SyncWriter.squashable_items: all((": ("equivalent", "an item of several transactions is a squash of "
                                                  "squashable, closed ones: all and any agree on every item"),
    "writer.SyncWriter.squashable_items: remove check if q is None": ("unreachable", "the server asks it of a table "
                                                                      "the policy chose among those pending"),
    "writer.SyncWriter.plan_flush: 1 -> 2": ("equivalent", "a sequence number is unsigned: none is at or below -1 or "
                                             "-2"),
    "writer.SyncWriter.plan_flush: table_marks or {}: drop operand {}": ("unreachable", "a flush planned without the "
                                                                         "table's marks: the server passes them, {} "
                                                                         "for a new table (DeltaStore.read_state)"),
    "writer.SyncWriter.put: swap checks open_tx is not None": ("equivalent", "the two checks exclude each other (one "
                                                               "needs an open transaction, the other none)"),
    "writer.SyncWriter.put: open_tx is None and (not queued) and (sequence is not None): drop operand": (
        "equivalent", "a put neither queued nor numbered is a probe, answered by the server (admit), never recorded"),
    "writer.SyncWriter.put: swap arguments rows / sequence": ("unreachable", _CALLER),
    "writer.is_probe: rows == 0: == -> <=": ("equivalent", "a row count is never negative"),
    "writer.SyncWriter.next_deadline: due.append": ("equivalent", "the earliest of the list is read, not its order"),
    "writer.SyncWriter.oldest_table": ("unreachable", "read by the trace replayer (conformance/sync/trace.py), by no "
                                       "server" + _HELD),
    "writer.SyncWriter.pending_items": ("unreachable", "read by no server (the machine walks call it)" + _HELD),
    "admission._signed_max: int(": ("equivalent", "an int already: int and round agree"),
    "admission.admit_rows: pa.types.is_unsigned_integer(kind) and len(column)": (
        "equivalent", "a column of no rows has no nulls: null_count < len is false either way"),
    "admission.admit_rows: swap arguments column / pa.scalar": ("equivalent", _COMMUTES + " (-0.0 + 0.0 is 0.0 "
                                                                "either way)"),
    "admission.name_problem: unicodedata.category(ch) == 'Cc': == -> <=": (
        "equivalent", "no Unicode category sorts before Cc (C's others are Cf, Cn, Co, Cs; every other starts with a "
                      "later letter)"),
    "admission.FIRST_MESSAGE_TIMEOUT_SETTING": ("unreachable", "a command-line option's name: no walk starts a server"),
    "admission.PUT_TIMEOUT_SETTING": ("unreachable", "a command-line option's name: no walk starts a server"),
    "server.SyncServerEndpoint.next_action: remove check if discarded is not None": (
        "equivalent", "the driver only logs a TransactionExpired step and asks again: going on in the same call does "
                      "what the next call does"),
    "server.SyncServerEndpoint.next_action: swap arguments discarded / self.settings": ("equivalent", _LOGGED),
    "errors.refusals: drop reversed(...)": ("equivalent", "no rule reads the order of refusals(): the spec reads it only "
                                            "for the generated docs' table of refusals (spec/docs/sync.py)"),
    "squash._untouched: drop np.sort(...)": ("equivalent", "the order of a rewritten file's rows: a Delta table keeps "
                                             "none (a walk reads the rows back sorted), and a deletion vector names "
                                             "positions of the file it is written against"),
    "admission.PutSlots": ("unreachable", _CONCURRENT),
    "admission.MemoryBudget": ("unreachable", _CONCURRENT),
    "admission.flush_working_set": ("unreachable", "puts in flight at once (a walk's puts are one at a time) while a "
                                    "flush holds its working set" + _HELD),
    "admission.PutStream": ("unreachable", _STREAM + "; its deadlines run on the transport's clock (row 72)" + _HELD),
    "admission.PutReading": ("unreachable", "a put of several messages summed past the put bound, or a message "
                             "over 128 MiB (row 73)" + _HELD),
    "admission.PutLimits": ("unreachable", "limits of messages and streams: " + _STREAM + _HELD),
    "client": ("unreachable", "a client's rule (spec.sync.client): the walks drive a server" + _HELD),
    "responses.shows_restart": ("unreachable", "a client's rule (spec.sync.client), never run by a server" + _HELD),
    "commit_time.commit_timestamp_ms": ("unreachable", "a Delta commit's timestamp: a walk reads rows, and the "
                                        "contract does not move a target's wall clock (row 77)" + _HELD),
    "writer.RunningTotals": ("equivalent", "a Protocol's body, never run"),
    "admission._type_problem: swap checks": ("equivalent", "no Arrow type is both the null type and nested"),
    "writer.SyncWriter.__init__: 0": ("equivalent", _IDS),
    "writer.SyncWriter.put: 1 -> 2": ("equivalent", _IDS),
    "writer.SyncWriter.put: drop self.expire(now)": ("unreachable", "a put after an open transaction's timeout that "
                                                     "comes before the flusher woke: ADVANCE returns once the flusher "
                                                     "has done what fell due, so it has discarded the transaction"),
    "writer.SyncSettings.high_watermark": ("unreachable", "the default high-watermark (none given): the target always "
                                           "sets one"),
    "flush_failures.FlushFailures.waiting": ("equivalent", "at a table's retry instant `due` has it retried first "
                                             "(next_action asks it before the policy), so whether `waiting` still "
                                             "counts it then changes nothing"),
    "flush_failures.FlushFailures.succeeded": ("equivalent", _HEALED),
    "server.SyncServerEndpoint.flushed: drop self._failures.succeeded": ("equivalent", _HEALED),
    "writer.RowGroupLimits.__post_init__": ("unreachable", "row-group limits below one row or byte: no walk sets "
                                            "the store's row-group settings (capability row-groups); the suite's "
                                            "apply/derived-row-groups-at-their-limits sets a limit of one row"),
    "writer.RowGroupLimits.cut": ("unreachable", "a flush of more than one row group: a walk's puts are a few rows, and "
                                  "a read shows a table's rows, not its row groups (the suite's "
                                  "apply/derived-row-groups-at-their-limits reads them, each limit at its bound)"),
    "errors.SyncInvalidMessage.__init__: drop self.reason": ("equivalent", _ATTRIBUTE),
    "errors.SyncError.condition": ("unreachable", _BASE),
    "errors.SyncError.status": ("unreachable", _BASE),
    "errors.SyncInvalidMessage.condition": ("unreachable", _BASE),
    "admission._NESTED: drop entry pa.types.is_struct": ("equivalent", "a struct's children count as columns: the "
                                                          "schema refuses it first (struct-value)"),
    "admission._NESTED: drop entry pa.types.is_dictionary": ("unreachable", "a dictionary-encoded column: its "
                                                              "dictionary messages are refused as Flight data first"),
    "writer.StaleFlushPlan": ("unreachable", "a flush plan completed after its table received more data: the server "
                              "completes a plan under the write lock it made it under (reference/sync/server.py), and "
                              "the refusal never leaves the server"),
    "writer.FlushReason": ("equivalent", "a flush's reason is compared by identity; its value is only named in the "
                           "server's log line and the generated spec's text"),
    "writer.Received": ("equivalent", "what a put did is compared by identity; no code reads its value"),
    "writer.row_ends": ("unreachable", "the bytes a flush's rows are cut into row groups by (what "
                        "RowGroupLimits.cut reads): a walk's flush is a few rows, under any limit the store is given "
                        "by default, and a read shows a table's rows, not its row groups (the suite's "
                        "apply/derived-row-groups-at-their-limits cuts at each limit's bound)"),
    "writer.SyncWriter.put: 'a probe is answered": ("unreachable", _CALLER),
    "writer.SyncWriter.put: 'a put with rows needs": ("unreachable", _CALLER),
    "writer.SyncWriter.put: remove check if is_probe(rows, sequence)": ("unreachable", _CALLER),
    "writer.SyncWriter.put: remove check if payload is None": ("unreachable", _CALLER),
    "writer.SyncWriter.squashed: 'squashed items must cover": ("unreachable", _CALLER),
    "writer.SyncWriter.squashed: [t for i in new_items": ("equivalent", _SAME_TRANSACTIONS),
    "writer.SyncWriter.squashed: remove check if [t for i in new_items": ("equivalent", _SAME_TRANSACTIONS),
    "server.SyncServerEndpoint.put_schema: \"a truncating put": ("unreachable", _EMPTY_BATCH),
    "server.SyncServerEndpoint.put_schema: remove check if cmd.truncate and arrow is None": ("unreachable", _EMPTY_BATCH),
    "server.SyncServerEndpoint.record: remove check if not claim()": ("unreachable", "a put whose call ended before "
                                                                      "it was recorded (its claim refused): a walk's "
                                                                      "puts are each claimed"),
    "server.SyncServerEndpoint.record: swap arguments self._writer.in_memory_bytes / size": (
        "equivalent", "fits_watermark sums its first two arguments"),
    "errors.SyncSchemaError.__init__: drop self.reason": ("equivalent", _ATTRIBUTE),
    "errors.StreamDeadlineExceeded.__init__: drop self.setting": ("equivalent", _ATTRIBUTE),
    "errors.TransactionDiscarded.__init__: drop self.origin": ("equivalent", _ATTRIBUTE),
    "errors.condition_in": ("unreachable", "a client's rule (spec.sync.client reads a refusal's condition)" + _HELD),
    "errors.BearerTokenRequired": ("unreachable", "a bearer token: the target requires none of a walk"),
    "errors.FlightDataError": ("unreachable", "Flight messages no Flight client sends (the decode corpus drives them, "
                               "docs/walks/sync-decode.md)"),
    "errors.InterruptedPut": ("unreachable", "a put whose call ended before it was recorded" + _HELD),
    "errors.PutSlotsBusy": ("unreachable", _CONCURRENT),
    "errors.StreamDeadlineExceeded": ("unreachable", _STREAM + _HELD),
    "errors.ServerRestarted": ("unreachable", _LIFE),
    "server.SyncServerEndpoint.admit: cmd.server_life": ("unreachable", _LIFE),
    "server.SyncServerEndpoint.admit: not probe and cmd.server_life": ("unreachable", _LIFE),
    "server.SyncServerEndpoint.admit: remove check if not probe and cmd.server_life": ("unreachable", _LIFE),
    "server.SyncServerEndpoint.admit: swap arguments cmd.": ("unreachable", _LIFE + " (the refusal's arguments)"),
    "server.SyncServerEndpoint.admit: life": ("unreachable", _LIFE),
    "server.SyncServerEndpoint.admit: drop not in not probe": ("unreachable", _LIFE),
    "server.SyncServerEndpoint.__init__": ("unreachable", _PEAK),
    "server.SyncServerEndpoint.record: 0": ("unreachable", _PEAK),
    "server.SyncServerEndpoint.record: drop self.peak_pending_bytes": ("unreachable", _PEAK),
    "server.SyncServerEndpoint.record: max(self.peak_pending_bytes": ("unreachable", _PEAK),
    "server.SyncServerEndpoint.record: swap checks": ("unreachable", "a put whose call ended before it was recorded "
                                                      "(its claim refused): a walk's puts are each claimed"),
    "server.SyncServerEndpoint.put_schema: 0 -> -1": ("equivalent", "every batch of one stream has the stream's schema"),
    "server.SyncServerEndpoint.change: 0 -> -1": ("unreachable", _EMPTY_BATCH),
    "server.SyncServerEndpoint.change: rows > 0": ("unreachable", _EMPTY_BATCH),
    "server.SyncServerEndpoint.change: not (rows > 0 or cmd.truncate)": ("unreachable", _EMPTY_BATCH),
}
"""Survivors judged by hand, by ``module.function`` (or ``module.function: operator`` prefix), the longest
match wins: ``("equivalent", why)`` or ``("unreachable", the input the interface lacks)``; the rest are gaps."""


def judgement(rule: str) -> tuple[str, str]:
    """``(class, reason)`` of a survivor: equivalent, unreachable or gap; a mutant the machine walks judge equivalent
    (docs/walks/sync-machines.md) is equivalent here too (the same code, whoever calls it)."""
    from conformance.sync.machine_walks import JUDGED as MACHINES_JUDGED

    kind, why = operator_mutants.judgement(rule, JUDGED)
    if kind == "gap":
        elsewhere, reason = operator_mutants.judgement(rule, MACHINES_JUDGED)
        if elsewhere == "equivalent":
            return elsewhere, f"{reason} (judged in docs/walks/sync-machines.md)"
    return kind, why


def told_apart_by_others() -> dict[str, Counter[Rule]]:
    """What each other corpus of the sync suite tells apart, by rule, as recorded: the input corpus (one request), the
    machine walks (calls on one machine), the decode corpus (bytes handed to one decoder)."""
    from conformance.sync import decode, inputs, machine_walks

    return {name: told_apart_in_file(path) for name, path in (
        ("inputs", inputs.VECTOR_FILE), ("decode", decode.VECTOR_FILE), ("machine walks", machine_walks.FILES.record))}


def report(doc: dict[str, Any]) -> str:
    """``docs/walks/sync.md``: the figures per module and the survivors by function and operator, judged; the
    mutants that only timed out, and those whose kill the ``exec:`` target did not reproduce, listed apart."""
    sel = doc["selection"]
    lines = ["# Walk corpus: sync", "",
             "Generated by `python -m conformance.sync.walks` from `conformance/sync/vectors/walks.json`; do not edit.",
             "", f"Seed {sel['seed']}, {sel['candidates']} candidate walks; the candidates that run a mutant's lines "
             f"were tried on it, the walks kept so far first, {_tries(sel['maxTries'])}"
             + _settings_tries(sel) + ", each put handed straight to the reference driver "
             "(`SyncServer.on_put`, no gRPC); every kill was then confirmed through the reference target as an `exec:` "
             f"target with the mutant planted in a copy of the tree. {doc['numberOfTests']} walks kept. A walk past its "
             f"time limit twice ({PER_WALK_S:g} s, then {2 * PER_WALK_S:g} s) tells nothing: a mutant on which one did "
             "is listed apart, never told apart (a flusher asking again and again to be woken at a time already "
             "reached is no such hang: the target answers that `ADVANCE` with an error, `conformance.sync.clock."
             "SPIN_LIMIT`; what still times out loops within one call). Score: told apart / (mutants - broken - "
             "equivalent). " + _families(sel) + _derived(sel), "",
             "What neither the walks nor the selection's runner express (the runner hands each put to the driver whole, "
             "as the transport does once a stream ended; every walk step is expressible): a put split over several "
             "messages, a stream held open, slow or cut, puts in flight at once, the put slots and the connection cap "
             "(`spec.admission`), a put whose call ended before it was recorded; the write-lock timeout's edge (a "
             "put waiting that long for a flush that holds the lock: a race on the wall clock; the settings walks "
             "show puts served under a timeout off its default), and the default high-watermark (threshold plus one "
             "message), as the target always sets one. Every other setting is walked off its default (`SETTINGS`, "
             "capability `settings`, one generator over `SETTING_EDGES`): an event at its edge a tick or a byte "
             "before, at the instant and after, and a no-op that must write nothing.", "",
             "| module | mutants | told apart | broken | timed out | not confirmed | equivalent | unreachable | gap "
             "| score | gap told apart elsewhere | true gap |", "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    survivors = [(module, rule) for module, f in sel["modules"].items() for rule in f["survivors"]]
    elsewhere = dict(zip(survivors, told_apart_elsewhere(survivors, [m for module in sel["modules"]
                                                                     for m in every_mutant(module)], told_apart_by_others())))
    total = [0] * 10
    for module, f in sel["modules"].items():
        classes = [judgement(s)[0] for s in f["survivors"]]
        gaps_elsewhere = sum(judgement(s)[0] == "gap" and elsewhere[(module, s)] is not None for s in f["survivors"])
        row = [f["mutants"], f["toldApart"], f["broken"], len(f["timedOut"]), len(f["unconfirmed"]),
               classes.count("equivalent"), classes.count("unreachable"), classes.count("gap"), gaps_elsewhere,
               classes.count("gap") - gaps_elsewhere]
        total = [a + b for a, b in zip(total, row)]
        lines.append(f"| {module} | " + " | ".join(map(str, row[:8])) + f" | {_score(row)} | {row[8]} | {row[9]} |")
    lines.append("| **all** | " + " | ".join(map(str, total[:8])) + f" | {_score(total)} | {total[8]} | {total[9]} |")
    by_corpus = Counter(elsewhere[(m, s)] for m, s in survivors if judgement(s)[0] == "gap" and elsewhere[(m, s)])
    lines += ["", f"Of the {total[7]} gaps, {total[8]} are told apart by another corpus of the sync suite ("
              + ", ".join(f"{name} {n}" for name, n in sorted(by_corpus.items())) + "; "
              "`corpus_record.told_apart_elsewhere`, by rule): the suite's true gaps are the other "
              f"{total[9]}, unmarked below."]
    missing = [m for m in MODULES if m not in sel["modules"]]
    if missing:
        lines += ["", "Not selected in this run (their mutants are not counted above): "
                  + ", ".join(f"`{m}`" for m in missing) + "."]
    for key, heading, text in (
            ("timedOut", "Timed out", "No walk told these apart; at least one ran past its time limit twice."),
            ("unconfirmed", "Not confirmed", "Told apart in process, but the `exec:` target answered the walk as "
             "recorded: not counted as told apart, and the walk is not kept for them.")):
        listed = [(module, rule) for module, f in sel["modules"].items() for rule in f[key]]
        if listed:
            lines += ["", f"## {heading}", "", text, ""] + [f"- `{rule}`" for _, rule in listed]
    lines += ["", "## Survivors", "", "Each with its judgement: equivalent (why), unreachable through the walk "
              "vocabulary (the input it lacks), or gap (no walk of the candidates tells it apart yet); marked with the "
              "other corpus of the sync suite that tells it apart, if one does: *inputs* (one request, "
              "docs/walks/sync-inputs.md), *machine walks* (calls on one machine, docs/walks/sync-machines.md), "
              "*decode* (bytes handed to one decoder, docs/walks/sync-decode.md).", ""]
    for module, f in sel["modules"].items():
        if not f["survivors"]:
            continue
        lines += [f"### {module}", ""]
        for survivor in f["survivors"]:
            kind, why = judgement(survivor)
            other = elsewhere[(module, survivor)]
            lines.append(f"- `{survivor}`: {kind}" + (f", {why}" if why else "") + (f"; *{other}*" if other else ""))
        lines.append("")
    return "\n".join(lines).rstrip() + "\n"


def _tries(max_tries: int | None) -> str:
    return "every one of them" if max_tries is None else f"at most {max_tries} of them (in candidate order, the shapes in turn)"


def _settings_tries(sel: dict[str, Any]) -> str:
    if not sel.get("settingsCandidates"):
        return ""
    return (f"; then {sel['settingsCandidates']} walks with settings off their defaults, tried on the mutants the "
            f"others left, at most {sel['settingsTries']} each (those not confirmed before again on the first "
            f"{sel['candidates']})")


def _families(sel: dict[str, Any]) -> str:
    """How the mutants of the families after the first-order ones were selected (none: the first-order alone)."""
    if sel.get("families") != "every":
        return "The mutants are the first-order operators' (`operator_mutants.mutants_of`)."
    return ("The mutants are every family's (`operator_mutants.every_mutant`: the first-order operators, then the "
            "classes of bug the blind rounds planted). Those the first-order selection had not judged were selected "
            "after it (`select-unjudged`, `operator_mutants.select_unjudged`): a mutant it judged kept its verdict, "
            "under its own name or under the name it had before its module's lines moved when it plants the same text "
            "there (the source of the commit that last wrote the record); the others were tried with every walk kept "
            f"first, at most {sel['unjudgedTries']} walks each (a walk's limit {UNJUDGED_WALK_S:g} s, then "
            f"{2 * UNJUDGED_WALK_S:g} s): the candidates that run its lines, or any candidate for one outside every "
            "function (a class's constants, run at import, on no walk's lines), then the settings walks that run "
            "its lines.")


def _derived(sel: dict[str, Any]) -> str:
    """How the derived walks were selected (none: not yet)."""
    if not sel.get("derivedCandidates"):
        return ""
    return (f" Then {sel['derivedCandidates']} derived walks (`squash_edge_walks`: every squash chain of up to "
            f"{CHAIN_LENGTH} changes on keys {', '.join(map(str, CHAIN_KEYS))} from every stored state, each change its "
            "own put, laid out plain, with CHANGED flags, alternating column orders or truncating, the size threshold "
            "reached by its last put or the one before; `nested_type_walks`: a put of a value of each nested type; "
            "`two_failing_walks`: two tables failing at once, retried a quarter second apart; "
            "`truncating_run_walks`: chains of three whose run of items to squash starts at a truncate; "
            "`format_walks`: a put in a table format above and below Delta's; `any_chain_walks`: every chain of two "
            "changes of any kind, a replayed insert and an update of an absent key among them, and a temporary row, in "
            "a table of keys alone too; `two_truncate_walks`: two truncating puts in one flush; "
            "`replayed_flush_walks`: transactions across two tables replayed after a restart lost one; "
            "`dropped_open_walks`: an open transaction dropped from a table holding other data, or from a failing one; "
            "`failing_policy_walks`: a failing table past the size threshold, or under a policy raised while it waits; "
            "`derived_vocabulary_walks`: an unsigned value at its signed bound, two record batches in one put, a "
            "command that is no DataSyncCommand; `schema_run_walks`: puts of two schemas in turn at the size "
            "threshold) were tried on the gaps the seeded walks left, at most "
            f"{sel['derivedTries']} each (`select-derived`; the families after `format_walks` were added later and "
            "tried on the suite's true gaps left then, every walk of theirs that runs a gap's lines), every kill confirmed "
            "as above.")


def _score(row: Sequence[int]) -> str:
    mutants, told, broken, equivalent = row[0], row[1], row[2], row[5]
    judged = mutants - broken - equivalent
    return f"{100 * told / judged:.0f}%" if judged else "-"


def _merge(parts: Sequence[Path]) -> dict[str, Any]:
    """One selection from parts run side by side over the same candidates (a module selected in two parts keeps
    the figures of the later)."""
    merged: dict[str, Any] = {"modules": {}, "killedBy": {}}
    for part in parts:
        data = json.loads(part.read_text())
        if merged.get("seed", data["seed"]) != data["seed"] or merged.get("candidates", data["candidates"]) != data[
                "candidates"]:
            raise ValueError(f"{part} was selected from other candidates")
        if merged.get("maxTries", data["maxTries"]) != data["maxTries"]:
            raise ValueError(f"{part} tried another number of walks per mutant")
        merged.update(seed=data["seed"], candidates=data["candidates"], maxTries=data["maxTries"],
                      settingsCandidates=data.get("settingsCandidates", 0),
                      settingsTries=max(merged.get("settingsTries") or 0, data.get("settingsTries") or 0) or None,
                      **{key: data[key] for key in ("families", "unjudgedTries", "derivedCandidates", "derivedTries")
                         if key in data})
        for module, figures in data["modules"].items():
            # counted per mutant: two mutants of one line with one operator (two constants ``0``) share a name
            figures["toldApart"] = figures["mutants"] - figures["broken"] - sum(
                len(figures[key]) for key in ("timedOut", "unconfirmed", "survivors"))
            merged["modules"][module] = figures
            merged["killedBy"] = {name: i for name, i in merged["killedBy"].items() if not name.startswith(module + ":")}
            merged["killedBy"].update({name: i for name, i in data["killedBy"].items() if name.startswith(module + ":")})
    merged["modules"] = {m: merged["modules"][m] for m in MODULES if m in merged["modules"]}
    return merged


def main(argv: Sequence[str] | None = None) -> int:
    """``select [--modules M ...] --out PART``: run the selection (minutes, under nice); ``select-unjudged --out
    PART``: carry the recorded selection on over the mutants it does not judge (:func:`select_unjudged_part`);
    ``select-derived --out PART``: over the gaps it left, with the derived walks (:func:`select_derived_part`);
    ``record PART ...``: write the vectors and the report from selections; without a command: regenerate both from the
    recorded selection (``--check``: exit 1 when either is stale, or the selection no longer judges the spec's
    mutants, :func:`record_problems`)."""
    args = list(sys.argv[1:] if argv is None else argv)
    if args[:1] == ["select"]:
        parser = argparse.ArgumentParser(prog="python -m conformance.sync.walks select")
        parser.add_argument("--modules", nargs="*", default=list(MODULES))
        parser.add_argument("--candidates", type=int, default=CANDIDATES)
        parser.add_argument("--max-tries", type=int, default=MAX_TRIES)
        parser.add_argument("--out", type=Path, required=True)
        opts = parser.parse_args(args[1:])
        opts.out.write_text(json.dumps(select_part(opts.modules, SEED, opts.candidates, opts.max_tries)))
        return 0
    if args[:1] == ["select-more"]:
        parser = argparse.ArgumentParser(prog="python -m conformance.sync.walks select-more")
        parser.add_argument("--modules", nargs="*", default=list(MODULES))
        parser.add_argument("--max-tries", type=int, default=SETTINGS_TRIES)
        parser.add_argument("--out", type=Path, required=True)
        parser.add_argument("--again-only", action="store_true")
        parser.add_argument("--settings-only", action="store_true")
        parser.add_argument("--again-pool", type=int)
        parser.add_argument("--retry-timed-out-in", type=Path, help="a selection whose timed-out mutants are retried")
        opts = parser.parse_args(args[1:])
        recorded_selection = json.loads(VECTOR_FILE.read_text())["selection"]
        retry = [] if opts.retry_timed_out_in is None else [
            rule for f in json.loads(opts.retry_timed_out_in.read_text())["modules"].values() for rule in f["timedOut"]]
        opts.out.write_text(json.dumps(select_more(recorded_selection, opts.modules, opts.max_tries, opts.again_only,
                                                   opts.settings_only, opts.again_pool, retry)))
        return 0
    carried_on = {"select-unjudged": (select_unjudged_part, UNJUDGED_TRIES),
                  "select-derived": (select_derived_part, DERIVED_TRIES)}
    if args[:1] and args[0] in carried_on:
        carry_on, tries = carried_on[args[0]]
        parser = argparse.ArgumentParser(prog=f"python -m conformance.sync.walks {args[0]}")
        parser.add_argument("--modules", nargs="*", default=list(MODULES))
        parser.add_argument("--tries", type=int, default=tries)
        parser.add_argument("--out", type=Path, required=True)
        if carry_on is select_derived_part:
            parser.add_argument("--families", nargs="*", default=[], help="derived families to try (default: all)")
            parser.add_argument("--walk-s", type=float, default=UNJUDGED_WALK_S, help="a walk's time limit")
        opts = parser.parse_args(args[1:])
        recorded_selection = json.loads(VECTOR_FILE.read_text())["selection"]
        part = (select_derived_part(recorded_selection, opts.modules, opts.tries, opts.families, opts.walk_s)
                if carry_on is select_derived_part else carry_on(recorded_selection, opts.modules, opts.tries))
        opts.out.write_text(json.dumps(part))
        return 0
    if args[:1] == ["record"]:
        selection = _merge([Path(a) for a in args[1:]])
    else:
        selection = json.loads(VECTOR_FILE.read_text())["selection"]
    doc = document(selection)
    status = vectorgen.write_or_check("conformance.sync.walks", __doc__, VECTOR_FILE, lambda: vectorgen.render(doc),
                                      [a for a in args if a == "--check"])
    if "--check" in args:
        stale = not REPORT_FILE.exists() or REPORT_FILE.read_text() != report(doc)
        for problem in record_problems(selection):
            print(f"{VECTOR_FILE}'s selection {problem}: python -m conformance.sync.walks select-unjudged --out PART, "
                  "then record PART", file=sys.stderr)
            stale = True
        return status or (print(f"{REPORT_FILE} is stale", file=sys.stderr) or 1 if stale else 0)
    REPORT_FILE.parent.mkdir(parents=True, exist_ok=True)
    REPORT_FILE.write_text(report(doc))
    return status


# -- the suite's cases ------------------------------------------------------------------------------------------

GROUP_COST: Final = 40
"""A case replays walks of one shape costing at most this much (a walk 1, a restart 15 more): each case stays a
few seconds on a loaded machine, under the per-case limit ``conformance sensitivity`` gives."""


def _cost(test: dict[str, Any]) -> int:
    return 1 + 15 * sum("restart" in step for step in test["steps"])


def recorded() -> list[dict[str, Any]]:
    """The recorded walks (none before the first selection)."""
    if not VECTOR_FILE.exists():
        return []
    tests: list[dict[str, Any]] = json.loads(VECTOR_FILE.read_text())["testGroups"][0]["tests"]
    return tests


def groups() -> list[tuple[str, list[int]]]:
    """``(case suffix, tcIds)``: the recorded walks by shape, each shape cut where its cost passes GROUP_COST."""
    out: list[tuple[str, list[int]]] = []
    by_shape: dict[str, list[dict[str, Any]]] = {}
    for test in recorded():
        by_shape.setdefault(test["shape"].removesuffix("_walk"), []).append(test)
    for shape, tests in sorted(by_shape.items()):
        part: list[int] = []
        cost = 0
        for test in tests:
            if part and cost + _cost(test) > GROUP_COST:
                out.append((shape, part))
                part, cost = [], 0
            part.append(test["tcId"])
            cost += _cost(test)
        out.append((shape, part))
    numbered: list[tuple[str, list[int]]] = []
    for shape, ids in out:
        same = [i for s, i in out if s == shape]
        numbered.append((shape if len(same) == 1 else f"{shape}-{same.index(ids) + 1}", ids))
    return numbered


def replay_case(ids: Sequence[int]) -> Callable[[SyncTarget, CaseContext], Verdict]:
    """The check replaying walks ``ids`` on the target; the first answer that differs fails it."""

    def check(t: SyncTarget, ctx: CaseContext) -> Verdict:
        tests = [test for test in recorded() if test["tcId"] in ids]
        ran = [test for test in tests if set(test["requires"]) <= t.capabilities]
        for test in ran:
            ctx.remaining()
            got = run_walk(t, test)
            if got != test["expected"]:
                step = next((i for i, (a, b) in enumerate(zip(got, test["expected"])) if a != b), len(got))
                return Verdict(False, f"walk tcId {test['tcId']} (kept for {test['comment']}), step {step} "
                               f"{json.dumps(test['steps'][step])[:300]}: {json.dumps(test['expected'][step])}",
                               json.dumps(got[step]) if step < len(got) else "no answer")
        return Verdict(True, f"{len(ran)} walks answer as recorded", f"{len(ran)} of {len(tests)} replayed "
                       f"({len(tests) - len(ran)} need a capability the target does not declare)")

    return check


if __name__ == "__main__":
    sys.exit(main())

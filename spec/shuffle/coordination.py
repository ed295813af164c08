"""The coordinator protocol: where writer tasks announce their servers and readers find them.

Spark 4.3.0 keeps this in the driver's ``StreamingShuffleOutputTracker`` (writers register
``(executor, host, port)``, readers poll every 10 ms). Its RPC is internal to Spark, so this is
our own small protocol, specified here like the shuffle's: construct layouts are the single
source of truth, every message is length-prefixed, every size read from the wire is bounded
before use, and failures come back as typed errors with condition names.

A request is answered by exactly one response on the same connection. A shuffle *attempt* is one
run of the writers for one run of the readers: recomputing the lazy result starts a new attempt,
so readers never see the servers of an earlier run.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import IntEnum
from typing import Final, Union

from construct import (
    Int8ub,
    Int16ub,
    Int32sb,
    Int32ub,
    PascalString,
    PrefixedArray,
    Struct,
    Switch,
    Terminated,
    this,
)
from construct import ConstructError

from spec.shuffle.errors import ShuffleError

MAX_MESSAGE_LENGTH: Final = 1 << 20
"""Largest coordinator message (length prefix excluded); larger announced lengths are rejected unread."""

MAX_TEXT_BYTES: Final = 16 * 1024
"""Largest text field (executor id, host, failure description), in UTF-8 bytes."""

POLL_INTERVAL_S: Final = 0.010
"""Readers poll for writers every 10 ms, as Spark's tracker clients do."""


class Kind(IntEnum):
    """Message kinds; requests below 64, responses from 64."""

    REGISTER = 1
    LOOKUP = 2
    UNREGISTER = 3
    REPORT_FAILURE = 4
    JOIN = 5
    OK = 64
    WRITERS = 65
    JOINED = 66
    ERROR = 127


class Role(IntEnum):
    WRITER = 0
    READER = 1
    DRIVER = 2


_TEXT = PascalString(Int16ub, "utf8")

LENGTH_PREFIX = Int32ub * "length of the message that follows, at most MAX_MESSAGE_LENGTH"

SHUFFLE_KEY = Struct(
    "shuffle_id" / Int32sb * "shuffle id assigned by the driver",
    "attempt" / Int32sb * "run of this shuffle; recomputing the result starts a new one",
)

WRITER_ENTRY = Struct(
    "writer_id" / Int32sb * "map task partition id",
    "executor" / _TEXT * "executor id of the writer task",
    "host" / _TEXT * "host the writer's server listens on",
    "port" / Int16ub * "TCP port of the writer's server",
)

BODIES = {
    Kind.REGISTER: Struct("key" / SHUFFLE_KEY, "writer" / WRITER_ENTRY),
    Kind.LOOKUP: Struct("key" / SHUFFLE_KEY),
    Kind.UNREGISTER: Struct("key" / SHUFFLE_KEY, "writer_id" / Int32sb),
    Kind.REPORT_FAILURE: Struct(
        "key" / SHUFFLE_KEY,
        "role" / Int8ub * "0 writer, 1 reader, 2 driver",
        "task" / Int32sb * "writer or reader id (-1 for the driver)",
        "description" / _TEXT * "root cause as the failing task reports it",
    ),
    Kind.JOIN: Struct("shuffle_id" / Int32sb, "reader_id" / Int32sb),
    Kind.OK: Struct(),
    Kind.WRITERS: Struct(
        "failure" / _TEXT * "first failure reported for the attempt; empty when none",
        "writers" / PrefixedArray(Int32ub, WRITER_ENTRY) * "every writer registered so far",
    ),
    Kind.JOINED: Struct("attempt" / Int32sb),
    Kind.ERROR: Struct("condition" / _TEXT, "message" / _TEXT),
}

MESSAGE = Struct(
    "kind" / Int8ub * "a Kind",
    "body" / Switch(this.kind, {int(k): v for k, v in BODIES.items()}),
    Terminated,
)
"""One coordinator message (after its length prefix)."""


class CoordinationError(ShuffleError):
    """A coordinator request failed, or its bytes did not form a message."""

    condition = "STREAMING_SHUFFLE_COORDINATION_ERROR"


class MalformedMessage(CoordinationError):
    condition = "STREAMING_SHUFFLE_COORDINATION_MALFORMED"

    def __init__(self, reason: str) -> None:
        super().__init__(f"malformed coordinator message: {reason}", reason=reason)


class MessageTooLarge(CoordinationError):
    condition = "STREAMING_SHUFFLE_COORDINATION_TOO_LARGE"

    def __init__(self, length: int) -> None:
        super().__init__(f"coordinator message of {length} bytes exceeds {MAX_MESSAGE_LENGTH}",
                         length=length, maximum=MAX_MESSAGE_LENGTH)


class RemoteError(CoordinationError):
    """The coordinator answered with ERROR; ``remote_condition`` is its condition name."""

    condition = "STREAMING_SHUFFLE_COORDINATION_REMOTE_ERROR"

    def __init__(self, remote_condition: str, message: str) -> None:
        super().__init__(f"{remote_condition}: {message}", remoteCondition=remote_condition)
        self.remote_condition = remote_condition


@dataclass(frozen=True, slots=True)
class ShuffleKey:
    shuffle_id: int
    attempt: int


@dataclass(frozen=True, slots=True)
class WriterLocation:
    """Where a writer task's server listens."""

    writer_id: int
    executor: str
    host: str
    port: int


@dataclass(frozen=True, slots=True)
class Register:
    key: ShuffleKey
    writer: WriterLocation


@dataclass(frozen=True, slots=True)
class Lookup:
    key: ShuffleKey


@dataclass(frozen=True, slots=True)
class Unregister:
    key: ShuffleKey
    writer_id: int


@dataclass(frozen=True, slots=True)
class ReportFailure:
    key: ShuffleKey
    role: Role
    task: int
    description: str


@dataclass(frozen=True, slots=True)
class Join:
    """A reader task starts: which attempt does it belong to (starting the writers if new)?"""

    shuffle_id: int
    reader_id: int


@dataclass(frozen=True, slots=True)
class Ok:
    pass


@dataclass(frozen=True, slots=True)
class Writers:
    """The writers known so far and the attempt's first failure ("" when none)."""

    failure: str
    writers: tuple[WriterLocation, ...]


@dataclass(frozen=True, slots=True)
class Joined:
    attempt: int


@dataclass(frozen=True, slots=True)
class Error:
    condition: str
    message: str


Request = Union[Register, Lookup, Unregister, ReportFailure, Join]
Response = Union[Ok, Writers, Joined, Error]
CoordinatorMessage = Union[Request, Response]


def _key(value: ShuffleKey) -> dict[str, int]:
    return {"shuffle_id": value.shuffle_id, "attempt": value.attempt}


def _entry(w: WriterLocation) -> dict[str, object]:
    return {"writer_id": w.writer_id, "executor": w.executor, "host": w.host, "port": w.port}


def _check_text(*texts: str) -> None:
    for text in texts:
        if len(text.encode()) > MAX_TEXT_BYTES:
            raise MalformedMessage(f"text field of {len(text.encode())} bytes exceeds {MAX_TEXT_BYTES}")


def _to_container(message: CoordinatorMessage) -> tuple[Kind, dict[str, object]]:
    if isinstance(message, Register):
        _check_text(message.writer.executor, message.writer.host)
        return Kind.REGISTER, {"key": _key(message.key), "writer": _entry(message.writer)}
    if isinstance(message, Lookup):
        return Kind.LOOKUP, {"key": _key(message.key)}
    if isinstance(message, Unregister):
        return Kind.UNREGISTER, {"key": _key(message.key), "writer_id": message.writer_id}
    if isinstance(message, ReportFailure):
        description = truncate_text(message.description)
        return Kind.REPORT_FAILURE, {"key": _key(message.key), "role": int(message.role),
                                     "task": message.task, "description": description}
    if isinstance(message, Join):
        return Kind.JOIN, {"shuffle_id": message.shuffle_id, "reader_id": message.reader_id}
    if isinstance(message, Ok):
        return Kind.OK, {}
    if isinstance(message, Writers):
        return Kind.WRITERS, {"failure": truncate_text(message.failure),
                              "writers": [_entry(w) for w in message.writers]}
    if isinstance(message, Joined):
        return Kind.JOINED, {"attempt": message.attempt}
    return Kind.ERROR, {"condition": truncate_text(message.condition), "message": truncate_text(message.message)}


def truncate_text(text: str) -> str:
    """Cut ``text`` to at most MAX_TEXT_BYTES of UTF-8 (long failure traces are cut, not rejected)."""
    raw = text.encode()
    return text if len(raw) <= MAX_TEXT_BYTES else raw[:MAX_TEXT_BYTES].decode(errors="ignore")


def encode(message: CoordinatorMessage) -> bytes:
    """The message with its length prefix."""
    kind, body = _to_container(message)
    raw: bytes = MESSAGE.build({"kind": int(kind), "body": body})
    if len(raw) > MAX_MESSAGE_LENGTH:
        raise MessageTooLarge(len(raw))
    return bytes(LENGTH_PREFIX.build(len(raw))) + raw


def check_length(prefix: bytes) -> int:
    """The length announced by a 4-byte prefix, bounded before anything is read."""
    length: int = LENGTH_PREFIX.parse(prefix)
    if length > MAX_MESSAGE_LENGTH:
        raise MessageTooLarge(length)
    return length


def _location(c: object) -> WriterLocation:
    d: dict[str, object] = dict(c)  # type: ignore[call-overload]
    return WriterLocation(int(d["writer_id"]), str(d["executor"]), str(d["host"]), int(d["port"]))  # type: ignore[call-overload]


def decode(body: bytes) -> CoordinatorMessage:
    """Decode one message (without its length prefix); every byte must belong to it."""
    try:
        parsed = MESSAGE.parse(body)
        kind = Kind(parsed.kind)
    except (ConstructError, ValueError, UnicodeDecodeError) as exc:
        raise MalformedMessage(str(exc).splitlines()[0] if str(exc) else type(exc).__name__) from None
    b = parsed.body
    if kind in (Kind.REGISTER, Kind.LOOKUP, Kind.UNREGISTER, Kind.REPORT_FAILURE):
        key = ShuffleKey(b.key.shuffle_id, b.key.attempt)
        if kind is Kind.REGISTER:
            return Register(key, _location(b.writer))
        if kind is Kind.LOOKUP:
            return Lookup(key)
        if kind is Kind.UNREGISTER:
            return Unregister(key, b.writer_id)
        try:
            role = Role(b.role)
        except ValueError:
            raise MalformedMessage(f"unknown role {b.role}") from None
        return ReportFailure(key, role, b.task, b.description)
    if kind is Kind.JOIN:
        return Join(b.shuffle_id, b.reader_id)
    if kind is Kind.OK:
        return Ok()
    if kind is Kind.WRITERS:
        return Writers(b.failure, tuple(_location(w) for w in b.writers))
    if kind is Kind.JOINED:
        return Joined(b.attempt)
    return Error(b.condition, b.message)

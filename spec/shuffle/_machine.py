"""What the writer and reader machines share: channels moved only through their table, one
failure path, the step buffer, and the rule that a finished machine ignores input."""

from __future__ import annotations

import functools
from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import Any, Callable, ClassVar, Concatenate, Generic, ParamSpec, Protocol, TypeVar

from spec.shuffle.errors import Fault, ShuffleError
from spec.shuffle.steps import Event, Failed, Send, Step, UsageError
from spec.shuffle.transitions import E, Moved, S, Table


@dataclass(frozen=True, slots=True)
class Side:
    """A machine's role and the names Spark gives its parts, as its errors report them."""

    role: str
    peer_role: str
    handler: str
    """Spark's netty handler on this side (``Unexpected message type in <handler>``)."""
    sent: str
    """The message this side must see written before it counts it."""


WRITER_SIDE = Side(role="writer", peer_role="reader", handler="ShuffleServerHandler", sent="data")
READER_SIDE = Side(
    role="reader", peer_role="writer", handler="ShuffleClientHandler", sent="termination acknowledgment"
)


class Channel(Protocol[S]):
    """One peer's channel: the machines keep its state in the table's states."""

    state: S


class ChannelMachine(ABC, Generic[S, E]):
    """Base of both machines: collects one input's sends and events into a :class:`Step`."""

    table: ClassVar[Table[Any, Any]]
    """The channel table; a class attribute, so copies of a machine (the model checks') share it."""
    side: ClassVar[Side]

    def __init__(self, shuffle_id: int) -> None:
        self.shuffle_id = shuffle_id
        self.error: ShuffleError | None = None
        self._out: list[Send] = []
        self._events: list[Event] = []
        self._quiet = Step()
        """The step of an input that produced nothing, shared while the deadline stays the same."""

    @property
    @abstractmethod
    def done(self) -> bool:
        """Completed or failed: every further input is ignored."""

    @abstractmethod
    def _stop(self) -> None:
        """Enter the machine's FAILED state (the error is recorded by :meth:`_fail`)."""

    @abstractmethod
    def _ends(self, channel: Any) -> tuple[int, int]:
        """(writer id, reader id) of ``channel``."""

    def _deadline(self) -> float | None:
        """When ``tick`` is due next; None when the machine keeps no timer."""
        return None

    def _move(self, channel: Channel[S], event: E, **observed: Any) -> bool:
        """Move ``channel`` as the table says; False when it failed (the machine failed with it).

        A failure carries the error the table names for the pair, its parameters taken from what
        the machine knows of the channel and what the input ``observed`` (which may override, for
        example the writer id a DATA message names); a caller bug raises :class:`UsageError`.
        """
        outcome = self.table.apply(channel.state, event)
        if isinstance(outcome, Moved):
            channel.state = outcome.target
            if outcome.error is None:
                return True
            error_type = outcome.error
        elif issubclass(outcome.error, UsageError):
            raise UsageError(f"{self.table.name}: {event.value} is not allowed in {channel.state.value}")
        else:
            channel.state = type(channel.state).FAILED
            error_type = outcome.error
        writer_id, reader_id = self._ends(channel)
        known: dict[str, Any] = dict(shuffle_id=self.shuffle_id, writer_id=writer_id, reader_id=reader_id,
                     peer_role=self.side.peer_role, handler=self.side.handler, sent=self.side.sent)
        self._fail(error_type.from_fault(Fault(**(known | observed))))
        return False

    def _fail(self, error: ShuffleError) -> None:
        self._stop()
        self.error = error
        self._events.append(Failed(error=error))

    def _send(self, send: Send) -> None:
        self._out.append(send)

    def _surface(self, event: Event) -> None:
        self._events.append(event)

    def _step(self) -> Step:
        deadline = self._deadline()
        if deadline != self._quiet.deadline:
            self._quiet = Step(deadline=deadline)
        if not self._out and not self._events:
            return self._quiet
        step = Step(tuple(self._out), tuple(self._events), deadline)
        self._out.clear()
        self._events.clear()
        return step


M = TypeVar("M", bound=ChannelMachine[Any, Any])
P = ParamSpec("P")


def machine_input(handler: Callable[Concatenate[M, P], None]) -> Callable[Concatenate[M, P], Step]:
    """An input of a machine: ignored once the machine is done; returns what it produced as a Step."""

    @functools.wraps(handler)
    def handle(self: M, /, *args: P.args, **kwargs: P.kwargs) -> Step:
        if not self.done:
            handler(self, *args, **kwargs)
        return self._step()

    return handle

"""The reader task honours its machine's deadline through the injected clock (issue #36): the connect
timeout fires when it is due, not at the next failed connect (which may never come, or come ~2 s
late after a blocking connect attempt)."""

from __future__ import annotations

import socket

import pytest

from reference.shuffle.reader_task import ReaderTask
from reference.shuffle.standalone_directory import StandaloneDirectory
from reference.shuffle.task import TaskOptions
from spec.shuffle import coordination, errors
from spec.shuffle.settings import ShuffleSettings

KEY = coordination.ShuffleKey(0, 0)
CONNECT_TIMEOUT_S = 5.0
GIVE_UP_AT = 60.0
"""Fake seconds after which a reader that ignores its deadline is given up on (it would wait for ever)."""


class TickingClock:
    """Fake time that moves 50 ms every time it is read; a reader still running at GIVE_UP_AT ignored its deadline."""

    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        self.now += 0.05
        if self.now > GIVE_UP_AT:
            raise AssertionError(f"the reader did not fail by fake t={GIVE_UP_AT}")
        return self.now


class SeenOnce(StandaloneDirectory):
    """The writer's registration is seen by the first lookup only, so exactly one connect is attempted."""

    def lookup(self, key: coordination.ShuffleKey) -> coordination.Writers:
        found = super().lookup(key)
        for writer in found.writers:
            self.unregister(key, writer.writer_id)
        return found


def refused_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
    return port  # closed again: a connect there is refused at once


def test_the_connect_timeout_fires_on_the_machines_deadline_without_another_connect() -> None:
    clock = TickingClock()
    directory = SeenOnce((coordination.WriterLocation(0, "exec", "127.0.0.1", refused_port()),))
    reader = ReaderTask(KEY, 0, [0], ShuffleSettings(), directory,
                        TaskOptions(clock=clock, connect_timeout_s=CONNECT_TIMEOUT_S))
    with pytest.raises(errors.WriterUnreachable) as failure:
        list(reader.records())
    assert failure.value.parameters["timeoutMs"] == CONNECT_TIMEOUT_S * 1000
    assert CONNECT_TIMEOUT_S <= clock.now < GIVE_UP_AT


def test_no_connect_attempt_outlasts_the_machines_deadline() -> None:
    clock = TickingClock()
    port = refused_port()
    reader = ReaderTask(KEY, 0, [0], ShuffleSettings(),
                        StandaloneDirectory((coordination.WriterLocation(0, "exec", "127.0.0.1", port),)),
                        TaskOptions(clock=clock, connect_timeout_s=CONNECT_TIMEOUT_S))
    attempts: list[tuple[float, float]] = []

    def refused(address: tuple[str, int], label: str, timeout_s: float, *, identified: bool = True) -> None:
        attempts.append((clock.now, timeout_s))  # as a writer that never answers would hold it
        raise ConnectionRefusedError(f"{address} refused")

    reader.reactor.connect = refused  # type: ignore[method-assign, assignment]
    with pytest.raises(errors.WriterUnreachable):
        list(reader.records())
    first_failure = attempts[0][0]
    assert len(attempts) > 2
    late = [(at, waited) for at, waited in attempts if at + waited > first_failure + CONNECT_TIMEOUT_S + 0.05]
    assert not late, f"connect attempts would have blocked past the connect deadline: {late}"

"""The thread-and-socket runtime, in one process: delivery, order, faults, backpressure, clean shutdown."""

from __future__ import annotations

import functools
import json
import os
import random
import sys
import threading
import time
from collections import Counter
from typing import Iterable, Iterator

import pytest
from outgoing_faults import corrupt_payload, rewriting_outgoing

from reference.net.ledger import ResourceLedger
from reference.shuffle.local import LocalShuffleError, run_local_shuffle
from reference.shuffle.reader_task import ReaderTask
from reference.shuffle.standalone_directory import StandaloneDirectory
from reference.shuffle.task import PeerTaskFailed, TaskOptions
from reference.shuffle.writer_task import HANDOVER_BUFFERS, WriterTask
from spec.shuffle import coordination
from spec.shuffle import errors
from spec.shuffle.codec import decode_frame
from spec.shuffle.messages import CreditMessage, DataMessage, TerminationAckMessage, TerminationControlMessage
from spec.shuffle.settings import ShuffleSettings

SMALL = ShuffleSettings(network_buffer_size=1024, network_buffer_max_wait_time_ms=5)
KEY = coordination.ShuffleKey(0, 0)
HANG_GUARD_S = 20.0
"""Only to end a broken run; nothing here asserts on time."""


@pytest.fixture(autouse=True)
def no_leaks(monkeypatch: pytest.MonkeyPatch) -> Iterator[ResourceLedger]:
    """Every shuffle a test runs leaves none of its tasks' threads or sockets behind, whatever the outcome.

    The tasks enter what they open in a ledger, so only that is counted (never the sockets and
    threads of the rest of the process), and it is checked at once: a task joins its threads and
    closes its sockets before it returns.
    """
    ledger = ResourceLedger()
    monkeypatch.setattr(sys.modules[__name__], "run_local_shuffle",
                        functools.partial(run_local_shuffle, ledger=ledger))
    yield ledger
    assert ledger.live_threads() == []
    assert ledger.open_sockets() == []


def make_inputs(writers: int, readers: int, per_writer: int, seed: int, size: int = 20) -> list[list[tuple[int, bytes]]]:
    rng = random.Random(seed)
    return [[(rng.randrange(readers), f"{w}:{i}:".encode() + rng.randbytes(rng.randrange(size)))
             for i in range(per_writer)] for w in range(writers)]


def check_delivery(inputs: list[list[tuple[int, bytes]]], outputs: list[list[bytes]]) -> None:
    """Each reader got exactly its records, and each writer's records in the writer's order."""
    for reader_id, got in enumerate(outputs):
        expected = [record for records in inputs for target, record in records if target == reader_id]
        assert Counter(got) == Counter(expected)
        for writer_id, records in enumerate(inputs):
            prefix = f"{writer_id}:".encode()
            mine = [r for r in got if r.startswith(prefix)]
            assert mine == [record for target, record in records if target == reader_id]


@pytest.mark.parametrize(("writers", "readers"), [(1, 1), (3, 2), (2, 5), (6, 3)])
def test_every_record_reaches_its_reader_in_writer_order(writers: int, readers: int) -> None:
    inputs = make_inputs(writers, readers, 3000, seed=writers * 10 + readers)
    outputs, stats = run_local_shuffle(inputs, readers, SMALL)
    check_delivery(inputs, outputs)
    assert [s.records for s in stats] == [len(i) for i in inputs]


def test_empty_inputs_and_empty_partitions_terminate() -> None:
    inputs: list[list[tuple[int, bytes]]] = [[], [(1, b"0:only")], []]
    outputs, _ = run_local_shuffle(inputs, 3, SMALL)
    assert outputs == [[], [b"0:only"], []]


def test_one_key_for_everything() -> None:
    inputs = [[(2, f"{w}:{i}".encode()) for i in range(5000)] for w in range(2)]
    outputs, _ = run_local_shuffle(inputs, 3, SMALL)
    check_delivery(inputs, outputs)
    assert [len(o) for o in outputs] == [0, 0, 10000]


def test_records_larger_than_the_network_buffer() -> None:
    inputs = make_inputs(2, 2, 40, seed=7, size=10 * SMALL.network_buffer_size)
    assert max(len(r) for records in inputs for _, r in records) > SMALL.network_buffer_size
    outputs, _ = run_local_shuffle(inputs, 2, SMALL)
    check_delivery(inputs, outputs)


def failing_input(records: list[tuple[int, bytes]], after: int) -> Iterator[tuple[int, bytes]]:
    for index, record in enumerate(records):
        if index == after:
            raise ValueError("input broke mid-stream")
        yield record


def test_writer_failure_fails_every_task_with_its_root_cause() -> None:
    inputs = make_inputs(2, 2, 2000, seed=3)
    broken: list[Iterable[tuple[int, bytes]]] = [failing_input(inputs[0], 1000), inputs[1]]
    with pytest.raises(LocalShuffleError) as caught:
        run_local_shuffle(broken, 2, SMALL, timeout_s=30)
    failures = caught.value.errors
    assert isinstance(failures[("writer", 0)], ValueError)
    for reader_id in range(2):
        error = failures[("reader", reader_id)]
        assert isinstance(error, PeerTaskFailed)
        assert "writer 0 failed: ValueError: input broke mid-stream" in error.root_cause


def test_failing_reader_ends_the_writers() -> None:
    inputs = make_inputs(2, 2, 20000, seed=4)

    def consume(reader_id: int, records: Iterable[bytes]) -> list[bytes]:
        for index, _ in enumerate(records):
            if reader_id == 1 and index == 100:
                raise RuntimeError("consumer gave up")
        return []

    with pytest.raises(LocalShuffleError) as caught:
        run_local_shuffle(inputs, 2, SMALL, consume=consume, timeout_s=30)
    failures = caught.value.errors
    assert isinstance(failures[("reader", 1)], RuntimeError)
    for writer_id in range(2):
        assert ("writer", writer_id) in failures


def test_corrupted_payload_fails_the_reader_with_checksum_verification_failed() -> None:
    inputs = make_inputs(1, 1, 100, seed=5)
    with pytest.raises(LocalShuffleError) as caught:
        with rewriting_outgoing(corrupt_payload):
            run_local_shuffle(inputs, 1, SMALL, timeout_s=30)
    error = caught.value.errors[("reader", 0)]
    assert isinstance(error, errors.ChecksumVerificationFailed)
    assert error.condition == "STREAMING_SHUFFLE_CHECKSUM_VERIFICATION_FAILED"
    assert error.parameters["writerId"] == 0


@pytest.mark.parametrize("owns_input", [False, True], ids=["serving-thread", "single-owner"])
def test_slow_consumer_bounds_writer_memory_and_loses_nothing(owns_input: bool) -> None:
    settings = ShuffleSettings(network_buffer_size=2048, network_buffer_max_wait_time_ms=5,
                               writer_max_memory=8192, reader_max_memory=4096)
    inputs = make_inputs(1, 2, 4000, seed=6, size=200)

    def slow(reader_id: int, records: Iterable[bytes]) -> list[bytes]:
        out = []
        for index, record in enumerate(records):
            if index % 50 == 0:
                time.sleep(0.005)
            out.append(record)
        return out

    outputs, stats = run_local_shuffle(inputs, 2, settings, TaskOptions(writer_owns_input=owns_input), consume=slow)
    check_delivery(inputs, outputs)
    assert stats[0].blocked_count > 0, "the producer was never blocked: backpressure not exercised"
    assert 0 < stats[0].peak_held_bytes <= settings.writer_max_memory


def test_transcript_records_every_frame_in_both_directions(tmp_path: object) -> None:
    path = os.path.join(str(tmp_path), "wire.jsonl")
    inputs = make_inputs(1, 1, 50, seed=8)
    run_local_shuffle(inputs, 1, SMALL, TaskOptions(transcript_path=path))
    with open(path, encoding="utf-8") as lines:
        entries = [json.loads(line) for line in lines]
    kinds: dict[tuple[str, str], Counter[type]] = {}
    for entry in entries:
        side = "writer" if entry["conn"].startswith("writer") else "reader"
        kinds.setdefault((side, entry["dir"]), Counter())[type(decode_frame(bytes.fromhex(entry["hex"])))] += 1
    data = kinds[("writer", "out")][DataMessage]
    assert data >= 1
    assert kinds[("reader", "in")][DataMessage] == data
    assert kinds[("writer", "out")][TerminationControlMessage] == 1
    assert kinds[("reader", "out")] == Counter({CreditMessage: data + 1, TerminationAckMessage: 1})
    assert kinds[("writer", "in")] == kinds[("reader", "out")]


OWNS_INPUT = pytest.mark.parametrize("owns_input", [True, False], ids=["single-owner", "serving-thread"])


def held_records_reach_the_reader_while_the_input_waits(settings: ShuffleSettings, options: TaskOptions) -> None:
    """A streaming source that waits until its reader has its first records before it gives the rest: the writer
    must send what it holds while its input blocks (a writer that does not never gets the rest)."""
    delivered = threading.Event()
    first = [(0, b"first %d" % i) for i in range(5)]
    rest = [(0, b"rest %d" % i) for i in range(5)]

    def source() -> Iterator[tuple[int, bytes]]:
        yield from first
        if not delivered.wait(HANG_GUARD_S):
            raise AssertionError("the records written before the input blocked never reached the reader")
        yield from rest

    def consume(reader_id: int, records: Iterable[bytes]) -> list[bytes]:
        out = []
        for record in records:
            out.append(record)
            delivered.set()
        return out

    outputs, stats = run_local_shuffle([source()], 1, settings, options, consume=consume, timeout_s=HANG_GUARD_S * 2)
    assert outputs == [[record for _, record in first + rest]]
    assert stats[0].records == len(first) + len(rest)


@OWNS_INPUT
def test_by_default_a_writer_whose_input_blocks_still_binds_its_reader_and_flushes_at_the_max_wait(
        owns_input: bool) -> None:
    """Spark's flush, the default: the flush timer (5 ms) sends what the writer holds."""
    held_records_reach_the_reader_while_the_input_waits(SMALL, TaskOptions(writer_owns_input=owns_input))


@OWNS_INPUT
def test_with_the_idle_flush_a_writer_whose_input_pauses_sends_what_it_holds_at_once(owns_input: bool) -> None:
    """The idle flush sends the held records when the input has nothing more for now: the flush timer (an hour
    here) never comes before the run's end."""
    hour = ShuffleSettings(network_buffer_size=1024, network_buffer_max_wait_time_ms=3_600_000)
    held_records_reach_the_reader_while_the_input_waits(
        hour, TaskOptions(writer_owns_input=owns_input, flush_when_idle=True))


def test_a_writer_owning_its_input_takes_at_most_one_round_of_records_ahead_of_its_machine() -> None:
    """What the input can make the writer hold outside its machine is bounded, as the hand-over bounds it."""
    settings = ShuffleSettings(network_buffer_size=1024, network_buffer_max_wait_time_ms=5)
    record = bytes(100)
    ahead_most = len(range(0, HANDOVER_BUFFERS * settings.network_buffer_size, len(record)))
    directory = StandaloneDirectory()
    task = WriterTask(KEY, 0, 1, settings, directory, TaskOptions(writer_owns_input=True))
    ahead: list[int] = []

    def source() -> Iterator[tuple[int, bytes]]:
        for pulled in range(5000):
            ahead.append(pulled - task.stats.records)
            yield 0, record

    writer = threading.Thread(target=task.run, args=(source(),), daemon=True)
    writer.start()
    received = list(ReaderTask(KEY, 0, [0], settings, directory).records())
    writer.join(HANG_GUARD_S)
    assert len(received) == 5000 and not writer.is_alive()
    assert 0 < max(ahead) <= ahead_most

"""The coordinator protocol (layouts) and service: registration, progressive discovery, failures, attempts."""

from __future__ import annotations

import socket
import struct
import threading
from typing import Iterator

import pytest
from hypothesis import given
from hypothesis import strategies as st

from reference.shuffle.coordinator import CoordinatorClient, CoordinatorServer, Directory, read_message
from spec.shuffle import coordination as co

texts = st.text(max_size=40)
ints = st.integers(-(2**31), 2**31 - 1)
keys = st.builds(co.ShuffleKey, ints, ints)
locations = st.builds(co.WriterLocation, ints, texts, texts, st.integers(0, 65535))
messages = st.one_of(
    st.builds(co.Register, keys, locations), st.builds(co.Lookup, keys), st.builds(co.Unregister, keys, ints),
    st.builds(co.ReportFailure, keys, st.sampled_from(co.Role), ints, texts), st.builds(co.Join, ints, ints),
    st.just(co.Ok()), st.builds(co.Writers, texts, st.lists(locations, max_size=5).map(tuple)),
    st.builds(co.Joined, ints), st.builds(co.Error, texts, texts),
)


@given(messages)
def test_every_message_round_trips(message: co.CoordinatorMessage) -> None:
    raw = co.encode(message)
    assert co.check_length(raw[:4]) == len(raw) - 4
    assert co.decode(raw[4:]) == message


@given(messages, st.binary(min_size=1, max_size=8))
def test_trailing_bytes_are_rejected(message: co.CoordinatorMessage, extra: bytes) -> None:
    with pytest.raises(co.MalformedMessage):
        co.decode(co.encode(message)[4:] + extra)


@given(messages, st.data())
def test_truncated_messages_are_rejected(message: co.CoordinatorMessage, data: st.DataObject) -> None:
    body = co.encode(message)[4:]
    cut = data.draw(st.integers(0, len(body) - 1))
    with pytest.raises(co.MalformedMessage):
        co.decode(body[:cut])


def test_unknown_kind_and_oversized_length_are_typed_errors() -> None:
    with pytest.raises(co.MalformedMessage, match="not a valid Kind"):
        co.decode(bytes([99]))
    with pytest.raises(co.MessageTooLarge) as caught:
        co.check_length(struct.pack(">I", co.MAX_MESSAGE_LENGTH + 1))
    assert caught.value.condition == "STREAMING_SHUFFLE_COORDINATION_TOO_LARGE"


def test_long_failure_descriptions_are_cut_not_rejected() -> None:
    message = co.ReportFailure(co.ShuffleKey(1, 0), co.Role.WRITER, 0, "x" * (co.MAX_TEXT_BYTES * 2))
    decoded = co.decode(co.encode(message)[4:])
    assert isinstance(decoded, co.ReportFailure)
    assert len(decoded.description) == co.MAX_TEXT_BYTES


@pytest.fixture
def service() -> Iterator[tuple[Directory, CoordinatorServer, list[co.ShuffleKey]]]:
    directory = Directory()
    launched: list[co.ShuffleKey] = []
    directory.add_shuffle(7, launched.append)
    server = CoordinatorServer(directory)
    yield directory, server, launched
    server.stop()


def test_readers_see_writers_as_they_register_and_leave(service: tuple[Directory, CoordinatorServer, list[co.ShuffleKey]]) -> None:
    _, server, _ = service
    key = co.ShuffleKey(7, 0)
    client = CoordinatorClient(*server.address)
    try:
        assert client.lookup(key) == co.Writers("", ())
        first = co.WriterLocation(1, "exec-1", "127.0.0.1", 4001)
        client.register(key, first)
        assert client.lookup(key).writers == (first,)
        second = co.WriterLocation(0, "exec-2", "127.0.0.1", 4002)
        client.register(key, second)
        assert client.lookup(key).writers == (second, first)
        client.unregister(key, 1)
        assert client.lookup(key).writers == (second,)
        assert client.lookup(co.ShuffleKey(7, 1)).writers == ()
    finally:
        client.close()


def test_the_first_failure_is_the_one_everybody_sees(service: tuple[Directory, CoordinatorServer, list[co.ShuffleKey]]) -> None:
    _, server, _ = service
    key = co.ShuffleKey(7, 0)
    client = CoordinatorClient(*server.address)
    try:
        client.report_failure(key, co.Role.WRITER, 3, "ValueError: boom")
        client.report_failure(key, co.Role.READER, 0, "connection closed")
        assert client.lookup(key).failure == "writer 3 failed: ValueError: boom"
    finally:
        client.close()


def test_join_starts_writers_once_per_run(service: tuple[Directory, CoordinatorServer, list[co.ShuffleKey]]) -> None:
    _, server, launched = service
    client = CoordinatorClient(*server.address)
    try:
        assert [client.join(7, r) for r in (0, 1)] == [0, 0]
        assert client.join(7, 0) == 1, "a reader seen again belongs to a new run"
        for _ in range(100):
            if len(launched) == 2:
                break
            threading.Event().wait(0.01)
        assert sorted(launched, key=lambda k: k.attempt) == [co.ShuffleKey(7, 0), co.ShuffleKey(7, 1)]
        with pytest.raises(co.RemoteError) as caught:
            client.join(8, 0)
        assert caught.value.remote_condition == "UNKNOWN_SHUFFLE"
    finally:
        client.close()


def test_server_answers_bad_bytes_with_a_typed_error_and_stays_up(service: tuple[Directory, CoordinatorServer, list[co.ShuffleKey]]) -> None:
    _, server, _ = service
    with socket.create_connection(server.address, timeout=5) as raw:
        raw.sendall(struct.pack(">I", co.MAX_MESSAGE_LENGTH + 1))
        answer = read_message(raw)
    assert isinstance(answer, co.Error)
    assert answer.condition == "STREAMING_SHUFFLE_COORDINATION_TOO_LARGE"
    with socket.create_connection(server.address, timeout=5) as raw:
        raw.sendall(co.encode(co.Ok()))
        answer = read_message(raw)
    assert isinstance(answer, co.Error) and "not a request" in answer.message
    client = CoordinatorClient(*server.address)
    try:
        assert client.lookup(co.ShuffleKey(7, 0)).failure == ""
    finally:
        client.close()

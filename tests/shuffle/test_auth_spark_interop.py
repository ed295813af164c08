"""The Python AuthEngine against Spark's own, both directions, both ciphers, both engine versions.

Spark's side is ``conformance/shuffle/jvm/SparkAuthPeer.java``: a ``TransportServer`` with Spark's
``AuthServerBootstrap`` echoing every one-way message, and a ``TransportClient`` with Spark's
``AuthClientBootstrap``. The Python side is the shuffle runtime's own :class:`Connection` on a
reactor. Bodies are streaming-shuffle messages, one DATA large enough to span several GCM segments; with GCM,
either side may seal several frames, and pieces of frames, into one message.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator

import pytest
from spark_jvm_support import require_jdk

from conformance.shuffle.jvm_bridge import JsonLinesProcess
from reference.net import CloseReason, Reactor, Stream
from reference.shuffle.transport import Connection
from spec.auth import AuthConfig, AuthError, CipherName, ClientHandshake, ReplayGuard, ServerHandshake
from spec.auth import ciphers, errors
from spec.shuffle.checksum import payload_checksum
from spec.shuffle.codec import decode_body, encode_body, encode_frame
from spec.shuffle.messages import CreditMessage, DataMessage, Message
from spec.shuffle.steps import Send

MAX_FRAME = 1 << 22
DEADLINE_S = 30.0
"""Only ends a broken run."""
PAYLOAD = bytes(range(256)) * 400
MESSAGES: list[Message] = [
    CreditMessage(seq=0, writer_id=3, reader_id=7, num_messages=1),
    DataMessage(writer_id=3, reader_id=7, seq=0, checksum=payload_checksum(PAYLOAD), payload=PAYLOAD),
    CreditMessage(seq=0, writer_id=3, reader_id=7, num_messages=1),
]
CONFIGS = [AuthConfig(b"shared secret", "app-1", cipher, version) for cipher in CipherName for version in (1, 2)]
GCM_CONFIGS = [config for config in CONFIGS if config.cipher is CipherName.GCM]


def spark_request(op: str, config: AuthConfig, **more: object) -> dict[str, object]:
    return {"op": op, "secret": config.secret.decode(), "app_id": config.app_id, "cipher": config.cipher.value,
            "version": config.engine_version, **more}


@pytest.fixture(scope="module")
def spark() -> Iterator[JsonLinesProcess]:
    with JsonLinesProcess("SparkAuthPeer", jdk=require_jdk()) as process:
        yield process


class PythonPeer:
    """A reactor polled by one thread; each connection authenticates, then decodes shuffle frames."""

    def __init__(self, config: AuthConfig, *, listen: bool, echo: bool) -> None:
        self.config = config
        self.echo = echo
        self.replays = ReplayGuard()
        self.messages: list[Message] = []
        self.errors: list[AuthError] = []
        self.connections: dict[Stream, Connection] = {}
        self.reactor = Reactor(self, listen=("127.0.0.1", 0) if listen else None)
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def run_in_background(self) -> None:
        self._thread = threading.Thread(target=self._loop, daemon=True)
        self._thread.start()

    def _loop(self) -> None:
        while not self._stop.is_set():
            self.reactor.poll(0.02)

    def poll_until(self, done: object) -> None:
        deadline = time.monotonic() + DEADLINE_S
        while not done():  # type: ignore[operator]
            assert time.monotonic() < deadline, "nothing within the deadline"
            self.reactor.poll(0.02)

    def authenticated_client(self, port: int) -> Connection:
        """A connection to Spark's server at ``port`` once its handshake completed."""
        stream = self.reactor.connect(("127.0.0.1", port), "python->spark", DEADLINE_S)
        conn = Connection(stream, MAX_FRAME, handshake=ClientHandshake(self.config))
        self.connections[stream] = conn
        conn.start()
        self.poll_until(lambda: conn.authenticated or self.errors)
        assert self.errors == []
        return conn

    def close(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(DEADLINE_S)
        self.reactor.close()

    def accepted(self, stream: Stream) -> None:
        self.connections[stream] = Connection(stream, MAX_FRAME, handshake=ServerHandshake(self.config, self.replays))

    def received(self, stream: Stream, data: memoryview) -> None:
        conn = self.connections[stream]
        try:
            messages = conn.decode(data)
        except AuthError as error:
            self.errors.append(error)
            stream.close()
            return
        for message in messages:
            self.messages.append(decode_body(encode_body(message)))  # a copy: payloads may be views
            if self.echo:
                conn.send([Send(peer=0, message=message)])

    def sent(self, stream: Stream, tokens: list[object]) -> None:
        return None

    def closed(self, stream: Stream, reason: CloseReason, error: OSError | None) -> None:
        conn = self.connections.pop(stream)
        try:
            conn.end()
        except AuthError as cut:
            if not self.errors:
                self.errors.append(cut)


@pytest.mark.parametrize("config", CONFIGS, ids=lambda c: f"{c.cipher.name}-v{c.engine_version}")
def test_the_python_client_authenticates_to_spark_server_and_frames_cross_both_ways(
        spark: JsonLinesProcess, config: AuthConfig) -> None:
    port = spark.request(spark_request("serve", config))["port"]
    peer = PythonPeer(config, listen=False, echo=False)
    try:
        conn = peer.authenticated_client(port)
        conn.send([Send(peer=0, message=message) for message in MESSAGES])  # one GCM message of three frames
        for message in MESSAGES:  # then one each: GCM messages of one length share this direction's key
            conn.send([Send(peer=0, message=message)])
        peer.poll_until(lambda: len(peer.messages) == 2 * len(MESSAGES))
        assert peer.messages == 2 * MESSAGES
        served = spark.request({"op": "served"})
        assert [bytes.fromhex(body) for body in served["bodies"][-2 * len(MESSAGES):]] == \
            [encode_body(m) for m in 2 * MESSAGES]
    finally:
        peer.close()


@pytest.mark.parametrize("config", CONFIGS, ids=lambda c: f"{c.cipher.name}-v{c.engine_version}")
def test_spark_client_authenticates_to_the_python_server_and_frames_cross_both_ways(
        spark: JsonLinesProcess, config: AuthConfig) -> None:
    peer = PythonPeer(config, listen=True, echo=True)
    peer.run_in_background()
    try:
        answer = spark.request(spark_request("connect", config, port=peer.reactor.port,
                                             bodies=[encode_body(m).hex() for m in MESSAGES]))
        assert [decode_body(bytes.fromhex(body)) for body in answer.get("echoed", [])] == MESSAGES, answer
        assert peer.messages == MESSAGES and peer.errors == []
    finally:
        peer.close()


@pytest.mark.parametrize("config", GCM_CONFIGS, ids=lambda c: f"{c.cipher.name}-v{c.engine_version}")
def test_spark_sealing_several_frames_and_a_piece_of_one_per_message_reaches_the_python_decoder(
        spark: JsonLinesProcess, config: AuthConfig) -> None:
    peer = PythonPeer(config, listen=True, echo=True)
    peer.run_in_background()
    stream = b"".join(encode_frame(m) for m in MESSAGES)
    cut = len(encode_frame(MESSAGES[0])) + 1000  # inside the DATA frame
    try:
        answer = spark.request(spark_request("connect", config, port=peer.reactor.port,
                                             chunks=[stream[:cut].hex(), stream[cut:].hex()], expect=len(MESSAGES)))
        assert [decode_body(bytes.fromhex(body)) for body in answer.get("echoed", [])] == MESSAGES, answer
        assert peer.messages == MESSAGES and peer.errors == []
    finally:
        peer.close()


def test_a_python_batch_past_the_message_bound_is_cut_inside_a_frame_and_spark_decodes_every_frame(
        spark: JsonLinesProcess, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(ciphers, "GCM_MESSAGE_SEGMENTS", 1)  # 32,752 bytes a message: the DATA spans four
    config = GCM_CONFIGS[0]
    port = spark.request(spark_request("serve", config))["port"]
    peer = PythonPeer(config, listen=False, echo=False)
    try:
        conn = peer.authenticated_client(port)
        conn.send([Send(peer=0, message=message) for message in MESSAGES])
        peer.poll_until(lambda: len(peer.messages) == len(MESSAGES))
        assert peer.messages == MESSAGES and peer.errors == []
        assert [bytes.fromhex(body) for body in spark.request({"op": "served"})["bodies"][-len(MESSAGES):]] == \
            [encode_body(m) for m in MESSAGES]
    finally:
        peer.close()


def test_a_wrong_secret_fails_the_python_client_typed_and_spark_server_never_authenticates_it(
        spark: JsonLinesProcess) -> None:
    config = CONFIGS[0]
    port = spark.request(spark_request("serve", config))["port"]
    before = spark.request({"op": "served"})
    peer = PythonPeer(AuthConfig(b"a guess", config.app_id), listen=False, echo=False)
    try:
        stream = peer.reactor.connect(("127.0.0.1", port), "python->spark", DEADLINE_S)
        conn = Connection(stream, MAX_FRAME, handshake=ClientHandshake(peer.config))
        peer.connections[stream] = conn
        conn.start()
        peer.poll_until(lambda: bool(peer.errors))
        assert isinstance(peer.errors[0], errors.HandshakeRejected)
        assert "Authentication failed." in str(peer.errors[0].parameters["reason"])
        assert not conn.authenticated
    finally:
        peer.close()
    deadline = time.monotonic() + DEADLINE_S
    while spark.request({"op": "served"})["unauthenticated_closes"] == before["unauthenticated_closes"]:
        assert time.monotonic() < deadline, "Spark's server kept the unauthenticated connection"
        time.sleep(0.02)
    assert spark.request({"op": "served"})["bodies"] == before["bodies"]


def test_a_wrong_secret_fails_spark_client_and_the_python_server_typed(spark: JsonLinesProcess) -> None:
    config = CONFIGS[0]
    peer = PythonPeer(config, listen=True, echo=True)
    peer.run_in_background()
    try:
        answer = spark.request(spark_request("connect", AuthConfig(b"a guess", config.app_id), port=peer.reactor.port,
                                             bodies=[encode_body(MESSAGES[0]).hex()]))
        assert "echoed" not in answer, answer
        assert "Authentication failed." in answer["detail"], answer
        deadline = time.monotonic() + DEADLINE_S
        while not peer.errors:
            assert time.monotonic() < deadline
            time.sleep(0.01)
        assert isinstance(peer.errors[0], errors.WrongSecret) and peer.messages == []
    finally:
        peer.close()

"""The codec agrees with Spark 4.3.0's own classes, byte for byte, in both directions.

Spark's ``StreamingShuffleMessage`` classes, its transport ``MessageEncoder`` and its
``TransportFrameDecoder``/``MessageDecoder`` run in a JVM (``conformance/shuffle/jvm/SparkCodecBridge.java``)
compiled against the installed pyspark's jars. Without a JDK the module is skipped with that reason,
except under CI, which has one: there a missing JDK fails.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Iterator

import pytest
from hypothesis import given
from shuffle_strategies import MESSAGES
from spark_jvm_support import require_jdk

from conformance.shuffle.jvm_bridge import SparkCodec, SparkDecode
from spec.shuffle import codec
from spec.shuffle.jsonform import from_json, to_json
from spec.shuffle.messages import Message

pytestmark = pytest.mark.jvm

VECTORS = Path(__file__).parents[2] / "conformance" / "shuffle" / "vectors" / "wire_messages.json"


def _vectors(*results: str) -> list[Any]:
    data = json.loads(VECTORS.read_text())
    return [
        pytest.param(group, test, id=f"tc{test['tcId']}-{group['name']}")
        for group in data["testGroups"] for test in group["tests"] if test["result"] in results
    ]


@pytest.fixture(scope="module")
def spark() -> Iterator[SparkCodec]:
    bridge = SparkCodec.start(require_jdk())
    yield bridge
    bridge.close()


@given(message=MESSAGES)
def test_spark_decodes_what_the_codec_encodes(spark: SparkCodec, message: Message) -> None:
    for decoded in (spark.decode_body(codec.encode_body(message)), spark.decode_frame(codec.encode_frame(message))):
        assert decoded.exact, decoded
        assert decoded.message is not None
        assert to_json(decoded.message) == to_json(message)


@given(message=MESSAGES)
def test_codec_decodes_what_spark_encodes(spark: SparkCodec, message: Message) -> None:
    body, frame = spark.encode(message)
    assert body == codec.encode_body(message)
    assert frame == codec.encode_frame(message)
    assert to_json(codec.decode_body(body)) == to_json(message)
    assert to_json(codec.decode_frame(frame)) == to_json(message)


@pytest.mark.parametrize(("group", "test"), _vectors("valid"))
def test_valid_vector_bytes_are_sparks_encoding(spark: SparkCodec, group: Any, test: Any) -> None:
    body, frame = spark.encode(from_json(test["message"]))
    assert body.hex() == test["body"]
    assert frame.hex() == test["frame"]


@pytest.mark.parametrize(("group", "test"), _vectors("valid"))
def test_spark_decodes_valid_vectors(spark: SparkCodec, group: Any, test: Any) -> None:
    for decoded in (spark.decode_body(bytes.fromhex(test["body"])), spark.decode_frame(bytes.fromhex(test["frame"]))):
        assert decoded.exact, decoded
        assert decoded.message is not None and to_json(decoded.message) == test["message"]


ANY = "<any>"


def _spark_rejection(test: Any) -> tuple[str | None, str | None]:
    """Spark's exception class and text for an invalid vector, as read off the 4.3.0 bytecode.

    None for the exception means Spark's decoder raised nothing (it yielded no OneWayMessage, or no
    message at all); None for the text means Netty's wording is not pinned.
    """
    error, params = test["error"], test.get("errorParams", {})
    if error == "STREAMING_SHUFFLE_UNEXPECTED_MESSAGE_TYPE":
        return "java.lang.IllegalArgumentException", f"Unknown message type: {params['messageType']}"
    if error in ("NEGATIVE_DATA_SIZE", "DATA_SIZE_MISMATCH"):
        return ("java.lang.IllegalArgumentException",
                f"Invalid DataMessage dataSize={params['dataSize']}, readable bytes after header={params['available']}")
    if error == "FRAME_LENGTH_OUT_OF_RANGE":
        # Spark reports the length without its own 8 bytes, computed in a Java long (wrapping).
        frame_size = (int(params["frameLength"]) - 8 + 2**63) % 2**64 - 2**63
        if frame_size <= 0:
            return "java.lang.IllegalArgumentException", f"Frame length should be positive: {frame_size}"
        if frame_size >= 2**31 - 1:
            return "java.lang.IllegalArgumentException", f"Too large frame: {frame_size}"
        return "java.lang.IndexOutOfBoundsException", None  # 9..12: the transport decoder runs out of bytes
    if error == "UNSUPPORTED_TRANSPORT_MESSAGE_TYPE":
        kind = int(params["messageType"])
        if kind == -1:
            return "java.lang.IllegalArgumentException", "User type messages cannot be decoded."
        if not 0 <= kind <= 12:
            return "java.lang.IllegalArgumentException", f"Unknown message type: {kind}"
        return ANY, None  # a known non-OneWay type: decoded as such, or failing inside its own decoder
    if error == "TRUNCATED_INPUT":
        return ("java.lang.IndexOutOfBoundsException", None) if "body" in test else (None, None)
    assert error == "TRAILING_BYTES", error
    return None, None  # the first frame decodes; the rest is held or decoded as more messages


@pytest.mark.parametrize(("group", "test"), _vectors("invalid"))
def test_spark_rejects_invalid_vectors(spark: SparkCodec, group: Any, test: Any) -> None:
    frame = bytes.fromhex(test["frame"])
    decodings: list[SparkDecode] = [spark.decode_frame(frame)]
    if "body" in test:
        decodings.append(spark.decode_body(bytes.fromhex(test["body"])))
    if "ChecksumMismatch" in test["flags"]:
        # "Decodes, fails verification": verifying the checksum is the reader's job, not the decoder's.
        for decoded in decodings:
            assert decoded.exact and decoded.message is not None
            assert to_json(decoded.message) == test["message"]
        return
    if "ConfiguredFrameLimit" in test["flags"]:
        # Spark has no configurable limit: it decodes a whole frame and waits for the rest of a partial one.
        assert int(group["maxFrameLength"]) < codec.SPARK_MAX_FRAME_LENGTH
        assert decodings[0].accepted == (int.from_bytes(frame[:8], "big", signed=True) == len(frame))
        return
    exception, detail = _spark_rejection(test)
    for decoded in decodings:
        assert not decoded.exact, decoded
        if not decoded.accepted and exception != ANY:
            assert decoded.exception == exception, decoded
            if detail is not None:
                assert decoded.detail == detail, decoded
    if test["error"] == "TRAILING_BYTES":
        assert decodings[0].accepted and decodings[0].pending + decodings[0].extra_messages > 0


@pytest.mark.parametrize(("group", "test"), _vectors("acceptable"))
def test_spark_accepts_acceptable_vectors_as_flagged(spark: SparkCodec, group: Any, test: Any) -> None:
    decodings = [spark.decode_frame(bytes.fromhex(test["frame"]))]
    if "body" in test:
        decodings.append(spark.decode_body(bytes.fromhex(test["body"])))
    for decoded in decodings:
        assert decoded.accepted and decoded.message is not None
        assert to_json(decoded.message) == test["message"]
        if "SparkIgnoresTrailingBytes" in test["flags"]:
            assert decoded.unread == int(test["errorParams"]["trailing"])
        else:
            assert decoded.exact


def test_jdk_lookup_prefers_java_home_and_reports_absence(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    from conformance.shuffle.jvm_bridge import JdkNotFound, find_jdk

    (tmp_path / "bin").mkdir()
    for tool in ("java", "javac"):
        (tmp_path / "bin" / tool).write_text("#!/bin/sh\n")
    monkeypatch.setenv("JAVA_HOME", str(tmp_path))
    assert find_jdk().javac == tmp_path / "bin" / "javac"
    monkeypatch.delenv("JAVA_HOME")
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    with pytest.raises(JdkNotFound, match="no JDK found"):
        find_jdk()

"""The codec agrees with Spark 4.3.0's own classes, byte for byte, in both directions.

Spark's ``StreamingShuffleMessage`` classes, its transport ``MessageEncoder`` and its
``TransportFrameDecoder``/``MessageDecoder`` run in a JVM (``conformance/jvm/SparkCodecBridge.java``)
compiled against the installed pyspark's jars. Without a JDK the module is skipped with that reason,
except under CI, which has one: there a missing JDK fails.
"""

from __future__ import annotations

import os
from typing import Iterator

import pytest
from hypothesis import given
from hypothesis import strategies as st

from conformance.jvm_bridge import JdkNotFound, SparkCodec, find_jdk, message_to_json
from spec.shuffle import codec
from spec.shuffle.messages import (
    CreditMessage,
    DataMessage,
    Message,
    TerminationAckMessage,
    TerminationControlMessage,
)

pytestmark = pytest.mark.jvm

INT32 = st.integers(-(2**31), 2**31 - 1)
INT64 = st.integers(-(2**63), 2**63 - 1)
PAYLOADS = st.one_of(st.binary(max_size=64), st.binary(min_size=32 * 1024 - 8, max_size=32 * 1024 + 8))

MESSAGES: st.SearchStrategy[Message] = st.one_of(
    st.builds(DataMessage, seq=INT64, writer_id=INT32, reader_id=INT32, checksum=INT64, payload=PAYLOADS),
    st.builds(CreditMessage, writer_id=INT32, reader_id=INT32, num_messages=INT32, seq=INT64),
    st.builds(TerminationControlMessage, seq=INT64, writer_id=INT32, reader_id=INT32),
    st.builds(TerminationAckMessage, seq=INT64, writer_id=INT32, reader_id=INT32),
)


@pytest.fixture(scope="module")
def spark() -> Iterator[SparkCodec]:
    try:
        jdk = find_jdk()
    except JdkNotFound as exc:
        if os.environ.get("CI"):
            pytest.fail(f"CI must run the Spark cross-check: {exc}")
        pytest.skip(f"Spark cross-check needs a JDK: {exc}")
    bridge = SparkCodec.start(jdk)
    yield bridge
    bridge.close()


@given(message=MESSAGES)
def test_spark_decodes_what_the_codec_encodes(spark: SparkCodec, message: Message) -> None:
    for decoded in (spark.decode_body(codec.encode_body(message)), spark.decode_frame(codec.encode_frame(message))):
        assert decoded.exact, decoded
        assert decoded.message is not None
        assert message_to_json(decoded.message) == message_to_json(message)


@given(message=MESSAGES)
def test_codec_decodes_what_spark_encodes(spark: SparkCodec, message: Message) -> None:
    body, frame = spark.encode(message)
    assert body == codec.encode_body(message)
    assert frame == codec.encode_frame(message)
    assert message_to_json(codec.decode_body(body)) == message_to_json(message)
    assert message_to_json(codec.decode_frame(frame)) == message_to_json(message)

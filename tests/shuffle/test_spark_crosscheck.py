"""The codec agrees with Spark 4.3.0's own classes, byte for byte, in both directions.

Spark's ``StreamingShuffleMessage`` classes, its transport ``MessageEncoder`` and its
``TransportFrameDecoder``/``MessageDecoder`` run in a JVM (``conformance/shuffle/jvm/SparkCodecBridge.java``)
compiled against the installed pyspark's jars. Without a JDK the module is skipped with that reason,
except under CI, which has one: there a missing JDK fails.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Iterator

import pytest
from hypothesis import given
from shuffle_strategies import MESSAGES
from spark_jvm_support import require_jdk

from conformance.shuffle.jvm_bridge import SparkCodec
from conformance.shuffle.vector_spark import judge
from conformance.shuffle.vector_suite import check_vectors
from spec.shuffle import codec
from spec.shuffle.jsonform import to_json
from spec.shuffle.messages import Message

pytestmark = pytest.mark.jvm

VECTORS = Path(__file__).parents[2] / "conformance" / "shuffle" / "vectors" / "wire_messages.json"


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


def test_every_wire_vector_agrees_with_sparks_own_decoders() -> None:
    """``vectors --suite shuffle --target spark-jvm``: every valid, invalid and acceptable wire vector
    judged against Spark's classes (conformance/shuffle/vector_spark.py); traces are not Spark's to take."""
    results = list(check_vectors("spark-jvm"))
    wire = [r for r in results if not r.group.startswith("traces/")]
    assert len(wire) == sum(len(group["tests"]) for group in json.loads(VECTORS.read_text())["testGroups"])
    assert [f"{r.group} {r.name}: {r.detail}" for r in wire if not r.passed] == []
    assert all(r.unsupported for r in results if r.group.startswith("traces/"))


def test_the_judgement_of_a_vector_against_spark_can_fail(spark: SparkCodec) -> None:
    """A valid vector whose bytes Spark does not produce, and an invalid one Spark reads exactly, are named."""
    document = json.loads(VECTORS.read_text())
    group = next(g for g in document["testGroups"] if g["name"] == "data_messages")
    test = next(t for t in group["tests"] if t["result"] == "valid")
    altered = test["frame"][:-2] + ("00" if test["frame"][-2:] != "00" else "01")
    assert judge(spark, group, test) is None
    assert "not the vector's bytes" in str(judge(spark, group, {**test, "frame": altered}))
    assert "accepts an invalid vector exactly" in str(judge(spark, group, {
        **test, "result": "invalid", "flags": [], "error": "TRAILING_BYTES", "errorParams": {}}))


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

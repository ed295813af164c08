"""The wire vectors through Spark 4.3.0's own encoder and decoders (``vectors --suite shuffle --target spark-jvm``).

Spark's ``StreamingShuffleMessage`` classes, its transport ``MessageEncoder`` and its
``TransportFrameDecoder``/``MessageDecoder`` run in a JVM (``jvm/SparkCodecBridge.java``, compiled
against the installed pyspark's jars). Each vector is judged by what it promises of Spark:

- ``valid``: Spark encodes the message to exactly the vector's body and frame, and decodes both
  back to the message with every byte consumed;
- ``invalid``: Spark does not read the bytes as exactly that one message. Its rejection is the one
  read off the 4.3.0 bytecode (exception class and text, :func:`spark_rejection`), except where the
  vector's flag says Spark leaves the check to someone else: ``ChecksumMismatch`` (the reader verifies
  checksums, not the decoder: Spark decodes the message) and ``ConfiguredFrameLimit`` (Spark has no
  configurable limit: it decodes a whole frame);
- ``acceptable``: Spark accepts the message (and, flagged ``SparkIgnoresTrailingBytes``, leaves exactly
  the trailing bytes unread).

The trace vectors drive state machines, which Spark's classes do not expose: they are reported
unsupported for this target.
"""

from __future__ import annotations

from typing import Any, Final, Iterator, Mapping

from conformance.framework import VectorResult
from conformance.shuffle.jvm_bridge import SparkCodec, SparkDecode
from conformance.shuffle.vector_traces import check_trace_vectors
from spec.shuffle import codec
from spec.shuffle.jsonform import from_json, to_json

TARGET: Final = "spark-jvm"
ANY: Final = "<any>"
"""Spark's exception is not pinned (a known non-OneWay transport type fails inside its own decoder)."""

Json = Mapping[str, Any]


def spark_rejection(test: Json) -> tuple[str | None, str | None]:
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
        return ANY, None
    if error == "TRUNCATED_INPUT":
        return ("java.lang.IndexOutOfBoundsException", None) if "body" in test else (None, None)
    if error == "TRAILING_BYTES":
        return None, None  # the first frame decodes; the rest is held or decoded as more messages
    raise ValueError(f"no Spark rejection is known for {error}")


def _decodings(spark: SparkCodec, test: Json) -> list[SparkDecode]:
    decodings = [spark.decode_frame(bytes.fromhex(test["frame"]))]
    if "body" in test:
        decodings.append(spark.decode_body(bytes.fromhex(test["body"])))
    return decodings


def _reads_as(decoded: SparkDecode, message: Json) -> bool:
    return decoded.message is not None and to_json(decoded.message) == message


def judge(spark: SparkCodec, group: Json, test: Json) -> str | None:
    """Why Spark's classes disagree with one wire vector; None when they agree."""
    result = test["result"]
    decodings = _decodings(spark, test)
    if result == "valid":
        body, frame = spark.encode(from_json(test["message"]))
        if frame.hex() != test["frame"] or ("body" in test and body.hex() != test["body"]):
            return f"Spark encodes {frame.hex()[:120]}, not the vector's bytes"
        wrong = [d for d in decodings if not (d.exact and _reads_as(d, test["message"]))]
        return f"Spark's decoder: {wrong[0]}" if wrong else None
    if result == "acceptable":
        for decoded in decodings:
            if not (decoded.accepted and _reads_as(decoded, test["message"])):
                return f"Spark rejects an acceptable vector: {decoded}"
            trailing = int(test["errorParams"]["trailing"]) if "SparkIgnoresTrailingBytes" in test["flags"] else 0
            if (decoded.unread, decoded.pending, decoded.extra_messages) != (trailing, 0, 0):
                return f"Spark leaves {decoded.unread} bytes unread, not {trailing}: {decoded}"
        return None
    if "ChecksumMismatch" in test["flags"]:
        wrong = [d for d in decodings if not (d.exact and _reads_as(d, test["message"]))]
        return f"Spark's decoder (which leaves checksums to the reader): {wrong[0]}" if wrong else None
    if "ConfiguredFrameLimit" in test["flags"]:
        frame = bytes.fromhex(test["frame"])
        whole = int.from_bytes(frame[:8], "big", signed=True) == len(frame)
        if int(group["maxFrameLength"]) >= codec.SPARK_MAX_FRAME_LENGTH or decodings[0].accepted != whole:
            return f"Spark (no configurable frame limit) should {'accept' if whole else 'wait for'} it: {decodings[0]}"
        return None
    exception, detail = spark_rejection(test)
    for decoded in decodings:
        if decoded.exact:
            return f"Spark accepts an invalid vector exactly: {decoded}"
        if not decoded.accepted and exception != ANY and (
                decoded.exception != exception or (detail is not None and decoded.detail != detail)):
            return f"Spark rejects it with {decoded.exception}: {decoded.detail}, not {exception}: {detail}"
    if test["error"] == "TRAILING_BYTES" and not (
            decodings[0].accepted and decodings[0].pending + decodings[0].extra_messages > 0):
        return f"Spark should decode the first frame and hold the rest: {decodings[0]}"
    return None


def check_spark_vectors(document: Json) -> Iterator[VectorResult]:
    """Every wire vector of ``document`` through one JVM running Spark's codec; the traces unsupported."""
    spark = SparkCodec.start()
    try:
        for group in document["testGroups"]:
            for test in group["tests"]:
                detail = judge(spark, group, test)
                yield VectorResult(group["name"], f"tcId {test['tcId']}: {test['comment']}", detail is None,
                                   detail or "")
    finally:
        spark.close()
    for result in check_trace_vectors("reference"):
        yield VectorResult(result.group, result.name, False, "traces drive state machines, which Spark's classes "
                           "do not expose", unsupported=True)

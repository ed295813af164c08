"""Golden vectors of the streaming shuffle (``python -m conformance vectors --suite shuffle``).

``--target reference`` checks every vector of ``conformance/shuffle/vectors/`` against the
reference codec: encoding, whole-frame and whole-body decoding, the incremental frame decoder
and checksum verification; ``--target spark-jvm`` runs every wire vector through Spark's own
encoder and decoders (vector_spark.py). Further vector kinds plug in as another entry of :data:`CHECKERS`.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Callable, Final, Iterator, Mapping

from conformance.framework import VectorResult
from conformance.shuffle.vector_traces import check_trace_vectors
from spec.shuffle import codec
from spec.shuffle.checksum import verify_payload
from spec.shuffle.errors import ShuffleError
from spec.shuffle.framing import FrameDecoder
from spec.shuffle.jsonform import from_json, to_json
from spec.shuffle.messages import DataMessage, Message

VECTOR_DIR: Final = Path(__file__).resolve().parent / "vectors"
TARGETS: Final = ("reference",)
SPARK_TARGET: Final = "spark-jvm"
"""Spark 4.3.0's own encoder and decoders in a JVM take the wire vectors (vector_spark.py)."""

Json = Mapping[str, Any]
CaseOutcome = Message | ShuffleError


def load(name: str) -> dict[str, Any]:
    """A vector file of ``conformance/shuffle/vectors/`` as JSON."""
    document: dict[str, Any] = json.loads((VECTOR_DIR / name).read_text())
    return document


def decode_outcome(data: bytes, group: Json, *, frame: bool) -> CaseOutcome:
    """What the reference makes of ``data`` (a frame or a body) under the group's parameters."""
    try:
        message = codec.decode_frame(data, int(group["maxFrameLength"])) if frame else codec.decode_body(data)
        if group["checksumVerification"] and isinstance(message, DataMessage):
            verify_payload(message)
        return message
    except ShuffleError as exc:
        return exc


def error_params(error: ShuffleError) -> dict[str, object]:
    """An error's parameters as vectors record them (integers as decimal strings)."""
    return {k: v for k, v in error.to_json().items() if k not in ("error", "message")}


def _describe(outcome: CaseOutcome) -> str:
    if isinstance(outcome, ShuffleError):
        return f"error {outcome.condition} {error_params(outcome)}"
    return f"message {json.dumps(to_json(outcome))[:200]}"


def _expect(outcome: CaseOutcome, test: Json, what: str) -> str | None:
    """Compare one outcome with the vector's expectation; a failure description or None."""
    if "error" in test:
        if isinstance(outcome, ShuffleError) and outcome.condition == test["error"] \
                and error_params(outcome) == test["errorParams"]:
            return None
        return f"{what}: expected error {test['error']} {test['errorParams']}, got {_describe(outcome)}"
    if isinstance(outcome, ShuffleError) or to_json(outcome) != test["message"]:
        return f"{what}: expected message {json.dumps(test['message'])[:200]}, got {_describe(outcome)}"
    return None


def _stream_outcome(frame: bytes, chunk: int, group: Json) -> list[Message] | ShuffleError:
    decoder = FrameDecoder(int(group["maxFrameLength"]))
    out: list[Message] = []
    try:
        for start in range(0, len(frame), chunk):
            out += decoder.feed(frame[start:start + chunk])
        decoder.close()
    except ShuffleError as exc:
        return exc
    return out


def check_wire_test(group: Json, test: Json) -> str | None:
    """Every check of one wire vector against the reference; a failure description or None."""
    frame = bytes.fromhex(test["frame"])
    body = bytes.fromhex(test["body"]) if "body" in test else None
    problems = [_expect(decode_outcome(frame, group, frame=True), test, "decode frame")]
    if body is not None:
        problems.append(_expect(decode_outcome(body, group, frame=False), test, "decode body"))
    if test["result"] == "valid":
        message = from_json(test["message"])
        if codec.encode_frame(message) != frame or (body is not None and codec.encode_body(message) != body):
            problems.append("encode: bytes differ from the vector")
        for chunk in (len(frame) or 1, 1, 7):
            streamed = _stream_outcome(frame, chunk, group)
            if streamed != [message]:
                problems.append(f"frame decoder in {chunk}-byte chunks: {streamed!r:.200}")
    elif test["result"] == "invalid" and "message" in test:
        decoded = codec.decode_frame(frame, int(group["maxFrameLength"]))
        if to_json(decoded) != test["message"]:
            problems.append(f"decode without verification: got {_describe(decoded)}")
    failures = [p for p in problems if p is not None]
    return "; ".join(failures) or None


def check_wire_messages(target: str) -> Iterator[VectorResult]:
    """``wire_messages.json``: one result per vector, grouped by testGroup name."""
    document = load("wire_messages.json")
    for group in document["testGroups"]:
        for test in group["tests"]:
            detail = check_wire_test(group, test)
            yield VectorResult(group["name"], f"tcId {test['tcId']}: {test['comment']}", detail is None,
                               detail or "")


CHECKERS: Final[tuple[Callable[[str], Iterator[VectorResult]], ...]] = (check_wire_messages, check_trace_vectors)
"""Every vector kind of the suite, run in order."""


def check_vectors(target: str) -> Iterator[VectorResult]:
    """Run every shuffle vector against ``target``: ``reference`` takes all of them; an ``exec:`` trace
    driver takes the traces (the wire vectors exercise a codec library, with no command-line form:
    load ``wire_messages.json`` in your own test runner), the wire vectors are reported unsupported."""
    if target.startswith("exec:"):
        for result in check_wire_messages("reference"):
            yield VectorResult(result.group, result.name, False, "wire vectors run in-process only", unsupported=True)
        yield from check_trace_vectors(target)
        return
    if target == SPARK_TARGET:
        from conformance.shuffle.vector_spark import check_spark_vectors

        yield from check_spark_vectors(load("wire_messages.json"))
        return
    if target not in TARGETS:
        raise SystemExit(f"error: unknown shuffle vector target {target!r}; known: {', '.join(TARGETS)}, "
                         f"{SPARK_TARGET}, exec:CMD")
    for checker in CHECKERS:
        yield from checker(target)

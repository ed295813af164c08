"""The shuffle input corpus (``vectors/inputs.json``): seeded inputs to the pure functions a trace cannot reach (the
codec, the frame decoder, the JSON form of messages, settings parsing), kept only when they tell the spec apart
from one of its first-order operator mutants (issue 43).

An input is one request line of the ``exec:`` inputs contract (capability ``inputs``, role ``inputs``: each stdin
line a request, each stdout line its answer), answered as plain JSON: ``{"value": ...}``, or the typed error
``{"error": CONDITION, "errorParams": {...}}`` (a stream's answer keeps the messages it decoded before failing).
:func:`candidates` draws them from :data:`SEED` as a tester would: every field at 0, 1, -1, its max and min and one
past; every length and size off by one; a wrong type id, transport type and checksum; two faults at once (the
answer records which check wins); frames fed in chunks split anywhere; every time unit in both cases, signs,
blanks, overflow and a negative time in a finer unit; settings that fail two rules at once, in either order.

``python -m conformance.shuffle.inputs --select`` (a minute or two; run it under ``nice``) runs the selection of
:mod:`conformance.operator_mutants` over the mutants of :data:`MODULES` and writes ``inputs.json`` and
``docs/walks/shuffle-inputs.md``; ``python -m conformance.shuffle.inputs [--check]`` rebuilds ``inputs.json`` from
the seed and the candidate numbers it records, answers taken from the spec as it is now.
"""

from __future__ import annotations

import json
import random
import sys
from dataclasses import replace
from pathlib import Path
from typing import Any, Callable, Final, Mapping, Sequence

from conformance import vectorgen
from conformance.connection_policies import answer_policy
from conformance.mutant_report import Judgement, judged, render_report
from conformance.shuffle.auth_inputs import FUNCTIONS as AUTH_FUNCTIONS
from conformance.shuffle.auth_inputs import SHAPES as AUTH_SHAPES
from conformance.shuffle.auth_inputs import answer_auth, refusal
from conformance.shuffle.derived_inputs import derived_requests
from conformance.shuffle.server_inputs import FUNCTIONS as SERVER_FUNCTIONS
from conformance.shuffle.server_inputs import SHAPES as SERVER_SHAPES
from conformance.shuffle.task_inputs import FUNCTIONS as TASK_FUNCTIONS
from conformance.shuffle.task_inputs import SHAPES as TASK_SHAPES
from conformance.shuffle.task_inputs import answer_tasks
from conformance.operator_mutants import (
    OperatorMutant,
    canonical,
    every_mutant,
    import_runner,
    rule_of,
    select,
)
from spec.errors import ProtocolError
from spec.shuffle import codec
from spec.shuffle.checksum import payload_checksum, verify_payload
from spec.shuffle.framing import FrameDecoder, max_frame_from_reader, max_frame_from_writer
from spec.shuffle.jsonform import from_json, to_json
from spec.shuffle.layouts import ONE_WAY_MESSAGE, MessageType
from spec.shuffle.messages import DataMessage, DataPayload, Gathered, Message
from spec.shuffle.reader import per_writer_quota
from spec.shuffle.settings import NETWORK_TIMEOUT_KEY, SETTINGS, ShuffleSettings, network_timeout_s
from spec.shuffle.writer import TCP_RECEIVE_BUFFER, TCP_SEND_BUFFER, flush_threshold, permit_capacity

ROOT: Final = Path(__file__).resolve().parents[2]
INPUT_FILE: Final = Path(__file__).resolve().parent / "vectors" / "inputs.json"
REPORT_FILE: Final = ROOT / "docs" / "walks" / "shuffle-inputs.md"
SELECTION_FILE: Final = ROOT / "docs" / "walks" / "shuffle-inputs-selection.json"
"""The selection's raw outcome, from which the report is written again (``--report``) without a selection."""
SCHEMA_NAME: Final = "inputs.schema.json"
GENERATOR_VERSION: Final = "1"
SEED: Final = 43
CANDIDATES: Final = 4000

MODULES: Final = (
    "spec.shuffle.codec", "spec.shuffle.framing", "spec.shuffle.jsonform", "spec.shuffle.settings",
    "spec.shuffle.registry", "spec.shuffle.checksum", "spec.shuffle.messages", "spec.shuffle.errors",
    "spec.auth.handshake", "spec.auth.keys", "spec.auth.ciphers", "spec.auth.layouts", "spec.auth.settings",
    "spec.auth.errors", "spec.shared_secret", "spec.shuffle.coordination", "spec.shuffle.root_cause", "spec.errors",
    "spec.admission", "spec.departure", "spec.http2_watch",
)
"""The spec modules the inputs reach (the ones mutated)."""
FUNCTIONS_OF: Final = {"spec.shuffle.writer": ("permit_capacity", "flush_threshold"),
                       "spec.shuffle.reader": ("per_writer_quota",)}
"""Modules of which only some functions are mutated here (the walk corpus mutates the rest through traces)."""
PREFIXES: Final = ("spec.", "conformance.shuffle.inputs", "conformance.shuffle.auth_inputs",
                   "conformance.shuffle.task_inputs", "conformance.shuffle.server_inputs",
                   "conformance.connection_policies")
"""Imported afresh for each mutant: the spec and the modules that bind its names at import."""

INT32: Final = (-(2**31), 2**31 - 1)
INT64: Final = (-(2**63), 2**63 - 1)
Json = Mapping[str, Any]
Request = dict[str, Any]


# -- the runner: exactly what the reference target answers for one request -------------------------------------

def _decoded(message: Message, request: Json) -> dict[str, Any]:
    if request.get("verifyChecksum") and isinstance(message, DataMessage):
        verify_payload(message)
    return to_json(message)


def _decode_frame(request: Json) -> Any:
    frame = bytes.fromhex(request["hex"])
    return _decoded(codec.decode_frame(frame, int(request.get("maxFrameLength", codec.DEFAULT_MAX_FRAME_LENGTH))),
                    request)


def _decode_body(request: Json) -> Any:
    return _decoded(codec.decode_body(bytes.fromhex(request["hex"])), request)


def _encode(request: Json) -> Any:
    message = from_json(request["message"])
    return (codec.encode_frame(message) if request["layer"] == "frame" else codec.encode_body(message)).hex()


def _settings(request: Json) -> Any:
    return ShuffleSettings.from_dict(request["settings"]).to_dict()


def _network_timeout(request: Json) -> Any:
    return network_timeout_s(request["conf"])


def _max_frame(request: Json) -> Any:
    if request["from"] == "reader":
        return max_frame_from_reader()
    return max_frame_from_writer(ShuffleSettings.from_dict(request["settings"]), int(request["maxRecordSize"]))


def _checksum(request: Json) -> Any:
    return str(payload_checksum(bytes.fromhex(request["payload"])))


def _budget(request: Json) -> Any:
    """A writer's byte permits for ``readers`` (or the refusal of its budget), its flush threshold, and a reader's
    quota per writer of ``writers``, under ``settings``."""
    settings = ShuffleSettings.from_dict(request["settings"])
    try:
        capacity: Any = permit_capacity(settings, int(request["readers"]))
    except ValueError as error:
        capacity = refusal(error)
    return {"permitCapacity": capacity, "flushThreshold": flush_threshold(settings),
            "perWriterQuota": per_writer_quota(settings, int(request["writers"]))}


def _payload_of(item: str | list[str]) -> DataPayload:
    """A payload as hex (one buffer), or as a list of hex parts: gathered, as the writer sends it, never joined."""
    return bytes.fromhex(item) if isinstance(item, str) else Gathered(tuple(bytes.fromhex(part) for part in item))


def _gathered(request: Json) -> Any:
    """A DATA whose payload is ``parts`` gathered: its size, CRC32C, body and frame as sent, and whether it equals
    (either way round) the same DATA with the payload ``against`` (hex, or parts)."""
    payload = _payload_of(request["parts"])
    message = DataMessage(seq=1, writer_id=2, reader_id=3, checksum=payload_checksum(payload), payload=payload)
    other = replace(message, payload=_payload_of(request["against"]))
    return {"dataSize": message.data_size, "checksum": str(message.checksum), "body": codec.encode_body(message).hex(),
            "frame": b"".join(codec.encode_frame_parts(message)).hex(), "equal": [message == other, other == message]}


FUNCTIONS: Final[dict[str, Callable[[Json], Any]]] = {
    "decodeFrame": _decode_frame, "decodeBody": _decode_body, "encode": _encode, "settings": _settings,
    "networkTimeout": _network_timeout, "maxFrame": _max_frame, "checksum": _checksum, "budget": _budget,
    "gathered": _gathered,
}


def _stream(request: Json) -> dict[str, Any]:
    """Chunks fed in turn, then the end of the stream: the messages decoded, and the error that stopped it."""
    decoder = FrameDecoder(int(request.get("maxFrameLength", codec.DEFAULT_MAX_FRAME_LENGTH)),
                           lent=bool(request.get("lent")))
    out: list[dict[str, Any]] = []
    try:
        for chunk in request["chunks"]:
            if request.get("views"):
                out += [to_json(codec.message_of(m)) for m in decoder.feed_views(bytes.fromhex(chunk))]
            else:
                out += [to_json(m) for m in decoder.feed(bytes.fromhex(chunk))]
        decoder.close()
    except ProtocolError as error:
        return {"messages": out, **refusal(error)}
    return {"messages": out}


def answer(request: Json) -> dict[str, Any]:
    """The spec's answer to one request of the inputs contract."""
    if request["function"] == "decodeStream":
        return _stream(request)
    if request["function"] in AUTH_FUNCTIONS:
        return answer_auth(request)
    if request["function"] in TASK_FUNCTIONS:
        return answer_tasks(request)
    if request["function"] in SERVER_FUNCTIONS:
        return answer_policy(request)
    try:
        return {"value": FUNCTIONS[request["function"]](request)}
    except ProtocolError as error:
        return refusal(error)


def serve() -> int:
    """The ``inputs`` role of an ``exec:`` target: one answer line per request line on stdin."""
    for line in sys.stdin:
        if line.strip():
            print(json.dumps(answer(json.loads(line))), flush=True)
    return 0


# -- the generator ----------------------------------------------------------------------------------------------

def _edge(rng: random.Random, bounds: tuple[int, int]) -> int:
    low, high = bounds
    return rng.choice((0, 0, 1, -1, 2, high, high - 1, low, low + 1, rng.randint(low, high)))


def _payload(rng: random.Random) -> bytes:
    return bytes(rng.getrandbits(8) for _ in range(rng.choice((0, 0, 1, 3, 4, 5, 8, 17))))


def _message(rng: random.Random) -> dict[str, Any]:
    """A valid message of any type, its fields at the edges of their ranges."""
    return _message_of_type(rng, rng.choice(list(MessageType)))


def _message_of_type(rng: random.Random, kind: MessageType) -> dict[str, Any]:
    """A valid message of ``kind``, its fields at the edges of their ranges."""
    out: dict[str, Any] = {"type": kind.name, "seq": _edge(rng, INT64), "writer_id": _edge(rng, INT32),
                           "reader_id": _edge(rng, INT32)}
    if kind is MessageType.CREDIT_CONTROL_MESSAGE:
        out["num_messages"] = _edge(rng, INT32)
    if kind is MessageType.DATA_MESSAGE_UNSAFE_ROW:
        payload = _payload(rng)
        out["payload"] = payload.hex()
        out["checksum"] = rng.choice((payload_checksum(payload),) * 3 + (_edge(rng, INT64),))
    return out


def _be(value: int, size: int) -> bytes:
    wrapped: int = value % 2 ** (8 * size)
    return wrapped.to_bytes(size, "big")


_BODY_FAULTS: Final = ("type", "truncate", "trail", "data_size", "checksum", "empty")
_FRAME_FAULTS: Final = ("frame_length", "transport", "body_length", "cut", "extra", "max")


def _faulty_body(rng: random.Random, body: bytearray, faults: Sequence[str]) -> bytearray:
    for fault in faults:
        if fault == "type":
            body[0:4] = _be(rng.choice((0, 5, -1, 255, 256 + rng.randint(1, 4), 2**31 - 1, -(2**31),
                                        rng.randint(1, 4))), 4)
        elif fault == "truncate":
            body = body[:rng.choice((0, 1, 2, 3, 4, 5, 11, 12, 19, 20, 23, 24, 31, 32, max(len(body) - 1, 0)))]
        elif fault == "trail":
            body += bytes(rng.choice((1, 1, 2, 4)))
        elif fault == "data_size" and len(body) >= 32:
            size = int.from_bytes(body[20:24], "big", signed=True)
            body[20:24] = _be(rng.choice((size + 1, size - 1, -1, -(2**31), 2**31 - 1, 0, -size)), 4)
        elif fault == "checksum" and len(body) >= 32:
            body[24:32] = _be(rng.choice((0, 1, -1, 2**32, int.from_bytes(body[24:32], "big") ^ 1)), 8)
        elif fault == "empty":
            body = bytearray()
    return body


def _frame_of(rng: random.Random, body: bytes, faults: Sequence[str]) -> tuple[bytearray, int]:
    length = 13 + len(body)
    max_length = rng.choice((codec.DEFAULT_MAX_FRAME_LENGTH, codec.SPARK_MAX_FRAME_LENGTH))
    frame_length, transport, body_length = length, ONE_WAY_MESSAGE, len(body)
    tail = b""
    cut = 0
    for fault in faults:
        if fault == "frame_length":
            frame_length = rng.choice((length + 1, length - 1, 0, 12, 13, 14, -1, -(2**63), 2**63 - 1,
                                       codec.SPARK_MAX_FRAME_LENGTH, codec.SPARK_MAX_FRAME_LENGTH + 1))
        elif fault == "transport":
            transport = rng.choice((0, 1, 8, 10, -1, 127, -128, 4))
        elif fault == "body_length":
            body_length = rng.choice((0, -1, len(body) + 1, 2**31 - 1))
        elif fault == "cut":
            cut = rng.choice((1, 2, length - 13, length - 12, length - 1, length))
        elif fault == "extra":
            tail = bytes(rng.choice((1, 1, 5, 13)))
        elif fault == "max":
            max_length = rng.choice((length, length - 1, length + 1, 13, 12, 14))
    frame = bytearray(_be(frame_length, 8) + _be(transport, 1) + _be(body_length, 4) + body + tail)
    return (frame[:len(frame) - cut] if cut else frame), max_length


def _faults(rng: random.Random, names: Sequence[str]) -> list[str]:
    count = rng.choice((0, 1, 1, 2, 2))
    return [rng.choice(names) for _ in range(count)]


def _decode_request(rng: random.Random) -> Request:
    body = bytearray(codec.encode_body(from_json(_message(rng))))
    layer = rng.choice(("frame", "frame", "body"))
    faults = _faults(rng, _BODY_FAULTS + (_FRAME_FAULTS if layer == "frame" else ()))
    body = _faulty_body(rng, body, [f for f in faults if f in _BODY_FAULTS])
    verify = rng.random() < 0.6
    if layer == "body":
        return {"function": "decodeBody", "hex": body.hex(), "verifyChecksum": verify}
    frame, max_length = _frame_of(rng, bytes(body), [f for f in faults if f in _FRAME_FAULTS])
    return {"function": "decodeFrame", "hex": frame.hex(), "maxFrameLength": max_length, "verifyChecksum": verify}


def _stream_request(rng: random.Random) -> Request:
    stream = bytearray()
    max_length = codec.DEFAULT_MAX_FRAME_LENGTH
    for _ in range(rng.choice((1, 2, 2, 3))):
        body = bytearray(codec.encode_body(from_json(_message(rng))))
        faults = [f for f in _faults(rng, _BODY_FAULTS + _FRAME_FAULTS) if f not in ("cut", "extra")]
        frame, bound = _frame_of(rng, bytes(_faulty_body(rng, body, [f for f in faults if f in _BODY_FAULTS])),
                                 [f for f in faults if f in _FRAME_FAULTS])
        stream += frame
        max_length = min(max_length, bound) if "max" in faults else max_length
    if rng.random() < 0.2:
        stream = stream[:len(stream) - rng.choice((1, 5, 13, 14))]
    elif rng.random() < 0.1:
        stream = stream[:rng.choice((12, 13, 14))]  # the stream ends in or right after the first frame's header
    chunk = rng.choice((1, 7, 12, 13, 14, 20, len(stream) or 1, 0))
    if chunk:
        chunks = [stream[i:i + chunk].hex() for i in range(0, len(stream), chunk)]
    else:  # split at random points
        points = sorted(rng.sample(range(len(stream) + 1), min(3, len(stream) + 1)))
        chunks = [stream[a:b].hex() for a, b in zip([0, *points], [*points, len(stream)])]
    return {"function": "decodeStream", "chunks": chunks, "maxFrameLength": max_length,
            "lent": rng.random() < 0.5, "views": rng.random() < 0.5}


_JSON_FAULTS: Final = ("missing", "unknown", "string", "spaced", "bool", "float", "null", "over", "under",
                       "type", "payload", "data_size", "checksum_over", "object")


def _json_fault(rng: random.Random, message: dict[str, Any], fault: str) -> Any:
    fields = [k for k in message if k != "type"]
    name = rng.choice(fields)
    wide = name in ("seq", "checksum")
    if fault == "missing":
        message.pop(rng.choice(list(message)))
    elif fault == "unknown":
        message[rng.choice(("extra", "Seq", "num_messages", "payload", "data_size"))] = 1
    elif fault == "string":
        message[name] = str(message[name]) if not isinstance(message[name], str) else message[name]
    elif fault == "spaced":
        message[name] = rng.choice((f" {message[name]} ", f"+{message[name]}", f"0x{message[name]}", ""))
    elif fault == "bool":
        message[name] = rng.choice((True, False))
    elif fault == "float":
        message[name] = rng.choice((1.0, 0.5, -0.0))
    elif fault == "null":
        message[name] = None
    elif fault in ("over", "under"):
        low, high = INT64 if wide else INT32
        value = high + 1 if fault == "over" else low - 1
        message[name] = rng.choice((value, str(value)))
    elif fault == "type":
        message["type"] = rng.choice((None, "DATA", "credit_control_message", 2, "", "TERMINATION_ACK_MESSAGE ", [],
                                      {"name": "DATA"}))
    elif fault == "payload":
        message["payload"] = rng.choice(("0x00", "00 ff", "0", "zz", "0g", "00 0", 0, None, "AbCd", " "))
    elif fault == "data_size":
        size = len(bytes.fromhex(message["payload"])) if isinstance(message.get("payload"), str) and all(
            c in "0123456789abcdef" for c in message["payload"]) and len(message["payload"]) % 2 == 0 else 0
        message["data_size"] = rng.choice((size, size + 1, size - 1, str(size), -1, 2**31))
    elif fault == "checksum_over":
        message["checksum"] = rng.choice((2**63, -(2**63) - 1, 2**63 - 1, -(2**63), "-0", "007"))
    elif fault == "object":
        return rng.choice(([], "message", 1, None))
    return message


def _encode_request(rng: random.Random) -> Request:
    message: Any = _message(rng)
    if rng.random() < 0.3:
        message = {k: (str(v) if isinstance(v, int) and rng.random() < 0.5 else v) for k, v in message.items()}
    if message["type"] == MessageType.DATA_MESSAGE_UNSAFE_ROW.name and rng.random() < 0.4:
        message.pop("checksum")
    if message["type"] == MessageType.CREDIT_CONTROL_MESSAGE.name and rng.random() < 0.3:
        message.pop("seq")
    if message["type"] == MessageType.DATA_MESSAGE_UNSAFE_ROW.name and rng.random() < 0.25:
        text = message["payload"]
        message["payload"] = rng.choice((f"0x{text}", f"0X{text.upper()}", " ".join(text[i:i + 2] for i in range(
            0, len(text), 2)), f"{text}0", f"{text}g0", f"x{text}", "0x", f"0x{text}0", f"\n{text}\t", "zz", "0g",
            None, 7, [text]))
        if message["payload"] is None:
            del message["payload"]
    if message.get("type") == MessageType.DATA_MESSAGE_UNSAFE_ROW.name and isinstance(message.get("payload"), str) \
            and rng.random() < 0.15:  # data_size one off a payload that is well-formed hex, and no other fault
        message = {**_message_of_type(rng, MessageType.DATA_MESSAGE_UNSAFE_ROW)}
        message["data_size"] = len(bytes.fromhex(message["payload"])) + rng.choice((1, -1, 0))
        return {"function": "encode", "layer": rng.choice(("frame", "body")), "message": message}
    for fault in _faults(rng, _JSON_FAULTS):
        if isinstance(message, dict) and len(message) > 1:
            message = _json_fault(rng, message, fault)
    return {"function": "encode", "layer": rng.choice(("frame", "body")), "message": message}


_BOOLEAN_SPELLINGS: Final = ("true", "false", "TRUE", "False", " true ", "yes", "1", "0", "", " ", "truee", "t")
_INT_SPELLINGS: Final = ("0", "1", "-1", "2", "+1", " 7 ", "-0", "+0", "", " ", "1k", "32k", "1.0", "1e3", "0x10",
                         "--1", "+-1", "1 000", "١", "007")
_TIME_UNITS: Final = ("", "us", "ms", "s", "m", "min", "h", "d", "US", "Ms", "S", "MIN", "H", "D", "ns", "sec", "y",
                      " ms", "ms ")
_TIME_NUMBERS: Final = (0, 1, -1, 2, -2, 999, 1000, 1001, -999, -1000, -1001, -1999, 1999, 2**62, -(2**62),
                        2**63 - 1, 2**63, -(2**63), -(2**63) - 1, 153722867280912, 153722867280913,
                        2562047788015215, 2562047788015216, 106751991167300, 106751991167301)


def _spelling(rng: random.Random, kind: str) -> str:
    """One value of a setting of ``kind`` as a tester would spell it: at a bound, one past, blank, signed."""
    if kind == "boolean":
        return rng.choice(_BOOLEAN_SPELLINGS)
    if kind == "time in MILLISECONDS":
        number = rng.choice(_TIME_NUMBERS)
        sign = rng.choice(("", "", "+")) if number >= 0 else ""
        unit = rng.choice(_TIME_UNITS)
        pad = rng.choice(("", "", "", " ", "\t"))
        return f"{pad}{sign}{number}{unit}{pad}"
    low, high = INT32 if kind == "int" else INT64
    return rng.choice((*_INT_SPELLINGS, str(high), str(high + 1), str(low), str(low - 1), str(high - 1),
                       str(rng.randint(low, high)), f" {high} ", f"+{high}", str(10**30)))


def _settings_values(rng: random.Random) -> dict[str, str]:
    chosen = rng.sample(SETTINGS, rng.choice((1, 1, 2, 2, 3, 6)))
    out = {s.key: _spelling(rng, s.kind.value) for s in chosen}
    if rng.random() < 0.1:
        out[rng.choice(("spark.shuffle.streaming.unknown", "spark.network.timeout", "spark.shuffle.streaming."))] = "x"
    return out


def _network_timeout_request(rng: random.Random) -> Request:
    if rng.random() < 0.1:
        return {"function": "networkTimeout", "conf": {}}
    value = _spelling(rng, "time in MILLISECONDS") if rng.random() < 0.7 else rng.choice(
        ("120", "0", "-1", "1", " 5 ", "120s", "abc", "", "1.5s", "-0"))
    return {"function": "networkTimeout", "conf": {NETWORK_TIMEOUT_KEY: value}}


def _max_frame_request(rng: random.Random) -> Request:
    if rng.random() < 0.2:
        return {"function": "maxFrame", "from": "reader"}
    size = rng.choice(("1", "2", "9", "10", "11", "12", "100", "32768", "2147483647", "0"))
    return {"function": "maxFrame", "from": "writer",
            "settings": {"spark.shuffle.streaming.networkBufferSize": size},
            "maxRecordSize": rng.choice((0, 1, 4, 64 * 1024 * 1024, 2**31 - 1))}


def _checksum_request(rng: random.Random) -> Request:
    return {"function": "checksum", "payload": _payload(rng).hex()}


_BUFFER_SIZES: Final = (1, 2, 10, 32768, 2**30 - 1, 2**30, 2**31 - 1)
_READERS: Final = (0, 1, 1, 2, 3, 200, 64527, 2**16)


def _budget_request(rng: random.Random) -> Request:
    """The memory-budget settings at Java's int bounds (0, 1, 2^31-1, 2^31, negative, with units) and at the edges
    of the writer's budget for its readers: the 2 R N floor, the TCP buffers' share, 2^31-1, one either side."""
    readers, buffer = rng.choice(_READERS), rng.choice(_BUFFER_SIZES)
    if rng.random() < 0.3:  # the floor of 2 buffers a reader at 2^31: R N = 2^30, a byte either side
        readers = rng.choice((1, 2, 4))
        buffer = 2**30 // readers + rng.choice((-1, 0, 0, 1))
    tcp = readers * (TCP_SEND_BUFFER + TCP_RECEIVE_BUFFER)
    edge = rng.choice((2 * readers * buffer + tcp, buffer + tcp, 2**31 - 1 + tcp, buffer, 2**31 - 1))
    memory = rng.choice((edge + rng.choice((-1, 0, 0, 1)),) * 3 + (0, 1, -1, 2**31 - 1, 2**31, -(2**31), 33554432))
    settings = {"spark.shuffle.streaming.networkBufferSize": str(buffer),
                "spark.shuffle.streaming.writerMaxMemory": rng.choice((str(memory),) * 14 + (
                    f" {memory} ", f"+{memory}", "32m", "1k", "0x10", ""))}
    if rng.random() < 0.5:
        settings["spark.shuffle.streaming.readerMaxMemory"] = rng.choice(
            ("0", "1", "-1", "2", "31", "32", "2147483647", "2147483648", "-2147483648", "33554432", "32m"))
    writers = rng.choice((1, 1, 2, 3, 31, 32, 33, 2**31 - 1))
    return {"function": "budget", "settings": settings, "readers": readers, "writers": writers}


def _gathered_request(rng: random.Random) -> Request:
    """A payload in parts (none, empty ones, one byte each), against the same bytes joined, in other parts, or
    bytes one off (a byte changed, one more, one fewer)."""
    parts = [_payload(rng) for _ in range(rng.choice((0, 1, 2, 2, 3, 5)))]
    joined = b"".join(parts)
    other = rng.choice((joined, joined, joined + b"\0", joined[:-1], bytes((joined[0] ^ 1,)) + joined[1:]
                        if joined else b"\1"))
    cut = rng.randint(0, len(other))
    against: Any = rng.choice((other.hex(), [other[:cut].hex(), other[cut:].hex()], [other.hex()]))
    return {"function": "gathered", "parts": [p.hex() for p in parts], "against": against}


_SHAPES: Final[tuple[tuple[Callable[[random.Random], Request], int], ...]] = (
    (_decode_request, 30), (_stream_request, 15), (_encode_request, 25),
    (lambda rng: {"function": "settings", "settings": _settings_values(rng)}, 22),
    (_network_timeout_request, 5), (_max_frame_request, 2), (_checksum_request, 1), (_budget_request, 4),
    (_gathered_request, 2), *AUTH_SHAPES, *TASK_SHAPES, *SERVER_SHAPES,
)
"""Each request shape with its weight."""


def candidate(number: int, seed: int = SEED) -> Request:
    """Candidate ``number`` of ``seed``: each is drawn from its own generator, so one is rebuilt alone."""
    rng = random.Random(f"{seed}:inputs:{number}")
    shapes = [shape for shape, _ in _SHAPES]
    draw: Callable[[random.Random], Request] = rng.choices(shapes, [weight for _, weight in _SHAPES])[0]
    return draw(rng)


def candidates(count: int = CANDIDATES, seed: int = SEED) -> list[Request]:
    return [candidate(number, seed) for number in range(count)]


# -- the corpus -------------------------------------------------------------------------------------------------

HEADER: Final = [
    "Requests of the inputs contract (exec: role 'inputs', one JSON line each) to the pure functions a trace does",
    "not reach: decodeFrame / decodeBody (hex; maxFrameLength; verifyChecksum), decodeStream (chunks fed in turn,",
    "then the end of the stream; 'lent' and 'views' pick the reference's decoding path and never change the",
    "answer), encode (a message as the JSON form holds it; layer frame or body), settings (Spark keys and",
    "strings; the answer is every setting's canonical string), networkTimeout (a conf; seconds), maxFrame (the",
    "longest frame a side can legitimately receive), checksum, budget (settings, 'readers', 'writers': a writer's",
    "byte permits or their refusal, its flush threshold, a reader's quota per writer) and gathered (a DATA whose",
    "payload is 'parts', hex buffers never joined: its size, CRC32C, body and frame, and whether it equals the DATA",
    "whose payload is 'against', hex or parts, either way round). 'answer' is {value} or {error, errorParams}.",
    "With capability inputs-auth: authServer / authClient (one end of the AuthEngine handshake under 'config';",
    "its draws are the bytes of SHA-256(random || counter) blocks in the spec's order; 'received' the peer's bytes",
    "fed in turn, then 'sealed' ciphertext; 'plaintexts' sealed back, an integer n meaning the bytes i % 251 for",
    "i < n, a list the buffers of one batch, sealed at once; sealed output past 512 bytes shown as its length and",
    "SHA-256), authSettings (conf, appId, the generated secret) and authReplays (a server's memory of answered",
    "challenges, 'capacity' of them or the spec's when absent, asked about 'salts': [first, count] runs, salt i",
    "being i as 16 big-endian bytes; the answer how many of each run it saw for the first time). With capability inputs-tasks: failureText (role, task, description: a string or",
    "{repeat: UTF-8 hex, times: n}; an answer past 512 bytes shown as its length and SHA-256), rootCause (a task's",
    "error by type name, 'seen' the look at its attempt, 'waitedS') and errorReport (a typed shuffle error from",
    "its arguments: its text, its JSON and a pickled copy's). With capability inputs-admission: strangers,",
    "departures and connections (a server's bounds on connections: the policy's bounds, then 'steps', each",
    "[method, args...] with integer peers and times in seconds; the answer each step's result) and watch (a",
    "connection's use read from HTTP/2 frame headers: maxStreams, steps [from_client|from_server, HEX], the answer",
    "the use after each). A GCM 'sealed'",
    "chunk is hex or a list of parts, hex or {repeat: HEX, times: n}; what a side opens past 512 bytes is shown",
    "as its length and SHA-256. Refusals without a typed condition (a ValueError) are named by their type. 'level': MUST,",
    "SHOULD (the reference's own bound or refusal) or INFO (Spark 4.3.0 answers otherwise; not judged).",
    "A test's 'source' is 'selected' or 'derived'. Selected requests are drawn from the seed and kept only when",
    "they tell the spec apart from one of its first-order operator mutants; 'candidate' is the request's number,",
    "'comment' the mutant it was kept for as 'function: operator' (docs/walks/shuffle-inputs.md). Derived requests",
    "follow them: every rule of the spec's tables at its edges (every time unit in both cases and signs around each",
    "rounding bound; every hex spelling of a payload; every typed error at each value of each parameter), 'comment'",
    "their family. An implementation answers both alike.",
]


def level_of(request: Json, response: Json) -> str:
    """How binding a recorded answer is: INFO where Spark 4.3.0 answers otherwise and the wire vectors accept both
    (bytes after a fixed-size body, which Spark ignores; a stream ending inside a frame, whose partial frame Spark
    drops at the close), SHOULD where the answer is the reference's own bound or refusal (the longest frame a side
    takes; a replayed challenge, which Spark answers), MUST otherwise."""
    params = response.get("errorParams", {})
    if response.get("error") == "TRAILING_BYTES" and params.get("what") != "frame":
        return "INFO"
    if request["function"] == "decodeStream" and response.get("error") == "TRUNCATED_INPUT" \
            and params.get("what") == "frame":
        return "INFO"
    if request["function"] == "maxFrame" or request.get("replayed"):
        return "SHOULD"
    return "MUST"


def _test(tc_id: int, request: Request, source: dict[str, Any]) -> dict[str, Any]:
    """A test as the vector file holds it: ``source`` says where the request comes from, the answer is the spec's."""
    response = answer(request)
    return {"tcId": tc_id, **source, "level": level_of(request, response), "request": request, "answer": response}


def build(kept: Sequence[tuple[int, str]]) -> dict[str, Any]:
    """The vector file for the kept ``(candidate number, comment)`` pairs, then the derived requests
    (:mod:`conformance.shuffle.derived_inputs`), answers from the spec now; a number past :data:`CANDIDATES` is a
    request an earlier corpus kept that the seed no longer draws (the selection records them,
    :func:`carried_requests`)."""
    carried = carried_requests()
    tests = [_test(i, candidate(n) if n < CANDIDATES else carried[n - CANDIDATES],
                   {"source": "selected", "candidate": n, "comment": comment}) for i, (n, comment) in enumerate(kept, 1)]
    tests += [_test(i, request, {"source": "derived", "comment": comment})
              for i, (comment, request) in enumerate(derived_requests(), len(tests) + 1)]
    return vectorgen.corpus_document("streaming-shuffle-inputs", SCHEMA_NAME, GENERATOR_VERSION, SEED, CANDIDATES,
                                     HEADER, tests)


def recorded() -> list[tuple[int, str]]:
    """The kept requests the committed file records (its selected tests)."""
    return vectorgen.recorded_kept(INPUT_FILE, "candidate")


def render() -> str:
    return vectorgen.render(build(recorded()))


# -- the selection ----------------------------------------------------------------------------------------------

def carried_requests() -> list[Request]:
    """The requests earlier corpora kept that the seed no longer draws (its shapes changed since), kept on by the last
    selection: candidate ``CANDIDATES + i`` is the i-th."""
    return list(json.loads(SELECTION_FILE.read_text()).get("carried", [])) if SELECTION_FILE.exists() else []


def _undrawn(earlier: Sequence[dict[str, Any]], drawn: Sequence[Request]) -> list[Request]:
    """The ``earlier`` corpora's requests the seed does not draw and the spec still answers as they record, once each:
    candidates too, so a re-selection keeps them (it only adds)."""
    seen = {canonical(request) for request in drawn}
    found: list[Request] = []
    for test in earlier:
        text = canonical(test["request"])
        if text not in seen and canonical(answer(test["request"])) == canonical(test["answer"]):
            seen.add(text)
            found.append(test["request"])
    return found


def mutants_now() -> list[OperatorMutant]:
    """Every family's mutants of :data:`MODULES` and of the :data:`FUNCTIONS_OF` functions, one per name (a name is a
    rule)."""
    every = [m for module in MODULES for m in every_mutant(module)] + [
        m for module, functions in FUNCTIONS_OF.items() for m in every_mutant(module) if m.function in functions]
    return list({m.name: m for m in reversed(every)}.values())[::-1]


def select_unjudged_corpus(outcome: dict[str, Any]) -> dict[str, Any]:
    """``--unjudged``: the last selection's ``outcome`` with the mutants it does not judge (a new family, say, and the
    survivors no judgement covers, its gaps: a request derived since may tell them apart) selected alone
    (:func:`conformance.operator_mutants.select_unjudged`), on the recorded requests first (kept and derived), then
    every drawn candidate; a request kept for one of them is added after the kept ones."""
    mutants = mutants_now()
    table = judgements()
    tests = json.loads(INPUT_FILE.read_text())["tests"]
    derived = iter(range(1, len(tests) + 1))
    number: list[int | str] = [t["candidate"] if t["source"] == "selected" else f"derived {next(derived)}"
                               for t in tests]
    requests = [t["request"] for t in tests] + candidates(int(outcome["candidates"]))
    number += list(range(int(outcome["candidates"])))
    return vectorgen.unjudged_outcome(outcome, SELECTION_FILE, mutants, number, requests, len(tests),
                                      import_runner("conformance.shuffle.inputs", "answer"), PREFIXES,
                                      lambda name: judged(name, table) is None)


def select_corpus(count: int, earlier: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """Run the selection over the first ``count`` candidates and the ``earlier`` corpora's requests the seed no longer
    draws; its outcome as :data:`SELECTION_FILE` holds it (those of the latter kept under ``carried``, numbered from
    :data:`CANDIDATES` on). The functions are fast, so every candidate is tried on every mutant (untraced: the codecs
    and tables the modules derive at import are mutated too), the kept ones first: the ``earlier`` corpora's requests
    (the spec still answering them as they record), then the derived requests (which the vector file holds in any
    case: a mutant one of them tells apart is ``killedBy`` ``derived N``, the N-th of them), before any other."""
    earlier = [test for test in earlier if test.get("source") != "derived"]
    requests = candidates(count)
    requests += _undrawn(earlier, requests)
    derived = [request for _, request in derived_requests()]
    derived_name = {len(requests) + i: f"derived {i + 1}" for i in range(len(derived))}
    requests += derived
    mutants = mutants_now()
    chosen = select(requests, import_runner("conformance.shuffle.inputs", "answer"), PREFIXES, mutants,
                    progress=lambda line: print(line, file=sys.stderr, flush=True), traced=False,
                    carried=[(t["request"], t["answer"]) for t in earlier] + [(request, None) for request in derived])
    selected = [index for index in chosen.kept if index not in derived_name]
    undrawn = [index for index in selected if index >= count]
    number: dict[int, int | str] = {index: index for index in selected} | derived_name | {
        index: CANDIDATES + i for i, index in enumerate(undrawn)}
    comment: dict[int | str, str] = {}
    for name, index in chosen.killed_by.items():
        comment.setdefault(number[index], rule_of(name))
    return {"seed": SEED, "candidates": count,
            "kept": [[number[index], comment.get(number[index], "kept by an earlier selection")] for index in selected],
            "carried": [requests[index] for index in undrawn],
            "mutants": [{"module": m.module, "name": m.name} for m in mutants],
            "killedBy": {name: number[index] for name, index in chosen.killed_by.items()},
            "survivors": chosen.survivors, "broken": chosen.broken, "timedOut": chosen.timed_out}


_ATTRIBUTE = "the attribute is kept for the runtime; the error's JSON (what an answer shows) is built from its parameters"
_BETWEEN_MESSAGES = ("the receiver's message length is -1 between messages and at least a header's (8 + 1 + key + 7 "
                     "bytes) within one: only its sign is read, so 0, 1 and -2 split it alike")
_HOT_PATH = ("whole segments before a message's last are decrypted alike by the hot path and one at a time (the same "
             "nonces, never the last's): the bound only moves work between the two")
_RESPONSE_OR_FAILURE = ("the frame reader lets only an RpcResponse (4) or an RpcFailure (5) through: == 5 is >= 5, and "
                        "after a failure returned, != 4 is as false as < 4 and > 4")
_PARSED = ("validate sees values parse made (an int or a bool, in range); only a Python caller building "
           "ShuffleSettings itself hands it anything else")

_TEXT_ONLY = ("only words a refusal's text (its message), which answers leave out (the condition and errorParams "
              "only)")
_NO_BOOL_PARAMETER = (
    "no error of any protocol carries a bool parameter, so none shows true as \"True\": every ProtocolError "
    "subclass's constructor types its parameters (str, int, int | None, float, bytes as hex text, list[str], an "
    "Entry or None; SyncInvalidMessage's **parameters come only from its subclasses, typed alike), none of the 230 "
    "constructions in spec/, reference/ and conformance/ passes a boolean expression, and the ints come from "
    "construct's integer fields, counts, or the JSON forms, which refuse true and false as integers (jsonform._int)")
"""Why a bool parameter is not an input of :meth:`spec.errors.ProtocolError.to_json` (issue 43)."""
_NO_FLOAT_OR_NONE = (
    "the errors with a float parameter (the sync errors' seconds and timeoutS) or a None one (the cluster's "
    "RevisionMismatch) are not the shuffle's, and no request builds one; the parameters of the errors a request "
    "builds are ints and strings, and str() of a string is itself")
_MEMBERSHIP = "a test of membership in a tuple does not depend on the order of its elements"
_BASE_CONDITION = ("the condition of a base class no error a request raises inherits: every raised subclass names its "
                   "own (a ClusterCoordinationError, not a CoordinationError, leaves the runtime)")

JUDGED: Final[tuple[Judgement, ...]] = (
    # (module-tail.function, a part of the operator ("" = every one), class, why)
    *(("layouts.gcm_message_header", part, "unreachable", "a field's documentation: only the generated spec shows it "
       "(docs/spec/auth.md, which tests/shuffle/test_shuffle_docs.py holds current); the cipher packs and reads the "
       "header's bytes by the layout's fields (ciphers.GcmHeader)")
      for part in ("'bytes of the whole message, these 8 ... -> ", "'1 + key length + 7' -> ",
                   "\"HKDF salt of this message's segment ... -> ", "\"first 7 bytes of every segment's non... -> ")),
    ("jsonform._data_from_json", "'missing (hex string", "equivalent", "the reason " + _TEXT_ONLY),
    ("jsonform._message_type", "remove check if value is None", "equivalent",
     "a missing type is not a string either: the refusal that follows names the same field 'type' (" + _TEXT_ONLY + ")"),
    ("framing.max_frame_from_reader", "a reader's frames are bounded", "equivalent",
     "an assertion's text; the assertion holds (no message a reader sends carries a payload)"),
    ("handshake.ClientHandshake.receive", "'challenge() first'", "unreachable",
     "the text of a caller's bug (receive() before challenge()); a request's client always sends its challenge first"),
    ("handshake.AuthConfig.__post_init__", "'utf-8' -> 'UTF-8'", "equivalent", "codec names are read in any case"),
    ("handshake.AuthConfig.__post_init__", "'replace' -> 'REPLACE'", "unreachable",
     "a request's secret is JSON text encoded as UTF-8, so it always decodes and the error handler is never looked up"),
    ("settings.Setting.validate", "remove check", "unreachable", _PARSED),
    ("settings.enabled", "swap elements 'true' / 'false'", "equivalent", _MEMBERSHIP),
    ("settings.auth_from_conf", "swap elements '1' / '2'", "equivalent", _MEMBERSHIP),
    ("settings.network_timeout_s", "'s' -> 'S'", "equivalent", "a time's unit is read lower-cased (settings._time_ms)"),
    *((f"{module}.condition", "", "equivalent", _BASE_CONDITION) for module in (
        "errors.ProtocolError", "errors.RuntimeFailure", "errors.AuthError", "coordination.CoordinationError")),
    *((f"root_cause.RootCause.{member}", "", "equivalent",
       "a rootCause answer names the cause by its member's name; the value is its description")
      for member in ("OWN", "NODE_FAILED", "PEER_FAILED", "RETIRED", "LOOK_AGAIN")),
    ("shared_secret.secret_matches", "swap arguments presented.encode() / configured.encode()", "equivalent",
     "hmac.compare_digest is symmetric"),
    ("registry.kind_of", "remove check if kind is None", "unreachable",
     "an unregistered message class is a caller's bug (UsageError); a request's message is one of the registered "
     "four (from its JSON form or its bytes)"),
    ("errors.WriterWaitTimeout.from_fault", "fault.shuffle_id / fault.writer_id", "unreachable",
     "a fault is the record a machine fills when a channel fails; no request builds one (errorReport gives an error "
     "its own arguments), and the walk corpus's writer is partition 0 of shuffle 0"),
    ("ciphers._segmented", "divmod -> truncating", "equivalent", "divmod of non-negative numbers truncates alike"),
    ("ciphers.GcmCipher._start_sealing", "divmod -> truncating", "equivalent",
     "divmod of non-negative numbers truncates alike"),
    ("codec._decoded_at", "swap branches of isinstance(buf, bytes)", "equivalent",
     "a bytes copy of the payload or a slice of the buffer holding it: the same payload bytes"),
    ("ciphers.GcmCipher.seal", "remove check if size <= GCM_PLAINTEXT_SEGMENT", "equivalent",
     "a batch of one segment is laid out and sealed alike by the join and by the segment loop: one message, its one "
     "segment last"),
    ("ciphers.GcmCipher.seal", "(left - 1) // GCM_PLAINTEXT_SEGMENT: floor -> truncation", "equivalent",
     "a message holds at least one byte (left >= 1), so the quotient's operands are non-negative"),
    ("ciphers.GcmCipher.open", "floor -> truncation", "equivalent",
     "the operand is negative only between messages (the length is then -1), where floor gives -1 and truncation 0: "
     "neither is above 1, so the hot path is passed over alike"),
    ("ciphers._segmented", "remove check if length < room", "equivalent",
     "a part shorter than the room left is appended whole by the loop's tail as well (an empty one joins to nothing)"),
    ("codec.decode_view_at", "", "equivalent", "the memo of decoded control bodies only saves work: decoding is a "
     "function of the bytes, so with the memo or without, and on either path, a body decodes to the same answer"),
    ("codec._decoded_at", "negate if owned", "equivalent", "owned picks a view or a copy of the same payload bytes"),
    ("codec._decoded_at", "type_id == _DATA_ID: == -> <=", "equivalent",
     "an id below 1 is refused by the lookup before (no type has it), so <= 1 is == 1"),
    ("codec._struct_of", "drop not", "equivalent",
     "a layout field's wrapper reads the same format string as the FormatField it wraps"),
    ("codec.decode_frame", "swap checks available < length", "equivalent",
     "fewer and more bytes than announced exclude each other: at most one of the two checks can fail"),
    ("codec.body_length", "", "unreachable",
     "the runtime sizes a send with it; no request asks for a body's length (encode answers the bytes themselves)"),
    ("framing.FrameDecoder._feed", "offset < end: < -> <=", "equivalent",
     "at offset == end the bytes kept are none: the held partial frame is unchanged"),
    ("framing.FrameDecoder._complete_pending", "take == missing: == -> >=", "equivalent",
     "take is min(missing, ...), never more than missing"),
    ("framing.FrameDecoder.at_boundary", "", "unreachable",
     "read by the runtime when a connection ends; a request's stream ends with close(), which judges the same partial "
     "frame"),
    ("framing.max_frame_from_writer", "0 -> ", "equivalent",
     "the term of a message without a payload: a control frame is shorter than DATA's whatever it is (0, 1 or -1)"),
    ("framing.max_frame_from_reader", "any -> all", "equivalent",
     "an assertion that holds either way (no message a reader sends carries a payload)"),
    ("jsonform._message_type", "swap checks value is None", "equivalent",
     "a missing type is not a string either: both refusals name the field 'type' (only the text differs)"),
    ("jsonform.InvalidMessageJson.__init__", "drop self.field", "equivalent", _ATTRIBUTE),
    ("registry._check", "", "equivalent",
     "a consistency check of the registry at import that passes on the spec's tables: weakened, it still passes"),
    ("registry.int_bits", "drop not", "equivalent",
     "a layout field's wrapper has the same size as the FormatField it wraps"),
    ("registry.int_bits", "sub.name == name: == -> <=", "equivalent",
     "the first field whose name sorts at or before the one asked for has the same width (names in wire order)"),
    ("settings.SettingsError.__init__", "drop self.", "equivalent", _ATTRIBUTE),
    ("settings.Setting.validate", "or -> and", "unreachable", _PARSED),
    ("settings.Setting.validate", "drop operand", "unreachable", _PARSED),
    ("settings.Setting.validate", "swap checks not low <= value <= high", "unreachable", _PARSED),
    ("errors.UnexpectedMessageType.__init__", "drop self.", "equivalent", _ATTRIBUTE),
    ("ciphers._kept", "", "equivalent", "the derived message keys kept only save work: a key derived again is the same"),
    ("keys.hkdf", "0 < length <= 255 * HASH_LENGTH", "equivalent",
     "an assertion on the lengths the spec asks for (12 to 32 bytes), far from either bound"),
    ("keys.hkdf", "255 -> ", "equivalent", "an assertion on the lengths the spec asks for (12 to 32 bytes)"),
    ("keys.seal_public_key", "len(iv) == GCM_IV_LENGTH", "equivalent",
     "an assertion on the IV the spec draws (always 12 bytes)"),
    ("errors.IncorrectSequenceNumber.__init__", "drop self.", "equivalent", _ATTRIBUTE),
    ("errors.WriterUnreachable.__init__", "drop self.", "equivalent", _ATTRIBUTE),
    ("errors.Fault.peer_id", "", "unreachable", "the record a machine fills when a channel fails, read by the channel "
     "table; no request builds one (errorReport gives an error its own arguments; the walk corpus judges the tables)"),
    ("errors.ProtocolError.to_json", "drop operand not isinstance(value, bool)", "unreachable", _NO_BOOL_PARAMETER),
    ("errors.ProtocolError.to_json", "and -> or", "unreachable", f"{_NO_BOOL_PARAMETER}; {_NO_FLOAT_OR_NONE}"),
    ("errors.ProtocolError.to_json", "drop operand isinstance(value, int)", "unreachable", _NO_FLOAT_OR_NONE),
    ("admission.StrangerAdmission.accepted", "append -> at the front", "equivalent",
     "one stranger arrives at a time, so the table is one past its bound at most: one eviction an arrival, in no order"),
    ("framing.FrameDecoder._complete_pending", "append -> at the front", "equivalent",
     "the held frame is completed first, on the empty list of what a feed returns: first either way"),
    ("handshake.ServerHandshake._complete", "drop operand self._replays is not None", "unreachable",
     "a server without a replay memory is a Python caller's option; every server a request runs (as the runtime's) has "
     "one"),
    ("http2_watch.ConnectionWatch.use", "drop operand self._client.malformed", "equivalent",
     "only a wrong preface makes the client's bytes malformed, before any frame is read: its SETTINGS ack is never "
     "seen, so the first operand holds already"),
    ("keys.hkdf", "drop operand bytes(HASH_LENGTH)", "equivalent",
     "HMAC pads a key shorter than its block with zero bytes (RFC 2104): an empty salt and 32 zero bytes key it alike"),
    ("messages.Gathered.__eq__", "drop operand isinstance(", "equivalent",
     "bytes compare unequal to anything that is not bytes-like: the check only spares the comparison"),
    *((f"coordination.ShuffleDirectory.{name}", "drop ...", "equivalent", "a Protocol's body is never run")
      for name in ("register", "lookup", "unregister", "report_failure")),
    ("admission.ConnectionAdmission.__init__", "1 -> 2", "equivalent",
     "one eviction rank more than the ranks used: it stays empty, and an empty rank is passed over"),
    ("departure.Departures.leaving", "queued_bytes == 0: == -> <=", "equivalent",
     "a queue holds 0 bytes or more (the reactor counts them): <= 0 is == 0"),
    *((f"ciphers.GcmCipher.{function}", part, "equivalent", _BETWEEN_MESSAGES) for function, part in (
        ("__init__", "1 -> 2"), ("_unit_length", "self._total < 0"), ("_unit_length", "0 -> 1"),
        ("_open_unit", "self._total < 0"), ("_open_unit", "0 -> 1"), ("_open_unit", "1 -> 2"),
        ("_start_message", "1 -> 2"), ("close", "self._total >= 0"), ("close", "0 -> 1"))),
    *(("ciphers.GcmCipher.__init__", part, "equivalent", "set by _start_message before any segment is read (and "
       "between messages only the sign of the length is read)") for part in (
        "0 -> ", "drop self._segment", "drop self._prefix")),
    *(("ciphers.GcmCipher.open", part, "equivalent", _HOT_PATH) for part in ("1 -> 2", "inner > 1", "1 -> 0")),
    ("ciphers.GcmCipher.open", "drop self._pending = bytearray()", "equivalent", "the pending bytes are replaced at "
     "the end of open; the loop between reads only the message's counters (and an error ends the session)"),
    ("ciphers.GcmCipher._open_unit", "len(unit) == self._total - self._read: == -> >=", "equivalent",
     "a unit is at most what is left of its message (min(left, a segment)): >= is =="),
    ("ciphers.GcmCipher._start_message", "self._read == total: == -> >=", "equivalent",
     "a length below the header's is refused above, so the header's length read is at most the total: >= is =="),
    ("ciphers.GcmCipher.seal", "size <= GCM_PLAINTEXT_SEGMENT: <= -> <", "equivalent", "a batch of exactly one "
     "segment is laid out and sealed alike by the join and by the segment loop: one message, its one segment last"),
    ("ciphers.GcmCipher.seal", "segment == last: == -> >=", "equivalent", "the loop's segment is never past last"),
    *(("ciphers._segmented", part, "equivalent", "a buffer that exactly fills a segment's room is laid out alike "
       "either way: the room for its tag follows it at once, or ahead of the next buffer (and the next message's "
       "head) or at the end; an empty piece joins to nothing") for part in (
        "length < room: < -> <=", "length - start >= room: >= -> >", "start < length: < -> <=")),
    ("ciphers._room", "len(buffer) >= size: >= -> >", "equivalent",
     "a buffer of exactly the size asked, or a new one: an answer copies each plaintext before the next open"),
    ("http2_watch.FrameReader.feed", "5 -> 4", "equivalent",
     "the stream id read with the flags byte in front is masked to its 31 bits all the same"),
    ("http2_watch.FrameReader.feed", "9 -> 10", "equivalent", "a frame header is 9 bytes: a slice to 10 ends at 9"),
    ("http2_watch.FrameReader.feed", "frame.kind == DATA: == -> <=", "equivalent",
     "DATA is type 0 and a type is a byte: <= 0 is == 0"),
    ("http2_watch._Stream.carries_request", "5 -> 6", "equivalent",
     "the prefix holds at most 5 bytes: a slice to 6 ends at 5"),
    ("http2_watch._Stream.carries_request", "remove check if len(self.prefix) < GRPC_PREFIX_BYTES", "equivalent",
     "a stream's prefix holds the first min(5, received) bytes of its data (each DataBytes piece adds its first "
     "min(size, 5) bytes, up to 5, and its size to received): while it is shorter than 5, received is below 5 and "
     "the length test fails alike"),
    ("http2_watch.ConnectionWatch._client_data", "GRPC_PREFIX_BYTES - len(stream.prefix): - -> +", "equivalent",
     "a piece's head is at most 5 bytes, so the prefix grows past 5 only by bytes carries_request never reads"),
    ("handshake.ClientHandshake._complete", "frame[TYPE_OFFSET] ==", "equivalent", _RESPONSE_OR_FAILURE),
    ("handshake.ClientHandshake._complete", "frame[TYPE_OFFSET] !=", "equivalent", _RESPONSE_OR_FAILURE),
    ("handshake._FrameReader.feed", "drop self._buffer.clear()", "equivalent", "a handshake reads one frame: once "
     "it is whole the outcome is fixed and the reader is never fed again"),
    ("handshake.ClientHandshake.__init__", "drop self._challenge", "unreachable", "only receive() before challenge() "
     "reads it (an assertion: a caller's bug); a request's client always sends its challenge first"),
    ("keys.open_public_key", "len(sealed) != SEALED_KEY_LENGTH", "equivalent", "the AuthMessage layout reads "
     "exactly 60 bytes of sealed key, so one of another length is refused as malformed before this check"),
    ("keys._hmac_sha256", "len(key) > SHA256_BLOCK", "equivalent", "HMAC is keyed with a 16-byte salt, 32 zero "
     "bytes, a 32-byte PRK, a GCM message's salt (the key's 16 or 32 bytes) or a transcript of two AuthMessages "
     "(178 bytes or more): never exactly 64"),
    ("keys.hkdf", "0 -> ", "equivalent", "the lower bound of an assertion on the lengths the spec asks for (12 to 32)"),
    ("keys.session_keys", "engine_version == 1: == -> <=", "equivalent",
     "the version is 1 or 2 (AuthConfig refuses any other): <= 1 is == 1"),
    ("settings.enabled", "text == 'true': == -> >=", "equivalent",
     "the text is 'true' or 'false' here (anything else is refused first), and 'false' < 'true'"),
    *(("shared_secret.secret_matches", part, "unreachable", "the cluster wire's HELLO check (spec.cluster.wire); no "
       "shuffle request presents a secret to it (the cluster input corpus does)") for part in ("and -> or",
                                                                                             "drop operand",
                                                                                             "drop .strip()")),
    ("settings.Setting.parse", "drop .lower() in str(raw).lower()", "unreachable",
     "a bool value: the contract's settings are text (inputs.schema.json); only a Python caller's conf holds a bool, "
     "which str(raw).lower() spells as Spark's conf does"),
    ("root_cause.root_cause", "swap checks isinstance(seen.state, AttemptFailure)", "equivalent",
     "an attempt's state is a failure or RETIRED, never both: the two checks exclude each other"),
)
"""The survivors judged by hand: equivalent (no input can tell them apart; why), or unreachable through the inputs
contract (which input it lacks). A survivor matched by no entry is a gap the generator should close. The walk
corpus's judgements of equivalence hold here too (:func:`judgements`): equivalence is the mutant's, not the corpus's."""


def judgements() -> tuple[Judgement, ...]:
    """:data:`JUDGED` and the walk corpus's equivalents in the modules both mutate."""
    from conformance.shuffle.walks import JUDGED as WALK_JUDGED  # the walks import the machines: only reports need it

    shared = {module.rsplit(".", 1)[-1] for module in (*MODULES, *FUNCTIONS_OF)}
    return JUDGED + tuple(j for j in WALK_JUDGED if j[2] == "equivalent" and j[0].split(".", 1)[0] in shared)


def report(outcome: Mapping[str, Any]) -> str:
    """docs/walks/shuffle-inputs.md from a selection's outcome."""
    intro = ["# Input corpus: shuffle", "",
             "Generated by `python -m conformance.shuffle.inputs --select` (do not edit): "
             f"{outcome['candidates']} candidate requests from seed {outcome['seed']}, {len(outcome['kept'])} kept in "
             "`conformance/shuffle/vectors/inputs.json`, which then holds the requests derived from the spec's tables "
             "(`conformance/shuffle/derived_inputs.py`, source `derived`); every candidate is tried on every mutant (the "
             "kept and the derived ones first: a mutant a derived request tells apart is killed by `derived N`). "
             "What a trace cannot reach: the walk corpus (docs/walks/shuffle.md) judged these modules' "
             "survivors unreachable through the trace contract.",
             "How the corpus is derived: docs/conformance.md, \"Input corpus: shuffle\"; the judgements are "
             "`conformance.shuffle.inputs.judgements()`.", ""]
    table = judgements()
    lines = _before_and_after(outcome, table)
    walked = frozenset(json.loads(WALK_SELECTION_FILE.read_text())["killedBy"])
    return render_report(outcome, intro, table, "the inputs contract",
                         ("the walk corpus (docs/walks/shuffle.md), which the suite's `*-walk-corpus` cases replay",
                          walked)) + "\n".join(lines) + "\n"


WALK_SELECTION_FILE: Final = ROOT / "docs" / "walks" / "shuffle-selection.json"


def _before_and_after(outcome: Mapping[str, Any], table: Sequence[Judgement]) -> list[str]:
    """Per module, the mutants told apart by the walk corpus alone (before) and by either corpus (after), over the
    mutants not broken nor judged equivalent here; a module the walks did not mutate shows a dash."""
    walks = json.loads(WALK_SELECTION_FILE.read_text())
    by_walks, walked = set(walks["killedBy"]), {m["module"] for m in walks["mutants"]}
    lines = ["", "## Before and after: told apart by the walks alone, and by the walks or the inputs", "",
             "| module | mutants - broken - equivalent | walks alone | walks or inputs |", "|---|---:|---:|---:|"]
    counted: dict[str, list[int]] = {}
    for m in outcome["mutants"]:
        name = m["name"]
        verdict = judged(name, table) if name in outcome["survivors"] else None
        if name in outcome["broken"] or (verdict is not None and verdict[0] == "equivalent"):
            continue
        row = counted.setdefault(m["module"], [0, 0, 0])
        row[0] += 1
        row[1] += name in by_walks
        row[2] += name in by_walks or name in outcome["killedBy"]
    for module, (total, before, after) in counted.items():
        shown = f"{before} ({before / total:.0%})" if module in walked else "-"
        lines.append(f"| {module} | {total} | {shown} | {after} ({after / total:.0%}) |")
    return lines


def main(argv: Sequence[str] | None = None) -> int:
    return vectorgen.corpus_main("conformance.shuffle.inputs", __doc__, (INPUT_FILE, SELECTION_FILE, REPORT_FILE),
                                 CANDIDATES, select_corpus, build, report, render,
                                 list(sys.argv[1:] if argv is None else argv), select_unjudged_corpus)


if __name__ == "__main__":
    sys.exit(main())

"""``python -m conformance codec`` as a user runs it: hex <-> JSON, stdin lines, clear errors."""

from __future__ import annotations

import json
import subprocess
import sys

from conformance.shuffle.vector_suite import load

VECTORS = [(g, t) for g in load("wire_messages.json")["testGroups"] for t in g["tests"]]
REFERENCE_FRAME = "000000000000003209000000250000000100000000000000050000000300000007000000050000000053518fab0102030405"


def codec(*args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "conformance", "codec", *args], input=stdin,
                          capture_output=True, text=True, timeout=120, check=False)


def test_decode_frame_prints_the_message_as_json() -> None:
    done = codec("decode", REFERENCE_FRAME)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == {"type": "DATA_MESSAGE_UNSAFE_ROW", "seq": "5", "writer_id": 3,
                                       "reader_id": 7, "data_size": 5, "checksum": "1397854123",
                                       "payload": "0102030405"}


def test_encode_computes_the_checksum_and_prints_body_hex() -> None:
    message = {"type": "DATA_MESSAGE_UNSAFE_ROW", "seq": "5", "writer_id": 3, "reader_id": 7, "payload": "0102030405"}
    done = codec("encode", "--body", json.dumps(message))
    assert (done.returncode, done.stdout.strip()) == (0, REFERENCE_FRAME[26:])


def test_stdin_lines_decode_every_vector_and_errors_do_not_stop_the_stream() -> None:
    lines = [t["frame"] for g, t in VECTORS if g["maxFrameLength"] != "64" and t["frame"]]
    done = codec("decode", "--frame", "-", stdin="\n".join(lines) + "\n")
    assert done.returncode == 1  # some vectors are invalid
    outputs = [json.loads(line) for line in done.stdout.splitlines()]
    assert len(outputs) == len(lines)
    for (group, test), out in zip([(g, t) for g, t in VECTORS if g["maxFrameLength"] != "64" and t["frame"]], outputs):
        if "error" in test and not (test["result"] == "invalid" and "message" in test):
            assert out["error"] == test["error"], test["comment"]
        else:
            assert out == test["message"], test["comment"]


def test_stdin_encode_round_trips_valid_vectors() -> None:
    valid = [t for _, t in VECTORS if t["result"] == "valid"]
    done = codec("encode", "-", stdin="".join(json.dumps(t["message"]) + "\n" for t in valid))
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == [t["frame"] for t in valid]


def test_bad_single_arguments_exit_2_with_the_condition_on_stderr() -> None:
    cases = [
        (("decode", "zz"), "INVALID_HEX"),
        (("decode", "--body", "00000009"), "STREAMING_SHUFFLE_UNEXPECTED_MESSAGE_TYPE"),
        (("encode", '{"type": "TERMINATION_ACK_MESSAGE", "seq": "1"}'), "INVALID_MESSAGE_JSON"),
    ]
    for args, condition in cases:
        done = codec(*args)
        assert done.returncode == 2 and done.stdout == "", args
        assert condition in done.stderr, done.stderr


def test_errors_explain_what_is_wrong() -> None:
    out_of_range = codec("encode", '{"type": "CREDIT_CONTROL_MESSAGE", "writer_id": 2147483648, "reader_id": 0, '
                                   '"num_messages": 1}')
    assert "writer_id: 2147483648 is outside the int32 range" in out_of_range.stderr
    typo = codec("encode", '{"type": "CREDIT_CONTROL_MESSAGE", "writerId": 1, "reader_id": 0, "num_messages": 1}')
    assert "writerId: unknown field" in typo.stderr
    body_as_frame = codec("decode", "00000004000000000000000600000003 00000007")
    assert "add --body" in body_as_frame.stderr

"""Encode or decode streaming-shuffle messages (hex <-> JSON), as Spark 4.3.0 puts them on the wire.

  decode [--frame|--body] HEX     print the message as JSON (--frame is the default)
  encode [--frame|--body] JSON    print the hex of the message's frame or body
  ... -                           read one item per line from stdin, write one result per line

JSON fields: type (DATA_MESSAGE_UNSAFE_ROW, CREDIT_CONTROL_MESSAGE, TERMINATION_CONTROL_MESSAGE,
TERMINATION_ACK_MESSAGE), seq, writer_id, reader_id, then num_messages (credit) or data_size,
checksum, payload (hex) (data). seq and checksum are decimal strings; on input integers may also be
JSON numbers, DATA's data_size and checksum may be omitted (payload length, CRC32C of the payload).

A bad single argument exits 2 with the error condition on stderr. With "-", a bad line prints
{"error": "<CONDITION>", ...} in its place and the rest still run (exit 1 if any line failed).
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Callable

from spec.shuffle import codec
from spec.shuffle.errors import ShuffleError
from spec.shuffle.jsonform import InvalidMessageJson, from_json, parse_hex, to_json

EXIT_OK, EXIT_LINE_FAILED, EXIT_BAD_ARGUMENT = 0, 1, 2


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("action", choices=("decode", "encode"))
    layer = parser.add_mutually_exclusive_group()
    layer.add_argument("--frame", dest="layer", action="store_const", const="frame",
                       help="a whole transport frame (default)")
    layer.add_argument("--body", dest="layer", action="store_const", const="body",
                       help="a message body without the 13-byte frame header")
    parser.add_argument("--max-frame-length", type=int, default=codec.SPARK_MAX_FRAME_LENGTH,
                        help="largest frame_length accepted when decoding (default: Spark's 2^31+6)")
    parser.add_argument("item", metavar="HEX|JSON|-", help="the input, or - for one item per stdin line")
    parser.set_defaults(layer="frame")


def _decoder(args: argparse.Namespace) -> Callable[[str], str]:
    def decode(text: str) -> str:
        data = parse_hex(text, args.layer)
        message = codec.decode_body(data) if args.layer == "body" else codec.decode_frame(data, args.max_frame_length)
        return json.dumps(to_json(message))
    return decode


def _encoder(args: argparse.Namespace) -> Callable[[str], str]:
    def encode(text: str) -> str:
        try:
            obj = json.loads(text)
        except json.JSONDecodeError as exc:
            raise InvalidMessageJson("message", f"not JSON: {exc}") from None
        message = from_json(obj)
        return (codec.encode_body(message) if args.layer == "body" else codec.encode_frame(message)).hex()
    return encode


def _hint(args: argparse.Namespace) -> str:
    """Point at --body when a frame fails to decode but the same hex is a valid body."""
    if args.action != "decode" or args.layer != "frame":
        return ""
    try:
        codec.decode_body(parse_hex(args.item))
    except ShuffleError:
        return ""
    return " (the input is a valid message body: add --body)"


def main(args: argparse.Namespace) -> int:
    convert = _decoder(args) if args.action == "decode" else _encoder(args)
    if args.item != "-":
        try:
            print(convert(args.item))
        except ShuffleError as exc:
            print(f"error: [{exc.condition}] {exc.message}{_hint(args)}", file=sys.stderr)
            return EXIT_BAD_ARGUMENT
        return EXIT_OK
    failed = False
    for line in sys.stdin:
        if not line.strip():
            continue
        try:
            out = convert(line)
        except ShuffleError as exc:
            failed = True
            out = json.dumps(exc.to_json())
        print(out, flush=True)
    return EXIT_LINE_FAILED if failed else EXIT_OK

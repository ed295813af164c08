"""Two deliberately broken ``exec:`` shuffle implementations, each with one fault that makes many
cases fail: the suite must name the one fault as the root cause and group the rest under it.

``python broken_shuffle_peers.py crc32``: the reference endpoint, but every DATA carries the CRC32 of
its payload instead of the CRC32C (a writer fault; its reader role is the reference's).

``python broken_shuffle_peers.py no-credits``: a reader on the spec's reader machine that sends its
handshake CREDIT but never the CREDIT owed for each DATA (a reader fault; it declares only the
reader role).
"""

from __future__ import annotations

import dataclasses
import json
import os
import socket
import sys
import zlib
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # run by path as an exec: target: `tests` importable

from conformance.shuffle import reference_target
from conformance.external import CAPABILITIES_ROLE, PEER_VARIABLE, ROLE_VARIABLE
from conformance.shuffle.targets import WORKLOAD_VARIABLE
from spec.shuffle.framing import FrameDecoder
from spec.shuffle.codec import encode_frame
from spec.shuffle.errors import CodecError
from spec.shuffle.messages import CreditMessage, DataMessage, Message
from spec.shuffle.reader import ReaderMachine
from spec.shuffle.settings import ShuffleSettings
from spec.shuffle.steps import Deliver, Failed, Step
from tests.shuffle.outgoing_faults import rewriting_outgoing


def crc32_checksums(message: Message) -> Message:
    if isinstance(message, DataMessage) and message.checksum != 0:
        return dataclasses.replace(message, checksum=zlib.crc32(bytes(message.payload)))
    return message


def read_without_credits() -> int:
    """Read the peer writer's stream with the spec's machine, dropping every CREDIT after the handshake."""
    with open(os.environ[WORKLOAD_VARIABLE]) as document:
        workload = json.load(document)
    host, _, port = os.environ[PEER_VARIABLE].rpartition(":")
    (writer_id,) = workload["writer_ids"]
    machine = ReaderMachine(int(workload["shuffle_id"]), int(workload["reader_id"]), [writer_id],
                            ShuffleSettings.from_dict(workload["settings"]), 0.0)
    sock = socket.create_connection((host.strip("[]"), int(port)), timeout=30)
    credits_sent = 0

    def run(step: Step) -> str | None:
        nonlocal credits_sent
        for send in step.sends:
            if isinstance(send.message, CreditMessage):
                credits_sent += 1
                if credits_sent > 1:
                    continue
            sock.sendall(encode_frame(send.message))
            if send.notify:
                run(machine.send_completed(writer_id, send.message.seq, 0.0))
        for event in step.events:
            if isinstance(event, Failed):
                return f"ERROR {event.error.condition} {event.error.message}"
            if isinstance(event, Deliver):
                if (ended := run(machine.release(event.writer_id, event.seq, 0.0))) is not None:
                    return ended
        return "COMPLETED" if machine.done else None

    decoder = FrameDecoder()
    ended = run(machine.connected(writer_id, 0.0))
    while ended is None:
        data = sock.recv(65536)
        if not data:
            ended = run(machine.connection_closed(writer_id, 0.0)) or "ERROR - connection closed"
            break
        try:
            for message in decoder.feed(data):
                if (ended := run(machine.received(writer_id, message, 0.0))) is not None:
                    break
        except CodecError as error:
            ended = run(machine.decode_failed(writer_id, error, 0.0)) or f"ERROR {error.condition} {error}"
    print(ended, flush=True)
    sock.close()
    return 0


def main(fault: str) -> int:
    if fault == "crc32":
        with rewriting_outgoing(crc32_checksums):
            return reference_target.main()
    if os.environ.get(ROLE_VARIABLE) == CAPABILITIES_ROLE:
        print("CAPABILITIES reader reports", flush=True)
        return 0
    return read_without_credits()


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))

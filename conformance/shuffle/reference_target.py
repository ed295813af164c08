"""``python -m conformance.shuffle.reference_target``: this project's runtime as an ``exec:`` implementation.

The ``reference`` target of the shuffle suite is exactly ``exec:`` with this program, so the generic
contract (``docs/conformance.md``) is exercised on every run. It reads ``CONFORMANCE_ROLE`` and the
workload named by ``CONFORMANCE_WORKLOAD`` and runs one task of the runtime in
:mod:`reference.shuffle`: a :class:`~reference.shuffle.writer_task.WriterTask` (prints
``LISTENING <port>``, writes the workload's records, ends its input, waits for the acks) or a
:class:`~reference.shuffle.reader_task.ReaderTask` reading from the writer at ``CONFORMANCE_PEER``.
It reports ``COMPLETED`` or ``ERROR <CONDITION> <message>`` on stdout and exits. A workload with an
``auth`` object (an authenticated run) makes every connection run Spark's AuthEngine handshake.

The directory is a standalone one (reference/shuffle/standalone_directory.py): the runner is the
only other party, so a reader finds exactly the peer writer, and no other task can report a failure.
"""

from __future__ import annotations

import json
import os
import sys
from typing import Any, Callable, Final, Iterator

from conformance.shuffle.targets import ACK_TIMEOUT_KEY, CASE_VARIABLE, WORKLOAD_VARIABLE, auth_from_json
from conformance.external import CAPABILITIES_ROLE, PEER_VARIABLE, ROLE_VARIABLE
from reference.shuffle.reader_task import ReaderTask
from reference.shuffle.standalone_directory import StandaloneDirectory
from reference.shuffle.task import TaskOptions, describe
from reference.shuffle.writer_task import WriterTask
from spec.shuffle import coordination
from spec.errors import ProtocolError
from spec.shuffle.settings import ShuffleSettings

CAPABILITIES: Final = "CAPABILITIES writer reader workload reports"


def report(line: str) -> None:
    print(line.replace("\n", " "), flush=True)


def run(task: Callable[[], None]) -> int:
    """Run a task to its end and report how it ended."""
    try:
        task()
    except ProtocolError as error:
        report(f"ERROR {error.condition} {error.message}")
        return 1
    except Exception as error:  # noqa: BLE001 - any failure is the outcome being reported
        report(f"ERROR - {describe(error)}")
        return 1
    report("COMPLETED")
    return 0


def writer(workload: dict[str, Any], settings: ShuffleSettings, options: TaskOptions) -> int:
    num_readers = int(workload["num_readers"])
    task = WriterTask(coordination.ShuffleKey(int(workload["shuffle_id"]), 0), int(workload["writer_id"]), num_readers,
                      settings, StandaloneDirectory(), options)
    report(f"LISTENING {task.port}")

    def records() -> Iterator[tuple[int, bytes]]:
        for reader_id in range(num_readers):
            for record in workload["records"].get(str(reader_id), []):
                yield reader_id, bytes.fromhex(record)

    def produce() -> None:
        task.run(records())

    return run(produce)


def reader(workload: dict[str, Any], settings: ShuffleSettings, options: TaskOptions, peer: str) -> int:
    host, _, port = peer.rpartition(":")
    (writer_id,) = workload["writer_ids"]
    location = coordination.WriterLocation(int(writer_id), "conformance-peer", host.strip("[]"), int(port))
    key = coordination.ShuffleKey(int(workload["shuffle_id"]), 0)
    task = ReaderTask(key, int(workload["reader_id"]), [location.writer_id], settings, StandaloneDirectory((location,)),
                      options)

    def consume() -> None:
        for _ in task.records():
            pass

    return run(consume)


def main() -> int:
    role = os.environ.get(ROLE_VARIABLE, "")
    if role == CAPABILITIES_ROLE:
        report(CAPABILITIES)
        return 0
    with open(os.environ[WORKLOAD_VARIABLE]) as document:
        workload = json.load(document)
    settings = ShuffleSettings.from_dict(workload.get("settings", {}))
    ack_timeout_ms = int(workload.get("settings", {}).get(ACK_TIMEOUT_KEY, -1))
    auth = workload.get("auth")
    options = TaskOptions(ack_timeout_ms=ack_timeout_ms, auth=None if auth is None else auth_from_json(auth))
    print(f"conformance case {os.environ.get(CASE_VARIABLE, '?')} as {role}", file=sys.stderr)
    if role == "writer":
        return writer(workload, settings, options)
    if role == "reader":
        return reader(workload, settings, options, os.environ[PEER_VARIABLE])
    print(f"unknown {ROLE_VARIABLE} {role!r}", file=sys.stderr)
    return 127


if __name__ == "__main__":
    sys.exit(main())

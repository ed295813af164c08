"""A sync client that shares no code with pyarrow speaks to the server unchanged: Node's grpc-js calls
Flight's DoPut and the Arrow JavaScript library encodes the batches (tests/sync/node_client/put.js).

Its message definitions come from the spec's own descriptors (Flight.proto's and the sync messages),
handed to it as a FileDescriptorSet, so the test checks the server against the spec's wire, not
against a second copy of it.  Needs ``node`` and ``npm ci`` in tests/sync/node_client (``make test``).
"""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

from google.protobuf import any_pb2, descriptor_pb2

from reference.sync.store import DeltaStore
from spec.sync.flight import DO_PUT_PATH, FLIGHT_FILE
from spec.sync.messages import FILE_DESCRIPTORS
from tests.sync.conftest import ServerFactory, flush_pending

CLIENT = Path(__file__).resolve().parent / "node_client"


def _descriptor_set(path: Path) -> Path:
    files = descriptor_pb2.FileDescriptorSet()
    any_file = descriptor_pb2.FileDescriptorProto()
    any_pb2.DESCRIPTOR.CopyToProto(any_file)
    files.file.extend([any_file, *FILE_DESCRIPTORS, FLIGHT_FILE])
    path.write_bytes(files.SerializeToString())
    return path


def _run(location: str, descriptors: Path, steps: list[dict[str, object]]) -> list[dict[str, object]]:
    node = shutil.which("node")
    assert node is not None and (CLIENT / "node_modules").is_dir(), "needs node and `npm ci` in " + str(CLIENT)
    done = subprocess.run([node, str(CLIENT / "put.js"), str(descriptors), location.removeprefix("grpc://"),
                           DO_PUT_PATH, json.dumps(steps)], capture_output=True, text=True, timeout=120, check=True)
    return [json.loads(line) for line in done.stdout.splitlines()]


def test_a_node_flight_client_syncs_a_transaction_and_is_refused_in_one_line(
    server_factory: ServerFactory, tmp_path: Path
) -> None:
    server = server_factory()
    steps: list[dict[str, object]] = [
        {"path": "js", "origin": "node", "seq": None, "rows": [[None, 1, "one"], [None, 2, "two"]]},
        {"path": "js", "origin": "node", "seq": 1, "rows": [[1, 1, "uno"], [None, 3, "three"]]},
        {"path": "js", "origin": "node", "seq": 2, "rows": [[2, None, None]]},
        {"path": "%2e%2e/x", "origin": "node", "seq": 3, "rows": [[None, 9, "x"]]},
    ]
    answers = _run(server.location, _descriptor_set(tmp_path / "sync.desc"), steps)
    assert [(a.get("accepted"), a.get("memory_sequence_number")) for a in answers[:3]] == [
        (True, None), (True, 1), (True, 2)]
    assert answers[0]["first"] is True
    assert answers[3] == {"error": "INVALID_ARGUMENT: Invalid table path '%2e%2e/x': "
                                   "a segment may hold only ASCII letters, digits, '_' and '-' "
                                   "[sync-condition: INVALID_TABLE_PATH]"}
    assert flush_pending(server)
    probe = _run(server.location, tmp_path / "sync.desc", [{"path": "", "origin": "node", "seq": None, "rows": []}])
    assert (probe[0]["memory_sequence_number"], probe[0]["durable_sequence_number"]) == (2, 2)
    rows = DeltaStore(str(tmp_path / "store")).read_table(str(tmp_path / "store" / "js")).to_pylist()
    assert sorted((r["id"], r["v"]) for r in rows) == [(1, "uno"), (3, "three")]

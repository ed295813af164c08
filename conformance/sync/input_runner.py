"""One DoPut as the reference sync server decides it, sans-IO: the runner of the input corpus's selection.

:mod:`conformance.sync.inputs` selects single requests by the operator mutants they tell apart, over
thousands of candidates and every mutant, so a request cannot cost a server. This module runs the
steps the reference server (``reference.sync.server.SyncServer._read``, ``_on_put`` and ``handle``)
runs for one put, in their order, on the wire bytes a Flight client sends: ``FlightData`` decoded
(``spec.sync.flight``), the descriptor's command, the put's schema, admission, destination, change,
record; then the flush the target's policy (lag 0) makes due at once, carried out on the rows held in
memory instead of a Delta store (none, or those a put the request names as ``stored`` wrote first). The selection imports it afresh for every mutant; the client's side (the
request's encoding, the response's decoding) stays in :mod:`conformance.sync.inputs`, unmutated, as a
live target's client is. Each kept request is replayed through the real server by the suite's
``inputs/`` cases, which prove the answers the same.
"""

from __future__ import annotations

from typing import Any, Final

import pyarrow as pa

from conformance.sync.reference_target import HIGH_WATERMARK
from reference.sync.store import UnstorableColumn, storable_shape
from reference.sync.transport import INTERNAL_ERROR_TEXT
from spec.sync.errors import FlightDataError, SyncError, TableSchemaMismatch, one_line
from spec.sync.flight import decode_flight_data, descriptor_command, ipc_message
from spec.sync.messages import decode_descriptor_cmd
from spec.sync.schema import SyncSchema, TableShape, check_table_fit
from spec.sync.server import SyncServerEndpoint
from spec.sync.squash import SquashedChange, apply_squashed
from spec.sync.writer import FlushTable, Received, SyncSettings

STORE_ROOT: Final = "/store"
"""The store root requests are answered under; the live replay shows its own root as this."""
ALLOWED: Final = (f"{STORE_ROOT}/allowed",)
"""The allowed store locations, as the reference target's (``{store}/allowed``)."""


def _read(messages: list[bytes]) -> tuple[bytes, list[pa.RecordBatch], pa.Schema | None]:
    """The command, batches and stream schema of a put's messages, as ``SyncServer._read`` reads them."""
    command = b""
    batches: list[pa.RecordBatch] = []
    schema: pa.Schema | None = None
    for raw in messages:
        data = decode_flight_data(raw)
        if data.descriptor is not None and not command:
            command = descriptor_command(data.descriptor)
        if not data.header:
            continue
        message = ipc_message(data.header, data.body)
        if message.type == "schema":
            schema = pa.ipc.read_schema(message)
            continue
        if message.type != "record batch":
            raise FlightDataError(f"{message.type} messages are not supported (dictionary-encoded columns)")
        if schema is None:
            raise FlightDataError("a record batch arrived before the schema")
        batches.append(pa.ipc.read_record_batch(message, schema))
    return command, batches, schema


def _fit(name: str, schema: SyncSchema, existing: TableShape | None) -> TableShape:
    """``SyncServer._fitting_shape``: the put's storable shape, fitted to the table's if it exists."""
    try:
        shape = storable_shape(schema)
    except UnstorableColumn as exc:
        raise TableSchemaMismatch(name, [str(exc)]) from None
    return shape if existing is None else check_table_fit(name, shape, existing)


def _flush(endpoint: SyncServerEndpoint, tables: dict[str, pa.Table]) -> None:
    """Carry out the steps due at once, each flush applied to the table's rows held in ``tables``."""
    while (action := endpoint.next_action(0.0)) is not None:
        if not isinstance(action, FlushTable):
            continue
        plan = endpoint.plan_flush(action.table, {}, action.reason)
        for item in plan.apply:
            change: SquashedChange | None = item.payload
            if change is None:
                continue
            empty = change.schema.table_schema().empty_table()
            stored = empty if change.truncate else tables.get(action.table, empty)
            for added in change.schema.table_schema():  # the table gains the put's new columns, null in its rows
                if added.name not in stored.column_names:
                    stored = stored.append_column(added, pa.nulls(stored.num_rows, added.type))
            tables[action.table] = apply_squashed(stored, change.batch, change.schema)
        endpoint.flushed(plan)


def _put(endpoint: SyncServerEndpoint, messages: list[bytes], tables: dict[str, pa.Table],
         shapes: dict[str, TableShape]) -> dict[str, Any]:
    """One put as the server takes it (``tables`` and ``shapes``: what earlier puts stored): its encoded response
    (hex), with the tables written when it wrote one; raise its refusal."""
    command, batches, stream_schema = _read(messages)
    cmd = decode_descriptor_cmd(command)
    schema = endpoint.put_schema(cmd, batches, stream_schema)
    rows = sum(b.num_rows for b in batches)
    if endpoint.admit(cmd, rows):
        return {"response": endpoint.accepted(cmd.origin).encode().hex()}
    name, root = endpoint.destination(cmd, ALLOWED)
    uri = f"{root or STORE_ROOT}/{name}"
    change, shape = endpoint.change(name, cmd, schema, batches, lambda s: _fit(name, s, shapes.get(uri)))
    received = endpoint.record(cmd, table=uri, rows=rows, change=change, now=0.0, claim=lambda: True)
    if received is None:
        return {"response": endpoint.busy().encode().hex()}
    if received is Received.RECORDED and shape is not None:
        shapes[uri] = shape
    _flush(endpoint, tables)
    return {"response": endpoint.accepted(cmd.origin).encode().hex(),
            "tables": {uri: table.to_pylist() for uri, table in tables.items()}}


def raw_answer(messages: list[bytes], stored: list[bytes] | None = None) -> dict[str, Any]:
    """The server's answer to one put's ``FlightData`` messages (after the put ``stored``, if any, whose answer is
    left out: a table an earlier put stored): the encoded response (hex), the tables written and their rows; or the
    refusal's condition and one-line text."""
    endpoint = SyncServerEndpoint(SyncSettings(max_replication_lag_s=0.0, high_watermark_bytes=HIGH_WATERMARK))
    tables: dict[str, pa.Table] = {}
    shapes: dict[str, TableShape] = {}
    try:
        if stored is not None:
            try:
                _put(endpoint, stored, tables, shapes)
            except SyncError:
                pass  # refused: the request's put finds no table, as on a live target
        return _put(endpoint, messages, tables, shapes)
    except SyncError as error:
        return {"error": error.condition, "message": one_line(error.message)}
    except Exception:  # noqa: BLE001 - what the transport answers any other failure of a put with
        return {"error": "INTERNAL", "message": INTERNAL_ERROR_TEXT}

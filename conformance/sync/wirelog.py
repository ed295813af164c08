"""Data-sync messages for the wire log: each entry is one whole message, a DoPut command (the
FlightDescriptor ``cmd``: an ``Any`` wrapping a ``DataSyncCommand``) from the peer, or the
``DataSyncResponse`` the server put in its ``PutResult``. Record batches are not logged."""

from __future__ import annotations

from typing import Final

from conformance.report.wirelog import Decoded
from spec.sync.errors import SyncError
from spec.sync.messages import ColumnRole, decode_descriptor_cmd, decode_response

PEER_TO_IMPL: Final = "peer->impl"


def _role(role: int) -> str:
    return ColumnRole(role).name if role in ColumnRole._value2member_map_ else str(role)


class SyncMessages:
    """One message per entry: the whole buffer is the message."""

    def next_frame(self, buffer: bytes, direction: str) -> Decoded | None:
        try:
            if direction == PEER_TO_IMPL:
                command = decode_descriptor_cmd(buffer)
                columns = [f"{_role(c.role)} {c.name}" for c in command.column_descriptors]
                fields: dict[str, object] = {
                    "type": "DataSyncCommand", "path": command.path, "origin": command.origin,
                    "sequence_number": command.sequence_number, "columns": columns, "format": command.format,
                    "store": None if command.store is None else command.store.location}
                seq = "none" if command.sequence_number is None else command.sequence_number
                return Decoded(len(buffer), f"DataSyncCommand path={command.path!r} origin={command.origin!r} "
                               f"sequence_number={seq} columns=[{', '.join(columns)}]", fields)
            response = decode_response(buffer)
        except SyncError as error:
            return Decoded(len(buffer), f"undecodable ({error.condition})", {}, error.message)
        fields = {"type": "DataSyncResponse", "accepted": response.accepted, "first": response.first,
                  "memory_sequence_number": response.memory_sequence_number,
                  "durable_sequence_number": response.durable_sequence_number}
        return Decoded(len(buffer), f"DataSyncResponse accepted={response.accepted} memory="
                       f"{response.memory_sequence_number} durable={response.durable_sequence_number} "
                       f"first={response.first}", fields)


CODEC: Final = SyncMessages()

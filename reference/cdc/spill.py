"""An open transaction's changes past the spill budget, on disk as the puts they become.

When the source's :class:`~spec.pgoutput.spill.SpillBudget` says so, the changes it holds of the
open transaction go out as one put per table (:class:`~spec.pgoutput.changes.TablePut`: a
TRUNCATE among them makes its put empty the table, which the sync server does at the put's place,
after the puts before it), each an Arrow IPC stream appended to a file. At the Commit the file is
the transaction's first puts: :class:`SpilledPuts` reads one put back each time it is asked for one,
so sending (and sending again after a sync server's restart) holds one put at a time, and the sync
client keeps the sequence, not the rows, until the transaction is durable.

The file is unlinked as soon as it is created: it lives while something holds its transaction (the
sync client, until durable), and a crash leaves nothing behind. Postgres sends the transaction
again from the slot's confirmed position.
"""

from __future__ import annotations

import os
import tempfile
import weakref
from collections.abc import Sequence
from dataclasses import dataclass
from typing import IO, overload

import pyarrow as pa

from reference.sync.client import SyncPut
from spec.pgoutput.changes import TableChanges, TablePut
from spec.sync.messages import ColumnDescriptor


@dataclass(frozen=True, slots=True)
class _Written:
    """Where one put's batch is in the file, and what else the put carries."""

    offset: int
    size: int
    path: str
    descriptors: tuple[ColumnDescriptor, ...]
    truncate: bool


class TransactionSpill:
    """The puts written out of one open transaction, in order (``directory``: where the file is made)."""

    def __init__(self, directory: str | None = None) -> None:
        handle, name = tempfile.mkstemp(prefix="streamwire-cdc-spill-", dir=directory)
        os.unlink(name)
        self._file: IO[bytes] = os.fdopen(handle, "w+b")
        self._written: list[_Written] = []
        self.rows = 0

    def write(self, changes: dict[str, TableChanges]) -> None:
        """Append one put per table of ``changes`` (each table's changes in order)."""
        for path, table_changes in changes.items():
            if not table_changes:
                continue
            put = TablePut.of(table_changes)
            assert put.image is not None
            batch = put.batch()
            sink = pa.BufferOutputStream()
            with pa.ipc.new_stream(sink, batch.schema) as writer:
                writer.write_table(batch)
            data = sink.getvalue()
            offset = self._file.seek(0, os.SEEK_END)
            self._file.write(memoryview(data))
            self._written.append(_Written(offset, data.size, path, put.image.descriptors(), put.truncate))
            self.rows += len(table_changes)

    def puts(self, then: Sequence[SyncPut]) -> SpilledPuts:
        """The transaction's puts: those written out, then ``then`` (what its Commit left in memory)."""
        self._file.flush()
        return SpilledPuts(self._file, tuple(self._written), tuple(then))

    def close(self) -> None:
        """Drop the file (a transaction not to be sent: Postgres sends it again)."""
        self._file.close()


class SpilledPuts(Sequence[SyncPut]):
    """A spilled transaction's puts, each read back from the file when asked for (the file closed, so gone,
    once nothing holds them)."""

    def __init__(self, file: IO[bytes], written: tuple[_Written, ...], then: tuple[SyncPut, ...]) -> None:
        self._file = file
        self._written = written
        self._then = then
        weakref.finalize(self, file.close)

    def __len__(self) -> int:
        return len(self._written) + len(self._then)

    @overload
    def __getitem__(self, index: int) -> SyncPut: ...

    @overload
    def __getitem__(self, index: slice) -> Sequence[SyncPut]: ...

    def __getitem__(self, index: int | slice) -> SyncPut | Sequence[SyncPut]:
        if isinstance(index, slice):
            return [self[i] for i in range(*index.indices(len(self)))]
        if index < 0:
            index += len(self)
        if not 0 <= index < len(self):
            raise IndexError(index)
        if index >= len(self._written):
            return self._then[index - len(self._written)]
        where = self._written[index]
        data = os.pread(self._file.fileno(), where.size, where.offset)
        batch = pa.ipc.open_stream(pa.py_buffer(data)).read_all()
        return SyncPut(where.path, batch, where.descriptors, truncate=where.truncate)

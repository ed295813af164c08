"""An open transaction's changes past the spill budget, on disk: as the puts they become, or as they are.

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

On PySpark the source routes each change to the sink that owns its key, so it spills the changes as
they are (:class:`ChangeSpill`, read back a piece at a time at the Commit), and each sink spills its
part of a table as Arrow pieces (:class:`PartSpill`) sent as one put, read back a piece at a time
(a sink's part is one put: the sync server refuses concurrent origins' puts inside one transaction).
"""

from __future__ import annotations

import os
import pickle
import tempfile
import weakref
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import IO, overload

import pyarrow as pa

from reference.sync.client import SyncPut
from spec.pgoutput.changes import TableChanges, TableImage, TablePut
from spec.sync.messages import ColumnDescriptor


@dataclass(frozen=True, slots=True)
class _Written:
    """Where one put's batch is in the file, and what else the put carries."""

    offset: int
    size: int
    path: str
    descriptors: tuple[ColumnDescriptor, ...]
    truncate: bool


def _unlinked_file(directory: str | None) -> IO[bytes]:
    """A new temporary file that has no name (gone once closed, or when the process dies)."""
    handle, name = tempfile.mkstemp(prefix="streamwire-cdc-spill-", dir=directory)
    os.unlink(name)
    return os.fdopen(handle, "w+b")


def _append(file: IO[bytes], data: bytes | memoryview) -> int:
    """Append ``data`` to ``file``; where it starts."""
    offset = file.seek(0, os.SEEK_END)
    file.write(data)
    return offset


def _append_batch(file: IO[bytes], batch: pa.Table) -> tuple[int, int]:
    """Append ``batch`` as an Arrow IPC stream; where it starts and its size."""
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, batch.schema) as writer:
        writer.write_table(batch)
    data = sink.getvalue()
    return _append(file, memoryview(data)), data.size


def _read_batch(file: IO[bytes], offset: int, size: int) -> pa.Table:
    """The batch :func:`_append_batch` wrote there."""
    return pa.ipc.open_stream(pa.py_buffer(os.pread(file.fileno(), size, offset))).read_all()


class TransactionSpill:
    """The puts written out of one open transaction, in order (``directory``: where the file is made)."""

    def __init__(self, directory: str | None = None) -> None:
        self._file = _unlinked_file(directory)
        self._written: list[_Written] = []
        self.rows = 0

    def write(self, changes: dict[str, TableChanges]) -> None:
        """Append one put per table of ``changes`` (each table's changes in order)."""
        for path, table_changes in changes.items():
            if not table_changes:
                continue
            put = TablePut.of(table_changes)
            assert put.image is not None
            offset, size = _append_batch(self._file, put.batch())
            self._written.append(_Written(offset, size, path, put.image.descriptors(), put.truncate))
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
        return SyncPut(where.path, _read_batch(self._file, where.offset, where.size), where.descriptors,
                       truncate=where.truncate)


class ChangeSpill:
    """The changes written out of one open transaction, as they are (pickled), in pieces read back in order
    (``directory``: where the file is made); ``truncated`` names the tables a TRUNCATE among them emptied."""

    def __init__(self, directory: str | None = None) -> None:
        self._file = _unlinked_file(directory)
        self._written: list[tuple[int, int]] = []
        self.rows = 0
        self.truncated: set[str] = set()

    def write(self, changes: dict[str, TableChanges]) -> None:
        """Append one piece: ``changes`` per table, in order."""
        data = pickle.dumps(changes, protocol=pickle.HIGHEST_PROTOCOL)
        self._written.append((_append(self._file, data), len(data)))
        self.rows += sum(len(c) for c in changes.values())
        self.truncated |= {path for path, c in changes.items() if c.truncates}

    def pieces(self) -> Iterator[dict[str, TableChanges]]:
        """The pieces written, in order, one read back at a time."""
        self._file.flush()
        for offset, size in self._written:
            piece: dict[str, TableChanges] = pickle.loads(os.pread(self._file.fileno(), size, offset))
            yield piece

    def close(self) -> None:
        """Drop the file."""
        self._file.close()


@dataclass(frozen=True, slots=True)
class _Piece:
    offset: int
    size: int
    rows: int
    image: TableImage
    """The table's image the piece was made in (conformed to the part's last one when read back)."""


class PartSpill:
    """What a sink wrote out of its part of one table in one transaction: Arrow pieces, in order."""

    def __init__(self, directory: str | None = None) -> None:
        self._file = _unlinked_file(directory)
        self._pieces: list[_Piece] = []
        self.truncate = False

    def write(self, put: TablePut) -> None:
        """Append what ``put`` holds (the changes after the pieces written before; its TRUNCATE empties the
        table first, so the pieces before it are dropped)."""
        assert put.image is not None
        if put.truncate:
            self._pieces, self.truncate = [], True
        batch = put.batch()
        offset, size = _append_batch(self._file, batch)
        self._pieces.append(_Piece(offset, size, batch.num_rows, put.image))

    def put(self, then: TablePut) -> SyncPut:
        """The part as one put: the pieces written, then ``then`` (what the sink still holds, maybe nothing),
        each read back when sent and conformed to the part's last image."""
        assert self._pieces or then.image is not None
        self._file.flush()
        pieces, truncate = ([], True) if then.truncate else (self._pieces, self.truncate)
        image = then.image or pieces[-1].image
        rows = _SpilledRows(self._file, tuple(pieces), image, then.batch() if then.image is not None else None)
        return SyncPut(image.path, rows, image.descriptors(), truncate=truncate)

    def close(self) -> None:
        """Drop the file (a part not to be sent)."""
        self._file.close()


class _SpilledRows:
    """A part's rows as one put's (:class:`~reference.sync.client.PutRows`): its pieces read back one at a
    time, then what was held; the file closed, so gone, once nothing holds them."""

    def __init__(self, file: IO[bytes], pieces: tuple[_Piece, ...], image: TableImage, held: pa.Table | None) -> None:
        self._file = file
        self._pieces = pieces
        self._image = image
        self._held = held
        self.num_rows = sum(p.rows for p in pieces) + (held.num_rows if held is not None else 0)
        weakref.finalize(self, file.close)

    @property
    def schema(self) -> pa.Schema:
        return self._image.schema()

    def tables(self) -> Iterator[pa.Table]:
        for piece in self._pieces:
            yield self._image.conform(_read_batch(self._file, piece.offset, piece.size), piece.image)
        if self._held is not None:
            yield self._held

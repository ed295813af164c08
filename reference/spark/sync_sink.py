"""PySpark glue for the data sync: push a DataFrame of changes to a sync server, read the table back.

``write_changes`` sends every (origin, sequence) group as one single-put transaction
through ``SyncClient`` from the executors: rows are repartitioned by origin and
sorted by sequence, so each origin's transactions leave one task in order, and
single-put transactions never leave a transaction open for another origin's task
to interleave with.  ``read_table`` returns the Delta table as a Spark DataFrame.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql import DataFrame, SparkSession

from reference.sync.credentials import ClientSecurity
from reference.sync.client import SyncClient, SyncPut
from spec.sync.messages import ColumnDescriptor

RESULT_SCHEMA = "origin string, transactions long, durable long"


def write_changes(
    df: DataFrame,
    location: str,
    path: str,
    descriptors: Sequence[ColumnDescriptor],
    *,
    origin_col: str = "origin",
    sequence_col: str = "sequence",
    deadline_s: float = 120.0,
    token: str | None = None,
    ca_file: str | None = None,
) -> dict[str, int | None]:
    """Send the changes in ``df`` to the sync server at ``location``; return each origin's durable number.

    ``df`` holds ``origin_col``, ``sequence_col`` and the change columns, in the order
    of ``descriptors``, under their batch (physical) names.  ``token`` is the server's bearer
    token and ``ca_file`` the PEM CA of a ``grpc+tls://`` server (a path readable on the executors).
    """
    change_cols = [c for c in df.columns if c not in (origin_col, sequence_col)]
    if len(change_cols) != len(descriptors):
        raise ValueError(f"{len(descriptors)} descriptors for {len(change_cols)} change columns")
    descs = tuple(descriptors)
    security = ClientSecurity(token=token, ca_file=ca_file)

    def push(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        table = pa.Table.from_batches(list(batches))
        out: dict[str, list[str | int | None]] = {"origin": [], "transactions": [], "durable": []}
        if table.num_rows == 0:
            yield pa.RecordBatch.from_pydict(out, schema=_result_schema())
            return
        for origin in pc.unique(table.column(origin_col)).to_pylist():
            rows = table.filter(pc.equal(table.column(origin_col), origin))
            rows = rows.sort_by(sequence_col)
            client = SyncClient(location, str(origin), deadline_s=deadline_s, security=security)
            sent = 0
            try:
                for seq in pc.unique(rows.column(sequence_col)).to_pylist():
                    part = rows.filter(pc.equal(rows.column(sequence_col), seq)).select(change_cols)
                    client.send_transaction(int(seq), [SyncPut(path, part, descs)])
                    sent += 1
                durable = client.probe().durable_sequence_number
            finally:
                client.close()
            out["origin"].append(str(origin))
            out["transactions"].append(sent)
            out["durable"].append(durable)
        yield pa.RecordBatch.from_pydict(out, schema=_result_schema())

    ordered = df.repartition(origin_col).sortWithinPartitions(origin_col, sequence_col)
    result = ordered.mapInArrow(push, RESULT_SCHEMA).collect()
    return {r["origin"]: r["durable"] for r in result}


def _result_schema() -> pa.Schema:
    return pa.schema([("origin", pa.string()), ("transactions", pa.int64()), ("durable", pa.int64())])


def read_table(spark: SparkSession, uri: str, storage_options: dict[str, str] | None = None) -> DataFrame:
    """The Delta table at ``uri`` as a Spark DataFrame, read through ``deltalake`` (no Delta jars
    needed) with its deletion vectors applied; the Arrow types carry over (a timestamp column stays
    a timestamp)."""
    from reference.sync.store import read_delta

    return spark.createDataFrame(read_delta(uri, storage_options))

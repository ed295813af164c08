"""The in-process cluster's durability: every committed model operation as a JSON line (fsynced
before the operation returns), compacted into a snapshot every ``compact_after`` lines.

The model is deterministic, so replaying the snapshot and the journal's operations rebuilds the
state after a restart of the process hosting the cluster. A line is ``[name, [arguments]]`` in the
order of the operation's fields (the format journals have always had).
"""

from __future__ import annotations

import base64
import json
import os
from dataclasses import fields
from pathlib import Path
from typing import IO, Any, Final

from spec.cluster.model import (
    ClusterModel,
    GossipRecord,
    JoinCluster,
    JoinShard,
    Member,
    Operation,
    RemoveFromCluster,
    RemoveFromShard,
    SetState,
    UpdateGossip,
    UpdateShardLog,
)
from spec.cluster.types import Entry, MetadataOp, NodeId, NodeState, Revision, Scope, ShardId

OPERATION_NAMES: Final[dict[type[Operation], str]] = {
    JoinCluster: "join_cluster",
    RemoveFromCluster: "remove_from_cluster",
    JoinShard: "join_shard",
    RemoveFromShard: "remove_from_shard",
    SetState: "set_state",
    UpdateShardLog: "update_shard_log",
    UpdateGossip: "update_gossip",
}
OPERATIONS_BY_NAME: Final = {name: kind for kind, name in OPERATION_NAMES.items()}


class Journal:
    """Generations of (snapshot, append-only journal of committed operations).

    ``snapshot.json`` names the generation whose journal continues it; a crash between writing a
    snapshot and starting its journal leaves that journal absent, which replays as empty.
    """

    def __init__(self, directory: Path, compact_after: int) -> None:
        self._dir = directory
        self._compact_after = compact_after
        self.generation = 0
        self.lines = 0
        self._file: IO[str] | None = None

    def load(self) -> ClusterModel:
        snapshot = self._dir / "snapshot.json"
        model = ClusterModel()
        if snapshot.exists():
            saved = json.loads(snapshot.read_text(encoding="utf-8"))
            self.generation = saved["generation"]
            model = model_from_json(saved["state"])
        path = self._journal_path()
        if path.exists():
            with open(path, encoding="utf-8") as lines:
                for line in lines:
                    if line.endswith("\n"):  # a torn last line was never acknowledged
                        model.apply(operation_from_json(json.loads(line)))
                        self.lines += 1
        self._file = open(path, "a", encoding="utf-8")
        return model

    def _journal_path(self) -> Path:
        return self._dir / f"journal-{self.generation}.log"

    def append(self, operation: Operation, model: ClusterModel) -> None:
        assert self._file is not None, "append before load"
        self._file.write(json.dumps(operation_to_json(operation)) + "\n")
        self._file.flush()
        os.fsync(self._file.fileno())
        self.lines += 1
        if self.lines >= self._compact_after:
            self.compact(model)

    def compact(self, model: ClusterModel) -> None:
        """Write the state as generation+1's snapshot, then start its empty journal."""
        assert self._file is not None, "compact before load"
        old = self._journal_path()
        tmp = self._dir / "snapshot.json.tmp"
        with open(tmp, "w", encoding="utf-8") as out:
            json.dump({"generation": self.generation + 1, "state": model_to_json(model)}, out)
            out.flush()
            os.fsync(out.fileno())
        os.replace(tmp, self._dir / "snapshot.json")
        self._file.close()
        self.generation += 1
        self.lines = 0
        self._file = open(self._journal_path(), "a", encoding="utf-8")
        old.unlink(missing_ok=True)

    def close(self) -> None:
        if self._file is not None:
            self._file.close()


def operation_to_json(operation: Operation) -> list[Any]:
    def one(value: Any) -> Any:
        if isinstance(value, Scope):
            return {"scope": value.value}
        if isinstance(value, NodeState):
            return {"state": value.value}
        if isinstance(value, tuple):
            return [{"key": o.key, "value": base64.b64encode(o.value).decode(), "expected": o.expected}
                    for o in value]
        return value
    return [OPERATION_NAMES[type(operation)], [one(getattr(operation, f.name)) for f in fields(operation)]]


def operation_from_json(item: list[Any]) -> Operation:
    def one(value: Any) -> Any:
        if isinstance(value, dict):
            return Scope(value["scope"]) if "scope" in value else NodeState(value["state"])
        if isinstance(value, list):
            return tuple(MetadataOp(key=o["key"], value=base64.b64decode(o["value"]),
                                    expected=None if o["expected"] is None else Revision(o["expected"]))
                         for o in value)
        return value
    name, args = item
    kind = OPERATIONS_BY_NAME[name]
    operation: Operation = kind(**{f.name: one(a) for f, a in zip(fields(kind), args, strict=True)})
    return operation


def _entry_to_json(entry: Entry) -> list[Any]:
    return [entry.key, base64.b64encode(entry.value).decode(), entry.revision]


def _entry_from_json(item: list[Any]) -> Entry:
    return Entry(key=item[0], value=base64.b64decode(item[1]), revision=Revision(item[2]))


def model_to_json(model: ClusterModel) -> dict[str, Any]:
    """The durable state of the model (sessions are not durable)."""
    return {
        "revision": model.revision,
        "members": {n: [m.address, m.shard, m.state.value, m.shard_since] for n, m in model.members.items()},
        "shard_logs": {s: [_entry_to_json(e) for e in log.values()] for s, log in model.shard_logs.items()},
        "gossip": [[_entry_to_json(g.entry), g.scope.value, g.origin] for g in model.gossip.values()],
    }


def model_from_json(state: dict[str, Any]) -> ClusterModel:
    model = ClusterModel(revision=state["revision"], members={
        NodeId(n): Member(a, ShardId(s), NodeState(st), since) for n, (a, s, st, since) in state["members"].items()})
    model.shard_logs = {ShardId(s): {(e := _entry_from_json(i)).key: e for i in items}
                        for s, items in state["shard_logs"].items()}
    for raw, scope, origin in state["gossip"]:
        entry = _entry_from_json(raw)
        model.gossip[entry.key] = GossipRecord(entry, Scope(scope), ShardId(origin))
    return model

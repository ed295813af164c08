"""The nemesis's independent checker: reads the workload's history, Postgres (``psql``) and every version
of the Delta table (its raw ``_delta_log`` JSON replayed here, data files read with pyarrow, deletion
vectors decoded here from the Delta protocol with pyroaring: deltalake 1.6 cannot read tables with
deletion vectors, and the project's own reader is not used) and proves:

- nothing uncommitted is ever present (no value of a rolled-back or unknown transaction, in any version);
- every key's values go through the versions in commit order, each at most once (a key never returns
  to an older value: a change applied twice or out of order would);
- every durable number (recorded in a commit, reported to a probe) is never ahead of what the table held:
  the version holding it reflects every transaction that surely committed at or below it (its LSN after
  the commit is at or below the number); with several origins (the Spark pipeline's sinks, each carrying
  its share of every transaction) a version is held to the smallest of their numbers, and a probe's
  number to what the table recorded for that origin;
- the slot is never confirmed past what the table held: the latest version when the confirmed position was
  read reflects every transaction that surely committed at or below it;
- the final table equals Postgres's final table (every committed change present).

Liveness (caught up within a bound after the last fault healed) is measured by the run and judged here.
"""

from __future__ import annotations

import json
import subprocess
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

import pyarrow.parquet as pq
from pyroaring import BitMap

META_KEY: Final = "streamwire.sync"
Z85: Final = "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ.-:+=^!/*?&<>()[]{}@%$#"
DV_MAGIC: Final = 1681511377
ABSENT: Final = None


def lsn(text: str) -> int:
    high, low = text.split("/")
    return (int(high, 16) << 32) | int(low, 16)


def psql_rows(socket_dir: str, port: int, database: str, query: str) -> list[list[str]]:
    """Rows of ``query`` read with psql (tab separated, unaligned)."""
    out = subprocess.run(["psql", "-h", socket_dir, "-p", str(port), "-U", "postgres", "-d", database, "-At", "-F",
                          "\t", "-c", query], check=True, capture_output=True, text=True, timeout=60).stdout
    return [line.split("\t") for line in out.splitlines() if line]


def z85_decode(text: str) -> bytes:
    """ZeroMQ's Z85 (the Delta protocol's encoding of DV ids and inline DVs)."""
    out = bytearray()
    for i in range(0, len(text), 5):
        value = 0
        for char in text[i:i + 5]:
            value = value * 85 + Z85.index(char)
        out += value.to_bytes(4, "big")
    return bytes(out)


def deleted_rows(table: Path, dv: dict[str, Any]) -> set[int]:
    """The row indexes a deletion vector descriptor deletes (Delta protocol: RoaringBitmapArray, portable)."""
    kind, text = dv["storageType"], dv["pathOrInlineDv"]
    if kind == "i":
        data = z85_decode(text)[:dv["sizeInBytes"]]
    else:
        if kind == "u":
            prefix, encoded = text[:-20], text[-20:]
            raw = z85_decode(encoded).hex()
            name = f"deletion_vector_{raw[:8]}-{raw[8:12]}-{raw[12:16]}-{raw[16:20]}-{raw[20:]}.bin"
            path = table / prefix / name if prefix else table / name
        else:
            path = Path(text.removeprefix("file://"))
        blob = path.read_bytes()
        offset = dv.get("offset") or 1
        size = int.from_bytes(blob[offset:offset + 4], "big")
        data = blob[offset + 4:offset + 4 + size]
    if int.from_bytes(data[:4], "little") != DV_MAGIC:
        raise ValueError(f"deletion vector without the portable magic: {dv}")
    count, pos, rows = int.from_bytes(data[4:12], "little"), 12, set[int]()
    for _ in range(count):
        high = int.from_bytes(data[pos:pos + 4], "little")
        bitmap = BitMap.deserialize(data[pos + 4:])
        pos += 4 + len(bitmap.serialize())
        rows.update((high << 32) | low for low in bitmap)
    return rows


class LogReplay:
    """The table's files version by version, replayed from the raw JSON log; rows read with pyarrow."""

    def __init__(self, table: Path) -> None:
        self.table = table
        self.files: dict[str, dict[str, Any] | None] = {}
        """Live data file -> its deletion vector (None: none)."""
        self._rows: dict[str, list[dict[str, Any]]] = {}

    def apply(self, actions: list[dict[str, Any]]) -> None:
        for action in actions:
            if "remove" in action:
                self.files.pop(action["remove"]["path"], None)
            if "add" in action:
                self.files[action["add"]["path"]] = action["add"].get("deletionVector")

    def state(self) -> dict[int, str]:
        out: dict[int, str] = {}
        for path, dv in self.files.items():
            if path not in self._rows:
                self._rows[path] = pq.read_table(self.table / path, columns=["id", "v"]).to_pylist()
            gone = deleted_rows(self.table, dv) if dv is not None else set()
            out.update({int(r["id"]): str(r["v"]) for i, r in enumerate(self._rows[path]) if i not in gone})
        return out


@dataclass
class Versions:
    """Every version of the Delta table: its rows by key and the durable numbers its commit recorded."""

    states: list[dict[int, str]] = field(default_factory=list)
    recorded: list[dict[str, int]] = field(default_factory=list)
    """Per version, each origin's durable number its commit recorded (the server records all of them)."""
    numbers: list[int] = field(default_factory=list)
    origins: tuple[str, ...] = ()

    @property
    def durable(self) -> list[int | None]:
        """Per version, the number at or below which every transaction is durable: with several origins (the
        pipeline's sinks, each a share of every transaction) the smallest, None until each has one."""
        return [min(r[o] for o in self.origins) if all(o in r for o in self.origins) else None for r in self.recorded]


def read_versions(table: Path, origins: str | tuple[str, ...]) -> Versions:
    out = Versions(origins=(origins,) if isinstance(origins, str) else origins)
    logs = sorted(int(p.stem) for p in (table / "_delta_log").glob("*.json") if p.stem.isdigit())
    replay = LogReplay(table)
    for version in logs:
        recorded: dict[str, int] = {}
        actions = [json.loads(line) for line in (table / "_delta_log" / f"{version:020}.json").read_text().splitlines()]
        for action in actions:
            meta = action.get("commitInfo", {}).get(META_KEY)
            if isinstance(meta, str):
                recorded = {o: int(n) for o, n in json.loads(meta).get("durable", {}).items() if o in out.origins}
        replay.apply(actions)
        out.states.append(replay.state())
        out.recorded.append(recorded)
        out.numbers.append(version)
    return out


@dataclass
class Commits:
    """The committed transactions in commit order: per key the tx index and value of each change."""

    by_key: dict[int, list[tuple[int, str | None]]] = field(default_factory=dict)
    value_of: dict[str, tuple[int, int]] = field(default_factory=dict)
    """value -> (key, tx index)."""
    rolled_back: set[str] = field(default_factory=set)
    lsn_after: list[int] = field(default_factory=list)

    @staticmethod
    def of(history: list[dict[str, Any]]) -> Commits:
        c = Commits()
        index = 0
        for tx in history:
            if not tx["committed"]:
                c.rolled_back.update(op[3] for op in tx["ops"] if op[3] is not None)
                continue
            for kind, key, new_key, value in tx["ops"]:
                if kind in ("delete", "move"):
                    c.by_key.setdefault(key, []).append((index, ABSENT))
                if kind in ("insert", "update", "move"):
                    target = new_key if kind == "move" else key
                    c.by_key.setdefault(target, []).append((index, value))
                    c.value_of[value] = (target, index)
            c.lsn_after.append(tx["lsn_after"])
            index += 1
        return c

    def state_at(self, count: int) -> dict[int, tuple[int, str | None]]:
        """Per key: the (tx index, value) of its last change among the first ``count`` transactions."""
        out = {}
        for key, changes in self.by_key.items():
            done = [c for c in changes if c[0] < count]
            if done:
                out[key] = done[-1]
        return out

    def surely_below(self, durable: int) -> int:
        """How many leading transactions surely committed at or below LSN ``durable``."""
        count = 0
        while count < len(self.lsn_after) and self.lsn_after[count] <= durable:
            count += 1
        return count


def _order_problems(commits: Commits, versions: Versions) -> list[str]:
    problems = []
    seen: dict[int, int] = {}  # key -> tx index of the change the table last showed
    for number, state in zip(versions.numbers, versions.states):
        for key, value in state.items():
            if value in commits.rolled_back:
                problems.append(f"version {number}: key {key} holds {value!r}, written by a rolled-back transaction")
                continue
            origin = commits.value_of.get(value)
            if origin is None or origin[0] != key:
                problems.append(f"version {number}: key {key} holds {value!r}, which no committed transaction wrote there")
                continue
            if origin[1] < seen.get(key, -1):
                problems.append(f"version {number}: key {key} went back to {value!r} (tx {origin[1]}) after tx "
                                f"{seen[key]}'s change (applied twice or out of commit order)")
            seen[key] = origin[1]
        for key, last in list(seen.items()):
            if key not in state:
                later_absence = [t for t, v in commits.by_key.get(key, []) if v is ABSENT and t >= last]
                if not later_absence:
                    problems.append(f"version {number}: key {key} is absent, but no change at or after tx {last} "
                                    "removed it")
                else:
                    seen[key] = later_absence[0]
    return problems


def _holds(commits: Commits, state: dict[int, str], count: int) -> list[str]:
    """Where ``state`` does not reflect the first ``count`` transactions."""
    wrong = []
    for key, (index, value) in commits.state_at(count).items():
        held = state.get(key)
        held_index = commits.value_of[held][1] if held in commits.value_of else None
        if value is ABSENT:
            if held is not None and (held_index is None or held_index < index):
                wrong.append(f"key {key} holds {held!r}, deleted by tx {index}")
        elif held is None:
            later_absence = any(t > index and v is ABSENT for t, v in commits.by_key[key])
            if not later_absence:
                wrong.append(f"key {key} is missing tx {index}'s {value!r}")
        elif held_index is None or held_index < index:
            wrong.append(f"key {key} holds {held!r}, not yet tx {index}'s {value!r}")
    return wrong


def _durable_problems(commits: Commits, versions: Versions, observations: list[dict[str, Any]]) -> list[str]:
    """Each version's recorded durable number, each number a probe was told (per origin, against what the table
    recorded for that origin) and each slot position confirmed (against the rows the table held then)."""
    problems = []
    for number, state, durable in zip(versions.numbers, versions.states, versions.durable):
        if durable is not None:
            wrong = _holds(commits, state, commits.surely_below(durable))
            if wrong:
                problems.append(f"version {number} records durable {durable} but " + "; ".join(wrong[:2]))
    index = {n: i for i, n in enumerate(versions.numbers)}
    for obs in observations:
        version = obs.get("version")
        if version is None or version not in index:
            continue
        upto = index[version] + 1
        reported = obs.get("reported")
        told = reported if isinstance(reported, dict) else {versions.origins[0]: reported}
        for origin, seen in told.items():
            recorded_max = max((r[origin] for r in versions.recorded[:upto] if origin in r), default=0)
            if seen is not None and seen > recorded_max:
                problems.append(f"at {obs['t']:.1f} s the reported durable number {seen} of {origin} was ahead of "
                                f"what the table held (version {version} records {recorded_max})")
        confirmed = obs.get("confirmed")
        if confirmed is not None:
            wrong = _holds(commits, versions.states[upto - 1], commits.surely_below(confirmed))
            if wrong:
                problems.append(f"at {obs['t']:.1f} s the slot was confirmed at {confirmed}, but version {version} "
                                "lacks it: " + "; ".join(wrong[:2]))
    return problems


def check(history: dict[str, Any], table: Path, final_rows: dict[int, str], caught_up_s: float | None,
          bound_s: float) -> dict[str, Any]:
    """The verdict on one run: each property with its problems (at most a few named)."""
    commits = Commits.of(history["transactions"])
    versions = read_versions(table, tuple(history.get("origins") or (history["origin"],)))
    final = versions.states[-1] if versions.states else {}
    missing = sorted(set(final_rows) - set(final))
    extra = sorted(set(final) - set(final_rows))
    different = sorted(k for k in set(final) & set(final_rows) if final[k] != final_rows[k])
    committed = [tx for tx in history["transactions"] if tx["committed"]]
    lost = [f"tx {i + 1} began its commit at {b['lsn_before']}, before tx {i}'s commit ended ({a['lsn_after']}): "
            "Postgres lost an acknowledged commit" for i, (a, b) in enumerate(zip(committed, committed[1:]))
            if b["lsn_before"] < a["lsn_after"]]
    properties = {
        "the workload's history is sound (no acknowledged commit lost by Postgres)": lost,
        "nothing uncommitted, every key in commit order, each change once": _order_problems(commits, versions),
        "durable numbers never ahead of the table": _durable_problems(commits, versions, history["observations"]),
        "final table equals Postgres": ([f"missing keys {missing[:5]}"] if missing else [])
        + ([f"keys Postgres does not hold {extra[:5]}"] if extra else [])
        + ([f"different values at keys {different[:5]}"] if different else []),
        f"caught up within {bound_s:g} s of the last heal": [] if caught_up_s is not None and caught_up_s <= bound_s
        else [f"not caught up ({'never' if caught_up_s is None else f'{caught_up_s:.1f} s'})"],
    }
    return {"passed": not any(properties.values()), "versions": len(versions.numbers),
            "committed": len(commits.lsn_after), "rolled_back": len(commits.rolled_back),
            "properties": {name: {"passed": not p, "problems": p[:5], "count": len(p)} for name, p in properties.items()}}

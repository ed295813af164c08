"""A concurrent write workload on two published tables (the demo, the benchmark and the tests).

``items`` has a single-column key and every mapped type, with ``body`` stored out of line (large
values become TOAST, and updates that leave them alone send them as unchanged); ``pairs`` has a
composite key. Each session owns the keys ``k % sessions == session``, so sessions never wait for
one another (and a run with another seed uses other keys), and does inserts, updates (with and without the TOASTed column), key changes, deletes
and NULLs, 1 to 4 statements per transaction, drawn from ``Random(f"{seed}/{session}")``.
"""

from __future__ import annotations

import random
import threading
from dataclasses import dataclass

from reference.cdc.pgwire import PgAddress, PgConnection, quote_ident

SCHEMA = (
    "CREATE TABLE items (id bigint PRIMARY KEY, name text, qty integer, price numeric(12,2), big text, "
    "tags jsonb, seen timestamptz, day date, flag boolean, raw bytea, ref uuid)",
    "ALTER TABLE items ALTER COLUMN big SET STORAGE EXTERNAL",
    "CREATE TABLE pairs (a integer, b text, v bigint, note varchar(40), PRIMARY KEY (a, b))",
)
TABLES = ("items", "pairs")
KEYS_PER_SEED = 10 ** 9


def create(conn: PgConnection, publication: str) -> None:
    """The tables (default replica identity) and a publication of them (everything: TRUNCATE too)."""
    for statement in SCHEMA:
        conn.query(statement)
    conn.query(f"CREATE PUBLICATION {quote_ident(publication)} FOR TABLE {', '.join(TABLES)}")


@dataclass
class Session:
    """One session's keys and generator."""

    session: int
    sessions: int
    rng: random.Random
    base: int = 0
    """Keys start above it: runs with other seeds never reuse a key."""
    next_key: int = 0
    live: list[int] | None = None

    def new_key(self) -> int:
        self.next_key += 1
        return self.base + self.next_key * self.sessions + self.session

    def statement(self) -> str:
        live = self.live if self.live is not None else []
        self.live = live
        roll = self.rng.random()
        if roll < 0.3 or len(live) < 3:
            key = self.new_key()
            live.append(key)
            big = "NULL" if self.rng.random() < 0.2 else \
                f"(SELECT string_agg(md5(g::text || '{key}'), '') FROM generate_series(1, {self.rng.randint(1, 120)}) g)"
            return (f"INSERT INTO items VALUES ({key}, 'n{key}', {self.rng.randint(-5, 500)}, "
                    f"{self.rng.randint(0, 10 ** 6) / 100}, {big}, '{{\"k\": {key}, \"s\": [1, 2]}}', "
                    f"'2024-05-0{self.rng.randint(1, 9)} 10:00:00.{self.rng.randint(0, 999999):06d}+00', "
                    f"'2024-02-{self.rng.randint(10, 29)}', {self.rng.random() < 0.5}, '\\x{key:016x}', "
                    f"'{self.rng.getrandbits(128):032x}')")
        key = self.rng.choice(live)
        if roll < 0.55:
            return f"UPDATE items SET qty = qty + 1, name = NULL WHERE id = {key}"  # big unchanged (TOAST)
        if roll < 0.65:
            return f"UPDATE items SET big = repeat(md5(qty::text), {self.rng.randint(1, 200)}) WHERE id = {key}"
        if roll < 0.75:
            live.remove(key)
            moved = self.new_key()
            live.append(moved)
            return f"UPDATE items SET id = {moved} WHERE id = {key}"
        if roll < 0.85:
            live.remove(key)
            return f"DELETE FROM items WHERE id = {key}"
        a = self.rng.randint(0, 20) * self.sessions + self.session
        b = self.rng.choice("xyz")
        if roll < 0.95:
            return (f"INSERT INTO pairs VALUES ({a}, '{b}', {self.rng.randint(0, 2 ** 40)}, NULL) "
                    f"ON CONFLICT (a, b) DO UPDATE SET v = excluded.v + 1, note = 'again'")
        return f"DELETE FROM pairs WHERE a = {a} AND b = '{b}'"


def run_session(address: PgAddress, session: int, sessions: int, transactions: int, seed: int = 7) -> int:
    """Commit ``transactions`` transactions of this session; the number of statements run."""
    conn = PgConnection(address)
    state = Session(session, sessions, random.Random(f"{seed}/{session}"), base=seed * KEYS_PER_SEED)
    statements = 0
    try:
        for _ in range(transactions):
            body = [state.statement() for _ in range(state.rng.randint(1, 4))]
            conn.query("BEGIN; " + "; ".join(body) + "; COMMIT")
            statements += len(body)
    finally:
        conn.close()
    return statements


def run_concurrently(address: PgAddress, sessions: int, transactions: int, seed: int = 7) -> int:
    """``sessions`` sessions at once, each committing ``transactions``; the statements run in all."""
    counts = [0] * sessions
    errors: list[BaseException] = []

    def one(s: int) -> None:
        try:
            counts[s] = run_session(address, s, sessions, transactions, seed)
        except BaseException as exc:  # reported to the caller below
            errors.append(exc)

    threads = [threading.Thread(target=one, args=(s,), name=f"workload-{s}") for s in range(sessions)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if errors:
        raise errors[0]
    return sum(counts)

"""``python -m benchmarks nemesis``: the Postgres change pipeline under a seeded schedule of faults, judged by an
independent checker (benchmarks/nemesis_check.py).

Each host is a network namespace on a bridge (lab N: 198.18.N.0/24, benchmarks/nemesis_net.py). Two pipelines:

- ``--pipeline cdc``: Postgres (``pg``), the sync server with its store on a small tmpfs (``sync``), the
  single-process change source ``python -m reference.cdc`` (``cdc``).
- ``--pipeline spark``: Postgres, the sync server, etcd (``etcd``), a Spark standalone master (``master``) and
  two workers (``worker1``, ``worker2``), and the driver of ``python -m reference.pipeline --source ... --sync
  ... --master spark://... --provider etcd://...`` (``driver``), whose source and sink tasks run in the
  workers' executors. The run supervises the driver as a service manager would: a driver that exits (its job
  failed, say, when a worker died) is started again.

The root namespace runs a concurrent workload (one session: inserts, updates, deletes and key changes on 40
keys, a tenth rolled back, each transaction's LSN read before and after its commit) and observes every half
second the slot's ``confirmed_flush_lsn``, the durable numbers the server reports to a probe, and the
table's latest version. Faults, one after another, each healed after 2-6 s: a partition between two hosts,
kill -9 of a process (restarted when healed), SIGSTOP/SIGCONT of one, a slow link (tc tbf at 64 kbit/s: the
kernel has no netem), a full disk under the store, a Postgres crash (``pg_ctl -m immediate``), SIGSTOP of
Postgres (every process of the server, its postmaster alone, or the slot's walsender) and a clock jump: of the
wall clock alone on a Python host (the sync server; the source, or the driver or a worker), and in the Spark
pipeline of every clock on the master's host (see :data:`WALL_CLOCKED` and :data:`CLOCKED` for how and why
there, :data:`JUMP_S` for how far).

Per seed: ``<out>/seed-N.json`` (the schedule, every transaction, every observation, the verdict) and
``<out>/seed-N.html`` (a timeline of faults, durable numbers and lag). Exit 0 when every seed passed.
Needs root (namespaces, tmpfs).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from benchmarks.nemesis_check import check, lsn, psql_rows, read_versions
from benchmarks.nemesis_net import Lab, ip_of, netns, unavailable, use_lab
from benchmarks.nemesis_timeline import timeline_html
from conformance.pgoutput.postgres_server import PostgresServer
from spec.sync.messages import SyncCommand
from conformance.sync.suite import do_put

ORIGIN: Final = "nemesis"
TABLE: Final = "items"
KEYS: Final = 40
SYNC_PORT: Final = 7000
OBSERVE_EVERY_S: Final = 0.5
PG_STOPS: Final = ("pg", "pg-postmaster", "walsender")
"""SIGSTOP targets in Postgres: every process of the server (a paused host), the postmaster alone (sessions go
on, new connections wait), the backend streaming the slot."""
FAULTS: Final = ("partition cdc-pg", "partition cdc-sync", "kill sync", "kill cdc", "stop sync", "stop cdc",
                 "slow cdc", "disk full", "crash pg", *(f"stop {t}" for t in PG_STOPS), "clock sync", "clock cdc")
"""The single-process pipeline's faults, drawn uniformly."""
SPARK_HOSTS: Final = ("pg", "sync", "etcd", "master", "worker1", "worker2", "driver")
SPARK_PROCESSES: Final = ("sync", "etcd", "master", "worker1", "worker2", "driver")
CLOCKED: Final = ("master",)
"""Hosts whose every clock (wall and monotonic) jumps forward, through libfaketime: the master's JVM only.
Python's timed waits do not survive libfaketime 0.9.10 (faking the monotonic clock,
``threading.Event().wait(0.25)`` never returns; leaving it alone, ``time.sleep`` fails with EINVAL), and it would
reach a worker's Python processes through its executors' inherited environment."""
WALL_CLOCKED: Final = ("sync", "cdc", "driver", "worker1", "worker2")
"""Hosts whose wall clock alone jumps, forward or back, as an NTP step moves it (benchmarks/nemesis_wallclock.c,
preloaded; the driver's JVM too, and a worker's JVM with its executors and their Python workers, which inherit
its environment): their monotonic clocks and timed waits are untouched. Not etcd: Go reads the clock through
the vDSO, never through libc, so no preload reaches it (measured: an etcd with the library mapped logged the
real time while ``date`` under the same preload was an hour ahead); only the machine's own clock would."""
JUMP_S: Final = (10, 240)
"""A clock jump's size in seconds: up to twice Spark's 120 s network timeout, past which a driver's jump makes
its heartbeat receiver take live executors for dead."""
SPARK_FAULTS: Final[dict[str, list[str]]] = {
    "partition": [f"{a}-{b}" for i, a in enumerate(SPARK_HOSTS) for b in SPARK_HOSTS[i + 1:]],
    "kill": list(SPARK_PROCESSES), "stop": [*SPARK_PROCESSES, *PG_STOPS], "slow": list(SPARK_HOSTS),
    "disk": ["full"], "crash": ["pg"], "clock": [*CLOCKED, *(h for h in SPARK_HOSTS if h in WALL_CLOCKED)]}
"""The Spark pipeline's faults: a kind drawn uniformly, then its target (any two hosts, any process)."""
CLOCK_LIB: Final = "/usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1"
CLOCK_ENV: Final = {"LD_PRELOAD": CLOCK_LIB, "FAKETIME_CACHE_DURATION": "1"}
WALL_CLOCK_SOURCE: Final = Path(__file__).resolve().parent / "nemesis_wallclock.c"
"""libfaketime re-reading its offset file (``FAKETIME_TIMESTAMP_FILE``, ``+Ns``) each second, so the running JVM
sees the jump (``System.currentTimeMillis`` and ``System.nanoTime`` alike: a forward leap of every clock of the
host, never backwards)."""
REPO: Final = Path(__file__).resolve().parent.parent
MASTER_PORT: Final = 7077
ETCD_PORT: Final = 2379
READERS: Final = 2
SETUP_S: Final = 480.0
"""How long the source may take to start streaming before the first fault: a Spark driver's job registers and
starts its executors in 1-2 minutes under a load average of 20, and took over 180 s in two seeds at 40-50."""
DRIVER_RESTART_S: Final = 1.0
"""How long the supervisor waits before it starts a driver that exited."""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--seeds", type=int, default=20, help="seeds 1..N, one run each")
    parser.add_argument("--first-seed", type=int, default=1)
    parser.add_argument("--faults", type=int, default=5, help="faults per run, one after another")
    parser.add_argument("--rate", type=float, default=20.0, help="workload transactions per second")
    parser.add_argument("--bound", type=float, default=60.0, help="seconds after the last heal to catch up in")
    parser.add_argument("--out", default="nemesis-out", help="directory for seed-N.json and seed-N.html")
    parser.add_argument("--pipeline", choices=("cdc", "spark"), default="cdc",
                        help="the single-process source, or the pipeline on a Spark standalone cluster with etcd")
    parser.add_argument("--lab", type=int, choices=range(10), default=0,
                        help="the lab's number: its namespaces, bridge and addresses (198.18.N.0/24) are its own")
    parser.add_argument("--fault", action="append", default=None, metavar="FAULT",
                        help="these faults in this order instead of --faults drawn ones (repeatable, e.g. 'kill cdc')")
    parser.add_argument("--lasting", type=float, nargs=2, default=(2.0, 6.0), metavar=("MIN", "MAX"),
                        help="seconds a fault lasts before it heals (drawn between the two)")
    parser.add_argument("--between", type=float, nargs=2, default=(1.0, 3.0), metavar=("MIN", "MAX"),
                        help="seconds from a heal to the next fault (drawn between the two)")


@dataclass
class Proc:
    """A process in a host's namespace, restartable."""

    host: str
    argv: list[str]
    log: Path
    env: dict[str, str] | None = None
    proc: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        with open(self.log, "ab") as log:
            self.proc = subprocess.Popen(["ip", "netns", "exec", netns(self.host), *self.argv], stdout=log,
                                         stderr=subprocess.STDOUT, start_new_session=True,
                                         env={**os.environ, "PYTHONUNBUFFERED": "1", **(self.env or {})})

    def exited(self) -> int | None:
        """The exit status of a process that ended by itself (None while it runs or was never started)."""
        return self.proc.poll() if self.proc is not None else None

    def signal(self, sig: int) -> None:
        if self.proc is not None and self.proc.poll() is None:
            os.killpg(self.proc.pid, sig)

    def stop(self) -> None:
        if self.proc is None:
            return
        self.signal(signal.SIGCONT)
        self.signal(signal.SIGKILL)
        try:
            self.proc.wait(30)
        except subprocess.TimeoutExpired:
            pass
        self.proc = None


HBA_LINE: Final = "host all all 198.18.0.0/16 scram-sha-256"


class NetnsPostgres(PostgresServer):
    """Postgres listening on the ``pg`` host's address, its server processes in that namespace."""

    def _run(self, *args: str, timeout_s: float = 120.0, check: bool = True) -> None:
        if args[0] != "pg_ctl":
            super()._run(*args, timeout_s=timeout_s, check=check)
            return
        hba = self.data_dir / "pg_hba.conf"
        if HBA_LINE not in hba.read_text():
            with open(hba, "a") as conf:
                conf.write(HBA_LINE + "\n")
        subprocess.run(["ip", "netns", "exec", netns("pg"), "runuser", "-u", "nobody", "--",
                        str(self._bin / "pg_ctl"), *args[1:]], check=check, capture_output=True, timeout=timeout_s)


class Workload:
    """One session committing random changes to ``items``; every transaction recorded with its LSNs."""

    def __init__(self, server: PostgresServer, rng: random.Random, rate: float, start: float) -> None:
        self.server, self.rng, self.rate, self.start = server, rng, rate, start
        self.transactions: list[dict[str, Any]] = []
        self.stopping = threading.Event()
        self.errors: list[str] = []
        self._present: set[int] = set()
        self._in_doubt: tuple[dict[str, Any], set[int], int] | None = None
        """A committing transaction until its COMMIT is answered: (its record, the keys then present, its xid)."""

    def run(self) -> None:
        conn = None
        n = 0
        while not self.stopping.is_set():
            time.sleep(1 / self.rate)
            try:
                if conn is None:
                    conn = self.server.connect()
                    self._resolve(conn)
                self._one(conn, n)
            except Exception as exc:  # noqa: BLE001 - Postgres crashed (a fault): reconnect, resolve what was in doubt
                self.errors.append(f"{time.monotonic() - self.start:.1f} s: {exc}"[:200])
                conn = None
                time.sleep(0.5)
            n += 1

    def _resolve(self, conn: Any) -> None:
        """A transaction whose COMMIT got no answer (Postgres crashed meanwhile) may have committed: ask Postgres
        (``txid_status``) on the next session. Committed, it joins the history with the WAL position now as
        its position after commit (a later bound: it only weakens what a durable number must cover)."""
        if self._in_doubt is None:
            return
        tx, present, xid = self._in_doubt
        self._in_doubt = None
        if conn.query(f"SELECT txid_status({xid})").rows[0][0] != "committed":
            return
        tx["lsn_after"] = lsn(str(conn.query("SELECT pg_current_wal_insert_lsn()").rows[0][0]))
        tx["in_doubt"] = True
        self._present = present
        self.transactions.append(tx)

    def _one(self, conn: Any, n: int) -> None:
        ops: list[tuple[str, int, int | None, str | None]] = []
        present = set(self._present)
        for j in range(self.rng.randint(1, 3)):
            written = f"t{n}o{j}"
            absent = [k for k in range(KEYS) if k not in present]
            choices = (["insert"] if absent else []) + (["update", "delete"] if present else []) \
                + (["move"] if present and absent else [])
            kind = self.rng.choice(choices)
            if kind == "insert":
                key = self.rng.choice(absent)
                ops.append((kind, key, None, written))
                present.add(key)
            elif kind == "move":
                key, new = self.rng.choice(sorted(present)), self.rng.choice(absent)
                ops.append((kind, key, new, written))
                present -= {key}
                present.add(new)
            else:
                key = self.rng.choice(sorted(present))
                ops.append((kind, key, None, None if kind == "delete" else written))
                if kind == "delete":
                    present.discard(key)
        commit = self.rng.random() >= 0.1
        conn.query("BEGIN")
        for op, k, moved_to, v in ops:
            conn.query({"insert": f"INSERT INTO {TABLE} VALUES ({k}, '{v}')",
                        "update": f"UPDATE {TABLE} SET v = '{v}' WHERE id = {k}",
                        "delete": f"DELETE FROM {TABLE} WHERE id = {k}",
                        "move": f"UPDATE {TABLE} SET id = {moved_to}, v = '{v}' WHERE id = {k}"}[op])
        xid = int(conn.query("SELECT txid_current()").rows[0][0])
        before = lsn(str(conn.query("SELECT pg_current_wal_insert_lsn()").rows[0][0]))
        tx = {"committed": commit, "ops": ops, "lsn_before": before, "lsn_after": before,
              "t": round(time.monotonic() - self.start, 3)}
        if commit:
            self._in_doubt = (tx, present, xid)
        conn.query("COMMIT" if commit else "ROLLBACK")
        tx["lsn_after"] = lsn(str(conn.query("SELECT pg_current_wal_insert_lsn()").rows[0][0]))
        if commit:
            self._present = present
        self.transactions.append(tx)
        self._in_doubt = None


def schedule(rng: random.Random, count: int, pipeline: str = "cdc", chosen: list[str] | None = None,
             lasting: tuple[float, float] = (2.0, 6.0), between: tuple[float, float] = (1.0, 3.0)
             ) -> list[dict[str, Any]]:
    """``count`` faults (or the ``chosen`` ones, in order) one after another, the first after 3 s of workload:
    each starts ``between`` s after the previous heal and lasts ``lasting`` s."""
    at, out = 3.0, []
    for i in range(len(chosen) if chosen else count):
        at += rng.uniform(*between)
        duration = rng.uniform(*lasting)
        if chosen:
            fault = chosen[i]
        elif pipeline == "spark":
            kind = rng.choice(sorted(SPARK_FAULTS))
            fault = f"{kind} {rng.choice(SPARK_FAULTS[kind])}"
        else:
            fault = rng.choice(FAULTS)
        step = {"fault": fault, "start": round(at, 2), "heal": round(at + duration, 2)}
        if fault.startswith("clock"):  # every clock leaps forward only; a wall clock either way
            step["jump_s"] = rng.randint(*JUMP_S) * (1 if fault.split()[1] in CLOCKED else rng.choice((-1, 1)))
        out.append(step)
        at += duration
    return out


class Run:
    """One seed: the lab, the processes, the workload, the observer and the faults."""

    def __init__(self, seed: int, args: argparse.Namespace, work: Path, out: Path) -> None:
        self.seed, self.args, self.work, self.out = seed, args, work, out
        self.spark = args.pipeline == "spark"
        self.rng = random.Random(seed)
        self.lab = Lab(work / "store", store_mb=64, hosts=SPARK_HOSTS if self.spark else ("pg", "sync", "cdc"))
        self.pg: NetnsPostgres | None = None
        self.procs: dict[str, Proc] = {}
        self.lock = threading.Lock()
        """Held while a fault or the supervisor starts, stops or signals a process."""
        self.held: set[str] = set()
        """Processes a fault keeps down (the supervisor leaves them)."""
        self.origins = tuple(f"{ORIGIN}/public/{TABLE}/sink{r}" for r in range(READERS)) if self.spark else (ORIGIN,)
        self.observations: list[dict[str, Any]] = []
        self.applied: list[dict[str, Any]] = []
        self.driver_exits: list[dict[str, Any]] = []
        self.stopped: list[int] = []
        """Postgres processes a fault holds stopped (SIGCONT at its heal)."""
        self.start = time.monotonic()

    def now(self) -> float:
        return time.monotonic() - self.start

    def table_dir(self) -> Path:
        return self.lab.store / "public" / TABLE

    def clock_file(self, host: str) -> Path:
        return self.work / f"clock-{host}"

    def clock_env(self, host: str) -> dict[str, str]:
        """The environment that lets a fault move ``host``'s clocks: its offset file starts at ``+0s``."""
        if host not in CLOCKED and host not in WALL_CLOCKED:
            return {}
        self.clock_file(host).write_text("+0s\n")
        if host in CLOCKED:
            return {**CLOCK_ENV, "FAKETIME_TIMESTAMP_FILE": str(self.clock_file(host))}
        library = self.work / "wallclock.so"
        if not library.exists():
            subprocess.run(["gcc", "-shared", "-fPIC", "-O2", "-o", str(library), str(WALL_CLOCK_SOURCE), "-ldl"],
                           check=True, capture_output=True, timeout=60)
        return {"LD_PRELOAD": str(library), "NEMESIS_WALL_OFFSET_FILE": str(self.clock_file(host))}

    def pg_pids(self, target: str) -> list[int]:
        """The Postgres processes a SIGSTOP of ``target`` (one of :data:`PG_STOPS`) hits, postmaster first."""
        assert self.pg is not None
        postmaster = int((self.pg.data_dir / "postmaster.pid").read_text().split()[0])
        if target == "pg-postmaster":
            return [postmaster]
        if target == "walsender":
            rows = psql_rows(str(self.pg.directory), self.pg.port, "postgres",
                             f"SELECT active_pid FROM pg_replication_slots WHERE slot_name = '{ORIGIN}'")
            return [int(rows[0][0])] if rows and rows[0][0] else []  # no source streaming: nothing to stop
        listed = subprocess.run(["ip", "netns", "pids", netns("pg")], capture_output=True, text=True, timeout=30)
        return [postmaster, *(int(p) for p in listed.stdout.split() if int(p) != postmaster)]

    def resume_pg(self) -> None:
        for pid in self.stopped:
            try:
                os.kill(pid, signal.SIGCONT)
            except ProcessLookupError:
                pass
        self.stopped = []

    def setup(self) -> None:
        self.lab.open()
        # synchronous_commit on: the test server's default (off) loses acknowledged commits in a crash, which
        # would be Postgres breaking the workload's history, not the pipeline (seed 14 saw its WAL go back)
        self.pg = NetnsPostgres(settings={"listen_addresses": ip_of("pg"), "wal_sender_timeout": "10s",
                                          "synchronous_commit": "on"})
        self.pg.start()
        conn = self.pg.connect()
        conn.query(f"CREATE TABLE {TABLE} (id integer PRIMARY KEY, v text NOT NULL)")
        conn.query(f"CREATE PUBLICATION {ORIGIN} FOR TABLE {TABLE}")
        conn.query(f"SELECT pg_create_logical_replication_slot('{ORIGIN}', 'pgoutput')")
        conn.close()
        py = sys.executable
        self.procs["sync"] = Proc("sync", [py, "-m", "reference.sync", "serve", "--store", str(self.lab.store),
                                           "--host", ip_of("sync"), "--port", str(SYNC_PORT),
                                           "--max-replication-lag-s", "1", "--flush-task-interval-s", "0.5", "--verbose"],
                                  self.out / f"seed-{self.seed}-sync.log", self.clock_env("sync"))
        source = f"postgresql://postgres:{self.pg.password}@{ip_of('pg')}:{self.pg.port}/postgres"
        if self.spark:
            self._spark_procs(source)
        else:
            self.procs["cdc"] = Proc("cdc", [py, "-m", "reference.cdc", "--source", source, "--publication", ORIGIN,
                                             "--slot", ORIGIN, "--sync", f"grpc://{ip_of('sync')}:{SYNC_PORT}",
                                             "--state-dir", str(self.work)], self.out / f"seed-{self.seed}-cdc.log",
                                    self.clock_env("cdc"))
        for proc in self.procs.values():
            proc.start()
        conn = self.pg.connect()
        try:
            for _ in range(int(SETUP_S * 4)):  # bounded: SETUP_S for the source to start streaming
                if conn.query(f"SELECT active FROM pg_replication_slots WHERE slot_name = '{ORIGIN}'").rows[0][0] == "t":
                    break
                if self.spark:
                    self._supervise_driver()
                time.sleep(0.25)
            else:
                raise RuntimeError(f"the source did not start streaming within {SETUP_S:.0f} s")
        finally:
            conn.close()
        self.start = time.monotonic()  # the schedule's times count from here: faults hit a streaming source

    def _spark_procs(self, source: str) -> None:
        """etcd, the standalone master, two workers and the driver; the clocked hosts' processes read their
        clocks through libfaketime with an offset file of their host."""
        logs = self.out / f"seed-{self.seed}-spark"
        logs.mkdir(exist_ok=True)
        etcd = f"http://{ip_of('etcd')}"
        self.procs["etcd"] = Proc("etcd", ["etcd", "--name", "nemesis", "--data-dir", str(self.work / "etcd"),
                                           "--listen-client-urls", f"{etcd}:{ETCD_PORT}",
                                           "--advertise-client-urls", f"{etcd}:{ETCD_PORT}",
                                           "--listen-peer-urls", f"{etcd}:2380",
                                           "--initial-advertise-peer-urls", f"{etcd}:2380",
                                           "--initial-cluster", f"nemesis={etcd}:2380"], logs / "etcd.log")

        import pyspark

        spark_home = Path(str(pyspark.__file__)).parent

        def env(host: str) -> dict[str, str]:
            clock = self.clock_env(host)
            return {"SPARK_HOME": str(spark_home), "SPARK_LOCAL_IP": ip_of(host), "SPARK_LOG_DIR": str(logs),
                    "SPARK_WORKER_DIR": str(logs / host), "PYSPARK_PYTHON": sys.executable,
                    "PYTHONPATH": str(REPO), **clock}

        spark_class = str(spark_home / "bin" / "spark-class")
        master = f"spark://{ip_of('master')}:{MASTER_PORT}"
        self.procs["master"] = Proc("master", [spark_class, "org.apache.spark.deploy.master.Master", "--host",
                                               ip_of("master"), "--port", str(MASTER_PORT), "--webui-port", "8080"],
                                    logs / "master.log", env("master"))
        for worker in ("worker1", "worker2"):
            self.procs[worker] = Proc(worker, [spark_class, "org.apache.spark.deploy.worker.Worker", master, "--host",
                                               ip_of(worker), "--cores", "2", "--memory", "1g", "--webui-port", "8081",
                                               "--work-dir", str(logs / worker)], logs / f"{worker}.log", env(worker))
        self.procs["driver"] = Proc("driver", [sys.executable, "-m", "reference.pipeline", "--source", source,
                                               "--publication", ORIGIN, "--slot", ORIGIN, "--store", str(self.lab.store),
                                               "--sync", f"grpc://{ip_of('sync')}:{SYNC_PORT}", "--master", master,
                                               "--provider", f"etcd://{ip_of('etcd')}:{ETCD_PORT}/{ORIGIN}",
                                               "--host", ip_of("driver"), "--readers", str(READERS)],
                                    logs / "driver.log", env("driver"))

    def _supervise_driver(self) -> None:
        """Start the driver again if it exited by itself (not while a fault keeps it down)."""
        with self.lock:
            driver = self.procs["driver"]
            code = driver.exited()
            if code is None or "driver" in self.held:
                return
            self.driver_exits.append({"t": round(self.now(), 2), "status": code})
            driver.proc = None
        time.sleep(DRIVER_RESTART_S)
        with self.lock:
            if "driver" not in self.held and driver.proc is None:
                driver.start()

    def supervise(self, stop: threading.Event) -> None:
        while not stop.wait(0.5):
            self._supervise_driver()

    def fault(self, step: dict[str, Any], on: bool) -> dict[str, Any]:
        """Apply or heal ``step``; what the history should note about it (the Postgres processes stopped)."""
        assert self.pg is not None
        kind, _, target = step["fault"].partition(" ")
        with self.lock:
            if kind == "partition":
                a, b = target.split("-")
                self.lab.partition(a, b, on)
            elif kind == "kill":
                if on:
                    self.held.add(target)
                    self.procs[target].stop()
                else:
                    self.held.discard(target)
                    self.procs[target].start()
            elif kind == "stop" and target in PG_STOPS:
                if not on:
                    self.resume_pg()
                    return {}
                self.stopped = self.pg_pids(target)
                for pid in self.stopped:
                    os.kill(pid, signal.SIGSTOP)
                return {"pids": len(self.stopped)}
            elif kind == "stop":
                self.procs[target].signal(signal.SIGSTOP if on else signal.SIGCONT)
            elif kind == "slow":
                self.lab.slow(target, 64, on)
            elif kind == "disk":
                self.lab.fill_disk(on)
            elif kind == "crash":
                self.pg.stop(mode="immediate") if on else self.pg.start()
            elif kind == "clock" and on:  # a jump is not undone: clocks do not run back
                offset = int(self.clock_file(target).read_text().strip().rstrip("s")) + step["jump_s"]
                self.clock_file(target).write_text(f"{offset:+d}s\n")
        return {}

    def observe(self, stop: threading.Event) -> None:
        assert self.pg is not None
        location = f"grpc://{ip_of('sync')}:{SYNC_PORT}"
        while not stop.wait(OBSERVE_EVERY_S):
            obs: dict[str, Any] = {"t": round(self.now(), 2)}
            try:
                rows = psql_rows(str(self.pg.directory), self.pg.port, "postgres",
                                 f"SELECT confirmed_flush_lsn FROM pg_replication_slots WHERE slot_name = '{ORIGIN}'")
                obs["confirmed"] = lsn(rows[0][0]) if rows and rows[0][0] else None
            except (subprocess.SubprocessError, IndexError):
                obs["confirmed"] = None
            told: dict[str, int | None] = {}
            for origin in self.origins:
                out = do_put(location, SyncCommand(path=f"public/{TABLE}", origin=origin, column_descriptors=(),
                                                   sequence_number=None).to_descriptor_cmd(), [], timeout=1.0)
                told[origin] = out.response.durable_sequence_number if out.response is not None else None
            obs["reported"] = told if self.spark else told[ORIGIN]
            logs = [int(p.stem) for p in (self.table_dir() / "_delta_log").glob("*.json") if p.stem.isdigit()]
            obs["version"] = max(logs) if logs else None
            self.observations.append(obs)

    def final_rows(self) -> dict[int, str]:
        assert self.pg is not None
        return {int(k): v for k, v in psql_rows(str(self.pg.directory), self.pg.port, "postgres",
                                                f"SELECT id, v FROM {TABLE}")}

    def table_rows(self) -> dict[int, str] | None:
        versions = read_versions(self.table_dir(), self.origins)
        return versions.states[-1] if versions.states else None

    def execute(self) -> dict[str, Any]:
        plan = schedule(self.rng, self.args.faults, self.args.pipeline, self.args.fault, tuple(self.args.lasting),
                        tuple(self.args.between))
        self.setup()
        assert self.pg is not None
        workload = Workload(self.pg, random.Random(self.seed * 7919), self.args.rate, self.start)
        stop = threading.Event()
        threads = [threading.Thread(target=workload.run, daemon=True),
                   threading.Thread(target=self.observe, args=(stop,), daemon=True)]
        if self.spark:
            threads.append(threading.Thread(target=self.supervise, args=(stop,), daemon=True))
        for thread in threads:
            thread.start()
        for step in plan:
            time.sleep(max(0.0, step["start"] - self.now()))
            started = self.now()
            notes = self.fault(step, True)
            time.sleep(max(0.0, step["heal"] - self.now()))
            self.fault(step, False)
            self.applied.append({"fault": step["fault"], "start": round(started, 2), "heal": round(self.now(), 2)}
                                | ({"jump_s": step["jump_s"]} if "jump_s" in step else {}) | notes)
        time.sleep(2.0)
        workload.stopping.set()
        threads[0].join(30)
        healed = self.now()
        caught_up = None
        final = self.final_rows()
        while self.now() - healed < self.args.bound:  # bounded: --bound seconds
            if self.table_rows() == final:
                caught_up = round(self.now() - healed, 2)
                break
            time.sleep(1.0)
        stop.set()
        for thread in threads[1:]:
            thread.join(10)
        history = {"seed": self.seed, "pipeline": self.args.pipeline, "origin": ORIGIN, "origins": list(self.origins),
                   "schedule": plan, "faults": self.applied, "transactions": workload.transactions,
                   "observations": self.observations, "driver_exits": self.driver_exits,
                   "workload_errors": workload.errors, "last_heal_s": healed, "caught_up_s": caught_up}
        verdict = check(history, self.table_dir(), final, caught_up, self.args.bound)
        history["verdict"] = verdict
        if not verdict["passed"] and self.table_dir().exists():  # the evidence outlives the tmpfs
            shutil.copytree(self.table_dir(), self.out / f"seed-{self.seed}-table", dirs_exist_ok=True)
        return history

    def close(self) -> None:
        with self.lock:
            self.held.update(self.procs)
            for proc in self.procs.values():
                proc.stop()
            self.resume_pg()
        if self.pg is not None:
            self.pg.stop(mode="immediate")
            self.pg.remove()
        self.lab.close()


def main(args: argparse.Namespace) -> int:
    use_lab(args.lab)
    reason = unavailable()
    if reason:
        print(f"nemesis: {reason}", file=sys.stderr)
        return 2
    if args.pipeline == "spark" and not (Path(CLOCK_LIB).exists() and shutil.which("etcd") and shutil.which("java")):
        print(f"nemesis: the Spark pipeline needs etcd and java on PATH and {CLOCK_LIB} (apt: etcd-server, "
              "libfaketime)", file=sys.stderr)
        return 2
    menu = FAULTS if args.pipeline == "cdc" else [f"{k} {t}" for k, targets in SPARK_FAULTS.items() for t in targets]
    unknown = [f for f in args.fault or [] if f not in menu]
    if unknown:
        print(f"nemesis: no fault {unknown[0]!r} in the {args.pipeline} pipeline's menu: {', '.join(menu)}",
              file=sys.stderr)
        return 2
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    failed = 0
    for seed in range(args.first_seed, args.first_seed + args.seeds):
        with tempfile.TemporaryDirectory(prefix=f"nemesis-{seed}-") as work:
            run = Run(seed, args, Path(work), out)
            try:
                history = run.execute()
            finally:
                run.close()
        (out / f"seed-{seed}.json").write_text(json.dumps(history, indent=1))
        (out / f"seed-{seed}.html").write_text(timeline_html(history))
        verdict = history["verdict"]
        failed += not verdict["passed"]
        broken = [f"{name}: {p['problems'][0]}" for name, p in verdict["properties"].items() if not p["passed"]]
        print(f"seed {seed}: {'PASS' if verdict['passed'] else 'FAIL'} ({verdict['committed']} committed, "
              f"{len(history['driver_exits'])} driver restarts, "
              f"{verdict['rolled_back']} rolled-back values, {verdict['versions']} versions, faults "
              f"{', '.join(f['fault'] for f in history['faults'])}; caught up {history['caught_up_s']} s)"
              + ("".join(f"\n    {b}" for b in broken)), flush=True)
    print(f"nemesis: {args.seeds - failed} of {args.seeds} seeds passed")
    return 0 if not failed else 1

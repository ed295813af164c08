"""What strangers make a shuffle writer task hold: threads, descriptors and memory under attack.

A writer task runs alone in a child process (its figures are read from /proc, without the
benchmark's own), with 1,000 records for a reader that has not come yet. Against it, in turn:
  churn  1,000 connect-then-close cycles (measured once the writer has released them)
  idle   500 connections that never send a byte (measured while they are held)
then a real reader task reads the whole stream, proving the writer still serves. Done twice:
with the default limits (at most 64 unbound connections held, the oldest evicted) and with the
cap raised above 500, so every idle connection is held and the cost of one shows.

Figures per run: threads, fds and rss_mb at baseline / after churn / with idle held / after the
idle ones closed; held_idle (connections the writer kept); bytes_per_connection (RSS growth per
held connection); served (the reader got every record). Goals (booleans): threads constant,
descriptors released after churn, held connections within the cap, memory per connection at most
the buffers Spark accounts per writer channel (32 KiB send + 512 B receive) + 64 KiB.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import socket
import time
from collections.abc import Callable
from multiprocessing.connection import Connection as Pipe
from typing import Any

from benchmarks.procstat import ProcessSample, sample
from reference.net import ConnectionLimits
from reference.shuffle.reader_task import ReaderTask
from reference.shuffle.standalone_directory import StandaloneDirectory
from reference.shuffle.task import TaskOptions
from reference.shuffle.writer_task import WriterTask
from spec.shuffle import coordination
from spec.shuffle.settings import ShuffleSettings
from spec.shuffle.writer import TCP_RECEIVE_BUFFER, TCP_SEND_BUFFER

KEY = coordination.ShuffleKey(0, 0)
RECORDS = 1000
CHURN = 1000
IDLE = 500
SETTLE_S = 20.0
"""Longest wait for the writer to reach a steady state after an attack."""
BUDGET_SLACK = 64 * 1024
"""Memory a connection may hold beyond the buffers the protocol accounts for it."""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--json", action="store_true", help="print the figures as one JSON line at the end")


def _serve(max_pending: int, pipe: Pipe) -> None:
    """The child: one writer task, its port sent up the pipe, run until its reader acknowledged."""
    task = WriterTask(KEY, 0, 1, ShuffleSettings(), StandaloneDirectory(),
                      TaskOptions(limits=ConnectionLimits(max_pending=max_pending)))
    pipe.send(task.port)
    task.run((0, b"%099d" % i) for i in range(RECORDS))


def _settle(pid: int, done: Callable[[ProcessSample], bool]) -> ProcessSample:
    """Sample ``pid`` until ``done`` holds (or SETTLE_S passed), then once more after a pause."""
    deadline = time.monotonic() + SETTLE_S
    while not done(sample(pid)) and time.monotonic() < deadline:
        time.sleep(0.01)
    time.sleep(0.2)
    return sample(pid)


def _figures(s: ProcessSample) -> dict[str, float]:
    return {"threads": s.threads, "fds": s.fds, "rss_mb": round(s.rss_bytes / 2**20, 2)}


def attack(max_pending: int) -> dict[str, Any]:
    """One writer child under churn, then idle connections, then its real reader."""
    parent, child = multiprocessing.Pipe()
    process = multiprocessing.get_context("spawn").Process(target=_serve, args=(max_pending, child))
    process.start()
    try:
        port = parent.recv()
        assert process.pid is not None
        pid = process.pid
        baseline = _settle(pid, lambda s: True)
        for _ in range(CHURN):
            socket.create_connection(("127.0.0.1", port)).close()
        churned = _settle(pid, lambda s: s.fds <= baseline.fds)
        expected_held = min(IDLE, max_pending)
        idle = [socket.create_connection(("127.0.0.1", port)) for _ in range(IDLE)]
        held = _settle(pid, lambda s: s.fds >= baseline.fds + expected_held)
        for sock in idle:
            sock.close()
        released = _settle(pid, lambda s: s.fds <= baseline.fds)
        writer = coordination.WriterLocation(0, "benchmark", "127.0.0.1", port)
        reader = ReaderTask(KEY, 0, [0], ShuffleSettings(), StandaloneDirectory((writer,)))
        served = sum(1 for _ in reader.records()) == RECORDS
        process.join(SETTLE_S)
        held_idle = held.fds - baseline.fds
        return {
            "max_pending": max_pending, "baseline": _figures(baseline), "after_churn": _figures(churned),
            "idle_held": _figures(held), "after_idle_closed": _figures(released), "held_idle": held_idle,
            "bytes_per_connection": round((held.rss_bytes - baseline.rss_bytes) / max(held_idle, 1)),
            "served": served and process.exitcode == 0,
        }
    finally:
        if process.is_alive():
            process.kill()
            process.join()


def main(args: argparse.Namespace) -> int:
    runs = {"default_limits": attack(ConnectionLimits().max_pending), "cap_above_idle": attack(IDLE + 100)}
    for name, run in runs.items():
        print(f"{name:16} baseline {run['baseline']}  after churn {run['after_churn']}  idle held "
              f"{run['idle_held']} ({run['held_idle']} held, {run['bytes_per_connection']} B each)  "
              f"served {run['served']}", flush=True)
    budget = TCP_SEND_BUFFER + TCP_RECEIVE_BUFFER + BUDGET_SLACK
    figures: dict[str, Any] = {"churned": CHURN, "idle": IDLE, **runs, "goals": {
        "threads_constant": all(r["idle_held"]["threads"] == r["after_churn"]["threads"] == r["baseline"]["threads"]
                                for r in runs.values()),
        "fds_released_after_churn": all(r["after_churn"]["fds"] == r["baseline"]["fds"] for r in runs.values()),
        "fds_released_after_idle": all(r["after_idle_closed"]["fds"] == r["baseline"]["fds"] for r in runs.values()),
        "held_within_cap": all(r["held_idle"] <= r["max_pending"] for r in runs.values()),
        "memory_per_connection_within_budget": runs["cap_above_idle"]["bytes_per_connection"] <= budget,
        "writer_still_serves": all(r["served"] for r in runs.values()),
    }}
    if args.json:
        print(json.dumps(figures))
    return 0 if all(figures["goals"].values()) else 1

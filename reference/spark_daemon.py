"""PySpark's daemon, except that a Python worker whose output the JVM stopped reading exits without
printing a traceback (run by PySpark as ``spark.python.daemon.module``; see
reference/spark/workers.py, which sets it on a local master).

A partial read (``show``, ``take``, ``first``, ``limit``) ends its task while the task's Python
worker still has output, and the JVM closes the worker's socket. PySpark's worker treats that as
nothing to report, but its daemon (pyspark/daemon.py, ``worker``) then flushes the rest into the
closed socket and prints the ``BrokenPipeError`` traceback, once per partial read, with or
without a shuffle. This module runs PySpark's own daemon with only that failure caught: the worker
exits as it would have, silently. It lives outside ``reference.spark`` so that starting the daemon
imports nothing else (the daemon forks its workers and must not start threads before).
"""

from __future__ import annotations

from typing import Any


def run() -> None:
    from pyspark import daemon

    pyspark_worker = daemon.worker

    def worker(sock: Any, authenticated: bool) -> int:
        try:
            return int(pyspark_worker(sock, authenticated))
        except (BrokenPipeError, ConnectionResetError):
            return 1  # the JVM closed the socket: nobody reads what is left, and the worker is done

    daemon.worker = worker
    daemon.manager()


if __name__ == "__main__":
    run()

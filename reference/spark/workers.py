"""Where PySpark's Python workers find this package (on a local master, the driver's interpreter),
and the daemon that starts them there (PySpark's, quiet about partial reads)."""

from __future__ import annotations

import logging
import os
import sys
from typing import Any, Final

log = logging.getLogger(__name__)

DAEMON_MODULE_KEY: Final = "spark.python.daemon.module"
QUIET_DAEMON: Final = "reference.spark_daemon"
"""PySpark's daemon, silent about the output a partial read leaves unread (reference/spark_daemon.py)."""

PACKAGE_ROOT: Final = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
"""The directory holding ``reference`` and ``spec`` (a checkout, or site-packages when installed)."""


def local_workers_use_driver_python(sc: Any) -> None:
    """On a local master, run Python workers with the driver's interpreter and package root.

    PySpark starts workers with ``python3`` from the PATH unless ``PYSPARK_PYTHON`` says otherwise,
    and that interpreter rarely has this package. The executors of a local master share the
    driver's machine, so its interpreter is the right one; an interpreter the user chose
    (``PYSPARK_PYTHON`` or ``spark.pyspark.python``) is kept. On a real cluster the executors'
    interpreter is the cluster's business: it needs streamwire installed (docs/pyspark.md).
    Workers start through :data:`QUIET_DAEMON` (see :func:`quiet_partial_reads`).
    """
    if not sc.master.startswith("local"):
        return
    if "PYSPARK_PYTHON" not in os.environ and not sc.getConf().get("spark.pyspark.python", None) \
            and sc.pythonExec != sys.executable:
        log.info("Python workers of %s use the driver's interpreter %s",
                 sc.master, sys.executable)
        sc.pythonExec = sys.executable
    quiet_partial_reads(sc)
    paths = [p for p in sc.environment.get("PYTHONPATH", "").split(os.pathsep) if p]
    if PACKAGE_ROOT not in paths:
        sc.environment["PYTHONPATH"] = os.pathsep.join(paths + [PACKAGE_ROOT])


def quiet_partial_reads(sc: Any) -> None:
    """Start the Python workers of the tasks created from now on through PySpark's daemon made
    silent about the output a partial read leaves unread (a daemon module the user chose is kept).
    A local master's executor reads the driver's live configuration; a cluster's executors take
    ``spark.python.daemon.module`` from spark-submit (docs/pyspark.md)."""
    conf = sc._jsc.sc().conf()
    if not conf.contains(DAEMON_MODULE_KEY):
        conf.set(DAEMON_MODULE_KEY, QUIET_DAEMON)

"""What Spark and PySpark print on a stop the user asked for, kept off the console; the log levels
left exactly as the user (or PySpark) set them.

``query.stop()`` cancels the micro-batch's running write tasks; Spark then logs, for a Python data
source, that the write "is aborting" and "aborted", and per task "Aborting task" with the
``TaskKilledException`` and "Aborting commit" / "Aborted commit": ten ERROR lines for a stop the
user asked for; when the stop also interrupts the driver's call of the writer's ``abort`` (which
does nothing: the tasks send nothing, the commit sends the batch), that it "failed to abort". A
query stopped between micro-batches (ours waits for durability between them) has no job to
cancel, and Spark's scheduler warns "Failed to cancel job group" for that; one stopped during a
micro-batch gets a WARN "Lost task ... TaskKilled ... was stopped" per task (both for every sink,
Spark's own ``noop`` too). A stop that interrupts the micro-batch thread while Hadoop's local file
system runs a shell command (``readlink`` in the checkpoint's rename) gets Hadoop's WARN "Interrupted
while joining on: Thread[...]" with the interrupt's stack. A genuine failure is still logged by
the executor ("Exception in task") and raised by the query, so these lines add nothing; each
filter matches only its own whole message.

The filters sit on the root logger's configuration: giving those loggers configurations of their
own would take them out of PySpark's console threshold (``Setting default log level to "WARN"``
lets through every logger that has its own configuration), and Spark's INFO lines of every
micro-batch's write would reach the console.

PySpark's side: the JVM sends the accumulator updates of Python tasks over one connection to the
driver's accumulator server, and closes it when the context stops; PySpark's handler then reads
the end of the stream as a message and the server prints an ``EOFError`` traceback (a race with
``spark.stop()``, seen after stopping a query whose micro-batches ran Python write tasks). The
connection's end is the JVM's goodbye and loses nothing, so the server lets it pass silently, as
``reference.spark_daemon`` does for PySpark's daemon.
"""

from __future__ import annotations

import sys
from typing import Any, Final

ECHOES: Final = (
    r"Data source write support .*PythonStreamingWrite.* (is aborting|aborted|failed to abort)\.",
    r"Abort(ing|ed) commit for partition .*",
    r"Aborting task",
    r"Failed to cancel job group \S+\. Cannot find active jobs for it\.",
    r".*Lost task .*: TaskKilled \(Stage cancelled: \[SPARK_JOB_CANCELLED\] Job \d+ cancelled Query \[.*\] was stopped.*",
    r"Interrupted while joining on: Thread\[.*\]",
)
"""Regular expressions of the whole messages dropped: WriteToDataSourceV2Exec's, DataWritingSparkTask's,
Utils's (the killed task's), DAGScheduler's, TaskSetManager's (a task the stop killed) and Hadoop Shell's
(the stopped micro-batch thread's)."""


def quiet_stops(sc: Any) -> None:
    """Keep the echoes of a stop off the console (idempotent per context)."""
    if getattr(sc, "_streamwire_quiet", False):
        return
    _drop_stop_echoes(sc)
    _end_accumulator_connections_quietly(sc)
    sc._streamwire_quiet = True


def _drop_stop_echoes(sc: Any) -> None:
    """Deny the echoes in the driver JVM's log4j configuration."""
    jvm = sc._jvm
    core = jvm.org.apache.logging.log4j.core
    log_manager = jvm.org.apache.logging.log4j.LogManager
    context = log_manager.getContext(False)
    root = context.getConfiguration().getLoggerConfig(log_manager.ROOT_LOGGER_NAME)
    for regex in ECHOES:
        root.addFilter(core.filter.RegexFilter.createFilter(
            regex, None, False, core.Filter.Result.DENY, core.Filter.Result.NEUTRAL))
    context.updateLoggers()


def _end_accumulator_connections_quietly(sc: Any) -> None:
    """The driver's accumulator server takes the JVM closing its connection (``EOFError``) silently
    and reports every other error as PySpark does (also for a connection already open)."""
    server = getattr(sc, "_accumulatorServer", None)
    if server is None:
        return
    pyspark_handle_error = server.handle_error

    def handle_error(request: Any, client_address: Any) -> None:
        if not isinstance(sys.exc_info()[1], EOFError):
            pyspark_handle_error(request, client_address)

    server.handle_error = handle_error

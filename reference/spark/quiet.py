"""Spark's ERROR lines that only echo a stopped query's killed write tasks, filtered out of its log.

``query.stop()`` cancels the micro-batch's running write tasks; Spark then logs, for a Python data
source, that the write "is aborting" and "aborted", and per task "Aborting task" with the
``TaskKilledException`` and "Aborting commit" / "Aborted commit": ten ERROR lines for a stop the
user asked for; when the stop also interrupts the driver's call of the writer's ``abort`` (which
does nothing: the tasks send nothing, the commit sends the batch), that it "failed to abort". A
genuine failure is still logged by the executor ("Exception in task") and raised by the query,
so these lines add nothing; each filter matches only its own message.
"""

from __future__ import annotations

from typing import Any, Final

ECHOES: Final = (
    ("org.apache.spark.sql.execution.datasources.v2.WriteToDataSourceV2Exec",
     r"Data source write support .*PythonStreamingWrite.* (is aborting|aborted|failed to abort)\."),
    ("org.apache.spark.sql.execution.datasources.v2.DataWritingSparkTask",
     r"Abort(ing|ed) commit for partition .*"),
    ("org.apache.spark.util.Utils", r"Aborting task"),
)
"""(logger, regular expression of the whole message) of each echo."""


def drop_stop_echoes(sc: Any) -> None:
    """Deny the echoes in the driver JVM's log4j configuration (idempotent per context)."""
    if getattr(sc, "_streamwire_quiet", False):
        return
    jvm = sc._jvm
    core = jvm.org.apache.logging.log4j.core
    context = jvm.org.apache.logging.log4j.LogManager.getContext(False)
    config = context.getConfiguration()
    for logger, regex in ECHOES:
        logger_config = config.getLoggerConfig(logger)
        if logger_config.getName() != logger:  # inherited: give the logger its own, still additive
            logger_config = core.config.LoggerConfig(logger, logger_config.getLevel(), True)
            config.addLogger(logger, logger_config)
        logger_config.addFilter(core.filter.RegexFilter.createFilter(
            regex, None, False, core.Filter.Result.DENY, core.Filter.Result.NEUTRAL))
    context.updateLoggers()
    sc._streamwire_quiet = True

"""The JVM helper that makes ``streaming_repartition``'s result a DataFrame without a second Python
pass: ``streamwire.spark.ArrowStreamRows`` (java/ArrowStreamRows.java), which turns each partition's
received Arrow IPC streams into rows in the JVM.

PySpark's own Arrow-to-DataFrame path takes batches the driver holds; for an RDD of them it offers
only ``createDataFrame`` of the streams in a binary column followed by ``mapInArrow``, a whole
Python pass more (about 0.7-1 s of Python CPU per million rows, docs/shuffle-runtime.md). The
helper's jar is built by the Makefile with ``javac`` against the installed pyspark's jars and ships
as package data; the first use on a SparkContext adds it to the driver's and the executors' class
path (the session's ``ADD JAR``). Where it cannot load, one warning line says why and the caller
takes the Python pass instead.
"""

from __future__ import annotations

import functools
import logging
import weakref
from pathlib import Path
from typing import Any, Callable, Final

log = logging.getLogger(__name__)

JAR: Final = Path(__file__).with_name("streamwire-spark.jar")
"""Where ``make`` puts the helper (gitignored: it is built, never committed)."""

HELPER_CLASS: Final = "streamwire.spark.ArrowStreamRows"

_helpers: weakref.WeakKeyDictionary[Any, Any] = weakref.WeakKeyDictionary()
"""Per SparkContext: the helper's ``dataFrame`` method (a py4j ``java.lang.reflect.Method``), or None
where it could not load (warned once)."""


ToRows = Callable[[Any, Any], Any]
"""``(streams, schema)`` to a DataFrame: ``streams`` a PySpark RDD yielding one Arrow IPC stream's bytes
per item, ``schema`` the rows' StructType."""


def to_rows(spark: Any) -> ToRows | None:
    """The JVM conversion for ``spark``'s context, loaded on first use; None (warned once) where it cannot load."""
    method = _helper(spark)
    return None if method is None else functools.partial(_data_frame, spark, method)


def _data_frame(spark: Any, method: Any, streams: Any, schema: Any) -> Any:
    """The rows of ``streams`` as a DataFrame of ``schema``, converted in the JVM by ``method``."""
    from pyspark.sql import DataFrame

    streams._bypass_serializer = True  # each item reaches the JVM as its own bytes, unpickled
    gateway = spark.sparkContext._gateway
    args = gateway.new_array(gateway.jvm.java.lang.Object, 3)
    args[0], args[1], args[2] = streams._jrdd, schema.json(), spark._jsparkSession
    return DataFrame(method.invoke(None, args), spark)


def _helper(spark: Any) -> Any | None:
    """The helper's method for ``spark``'s context, loaded on first use (None, warned once, where it cannot)."""
    sc = spark.sparkContext
    if sc in _helpers:
        return _helpers[sc]
    method = None
    try:
        method = _load(spark)
    except Exception as error:  # noqa: BLE001 - any failure to load means the Python pass, said in one line
        log.warning("streaming_repartition: the JVM helper %s did not load (%s): the received Arrow streams "
                    "become rows in a second Python pass instead", JAR.name, _one_line(error))
    _helpers[sc] = method
    return method


def _load(spark: Any) -> Any:
    """Add the jar to the session's class path (driver and executors) unless it is there; its method."""
    if not JAR.is_file():
        raise FileNotFoundError(f"{JAR} is missing: build it with `make spark-helper` (needs javac)")
    jvm = spark.sparkContext._jvm
    loader = spark._jsparkSession.sharedState().jarClassLoader()
    if not any(str(url).endswith("/" + JAR.name) for url in loader.getURLs()):
        spark._jsparkSession.sessionState().resourceLoader().addJar(str(JAR))
    helper = jvm.java.lang.Class.forName(HELPER_CLASS, True, loader)
    return next(m for m in helper.getMethods() if m.getName() == "dataFrame")


def _one_line(error: BaseException) -> str:
    """``error`` in one line: a py4j error as its Java exception (its text carries the JVM's stack trace)."""
    java = getattr(error, "java_exception", None)
    text = (str(java.toString()) if java is not None else str(error)).strip().splitlines()
    return f"{type(error).__name__}: {text[0] if text else ''}"

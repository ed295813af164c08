"""The PySpark API of the reference runtime (``pip install 'streamwire[spark]'``)."""

import importlib.util as _importlib_util

EXTRA = "streamwire[spark]"
"""The install extra that brings everything this package imports."""

_NEEDED = {"pyspark": "pyspark", "pyarrow": "pyarrow", "pandas": "pandas", "google.protobuf": "protobuf",
           "deltalake": "deltalake"}
"""Module -> distribution of every third-party module the PySpark API imports (the extra's list)."""


def _missing() -> list[str]:
    def absent(module: str) -> bool:
        try:
            return _importlib_util.find_spec(module) is None
        except (ImportError, ValueError):
            return True

    return [dist for module, dist in _NEEDED.items() if absent(module)]


if _missing():
    raise ImportError(f"reference.spark needs {', '.join(_missing())}: pip install '{EXTRA}'")

from reference.spark.exchange import ReaderRetryUnsupported  # noqa: E402 - after the check: a missing extra is one line
from reference.spark.runs import RunDidNotStart  # noqa: E402
from reference.spark.shape import InsufficientSlots  # noqa: E402
from reference.spark.shuffle import (  # noqa: E402
    StreamingShuffle,
    stop_coordinator,
    streaming_repartition,
    streaming_shuffle,
)

__all__ = [
    "EXTRA",
    "InsufficientSlots",
    "ReaderRetryUnsupported",
    "RunDidNotStart",
    "StreamingShuffle",
    "stop_coordinator",
    "streaming_repartition",
    "streaming_shuffle",
]

"""The PySpark API of the reference runtime (``pip install 'streamwire[spark]'``)."""

from streamwire.extras import require

require("spark", "reference.spark")  # the modules of streamwire[spark], before any of them is imported

from reference.spark.exchange import ReaderRetryUnsupported  # noqa: E402 - after the check: a missing extra is one line
from reference.spark.runs import RunDidNotStart  # noqa: E402
from reference.spark.shape import InsufficientSlots  # noqa: E402
from reference.spark.shuffle import (  # noqa: E402
    StreamingShuffle,
    stop_coordinator,
    stop_directory,
    streaming_repartition,
    streaming_shuffle,
)

__all__ = [
    "InsufficientSlots",
    "ReaderRetryUnsupported",
    "RunDidNotStart",
    "StreamingShuffle",
    "stop_coordinator",
    "stop_directory",
    "streaming_repartition",
    "streaming_shuffle",
]

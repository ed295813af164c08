"""The PySpark API of the reference runtime."""

from reference.spark.shuffle import (
    InsufficientSlots,
    ReaderRetryUnsupported,
    StreamingShuffle,
    stop_coordinator,
    streaming_repartition,
    streaming_shuffle,
)

__all__ = [
    "InsufficientSlots",
    "ReaderRetryUnsupported",
    "StreamingShuffle",
    "stop_coordinator",
    "streaming_repartition",
    "streaming_shuffle",
]

"""The six ``spark.shuffle.streaming.*`` settings, with Spark 4.3.0's keys, defaults and parsing.

Sizes and times accept Spark's strings (``32k``, ``1h``, ``-1``) with Spark's units: a bare number
means bytes for sizes and milliseconds for times.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, fields
from typing import Any, Callable, Final, Mapping, Protocol

PREFIX: Final = "spark.shuffle.streaming."

_BYTE_UNITS: Final = {
    "b": 1, "k": 1 << 10, "kb": 1 << 10, "m": 1 << 20, "mb": 1 << 20, "g": 1 << 30,
    "gb": 1 << 30, "t": 1 << 40, "tb": 1 << 40, "p": 1 << 50, "pb": 1 << 50,
}
_TIME_UNITS_MS: Final = {
    "ms": 1.0, "us": 0.001, "s": 1000.0, "m": 60_000.0, "min": 60_000.0,
    "h": 3_600_000.0, "d": 86_400_000.0,
}
_NUMBER_WITH_UNIT: Final = re.compile(r"(-?[0-9]+)([a-z]+)?")


class SettingsError(ValueError):
    """A setting's value cannot be parsed or is out of its allowed range."""

    condition: Final = "INVALID_STREAMING_SHUFFLE_SETTING"

    def __init__(self, key: str, value: object, reason: str) -> None:
        super().__init__(f"{key}={value!r}: {reason}")
        self.key = key
        self.value = value
        self.reason = reason


def parse_bytes(key: str, value: object) -> int:
    """Spark's byte-string parsing (``JavaUtils.byteStringAs``, a leading ``-`` allowed)."""
    return _parse_with_units(key, value, _BYTE_UNITS, "b", "a size such as 32k, 4m or 1g")


def parse_time_ms(key: str, value: object) -> int:
    """Spark's time-string parsing in milliseconds (``JavaUtils.timeStringAs``)."""
    return _parse_with_units(key, value, _TIME_UNITS_MS, "ms", "a time such as 50ms, 30s or 1h")


def _parse_with_units(
    key: str, value: object, units: Mapping[str, float], default_unit: str, expected: str
) -> int:
    if isinstance(value, bool):
        raise SettingsError(key, value, f"expected {expected}")
    if isinstance(value, int):
        return value
    text = str(value).strip().lower()
    match = _NUMBER_WITH_UNIT.fullmatch(text)
    if match is None or (match.group(2) or default_unit) not in units:
        reason = "fractional values are not supported" if re.fullmatch(r"-?[0-9]+\.[0-9]+[a-z]*", text) else f"expected {expected}"
        raise SettingsError(key, value, reason)
    return int(int(match.group(1)) * units[match.group(2) or default_unit])


def parse_bool(key: str, value: object) -> bool:
    """Spark's boolean parsing: ``true``/``false``, any case."""
    if isinstance(value, bool):
        return value
    text = str(value).strip().lower()
    if text not in ("true", "false"):
        raise SettingsError(key, value, "expected true or false")
    return text == "true"


class SparkConfLike(Protocol):
    """What is read from a ``pyspark.SparkConf``: ``getAll()`` pairs."""

    def getAll(self) -> list[tuple[str, str]]: ...


@dataclass(frozen=True, slots=True)
class ShuffleSettings:
    """Streaming shuffle configuration; field metadata holds the Spark key and parser."""

    checksum_enabled: bool = True
    network_buffer_size: int = 32 * 1024
    network_buffer_max_wait_time_ms: int = 50
    writer_max_memory: int = 32 * 1024 * 1024
    reader_max_memory: int = 32 * 1024 * 1024
    writer_connection_timeout_ms: int = 3_600_000

    def __post_init__(self) -> None:
        if self.network_buffer_size <= 0:
            raise SettingsError(key_of("network_buffer_size"), self.network_buffer_size, "must be > 0")
        if self.network_buffer_max_wait_time_ms <= 0:
            raise SettingsError(key_of("network_buffer_max_wait_time_ms"), self.network_buffer_max_wait_time_ms, "must be > 0")
        for name in ("writer_max_memory", "reader_max_memory"):
            if getattr(self, name) <= 0:
                raise SettingsError(key_of(name), getattr(self, name), "must be > 0")
        if self.writer_connection_timeout_ms < -1 or self.writer_connection_timeout_ms == 0:
            raise SettingsError(
                key_of("writer_connection_timeout_ms"), self.writer_connection_timeout_ms,
                "must be > 0, or -1 to wait forever",
            )

    @property
    def waits_forever_for_readers(self) -> bool:
        return self.writer_connection_timeout_ms == -1

    @classmethod
    def from_dict(cls, values: Mapping[str, object]) -> ShuffleSettings:
        """Build from Spark keys; keys outside ``spark.shuffle.streaming.*`` are ignored, unknown ones inside it are an error."""
        parsed: dict[str, Any] = {}
        for key, raw in values.items():
            if not key.startswith(PREFIX):
                continue
            if key not in _FIELD_BY_KEY:
                raise SettingsError(key, raw, f"unknown setting; known: {', '.join(sorted(_FIELD_BY_KEY))}")
            name, parse = _FIELD_BY_KEY[key]
            parsed[name] = parse(key, raw)
        return cls(**parsed)

    @classmethod
    def from_spark_conf(cls, conf: SparkConfLike) -> ShuffleSettings:
        return cls.from_dict(dict(conf.getAll()))

    def to_dict(self) -> dict[str, str]:
        """The settings as Spark keys and strings (what a SparkConf would hold)."""
        out = {}
        for f in fields(self):
            value = getattr(self, f.name)
            out[KEYS[f.name]] = str(value).lower() if isinstance(value, bool) else str(value)
        return out


KEYS: Final = {
    "checksum_enabled": PREFIX + "checksum.enabled",
    "network_buffer_size": PREFIX + "networkBufferSize",
    "network_buffer_max_wait_time_ms": PREFIX + "networkBufferMaxWaitTimeMs",
    "writer_max_memory": PREFIX + "writerMaxMemory",
    "reader_max_memory": PREFIX + "readerMaxMemory",
    "writer_connection_timeout_ms": PREFIX + "writerConnectionTimeout",
}
"""Field name -> Spark key."""

_PARSERS: Final[Mapping[str, Callable[[str, object], object]]] = {
    "checksum_enabled": parse_bool,
    "network_buffer_size": parse_bytes,
    "network_buffer_max_wait_time_ms": parse_time_ms,
    "writer_max_memory": parse_bytes,
    "reader_max_memory": parse_bytes,
    "writer_connection_timeout_ms": parse_time_ms,
}
_FIELD_BY_KEY: Final = {key: (name, _PARSERS[name]) for name, key in KEYS.items()}


def key_of(field_name: str) -> str:
    return KEYS[field_name]

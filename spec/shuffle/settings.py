"""The six ``spark.shuffle.streaming.*`` settings, parsed and validated exactly as Spark 4.3.0 does.

Read off ``org.apache.spark.internal.config.package$``: only ``writerConnectionTimeout`` is a time
(``1h``, ``30s``, ``-1``; a bare number is milliseconds); the sizes are plain ``int``/``long``
numbers, so ``32k`` is rejected as Spark rejects it. Errors carry Spark's conditions
``INVALID_CONF_VALUE.TYPE_MISMATCH`` and ``INVALID_CONF_VALUE.REQUIREMENT`` and Spark's wording.
The table :data:`SETTINGS` drives parsing, validation and the generated specification.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, fields
from enum import Enum
from typing import Callable, ClassVar, Final, Mapping, Protocol

from spec.errors import ProtocolError

PREFIX: Final = "spark.shuffle.streaming."


class SettingKind(Enum):
    """Spark's config builder for a key, with the type word its TYPE_MISMATCH message uses."""

    BOOLEAN = "boolean"
    INT = "int"
    LONG = "long"
    TIME_MS = "time in MILLISECONDS"


_INT_RANGE: Final = {SettingKind.INT: (-(2**31), 2**31 - 1), SettingKind.LONG: (-(2**63), 2**63 - 1),
                     SettingKind.TIME_MS: (-(2**63), 2**63 - 1)}
_JAVA_INTEGER: Final = re.compile(r"[+-]?[0-9]+")
_TIME_STRING: Final = re.compile(r"(-?[0-9]+)([a-z]+)?")
TIME_UNITS: Final = {"us": (1, 1000), "ms": (1, 1), "s": (1000, 1), "m": (60_000, 1),
                     "min": (60_000, 1), "h": (3_600_000, 1), "d": (86_400_000, 1)}
"""Spark's ``JavaUtils.timeSuffixes`` (matched in lower case), as (multiplier, divisor) to milliseconds; TimeUnit
truncates toward zero. Public: the conformance suite derives its time requests from it."""


class SettingsError(ProtocolError, ValueError):
    """A value Spark would refuse (its INVALID_CONF_VALUE); a ValueError too, as Python callers expect."""

    condition: ClassVar[str] = "INVALID_CONF_VALUE"

    def __init__(self, key: str, value: str, reason: str) -> None:
        super().__init__(f"The value '{value}' in the config \"{key}\" is invalid. {reason}",
                         key=key, value=value, reason=reason)
        self.key = key
        self.value = value
        self.reason = reason


class RequirementFailed(SettingsError):
    """The value has the right type but fails the setting's requirement (e.g. must be positive)."""

    condition = "INVALID_CONF_VALUE.REQUIREMENT"


class TypeMismatch(SettingsError):
    """The text is not a value of the setting's type (or lies outside the Java type's range)."""

    condition = "INVALID_CONF_VALUE.TYPE_MISMATCH"


@dataclass(frozen=True, slots=True)
class Setting:
    """One key: Spark's builder, default and requirement (``check`` returns True when valid)."""

    field: str
    key: str
    kind: SettingKind
    default: str
    meaning: str
    check: Callable[[int], bool] | None = None
    requirement: str = ""

    def parse(self, raw: object) -> int | bool:
        """The value as Spark's ``ConfigEntry`` converts it (strings are trimmed first)."""
        text = (str(raw).lower() if isinstance(raw, bool) else str(raw)).strip()
        if self.kind is SettingKind.BOOLEAN:
            if text.lower() not in ("true", "false"):
                raise self._type_mismatch(text)
            return text.lower() == "true"
        if self.kind is SettingKind.TIME_MS:
            value = _time_ms(text)
        else:
            value = int(text) if _JAVA_INTEGER.fullmatch(text) else None
        if value is None:
            raise self._type_mismatch(text)
        low, high = _INT_RANGE[self.kind]
        if not low <= value <= high:
            raise self._type_mismatch(text)
        return value

    def validate(self, value: int | bool) -> None:
        """Spark's ``checkValue`` on a converted value (and the Java range of the type)."""
        if self.kind is SettingKind.BOOLEAN:
            if not isinstance(value, bool):
                raise self._type_mismatch(str(value))
            return
        if isinstance(value, bool) or not isinstance(value, int):
            raise self._type_mismatch(str(value))
        low, high = _INT_RANGE[self.kind]
        if not low <= value <= high:
            raise self._type_mismatch(str(value))
        if self.check is not None and not self.check(value):
            shown = f"{value}ms" if self.kind is SettingKind.TIME_MS else str(value)
            raise RequirementFailed(self.key, shown, self.requirement)

    def _type_mismatch(self, text: str) -> TypeMismatch:
        return TypeMismatch(self.key, text, f"It should be a/an '{self.kind.value}' value.")


def _time_ms(text: str) -> int | None:
    """``JavaUtils.timeStringAs(text, MILLISECONDS)``; None where Spark throws."""
    match = _TIME_STRING.fullmatch(text.lower())
    if match is None or (match.group(2) or "ms") not in TIME_UNITS:
        return None
    number = int(match.group(1))
    if not -(2**63) <= number < 2**63:
        return None
    multiplier, divisor = TIME_UNITS[match.group(2) or "ms"]
    millis = abs(number) * multiplier // divisor
    return min(millis, 2**63 - 1) * (-1 if number < 0 else 1)


def _positive(value: int) -> bool:
    return value > 0


NETWORK_TIMEOUT_KEY: Final = "spark.network.timeout"
NETWORK_TIMEOUT_DEFAULT: Final = "120s"


def network_timeout_s(conf: Mapping[str, object]) -> float:
    """Spark's ``spark.network.timeout`` in seconds, read as Spark reads it (``timeConf(SECONDS)``: a bare
    number is seconds; default 120s): how long a connection may stay quiet before it is given up.
    Raises SettingsError for a value Spark would refuse or one that is not positive."""
    raw = str(conf.get(NETWORK_TIMEOUT_KEY, NETWORK_TIMEOUT_DEFAULT)).strip()
    millis = _time_ms(raw if not _JAVA_INTEGER.fullmatch(raw) else raw + "s")
    if millis is None:
        raise TypeMismatch(NETWORK_TIMEOUT_KEY, raw, "It should be a/an 'time' value.")
    if millis <= 0:
        raise RequirementFailed(NETWORK_TIMEOUT_KEY, raw, "The timeout must be positive.")
    return millis / 1000.0


SETTINGS: Final = (
    Setting("checksum_enabled", PREFIX + "checksum.enabled", SettingKind.BOOLEAN, "true",
            "CRC32C per DATA payload, verified by the reader; 0 is sent when disabled"),
    Setting("network_buffer_size", PREFIX + "networkBufferSize", SettingKind.INT, "32768",
            "bytes per reader buffer on the writer", _positive,
            "spark.shuffle.streaming.networkBufferSize must be positive."),
    Setting("network_buffer_max_wait_time_ms", PREFIX + "networkBufferMaxWaitTimeMs", SettingKind.LONG,
            "50", "max age in ms of a buffered record (not validated by Spark)"),
    Setting("writer_max_memory", PREFIX + "writerMaxMemory", SettingKind.INT, "33554432",
            "writer memory budget in bytes, TCP buffers included", _positive,
            "spark.shuffle.streaming.writerMaxMemory must be positive."),
    Setting("reader_max_memory", PREFIX + "readerMaxMemory", SettingKind.INT, "33554432",
            "reader budget in bytes, split evenly across writers (not validated by Spark)"),
    Setting("writer_connection_timeout_ms", PREFIX + "writerConnectionTimeout", SettingKind.TIME_MS, "1h",
            "how long a writer waits for a reader to connect; -1 waits forever",
            lambda v: v == -1 or v > 0,
            "The reader connection timeout must be positive or -1 to wait indefinitely."),
)
"""Every key, in Spark's declaration order."""

_BY_KEY: Final = {s.key: s for s in SETTINGS}
_BY_FIELD: Final = {s.field: s for s in SETTINGS}


class SparkConfLike(Protocol):
    """What is read from a ``pyspark.SparkConf``: ``getAll()`` pairs."""

    def getAll(self) -> list[tuple[str, str]]: ...


@dataclass(frozen=True, slots=True)
class ShuffleSettings:
    """Streaming shuffle configuration with Spark's defaults; validated on construction."""

    checksum_enabled: bool = True
    network_buffer_size: int = 32 * 1024
    network_buffer_max_wait_time_ms: int = 50
    writer_max_memory: int = 32 * 1024 * 1024
    reader_max_memory: int = 32 * 1024 * 1024
    writer_connection_timeout_ms: int = 3_600_000

    def __post_init__(self) -> None:
        for f in fields(self):
            _BY_FIELD[f.name].validate(getattr(self, f.name))

    @classmethod
    def from_dict(cls, values: Mapping[str, object]) -> ShuffleSettings:
        """Build from Spark keys; other keys are ignored, as a SparkConf ignores keys nobody reads."""
        parsed: dict[str, int | bool] = {
            _BY_KEY[key].field: _BY_KEY[key].parse(raw) for key, raw in values.items() if key in _BY_KEY
        }
        return cls(**parsed)  # type: ignore[arg-type]

    @classmethod
    def from_spark_conf(cls, conf: SparkConfLike) -> ShuffleSettings:
        return cls.from_dict(dict(conf.getAll()))

    def to_dict(self) -> dict[str, str]:
        """The settings as Spark keys and strings (what a SparkConf would hold)."""
        out = {}
        for s in SETTINGS:
            value = getattr(self, s.field)
            out[s.key] = str(value).lower() if isinstance(value, bool) else str(value)
        return out


def key_of(field_name: str) -> str:
    """The Spark key of a settings field."""
    return _BY_FIELD[field_name].key

"""Settings parse and validate exactly as Spark 4.3.0's config entries (read off its bytecode)."""

from __future__ import annotations

import pytest
from pyspark import SparkConf

from spec.shuffle.settings import PREFIX, SETTINGS, SettingsError, ShuffleSettings, key_of


def _one(key: str, value: object) -> ShuffleSettings:
    return ShuffleSettings.from_dict({PREFIX + key: value})


def test_defaults_are_sparks() -> None:
    assert ShuffleSettings().to_dict() == {
        PREFIX + "checksum.enabled": "true",
        PREFIX + "networkBufferSize": "32768",
        PREFIX + "networkBufferMaxWaitTimeMs": "50",
        PREFIX + "writerMaxMemory": "33554432",
        PREFIX + "readerMaxMemory": "33554432",
        PREFIX + "writerConnectionTimeout": "3600000",
    }
    assert {s.key: s.default for s in SETTINGS}[PREFIX + "writerConnectionTimeout"] == "1h"


@pytest.mark.parametrize(("text", "millis"), [
    ("1h", 3_600_000), ("5s", 5000), ("10m", 600_000), ("2min", 120_000), ("1d", 86_400_000), ("250", 250),
    ("250ms", 250), ("-1", -1), ("-1ms", -1), (" 30S ", 30_000), ("2000us", 2), (-1, -1),
])
def test_connection_timeout_accepts_spark_time_strings(text: object, millis: int) -> None:
    assert _one("writerConnectionTimeout", text).writer_connection_timeout_ms == millis


@pytest.mark.parametrize(("text", "condition", "shown"), [
    ("0", "INVALID_CONF_VALUE.REQUIREMENT", "0ms"),
    ("100us", "INVALID_CONF_VALUE.REQUIREMENT", "0ms"),
    ("-5", "INVALID_CONF_VALUE.REQUIREMENT", "-5ms"),
    ("1ns", "INVALID_CONF_VALUE.TYPE_MISMATCH", "1ns"),
    ("1.5", "INVALID_CONF_VALUE.TYPE_MISMATCH", "1.5"),
    ("forever", "INVALID_CONF_VALUE.TYPE_MISMATCH", "forever"),
])
def test_connection_timeout_rejections(text: str, condition: str, shown: str) -> None:
    with pytest.raises(SettingsError) as info:
        _one("writerConnectionTimeout", text)
    assert (info.value.condition, info.value.value, info.value.key) == (condition, shown, key_of("writer_connection_timeout_ms"))


def test_requirement_message_is_sparks() -> None:
    with pytest.raises(SettingsError) as info:
        _one("networkBufferSize", "0")
    assert str(info.value) == (
        "[INVALID_CONF_VALUE.REQUIREMENT] The value '0' in the config \"spark.shuffle.streaming.networkBufferSize\" "
        "is invalid. spark.shuffle.streaming.networkBufferSize must be positive.")


@pytest.mark.parametrize(("key", "text"), [
    ("networkBufferSize", "32k"), ("writerMaxMemory", "1g"), ("readerMaxMemory", "2147483648"),
    ("networkBufferMaxWaitTimeMs", "50ms"), ("networkBufferMaxWaitTimeMs", "9223372036854775808"),
    ("checksum.enabled", "1"), ("checksum.enabled", "yes"), ("networkBufferSize", True),
])
def test_sizes_are_plain_numbers_as_in_spark(key: str, text: object) -> None:
    with pytest.raises(SettingsError) as info:
        _one(key, text)
    assert info.value.condition == "INVALID_CONF_VALUE.TYPE_MISMATCH"
    assert "It should be a/an '" in str(info.value)


@pytest.mark.parametrize(("key", "text", "field", "value"), [
    ("networkBufferSize", " 100 ", "network_buffer_size", 100),
    ("networkBufferSize", "+7", "network_buffer_size", 7),
    ("networkBufferMaxWaitTimeMs", "-5", "network_buffer_max_wait_time_ms", -5),
    ("networkBufferMaxWaitTimeMs", "2147483648", "network_buffer_max_wait_time_ms", 2**31),
    ("readerMaxMemory", "0", "reader_max_memory", 0),
    ("checksum.enabled", "FALSE", "checksum_enabled", False),
    ("checksum.enabled", False, "checksum_enabled", False),
])
def test_values_spark_accepts(key: str, text: object, field: str, value: object) -> None:
    assert getattr(_one(key, text), field) == value


def test_writer_max_memory_must_be_positive() -> None:
    with pytest.raises(SettingsError, match="writerMaxMemory must be positive"):
        ShuffleSettings(writer_max_memory=0)


def test_other_keys_are_ignored_like_sparkconf_does() -> None:
    settings = ShuffleSettings.from_dict({"spark.app.name": "x", PREFIX + "notAKey": "1"})
    assert settings == ShuffleSettings()


def test_from_spark_conf_and_round_trip() -> None:
    conf = SparkConf(loadDefaults=False).set(PREFIX + "networkBufferSize", "4096").set(
        PREFIX + "writerConnectionTimeout", "30s").set(PREFIX + "checksum.enabled", "false")
    settings = ShuffleSettings.from_spark_conf(conf)
    assert (settings.network_buffer_size, settings.writer_connection_timeout_ms, settings.checksum_enabled) == (
        4096, 30_000, False)
    assert ShuffleSettings.from_dict(settings.to_dict()) == settings

"""The JDK for tests that run Spark's own classes: skipped with the reason when absent, failed under CI;
waiting for a Spark peer's event."""

from __future__ import annotations

import os

import pytest

from conformance.shuffle.jvm_bridge import Jdk, JdkNotFound, find_jdk
from conformance.shuffle.spark_jvm import Event, SparkPeer


def require_jdk() -> Jdk:
    try:
        return find_jdk()
    except JdkNotFound as exc:
        if os.environ.get("CI"):
            pytest.fail(f"CI has a JDK and must run the Spark checks: {exc}")
        pytest.skip(f"needs a JDK to run Spark's classes: {exc}")


def expect_event(peer: SparkPeer, name: str, timeout: float) -> Event:
    """The peer's first ``name`` event; fails with its events and stderr if an error or nothing comes first."""
    found = peer.events.wait_for(lambda e: e["event"] in (name, "error"), timeout)
    assert found is not None, f"no {name} event; events: {peer.events.snapshot()}\n{peer.stderr_tail()}"
    assert found["event"] == name, found
    return found

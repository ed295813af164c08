"""The JDK for tests that run Spark's own classes: skipped with the reason when absent, failed under CI."""

from __future__ import annotations

import os

import pytest

from conformance.jvm_bridge import Jdk, JdkNotFound, find_jdk


def require_jdk() -> Jdk:
    try:
        return find_jdk()
    except JdkNotFound as exc:
        if os.environ.get("CI"):
            pytest.fail(f"CI has a JDK and must run the Spark checks: {exc}")
        pytest.skip(f"needs a JDK to run Spark's classes: {exc}")

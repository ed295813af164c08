"""Hypothesis profiles: ``dev`` for quick local runs, ``ci`` (selected when CI is set) for CI."""

from __future__ import annotations

import os

from hypothesis import HealthCheck, settings

settings.register_profile("dev", max_examples=50, stateful_step_count=30, deadline=None)
settings.register_profile(
    "ci", max_examples=200, stateful_step_count=50, deadline=None, derandomize=True,
    suppress_health_check=[HealthCheck.too_slow],
)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE") or ("ci" if os.environ.get("CI") else "dev"))

"""One SparkSession per test module of the streaming shuffle: Spark start-up is the slow part.

Module scope, not session scope: a session-wide context stayed active after this directory's
tests, so a later module's ``getOrCreate`` (tests/sync) silently got this context, with this
configuration, and stopped it under this fixture; no module now sees another's context."""

from __future__ import annotations

from typing import Any, Iterator

import pytest
from spark_session import local_session


@pytest.fixture(scope="module")
def spark() -> Iterator[Any]:
    yield from local_session()

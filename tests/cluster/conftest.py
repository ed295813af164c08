"""Fixtures for the cluster tests: a loopback etcd in a temp dir, always stopped."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Iterator

import pytest

from reference.cluster.etcd_server import EtcdServer, etcd_binary


@pytest.fixture(scope="session")
def etcd_required() -> None:
    """Without `etcd` on PATH, etcd tests fail in CI and skip (saying why) locally."""
    if etcd_binary() is None:
        message = "etcd binary not on PATH (Debian package etcd-server; .ci/run installs it)"
        if os.environ.get("CI"):
            pytest.fail(message)
        pytest.skip(message)


@pytest.fixture(scope="session")
def etcd_server(etcd_required: None, tmp_path_factory: pytest.TempPathFactory) -> Iterator[EtcdServer]:
    """An etcd on loopback for the session, stopped at its end."""
    server = EtcdServer(Path(tmp_path_factory.mktemp("etcd")) / "data")
    server.start()
    try:
        yield server
    finally:
        server.stop()

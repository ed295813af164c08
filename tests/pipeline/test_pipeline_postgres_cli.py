"""The Postgres source's command line takes the cluster it runs on (--master, --provider) and a running sync
server (--sync), as the nemesis's Spark run needs: a standalone cluster, etcd and a server on other hosts."""

from __future__ import annotations

import pytest

import reference.pipeline.postgres as postgres
from reference.pipeline.__main__ import main


def test_master_provider_and_a_running_sync_server_reach_the_postgres_run(monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[postgres.CdcOptions] = []
    monkeypatch.setattr(postgres, "run", lambda options: seen.append(options) or 0)
    assert main(["--source", "postgresql://u@db:5432/d", "--publication", "p", "--slot", "s", "--store", "/tmp/x",
                 "--master", "spark://10.0.0.1:7077", "--provider", "etcd://10.0.0.2:2379/n",
                 "--sync", "grpc://10.0.0.3:7000"]) == 0
    assert (seen[0].master, seen[0].provider, seen[0].sync) == (
        "spark://10.0.0.1:7077", "etcd://10.0.0.2:2379/n", "grpc://10.0.0.3:7000")


def test_sync_without_a_source_is_refused(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_:
        main(["--sync", "grpc://10.0.0.3:7000"])
    assert exit_.value.code == 2
    assert "--sync go with --source" in capsys.readouterr().err

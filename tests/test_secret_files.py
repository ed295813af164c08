"""Every server fails closed on a secret file it cannot use (issue #38, item 3): run as a user
would, a blank, missing or unreadable secret file is refused in one line with exit 2 before the
server listens (the cluster service used to take a blank file as the empty secret, which every
HELLO without a secret matched, and printed a traceback for a missing one)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

SERVERS = {
    "cluster service": ["-m", "reference.cluster.service", "--secret-file"],
    "sync server": ["-m", "reference.sync", "serve", "--store", "{store}", "--token-file"],
    "shuffle conformance run": ["-m", "conformance", "run", "--suite", "shuffle", "--target", "reference", "--secret-file"],
}


def unusable_files(tmp_path: Path) -> dict[str, Path]:
    blank, spaces = tmp_path / "newline", tmp_path / "spaces"
    blank.write_text("\n")
    spaces.write_text(" \t\n \n")
    return {"newline only": blank, "whitespace only": spaces, "missing": tmp_path / "absent",
            "a directory": tmp_path}


@pytest.mark.parametrize("server", SERVERS)
def test_an_unusable_secret_file_is_refused_in_one_line(server: str, tmp_path: Path) -> None:
    for kind, secret_file in unusable_files(tmp_path).items():
        argv = [arg.format(store=tmp_path / "store") for arg in SERVERS[server]]
        done = subprocess.run([sys.executable, *argv, str(secret_file)], capture_output=True, text=True,
                              stdin=subprocess.DEVNULL, timeout=60)
        said = done.stderr.strip().splitlines()
        assert done.returncode == 2, (kind, done.returncode, done.stdout, done.stderr)
        assert len(said) == 1 and "Traceback" not in done.stderr, (kind, done.stderr)
        assert str(secret_file) in said[0] and ("secret" in said[0] or "cannot read" in said[0]), (kind, said)
        assert done.stdout == "", (kind, done.stdout)  # refused before it listened

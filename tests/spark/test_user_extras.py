"""Each install extra as a user gets it: every flow runs with only its extra importable, and every
entry point without its extra answers in one line naming the extra to install.

"Only its extra" is the environment ``pip install 'streamwire[X]'`` makes: the project's
dependencies and the extra's, with their own dependencies (read from the installed
distributions' metadata), and nothing else. Instead of installing wheels into a fresh venv (a
PySpark wheel alone takes longer than this whole file), each command runs with a
``sitecustomize`` that makes every other installed distribution's modules unimportable, in the
command's process and in every Python process it starts (the sync server re-execs itself).
"""

from __future__ import annotations

import importlib.metadata as metadata
import os
import subprocess
import sys
import tomllib
from functools import cache
from pathlib import Path

import pytest
from packaging.requirements import Requirement

from streamwire.extras import EXTRAS

REPO = Path(__file__).resolve().parents[2]
PROJECT = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
HANG_GUARD_S = 120.0
OWN_PACKAGES = frozenset({"spec", "reference", "conformance", "benchmarks", "streamwire"})

MASK = """
import sys
HIDDEN = frozenset({hidden!r})
class OnlyTheExtra:
    def find_spec(self, name, path=None, target=None):
        if name.partition(".")[0] in HIDDEN:
            raise ModuleNotFoundError(f"No module named {{name!r}}", name=name)
sys.meta_path.insert(0, OnlyTheExtra())
"""


def _name(requirement: str) -> str:
    return Requirement(requirement).name.lower().replace("_", "-")


def direct_requirements(extra: str | None) -> set[str]:
    """What ``pip install 'streamwire[extra]'`` asks for by name (extras of streamwire resolved)."""
    names = {_name(r) for r in PROJECT["dependencies"]}
    pending, seen = [extra] if extra else [], set()
    while pending:
        current = pending.pop()
        seen.add(current)
        for requirement in map(Requirement, PROJECT["optional-dependencies"][current]):
            if requirement.name == "streamwire":
                pending += [e for e in requirement.extras if e not in seen]
            else:
                names.add(_name(str(requirement)))
    return names


def installed_closure(names: set[str]) -> set[str]:
    """``names`` and every distribution they require (no extras of theirs), transitively."""
    closure, pending = set(), list(names)
    while pending:
        name = pending.pop()
        if name in closure:
            continue
        closure.add(name)
        try:
            requires = metadata.requires(name) or []
        except metadata.PackageNotFoundError:  # not installed here: nothing of it to hide either
            continue
        for text in requires:
            requirement = Requirement(text)
            if requirement.marker is None or requirement.marker.evaluate({"extra": ""}):
                pending.append(_name(text))
    return closure


@cache
def mask_dir(extra: str | None, tmp_root: Path) -> Path:
    """A directory whose ``sitecustomize`` hides every distribution ``streamwire[extra]`` does not bring."""
    kept = installed_closure(direct_requirements(extra))
    hidden = sorted(top for top, dists in metadata.packages_distributions().items()
                    if top not in OWN_PACKAGES and not {_name(d) for d in dists} & kept)
    directory = tmp_root / f"only-{extra or 'base'}"
    directory.mkdir(exist_ok=True)
    (directory / "sitecustomize.py").write_text(MASK.format(hidden=hidden))
    return directory


@pytest.fixture(scope="module")
def tmp_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("extras")


def only(extra: str | None, tmp_root: Path) -> dict[str, str]:
    """The environment of a Python that can import only ``streamwire[extra]`` (None: the bare install)."""
    return dict(os.environ, PYTHONPATH=f"{mask_dir(extra, tmp_root)}{os.pathsep}{REPO}", PYTHONNOUSERSITE="1")


def run(tmp_root: Path, extra: str | None, *argv: str) -> subprocess.CompletedProcess[str]:
    """``python ARGV`` with only ``streamwire[extra]`` importable."""
    return subprocess.run([sys.executable, *argv], cwd=tmp_root, env=only(extra, tmp_root), capture_output=True,
                          text=True, timeout=HANG_GUARD_S)


def test_the_table_of_extras_is_pyprojects() -> None:
    """streamwire/extras.py (what the entry points check) names what pyproject.toml installs."""
    for extra, modules in EXTRAS.items():
        assert direct_requirements(extra) - direct_requirements(None) == set(modules.values()), extra


def test_the_mask_hides_what_the_extra_does_not_bring(tmp_root: Path) -> None:
    done = run(tmp_root, "conformance", "-c", "import pyarrow, google.protobuf, crc32c\nimport pyspark")
    assert done.returncode == 1 and done.stderr.strip().endswith("No module named 'pyspark'"), done.stderr


WITHOUT_THEIR_EXTRA = [
    (("-m", "streamwire", "sync", "serve", "--store", "s"), "sync", "streamwire sync serve"),
    (("-m", "streamwire", "pipeline", "--changes", "10"), "pipeline", "streamwire pipeline"),
    (("-m", "streamwire", "conformance", "vectors", "--suite", "shuffle"), "conformance", "streamwire conformance"),
    (("-m", "conformance", "vectors", "--suite", "sync"), "conformance", "python -m conformance"),
    (("-m", "reference.sync", "serve", "--store", "s"), "sync", "python -m reference.sync"),
    (("-m", "reference.pipeline", "--changes", "10"), "pipeline", "python -m reference.pipeline"),
    (("-m", "reference.cdc", "--source", "postgresql://u@h:1/d", "--publication", "p", "--slot", "s",
      "--sync", "grpc://127.0.0.1:1"), "cdc", "python -m reference.cdc"),
]


@pytest.mark.parametrize(("installed", "argv", "extra", "prog"), [
    (installed, argv, extra, prog) for argv, extra, prog in WITHOUT_THEIR_EXTRA
    for installed in (None, "conformance", "spark", "sync")
    if not EXTRAS[extra].keys() <= EXTRAS.get(installed or "", {}).keys()  # [sync] brings all [conformance] needs
], ids=lambda value: " ".join(value) if isinstance(value, tuple) else str(value))
def test_an_entry_point_without_its_extra_names_it_in_one_line(
        tmp_root: Path, installed: str | None, argv: tuple[str, ...], extra: str, prog: str) -> None:
    done = run(tmp_root, installed, *argv)
    assert done.returncode == 2 and done.stdout == "", done.stderr
    [line] = done.stderr.splitlines()
    assert line.startswith(f"{prog}: needs the '{extra}' extra (") and line.endswith(
        f" not installed): pip install 'streamwire[{extra}]'"), line


def test_the_pyspark_api_without_its_extra_fails_at_import_naming_it(tmp_root: Path) -> None:
    done = run(tmp_root, "sync", "-c", "import reference.spark")
    assert done.returncode == 1
    assert done.stderr.strip().splitlines()[-1] == (
        "streamwire.extras.MissingExtra: reference.spark: needs the 'spark' extra (pyspark, pandas not installed): "
        "pip install 'streamwire[spark]'")


def test_the_conformance_extra_runs_vectors_and_runner_and_the_bare_install_the_codec(tmp_root: Path) -> None:
    done = run(tmp_root, "conformance", "-m", "streamwire", "conformance", "vectors", "--suite", "shuffle",
               "--target", "reference")
    assert done.returncode == 0 and "0 failed" in done.stdout, done.stdout + done.stderr
    done = run(tmp_root, "conformance", "-m", "streamwire", "conformance", "run", "--suite", "shuffle", "--target",
               "reference", "--case", "shuffle/handshake", "--jobs", "2")  # each case its own programs: two at once
    assert done.returncode == 0 and "FAIL=0" in done.stdout, done.stdout + done.stderr
    done = run(tmp_root, None, "-m", "streamwire", "codec", "decode", "--frame", "000000000000003209000000250000000100"
               "000000000000050000000300000007000000050000000053518fab0102030405")
    assert done.returncode == 0 and "DATA" in done.stdout, done.stderr


def test_the_sync_extra_serves(tmp_root: Path) -> None:
    for argv in (("-m", "streamwire", "sync", "serve"), ("-m", "reference.sync", "serve")):
        server = subprocess.Popen([sys.executable, *argv, "--store", str(tmp_root / "store"), "--port", "0"],
                                  cwd=tmp_root, env=only("sync", tmp_root), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        try:
            assert server.stdout is not None
            first = server.stdout.readline()
        finally:
            server.terminate()
            _, err = server.communicate(timeout=HANG_GUARD_S)
        assert first.startswith("LISTENING "), err
        assert "Traceback" not in err, err


PYSPARK_API = """
import reference.spark
from reference.spark import sync_datasource, streaming_repartition
from reference.spark.sync_sink import read_table
from reference.sync.store import DeltaStore
import reference.sync.dv_commit, reference.sync.row_index
print("ok")
"""


def test_the_spark_extra_imports_the_sink_and_read_table(tmp_root: Path) -> None:
    done = run(tmp_root, "spark", "-c", PYSPARK_API)
    assert done.returncode == 0 and done.stdout == "ok\n", done.stderr


def test_the_pipeline_extra_imports_the_job_and_its_report(tmp_root: Path) -> None:
    done = run(tmp_root, "pipeline", "-c", "import reference.pipeline.__main__, reference.pipeline.job\n"
               "import matplotlib.pyplot\nprint('ok')")
    assert done.returncode == 0 and done.stdout == "ok\n", done.stderr

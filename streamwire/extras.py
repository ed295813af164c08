"""The install extras of pyproject.toml and the one check every entry point makes of them.

Each entry point (a ``streamwire`` tool, a ``python -m reference.*`` main, ``import
reference.spark``) checks the third-party modules of its extra once, before importing any of
them, so a missing one is one line naming the extra to install instead of a traceback that
ends in ``No module named 'google'``. ``tests/spark/test_user_extras.py`` keeps this table and
pyproject.toml's extras the same, and runs each flow with only its extra importable.
"""

from __future__ import annotations

import importlib.util
import sys
from collections.abc import Callable
from typing import Final

from streamwire.cli import EXIT_SETUP

_FLIGHT: Final = {"pyarrow": "pyarrow", "google.protobuf": "protobuf"}
_DELTA: Final = {"deltalake": "deltalake", "numpy": "numpy", "pyroaring": "pyroaring"}
_SYNC: Final = {**_FLIGHT, "grpc": "grpcio", **_DELTA}
_SPARK: Final = {**_FLIGHT, **_DELTA, "pyspark": "pyspark", "pandas": "pandas"}
_CDC: Final = {**_SYNC, "psycopg": "psycopg", "psycopg_binary": "psycopg-binary"}

EXTRAS: Final[dict[str, dict[str, str]]] = {
    "conformance": _FLIGHT,
    "sync": _SYNC,
    "spark": _SPARK,
    "cdc": _CDC,
    "pipeline": {**_CDC, **_SPARK, "matplotlib": "matplotlib"},
}
"""Extra -> {module its flows import: the distribution that brings it}.

``conformance``: the codec, vectors and runner, a Flight client to a sync server under test.
``sync``: the sync server (gRPC) and client and the Delta store (deletion vectors: pyroaring).
``spark``: the PySpark API, whose sink is a sync client and whose ``read_table`` reads the store.
``cdc``: the Postgres change source, a sync client that reads Postgres through libpq (psycopg's wheel).
``pipeline``: the main job, which also runs a sync server, plots (``--report``) and reads Postgres."""


class MissingExtra(ImportError):
    """An entry point's extra is not (wholly) installed; the message says which one to install."""


def missing(extra: str) -> list[str]:
    """The distributions of ``extra`` whose module cannot be imported here."""

    def absent(module: str) -> bool:
        try:
            return importlib.util.find_spec(module) is None
        except (ImportError, ValueError):  # a parent package missing, or a module without a spec
            return True

    return [dist for module, dist in EXTRAS[extra].items() if absent(module)]


def problem(extra: str, what: str) -> str | None:
    """``what: needs the 'X' extra (... not installed): pip install 'streamwire[X]'``, or None."""
    absent = missing(extra)
    if not absent:
        return None
    return (f"{what}: needs the '{extra}' extra ({', '.join(absent)} not installed): "
            f"pip install 'streamwire[{extra}]'")


def require(extra: str, what: str) -> None:
    """For a library import: raise :class:`MissingExtra` naming the extra when it is not installed."""
    text = problem(extra, what)
    if text is not None:
        raise MissingExtra(text)


def exit_without(extra: str, prog: str) -> None:
    """For a ``python -m`` main, before its imports: one line on stderr and exit 2 without ``extra``."""
    text = problem(extra, prog)
    if text is not None:
        print(text, file=sys.stderr)
        raise SystemExit(EXIT_SETUP)


def run_with(extra: str, prog: str, command: Callable[[], int]) -> int:
    """Run a command line that needs ``extra``: without it, one line naming it and exit 2."""
    text = problem(extra, prog)
    if text is not None:
        print(text, file=sys.stderr)
        return EXIT_SETUP
    return command()


"""``streamwire``: the project's tools behind one command (the console script of pyproject.toml).

  streamwire conformance run|vectors|codec|sync-trace ...   conformance suites, vectors and tools
  streamwire codec encode|decode ...                        the shuffle codec (hex <-> JSON)
  streamwire monitor -i lo | -r FILE ...                    watch streaming-shuffle traffic, judged by the spec
  streamwire sync serve ...                                 a data-sync Arrow Flight server
  streamwire pipeline ...                                   the CDC pipeline, checked against its oracle

Each tool's module is imported only when it runs, so ``pip install streamwire[conformance]``
(no PySpark, no Delta) runs ``conformance`` and ``codec``; a tool whose extra is not installed
says which in one line (streamwire/extras.py). Bad arguments or a setup that cannot run exit 2
with one line on stderr; a closed stdout (``| head``) ends a tool quietly.
"""

from __future__ import annotations

import argparse
import sys
from typing import Callable, Final

from conformance.__main__ import COMMANDS as CONFORMANCE_COMMANDS
from streamwire.cli import HelpFormatter, dispatch, guarded, run_command
from streamwire.extras import run_with


def _conformance(argv: list[str]) -> int:
    def conformance() -> int:
        from conformance.__main__ import __doc__ as doc

        return dispatch("streamwire conformance", doc, CONFORMANCE_COMMANDS, argv)

    return run_with("conformance", "streamwire conformance", conformance)


def _conformance_tool(name: str) -> tuple[Callable[[list[str]], int], str]:
    """A conformance command also offered at the top level, from its one entry in conformance's table."""
    module, help_text = CONFORMANCE_COMMANDS[name]
    return (lambda argv: run_command(f"streamwire {name}", module, argv)), help_text


def _sync(argv: list[str]) -> int:
    def serve() -> int:
        from reference.sync.__main__ import main

        return main(argv)

    return run_with("sync", "streamwire sync serve", lambda: guarded("streamwire sync", serve))


def _pipeline(argv: list[str]) -> int:
    def pipeline() -> int:
        from reference.pipeline.__main__ import main

        return main(argv)

    return run_with("pipeline", "streamwire pipeline", lambda: guarded("streamwire pipeline", pipeline))


TOOLS: Final[dict[str, tuple[Callable[[list[str]], int], str]]] = {
    "conformance": (_conformance, "conformance suites, golden vectors, codec and sync-trace tools"),
    "codec": _conformance_tool("codec"),
    "monitor": _conformance_tool("monitor"),
    "sync": (_sync, "the data-sync server: 'streamwire sync serve --store DIR'"),
    "pipeline": (_pipeline, "run the CDC pipeline once (exit 0 only if the table matches)"),
}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="streamwire", description=__doc__, formatter_class=HelpFormatter)
    names = parser.add_subparsers(dest="tool", required=True, metavar="TOOL")
    for name, (_, help_text) in TOOLS.items():
        names.add_parser(name, help=help_text, add_help=False)
    known, rest = parser.parse_known_args(sys.argv[1:] if argv is None else argv)
    tool, _ = TOOLS[known.tool]
    return tool(rest)


if __name__ == "__main__":
    sys.exit(main())

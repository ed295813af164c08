"""Lazy subcommand dispatch: a command's module is imported only when that command runs.

Each command module exposes ``add_arguments(parser)`` and ``main(args) -> int``; importing only
the chosen one keeps start-up fast and keeps one protocol's dependencies out of another's tools.
"""

from __future__ import annotations

import argparse
import importlib
from typing import Mapping


def dispatch(prog: str, description: str | None, commands: Mapping[str, tuple[str, str]],
             argv: list[str] | None) -> int:
    """Parse ``argv`` as ``COMMAND [options]`` and run the command's ``main``."""
    parser = argparse.ArgumentParser(prog=prog, description=description)
    names = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name, (_, help_text) in commands.items():
        names.add_parser(name, help=help_text, add_help=False)
    known, rest = parser.parse_known_args(argv)
    module_name, _ = commands[known.command]
    module = importlib.import_module(module_name)
    command_parser = argparse.ArgumentParser(
        prog=f"{prog} {known.command}", description=module.__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    module.add_arguments(command_parser)
    code: int = module.main(command_parser.parse_args(rest))
    return code

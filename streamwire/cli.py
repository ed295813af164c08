"""What every command line of the project shares: lazy subcommand dispatch, ``--help`` showing
defaults, option types that refuse bad values in one line (counts, seconds, fractions, ports), and
one line on stderr with exit 2 instead of a traceback.

A command's module is imported only when that command runs. Each command module exposes
``add_arguments(parser)`` and ``main(args) -> int``; importing only the chosen one keeps start-up
fast and keeps one protocol's dependencies out of another's tools.
"""

from __future__ import annotations

import argparse
import importlib
import math
import os
import sys
from pathlib import Path
from typing import Callable, Mapping, NoReturn

from spec.shared_secret import EmptySecret, required_secret

EXIT_SETUP: int = 2
"""Bad arguments or a setup that cannot run (argparse's own code for bad arguments)."""


class SetupRefused(ValueError):
    """A setting a program refuses to start with, said in one line (its caller exits 2)."""


def read_secret(path: str | os.PathLike[str], option: str) -> str:
    """The shared secret held in the file ``path`` (surrounding whitespace removed), failing closed.

    A missing, unreadable or blank file raises SetupRefused naming ``option``: an empty secret is
    matched by every peer that sends none, so taking it would turn authentication off (the rule of
    ``spec.shared_secret``, which every other way of giving a secret follows too). The one
    reader of secret files for every server (the cluster service, the sync server, the shuffle's
    conformance runs), so each refuses the same files in the same words.
    """
    try:
        secret = Path(path).read_text(encoding="utf-8").strip()
    except (OSError, UnicodeDecodeError) as unreadable:
        reason = unreadable.strerror if isinstance(unreadable, OSError) and unreadable.strerror else unreadable
        raise SetupRefused(f"{option}: cannot read {path}: {reason}") from None
    try:
        return required_secret(secret, f"{option}: {path}")
    except EmptySecret as blank:
        raise SetupRefused(blank.message) from None


class OneLineParser(argparse.ArgumentParser):
    """Usage errors in one line (``PROG: error: ...``) and exit 2, never argparse's usage block."""

    def error(self, message: str) -> NoReturn:
        self.exit(EXIT_SETUP, f"{self.prog}: error: {message}\n")


def count_at_least(minimum: int) -> Callable[[str], int]:
    """An option's type: an integer of at least ``minimum``."""
    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not an integer") from None
        if value < minimum:
            raise argparse.ArgumentTypeError(f"{value} is below {minimum}")
        return value
    return parse


def seconds(positive: bool) -> Callable[[str], float]:
    """An option's type: a finite number of seconds, above 0 (``positive``) or at least 0."""
    def parse(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not a number of seconds") from None
        if not math.isfinite(value) or value < 0 or (positive and value == 0):
            raise argparse.ArgumentTypeError(f"{text} is not a {'positive' if positive else 'non-negative'} "
                                             "number of seconds")
        return value
    return parse


def fraction(text: str) -> float:
    """An option's type: a number above 0 and at most 1."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if not 0 < value <= 1:
        raise argparse.ArgumentTypeError(f"{text} is not a fraction above 0 and at most 1")
    return value


MAX_PORT = 65535


def port(text: str) -> int:
    """An option's type: a TCP port, 0 (pick a free one) to 65535."""
    value = count_at_least(0)(text)
    if value > MAX_PORT:
        raise argparse.ArgumentTypeError(f"{value} is above {MAX_PORT}")
    return value


class HelpFormatter(argparse.RawDescriptionHelpFormatter, argparse.ArgumentDefaultsHelpFormatter):
    """Descriptions as written, and every option's default in ``--help`` (unless it has none)."""

    def add_argument(self, action: argparse.Action) -> None:
        if action.help is None and self._shows_default(action):
            action.help = "default: %(default)s"
        super().add_argument(action)

    def _get_help_string(self, action: argparse.Action) -> str | None:
        if not self._shows_default(action) or "%(default)" in (action.help or ""):
            return action.help
        return super()._get_help_string(action)

    @staticmethod
    def _shows_default(action: argparse.Action) -> bool:
        return action.default not in (None, False, argparse.SUPPRESS) and bool(action.option_strings)


def guarded(prog: str, command: Callable[[], int]) -> int:
    """Run a command line's body the way a shell user expects: an error that escapes it is one
    line on stderr and exit 2 (never a traceback); a closed stdout (``| head``) ends it quietly."""
    try:
        return command()
    except BrokenPipeError:
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # no second error at exit
        return 0
    except KeyboardInterrupt:
        return 130
    except Exception as error:  # noqa: BLE001 - the command line's last word, said in one line
        print(f"{prog}: {one_line(error)}", file=sys.stderr)
        return EXIT_SETUP


def one_line(error: BaseException, *, typed: bool = True, whole: bool = False) -> str:
    """An error as one line for a terminal or a log: the one home of this rule for every tool.

    ``Type: first line of the message`` by default (a Java exception's later lines are its stack trace,
    a gRPC status's its details); ``whole`` keeps every line, whitespace runs as one space (PostgreSQL's
    DETAIL and HINT, a target's start-up output); ``typed=False`` leaves the type out where the text
    already says what failed (an empty message is then the type's name).
    """
    text = str(error).strip()
    said = " ".join(text.split()) if whole else (text.splitlines() or [""])[0]
    if not typed:
        return said or type(error).__name__
    return f"{type(error).__name__}: {said}" if said else type(error).__name__


def dispatch(prog: str, description: str | None, commands: Mapping[str, tuple[str, str]],
             argv: list[str] | None) -> int:
    """Parse ``argv`` as ``COMMAND [options]`` and run the command's ``main``."""
    parser = argparse.ArgumentParser(prog=prog, description=description, formatter_class=HelpFormatter)
    names = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name, (_, help_text) in commands.items():
        names.add_parser(name, help=help_text, add_help=False)
    known, rest = parser.parse_known_args(argv)
    module_name, _ = commands[known.command]
    return run_command(f"{prog} {known.command}", module_name, rest)


def run_command(prog: str, module_name: str, argv: list[str]) -> int:
    """Import one command's module, parse ``argv`` with its arguments and run its ``main``, guarded."""
    module = importlib.import_module(module_name)
    parser = argparse.ArgumentParser(prog=prog, description=module.__doc__, formatter_class=HelpFormatter)
    module.add_arguments(parser)
    args = parser.parse_args(argv)
    return guarded(prog, lambda: int(module.main(args)))

"""The ``dpacct`` command line: epsilon, delta and noise calibration for DP-SGD runs.

Examples::

    dpacct epsilon --sigma 1.1 --q 0.0042667 --steps 10000 --delta 1e-5
    dpacct epsilon --sigma 1.1 --epochs 60 --batch-size 256 --dataset-size 60000 --delta 1e-5 --json
    dpacct delta --sigma 1.1 --q 0.0042667 --steps 10000 --epsilon 2
    dpacct sigma --epsilon 3 --delta 1e-5 --q 0.0042667 --steps 10000
    dpacct compare --sigma 0.4 --q 0.0001 --steps 10000 --delta 1e-6

Every subcommand that takes a run accepts ``--q/--steps`` (``--steps`` is the total
number of steps) or ``--epochs/--batch-size/--dataset-size [--drop-last]``. Errors are
one line naming the flag as typed (a JSON object with ``--json``), exit status 2.

Adding a subcommand: write ``dpacct/cli/NAME.py`` exposing ``COMMANDS``, a tuple of
:class:`dpacct.cli._base.Command`, and add the module to :data:`COMMAND_MODULES`.
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import sys
from collections.abc import Sequence

from dpacct.cli._base import CLIError, Command, Notes, emit_notes, flag_translator, print_json, print_table
from dpacct.cli.accounting import default_accountant

__all__ = ["COMMAND_MODULES", "default_accountant", "main"]

#: Modules providing subcommands, in the order ``dpacct --help`` lists them.
COMMAND_MODULES: tuple[str, ...] = (
    "dpacct.cli.accounting",
    "dpacct.cli.schedule",
    "dpacct.cli.compare",
    "dpacct.cli.tradeoff",
)


def _commands() -> dict[str, Command]:
    commands: dict[str, Command] = {}
    for module in COMMAND_MODULES:
        for command in importlib.import_module(module).COMMANDS:
            if command.name in commands:
                msg = f"subcommand {command.name!r} is defined twice ({module})"
                raise RuntimeError(msg)
            commands[command.name] = command
    return commands


def _version() -> str:
    from dpacct import __version__

    return f"dpacct {__version__}"


def _parser(commands: dict[str, Command]) -> tuple[argparse.ArgumentParser, dict[str, argparse.ArgumentParser]]:
    parser = argparse.ArgumentParser(prog="dpacct", description="Privacy accounting for DP-SGD.")
    parser.add_argument("--version", action="version", version=_version())
    sub = parser.add_subparsers(dest="command", required=True)
    parsers = {}
    for name, command in commands.items():
        p = sub.add_parser(name, help=command.help, description=command.help)
        command.add_arguments(p)
        parsers[name] = p
    return parser, parsers


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``dpacct`` command; returns the exit status."""
    arguments = list(sys.argv[1:] if argv is None else argv)
    commands = _commands()
    parser, parsers = _parser(commands)
    args = parser.parse_args(arguments)
    command = commands[args.command]
    as_json = bool(getattr(args, "json", False))
    notes = Notes()
    try:
        report = command.run(args, notes)
    except (ValueError, TypeError) as error:
        translate = flag_translator(parsers[args.command], arguments, command.aliases)
        message = str(error) if isinstance(error, CLIError) else translate(str(error))
        message = " ".join(message.split())  # one line, whatever the library wrote
        emit_notes(notes)
        print(f"dpacct: error: {message}", file=sys.stderr)
        if as_json:
            print(json.dumps({"command": args.command, "error": message}))
        return 2
    emit_notes(notes)
    if notes.warnings:
        report["warnings"] = notes.warnings
    if notes.notes:
        report["notes"] = notes.notes
    try:
        if as_json:
            print_json(report)
        else:
            (command.print_table or print_table)(report)
    except BrokenPipeError:  # `dpacct ... | head`: the reader left; not an error of ours
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # no second error at exit
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""``dpacct tradeoff``: the f-DP trade-off curve and membership-inference risk (see :mod:`dpacct.fdp`)."""

from __future__ import annotations

import argparse
from typing import Any

from dpacct.cli._base import Command, Notes
from dpacct.fdp import cli as fdp_cli

__all__ = ["COMMANDS"]


def _run(args: argparse.Namespace, notes: Notes) -> dict[str, Any]:
    return fdp_cli.report(args)


COMMANDS = (Command("tradeoff", fdp_cli.HELP, fdp_cli.add_arguments, _run, fdp_cli.print_report),)

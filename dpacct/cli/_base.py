"""What every subcommand shares: the run flags, errors in the user's own words, notes, output.

A subcommand is a :class:`Command`: a name, a help line, a function adding its flags, a
function computing a report (a plain dict), and optionally a table printer. A module
listed in :data:`dpacct.cli.COMMAND_MODULES` exposes its commands as ``COMMANDS``.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import warnings
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from dpacct.results import json_safe
from dpacct.run import Run

__all__ = [
    "CLIError",
    "Command",
    "Notes",
    "add_run_arguments",
    "flag_translator",
    "print_table",
    "run_from_args",
]


class CLIError(ValueError):
    """A user-facing error whose message already names the flags as typed."""


@dataclass(frozen=True)
class Command:
    """One ``dpacct`` subcommand."""

    name: str
    help: str
    add_arguments: Callable[[argparse.ArgumentParser], None]
    run: Callable[[argparse.Namespace, Notes], dict[str, Any]]
    print_table: Callable[[dict[str, Any]], None] | None = None
    # Python parameter names (in library messages) -> argparse dest, where they differ.
    aliases: dict[str, str] = field(default_factory=dict)


@dataclass
class Notes:
    """One-line notes and warnings collected while computing, printed on stderr and put in ``--json``."""

    notes: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)

    def note(self, text: str) -> None:
        if text not in self.notes:
            self.notes.append(text)

    def warn(self, text: str) -> None:
        if text not in self.warnings:
            self.warnings.append(text)

    @contextmanager
    def capture(self) -> Iterator[None]:
        """Turn library warnings into clean one-line notes (no file paths, no Python-only advice)."""
        from dpacct.api import PoissonAssumptionWarning
        from dpacct.rdp import OrderGridWarning

        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            yield
        for w in caught:
            if issubclass(w.category, OrderGridWarning):
                self.note("the optimal RDP order is at the edge of the order grid: the bound is valid, "
                          "a wider grid might give a smaller one")
            elif issubclass(w.category, PoissonAssumptionWarning):
                self.warn(str(w.message).replace("assume_poisson=True", "--assume-poisson")
                          .replace("assume_poisson=False", "no --assume-poisson"))
            else:
                self.note(str(w.message).splitlines()[0])


def add_run_arguments(parser: argparse.ArgumentParser) -> None:
    """``--q/--steps`` or ``--epochs/--batch-size/--dataset-size [--drop-last]``: one meaning everywhere."""
    group = parser.add_argument_group("the run (give --q and --steps, or --epochs, --batch-size and --dataset-size)")
    group.add_argument("--sampling-probability", "--q", dest="sampling_probability", type=float,
                       help="q = batch size / dataset size (Poisson rate, or batch fraction)")
    group.add_argument("--steps", type=float, help="total number of noisy steps T")
    group.add_argument("--epochs", type=float, help="passes over the data E")
    group.add_argument("--batch-size", dest="batch_size", type=int, help="(expected) batch size b")
    group.add_argument("--dataset-size", dest="dataset_size", type=int, help="dataset size n")
    group.add_argument("--drop-last", dest="drop_last", action="store_true",
                       help="with --epochs: each epoch drops a short last batch (shuffle/deterministic)")


def run_from_args(args: argparse.Namespace) -> Run:
    """The run from the flags, with errors naming the flags."""
    by_epochs = {"--epochs": args.epochs, "--batch-size": args.batch_size, "--dataset-size": args.dataset_size}
    by_steps = {"--q": args.sampling_probability, "--steps": args.steps}
    if any(v is not None for v in by_epochs.values()):
        if any(v is not None for v in by_steps.values()):
            msg = "give either --q and --steps, or --epochs, --batch-size and --dataset-size, not both"
            raise CLIError(msg)
        missing = [flag for flag, v in by_epochs.items() if v is None]
        if missing:
            msg = f"--epochs, --batch-size and --dataset-size must be given together; missing {', '.join(missing)}"
            raise CLIError(msg)
        return Run.from_epochs(epochs=args.epochs, batch_size=args.batch_size, dataset_size=args.dataset_size,
                               drop_last=args.drop_last)
    missing = [flag for flag, v in by_steps.items() if v is None]
    if missing:
        msg = f"give --q and --steps, or --epochs, --batch-size and --dataset-size; missing {', '.join(missing)}"
        raise CLIError(msg)
    if args.drop_last:
        msg = "--drop-last applies only with --epochs, --batch-size and --dataset-size"
        raise CLIError(msg)
    return Run(sampling_probability=args.sampling_probability, steps=args.steps)


# Library messages name Python parameters; these followers mark a parameter name (not prose).
_FOLLOWERS = r"(?= must| is required| does not apply| applies only|=| \(the unknown\)|,? got )"


def flag_translator(parser: argparse.ArgumentParser, argv: Sequence[str],
                    aliases: dict[str, str]) -> Callable[[str], str]:
    """A function rewriting a library message so that parameters read as the flags the user typed."""
    typed = {token.split("=", 1)[0] for token in argv if token.startswith("--")}
    by_dest: dict[str, str] = {}
    for action in parser._actions:  # argparse has no public accessor for its actions
        longs = [o for o in action.option_strings if o.startswith("--")]
        if not longs or action.dest in ("help", "version"):
            continue
        chosen = next((o for o in longs if o in typed), longs[0])
        by_dest[action.dest] = chosen
    names = {dest: flag for dest, flag in by_dest.items()}
    for python_name, dest in aliases.items():
        if dest in by_dest:
            names[python_name] = by_dest[dest]
    ordered = sorted(names, key=len, reverse=True)
    pattern = re.compile(r"(?<![\w-])(" + "|".join(re.escape(n) for n in ordered) + r")\b" + _FOLLOWERS) \
        if ordered else None

    def translate(message: str) -> str:
        if pattern is None:
            return message
        return pattern.sub(lambda m: names[m.group(1)], message)

    return translate


def format_value(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:.6g}"
    if isinstance(value, dict):
        return ", ".join(f"{k}={format_value(v)}" for k, v in value.items())
    return str(value)


_LABELS = {
    "command": "quantity",
    "noise_multiplier": "noise multiplier (sigma)",
    "sampling_probability": "sampling probability (q)",
    "steps": "steps (T)",
    "participations": "participations per record",
    "order": "optimal RDP order",
    "conversion": "RDP conversion",
    "target_epsilon": "target epsilon",
    "evaluations": "accountant evaluations",
    "epsilon_lower_bound": "epsilon lower bound",
    "delta_lower_bound": "delta lower bound",
    "lower_bound_method": "lower bound from",
    "accounted_as": "accounted as sampler",
    "kind_detail": "kind, in words",
}


def print_table(report: dict[str, Any]) -> None:
    """Two columns: a readable label and the value (nested results and notes are left to --json)."""
    rows = {k: v for k, v in report.items() if k not in ("results", "notes", "warnings") and not isinstance(v, list)}
    width = max(len(_LABELS.get(k, k.replace("_", " "))) for k in rows)
    for key, value in rows.items():
        print(f"{_LABELS.get(key, key.replace('_', ' ')):<{width}}  {format_value(value)}")


def print_json(report: dict[str, Any]) -> None:
    """One strict JSON object (an unbounded epsilon is the string "inf", never the non-standard Infinity)."""
    print(json.dumps(json_safe(report), allow_nan=False))


def emit_notes(notes: Notes) -> None:
    for text in notes.warnings:
        print(f"dpacct: warning: {text}", file=sys.stderr)
    for text in notes.notes:
        print(f"dpacct: note: {text}", file=sys.stderr)

"""The ``dpacct`` command line: epsilon, delta and noise calibration for DP-SGD runs.

Examples::

    dpacct epsilon --sigma 1.1 --q 0.0042667 --steps 10000 --delta 1e-5
    dpacct epsilon --sigma 1.1 --epochs 60 --batch-size 256 --dataset-size 60000 --delta 1e-5 --json
    dpacct delta --sigma 1.1 --q 0.0042667 --steps 10000 --epsilon 2
    dpacct sigma --epsilon 3 --delta 1e-5 --q 0.0042667 --steps 10000
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from collections.abc import Sequence
from typing import Any

from dpacct import _check
from dpacct.accountant import available_accountants
from dpacct.api import SAMPLERS, build_accountant
from dpacct.calibration import calibrate

__all__ = ["default_accountant", "main"]

_PREFERENCE = ("pld", "rdp")  # tightest certified accountant first


def default_accountant() -> str:
    """The tightest certified accountant available: PLD when present, else RDP."""
    available = available_accountants()
    return next(name for name in _PREFERENCE if name in available)


def _add_run_arguments(parser: argparse.ArgumentParser, *, with_sigma: bool) -> None:
    if with_sigma:
        parser.add_argument("--noise-multiplier", "--sigma", dest="noise_multiplier", type=float, required=True,
                            help="noise standard deviation / clipping norm (sigma)")
    parser.add_argument("--sampling-probability", "--q", dest="sampling_probability", type=float,
                        help="Poisson sampling rate q = batch size / dataset size")
    parser.add_argument("--steps", type=float, help="number of noisy steps T")
    parser.add_argument("--epochs", type=float, help="epochs E (with --batch-size and --dataset-size)")
    parser.add_argument("--batch-size", type=int, help="expected batch size b")
    parser.add_argument("--dataset-size", type=int, help="dataset size n")
    parser.add_argument("--accountant", default=None,
                        help=f"accounting method: {', '.join(available_accountants())} (default: tightest available)")
    parser.add_argument("--sampler", default="poisson", help=f"batch sampler: {', '.join(SAMPLERS)}")
    parser.add_argument("--json", action="store_true", help="print one JSON object instead of a table")


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="dpacct", description="Privacy accounting for DP-SGD.")
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("epsilon", help="epsilon (upper bound) of a run for a given delta")
    _add_run_arguments(p, with_sigma=True)
    p.add_argument("--delta", type=float, required=True, help="target delta in (0, 1)")
    p = sub.add_parser("delta", help="delta (upper bound) of a run for a given epsilon")
    _add_run_arguments(p, with_sigma=True)
    p.add_argument("--epsilon", type=float, required=True, help="target epsilon >= 0")
    p = sub.add_parser("sigma", help="smallest noise multiplier meeting an (epsilon, delta) budget")
    _add_run_arguments(p, with_sigma=False)
    p.add_argument("--epsilon", type=float, required=True, help="target epsilon > 0")
    p.add_argument("--delta", type=float, required=True, help="target delta in (0, 1)")
    return parser


def _sampling(args: argparse.Namespace) -> tuple[float, int, dict[str, Any]]:
    """q and T from either --q/--steps or --epochs/--batch-size/--dataset-size."""
    via_epochs = [args.epochs, args.batch_size, args.dataset_size]
    if any(v is not None for v in via_epochs):
        if any(v is None for v in via_epochs):
            msg = "--epochs, --batch-size and --dataset-size must be given together"
            raise ValueError(msg)
        if args.sampling_probability is not None or args.steps is not None:
            msg = "give either --q/--steps or --epochs/--batch-size/--dataset-size, not both"
            raise ValueError(msg)
        epochs = _check.positive("epochs", args.epochs)
        batch = _check.count("batch_size", args.batch_size)
        size = _check.count("dataset_size", args.dataset_size)
        if not 1 <= batch <= size:
            msg = f"batch_size must be in [1, dataset_size={size}], got {batch}"
            raise ValueError(msg)
        q = batch / size
        # Round the number of steps up: more steps can only increase epsilon.
        steps = math.ceil(epochs * size / batch - 1e-9)
        return q, steps, {"epochs": epochs, "batch_size": batch, "dataset_size": size}
    if args.sampling_probability is None or args.steps is None:
        msg = "give --q and --steps, or --epochs, --batch-size and --dataset-size"
        raise ValueError(msg)
    return args.sampling_probability, _check.count("steps", args.steps), {}


_LABELS = {
    "command": "quantity",
    "noise_multiplier": "noise multiplier (sigma)",
    "sampling_probability": "sampling probability (q)",
    "steps": "steps (T)",
    "epochs": "epochs",
    "batch_size": "batch size",
    "dataset_size": "dataset size",
    "sampler": "sampler",
    "accountant": "accountant",
    "delta": "delta",
    "epsilon": "epsilon",
    "kind": "kind",
    "order": "optimal RDP order",
    "conversion": "RDP conversion",
    "target_epsilon": "target epsilon",
    "evaluations": "accountant evaluations",
}


def _print(report: dict[str, Any], as_json: bool) -> None:
    if as_json:
        print(json.dumps(report))
        return
    width = max(len(_LABELS.get(k, k)) for k in report)
    for key, value in report.items():
        text = f"{value:.6g}" if isinstance(value, float) else str(value)
        print(f"{_LABELS.get(key, key):<{width}}  {text}")


def _run(args: argparse.Namespace) -> dict[str, Any]:
    accountant = args.accountant if args.accountant is not None else default_accountant()
    q, steps, extra = _sampling(args)
    report: dict[str, Any] = {"command": args.command}
    if args.command == "sigma":
        result = calibrate(
            epsilon=args.epsilon, delta=args.delta, sampling_probability=q, steps=steps,
            accountant=accountant, sampler=args.sampler,
        )
        report.update(noise_multiplier=result.noise_multiplier, sampling_probability=q, steps=steps, **extra)
        report.update(sampler=args.sampler, accountant=accountant, delta=result.delta,
                      target_epsilon=result.target_epsilon, epsilon=result.epsilon,
                      kind="upper bound (achieved, <= target)", evaluations=result.evaluations)
        return report
    acct = build_accountant(
        noise_multiplier=args.noise_multiplier, sampling_probability=q, steps=steps,
        accountant=accountant, sampler=args.sampler,
    )
    report.update(noise_multiplier=_check.noise_multiplier(args.noise_multiplier), sampling_probability=q,
                  steps=steps, **extra)
    report.update(sampler=args.sampler, accountant=accountant)
    if args.command == "epsilon":
        report["delta"] = _check.delta(args.delta)
        report.update(acct.get_epsilon_details(report["delta"]))
    else:
        report["epsilon"] = _check.epsilon(args.epsilon)
        report["delta"] = float(acct.get_delta(report["epsilon"]))
        report["kind"] = "upper bound"
    return report


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``dpacct`` command; returns the exit status."""
    args = _parser().parse_args(argv)
    try:
        report = _run(args)
    except (ValueError, TypeError) as error:
        print(f"dpacct: error: {error}", file=sys.stderr)
        return 2
    _print(report, args.json)
    return 0


if __name__ == "__main__":
    sys.exit(main())

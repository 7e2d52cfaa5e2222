"""``dpacct schedule``: noise per epoch and the epochs a zCDP budget affords (Yu et al. 2019, Section IV-A)."""

from __future__ import annotations

import argparse
from typing import Any

from dpacct import _check
from dpacct.cli._base import CLIError, Command, Notes, format_value
from dpacct.schedules import SCHEDULES, ValidationBased, allocate_budget, make_schedule, solve_decay

__all__ = ["COMMANDS"]

_CHOICES = (*SCHEDULES, "validation")
_DEFAULT_MAX_EPOCHS = 100_000


def _add(p: argparse.ArgumentParser) -> None:
    p.add_argument("--budget-rho", dest="budget_rho", type=float, required=True, help="zCDP budget rho > 0")
    p.add_argument("--sigma0", type=float, required=True, help="noise multiplier of epoch 0 (uniform: of every epoch)")
    p.add_argument("--schedule", required=True, choices=_CHOICES, help="schedule family")
    p.add_argument("--decay", type=float, help="decay rate k (time, exponential, step, polynomial, validation)")
    p.add_argument("--target-epochs", dest="target_epochs", type=int,
                   help="solve for the decay rate that gives this many epochs (instead of --decay)")
    p.add_argument("--period", type=int, help="epochs per step (step), decay length (polynomial), "
                                              "or checks between comparisons (validation)")
    p.add_argument("--sigma-end", dest="sigma_end", type=float, help="final noise multiplier (polynomial)")
    p.add_argument("--accuracies", help="validation: comma-separated validation accuracies measured after each "
                                        "epoch so far (the schedule then covers those epochs and the next)")
    p.add_argument("--window", type=int, default=1, help="validation: checks averaged (default 1)")
    p.add_argument("--threshold", type=float, default=0.0,
                   help="validation: decay when the averaged accuracy improved by at most this (default 0)")
    p.add_argument("--max-epochs", dest="max_epochs", type=int, default=_DEFAULT_MAX_EPOCHS,
                   help=f"stop after this many epochs (default {_DEFAULT_MAX_EPOCHS}); the report says when it "
                        "stopped the allocation before the budget ran out")
    p.add_argument("--json", action="store_true", help="print one JSON object instead of a table")


def _accuracies(text: str | None) -> list[float]:
    if text is None:
        msg = "--accuracies is required for --schedule validation (comma-separated accuracies, one per epoch)"
        raise CLIError(msg)
    try:
        return [float(x) for x in text.split(",") if x.strip()]
    except ValueError:
        msg = f"--accuracies must be comma-separated numbers, got {text!r}"
        raise CLIError(msg) from None


def _run(args: argparse.Namespace, notes: Notes) -> dict[str, Any]:
    if args.decay is not None and args.target_epochs is not None:
        msg = "give either --decay or --target-epochs, not both"
        raise CLIError(msg)
    _check.positive("budget_rho", args.budget_rho)
    _check.positive("sigma0", args.sigma0)
    limit = _check.count("max_epochs", args.max_epochs)
    options = {"period": args.period, "final_noise_multiplier": args.sigma_end}
    decay = args.decay
    if args.schedule == "validation":
        if args.target_epochs is not None or args.sigma_end is not None:
            msg = "--target-epochs and --sigma-end do not apply to --schedule validation"
            raise CLIError(msg)
        if decay is None:
            msg = "--decay is required for --schedule validation"
            raise CLIError(msg)
        schedule = ValidationBased(initial_noise_multiplier=args.sigma0, decay=decay,
                                   period=1 if args.period is None else args.period, window=args.window,
                                   threshold=args.threshold)
        sigmas = schedule.noise_multipliers(_accuracies(args.accuracies))
        allocation = allocate_budget(sigmas.tolist(), rho_total=args.budget_rho, max_epochs=limit)
        if not allocation.budget_exhausted and allocation.epochs == sigmas.size:
            notes.note(f"the budget covers all {sigmas.size} epochs known so far (the measured ones and the next); "
                       "rerun with more --accuracies as training goes on")
    elif args.accuracies is not None:
        msg = f"--accuracies applies only to --schedule validation, got --schedule {args.schedule}"
        raise CLIError(msg)
    elif args.target_epochs is not None:
        if args.schedule == "uniform":
            msg = "--target-epochs needs a decaying schedule; the uniform schedule has no decay rate"
            raise CLIError(msg)
        solution = solve_decay(args.schedule, initial_noise_multiplier=args.sigma0, rho_total=args.budget_rho,
                               target_epochs=args.target_epochs, max_epochs=limit, **options)
        allocation, decay = solution.allocation, solution.decay
    else:
        schedule_obj = make_schedule(args.schedule, initial_noise_multiplier=args.sigma0, decay=args.decay, **options)
        allocation = allocate_budget(schedule_obj, rho_total=args.budget_rho, max_epochs=limit)
    if args.schedule != "validation" and not allocation.budget_exhausted:
        notes.note(f"stopped at --max-epochs {limit} with budget left (rho used "
                   f"{float(allocation.cumulative_rho[-1]) if allocation.epochs else 0.0:.6g} of {args.budget_rho:g}); "
                   "raise --max-epochs to allocate further")
    report: dict[str, Any] = {"command": "schedule", "schedule": args.schedule, "sigma0": float(args.sigma0)}
    report.update({k: v for k, v in (("decay", decay), ("period", args.period), ("sigma_end", args.sigma_end))
                   if v is not None})
    if args.target_epochs is not None:
        report["decay_solved_for"] = f"target_epochs = {args.target_epochs}"
    report.update(budget_rho=allocation.rho_total, epochs=allocation.epochs,
                  rho_used=float(allocation.cumulative_rho[-1]) if allocation.epochs else 0.0,
                  budget_exhausted=allocation.budget_exhausted,
                  stopped_by="budget" if allocation.budget_exhausted else
                  ("known epochs" if args.schedule == "validation" else "max_epochs"),
                  kind="zCDP, random-reshuffling accounting: epoch t costs 1/(2 sigma_t^2)")
    report["per_epoch"] = [
        {"epoch": t, "noise_multiplier": float(sigma), "cumulative_rho": float(total)}
        for t, (sigma, total) in enumerate(zip(allocation.noise_multipliers, allocation.cumulative_rho))
    ]
    return report


def _print(report: dict[str, Any]) -> None:
    summary = {k: v for k, v in report.items() if k not in ("per_epoch", "notes", "warnings")}
    width = max(len(k) for k in summary)
    for key, value in summary.items():
        print(f"{key:<{width}}  {format_value(value)}")
    print()
    print(f"{'epoch':>6}  {'sigma':>12}  {'cumulative rho':>14}")
    for row in report["per_epoch"]:
        print(f"{row['epoch']:>6}  {row['noise_multiplier']:>12.6g}  {row['cumulative_rho']:>14.6g}")


COMMANDS = (
    Command("schedule", "noise schedule per epoch and the epochs a zCDP budget affords", _add, _run, _print,
            aliases={"rho_total": "budget_rho", "initial_noise_multiplier": "sigma0",
                     "final_noise_multiplier": "sigma_end"}),
)

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
import os
import sys
import warnings
from collections.abc import Sequence
from typing import Any

from dpacct import _check, gaussian, zcdp
from dpacct.accountant import available_accountants
from dpacct.api import SAMPLERS, PoissonAssumptionWarning, build_accountant, participations
from dpacct.calibration import calibrate
from dpacct.fdp import cli as fdp_cli
from dpacct.schedules import SCHEDULES, allocate_budget, make_schedule, solve_decay

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
    parser.add_argument("--assume-poisson", dest="assume_poisson", action="store_true",
                        help="with --sampler shuffle: report the Poisson number anyway (NOT a guarantee for "
                             "shuffled batches; prints a warning)")
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
    _add_schedule_parser(sub)
    _add_compare_parser(sub)
    fdp_cli.add_parser(sub)  # f-DP subcommand, owned by dpacct/fdp/cli.py
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
    "warning": "WARNING",
    "assumed_sampler": "accounted as sampler",
    "shuffle_epsilon_upper_bound": "shuffle epsilon upper bound",
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
    "epsilon_lower_bound": "epsilon lower bound",
    "lower_bound_method": "lower bound from",
}


def _print(report: dict[str, Any], as_json: bool) -> None:
    if as_json:
        print(json.dumps(report))
        return
    if "per_epoch" in report:
        _print_schedule(report)
        return
    if report.get("command") == "compare":
        _print_compare(report)
        return
    width = max(len(_LABELS.get(k, k)) for k in report)
    for key, value in report.items():
        text = f"{value:.6g}" if isinstance(value, float) else str(value)
        print(f"{_LABELS.get(key, key):<{width}}  {text}")


def _run(args: argparse.Namespace) -> dict[str, Any]:
    if args.command == "schedule":
        return _run_schedule(args)
    if args.command == "compare":
        return _run_compare(args)
    accountant = args.accountant if args.accountant is not None else default_accountant()
    q, steps, extra = _sampling(args)
    if accountant == "zcdp" and args.command != "sigma":
        return _run_zcdp(args, q, steps, extra)
    report: dict[str, Any] = {"command": args.command}
    if args.command == "sigma":
        if args.assume_poisson:
            msg = "--assume-poisson is not available for sigma: calibrate a shuffled run with --sampler shuffle"
            raise ValueError(msg)
        result = calibrate(
            epsilon=args.epsilon, delta=args.delta, sampling_probability=q, steps=steps,
            accountant=accountant, sampler=args.sampler,
        )
        report.update(noise_multiplier=result.noise_multiplier, sampling_probability=q, steps=steps, **extra)
        report.update(sampler=args.sampler, accountant=accountant, delta=result.delta,
                      target_epsilon=result.target_epsilon, epsilon=result.epsilon,
                      kind="upper bound (achieved, <= target)", evaluations=result.evaluations)
        return report
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", PoissonAssumptionWarning)
        acct = build_accountant(
            noise_multiplier=args.noise_multiplier, sampling_probability=q, steps=steps,
            accountant=accountant, sampler=args.sampler, assume_poisson=args.assume_poisson,
        )
    report.update(noise_multiplier=_check.noise_multiplier(args.noise_multiplier), sampling_probability=q,
                  steps=steps, **extra)
    report.update(sampler=args.sampler, accountant=accountant)
    for warning in caught:  # the opt-in Poisson number for a shuffled run: say so, loudly
        print(f"dpacct: warning: {warning.message}", file=sys.stderr)
        report["warning"] = str(warning.message)
        report["assumed_sampler"] = "poisson"
    if args.command == "epsilon":
        report["delta"] = _check.delta(args.delta)
        report.update(acct.get_epsilon_details(report["delta"]))
        if args.sampler == "shuffle":
            details = _shuffle_details(args, q, steps, accountant, report["delta"])
            if caught:  # keep the opted-in Poisson number, and show the honest interval beside it
                report["shuffle_epsilon_upper_bound"] = details.pop("epsilon")
                details.pop("kind")
            report.update(details)
    else:
        report["epsilon"] = _check.epsilon(args.epsilon)
        report["delta"] = float(acct.get_delta(report["epsilon"]))
        report["kind"] = "upper bound"
    if caught:
        report["kind"] = "Poisson-sampling upper bound, NOT a guarantee for shuffled batches (--assume-poisson)"
    return report


def _add_schedule_parser(sub: Any) -> None:
    """The ``schedule`` subcommand: sigma per epoch and the epochs a zCDP budget affords."""
    p = sub.add_parser("schedule", help="noise schedule per epoch and the epochs a zCDP budget affords")
    p.add_argument("--budget-rho", dest="budget_rho", type=float, required=True, help="zCDP budget rho > 0")
    p.add_argument("--sigma0", type=float, required=True, help="noise multiplier of epoch 0 (uniform: of every epoch)")
    p.add_argument("--schedule", required=True, choices=SCHEDULES, help="schedule family")
    p.add_argument("--decay", type=float, help="decay rate k (time, exponential, step, polynomial)")
    p.add_argument("--target-epochs", dest="target_epochs", type=int,
                   help="solve for the decay rate that gives this many epochs (instead of --decay)")
    p.add_argument("--period", type=int, help="epochs per step (step) or decay length (polynomial)")
    p.add_argument("--sigma-end", dest="sigma_end", type=float, help="final noise multiplier (polynomial)")
    p.add_argument("--max-epochs", dest="max_epochs", type=int, default=100_000, help="stop after this many epochs")
    p.add_argument("--json", action="store_true", help="print one JSON object instead of a table")


def _run_schedule(args: argparse.Namespace) -> dict[str, Any]:
    if args.decay is not None and args.target_epochs is not None:
        msg = "give either --decay or --target-epochs, not both"
        raise ValueError(msg)
    _check.positive("budget_rho", args.budget_rho)
    _check.positive("sigma0", args.sigma0)
    options = {"period": args.period, "final_noise_multiplier": args.sigma_end}
    if args.target_epochs is not None:
        if args.schedule == "uniform":
            msg = "target_epochs needs a decaying schedule; the uniform schedule has no decay rate"
            raise ValueError(msg)
        solution = solve_decay(args.schedule, initial_noise_multiplier=args.sigma0, rho_total=args.budget_rho,
                               target_epochs=args.target_epochs, max_epochs=args.max_epochs, **options)
        schedule, allocation, decay = solution.schedule, solution.allocation, solution.decay
    else:
        schedule = make_schedule(args.schedule, initial_noise_multiplier=args.sigma0, decay=args.decay, **options)
        allocation = allocate_budget(schedule, rho_total=args.budget_rho, max_epochs=args.max_epochs)
        decay = args.decay
    report: dict[str, Any] = {"command": "schedule", "schedule": args.schedule, "sigma0": float(args.sigma0)}
    report.update({k: v for k, v in (("decay", decay), ("period", args.period), ("sigma_end", args.sigma_end))
                   if v is not None})
    if args.target_epochs is not None:
        report["decay_solved_for"] = f"target_epochs = {args.target_epochs}"
    report.update(budget_rho=allocation.rho_total, epochs=allocation.epochs,
                  rho_used=float(allocation.cumulative_rho[-1]) if allocation.epochs else 0.0,
                  budget_exhausted=allocation.budget_exhausted,
                  kind="zCDP, random-reshuffling accounting: epoch t costs 1/(2 sigma_t^2)")
    report["per_epoch"] = [
        {"epoch": t, "noise_multiplier": float(sigma), "cumulative_rho": float(total)}
        for t, (sigma, total) in enumerate(zip(allocation.noise_multipliers, allocation.cumulative_rho))
    ]
    return report


def _print_schedule(report: dict[str, Any]) -> None:
    summary = {k: v for k, v in report.items() if k != "per_epoch"}
    width = max(len(k) for k in summary)
    for key, value in summary.items():
        text = f"{value:.6g}" if isinstance(value, float) else str(value)
        print(f"{key:<{width}}  {text}")
    print()
    print(f"{'epoch':>6}  {'sigma':>12}  {'cumulative rho':>14}")
    for row in report["per_epoch"]:
        print(f"{row['epoch']:>6}  {row['noise_multiplier']:>12.6g}  {row['cumulative_rho']:>14.6g}")


_ZCDP_SAMPLERS = ("poisson", "shuffle", "deterministic")


def _run_zcdp(args: argparse.Namespace, q: float, steps: int, extra: dict[str, Any]) -> dict[str, Any]:
    """``--accountant zcdp``: the heuristic for Poisson sampling, random reshuffling for shuffled batches."""
    sampler = _check.one_of("sampler", args.sampler, _ZCDP_SAMPLERS)
    sigma = _check.noise_multiplier(args.noise_multiplier)
    q = _check.probability("sampling_probability", q)
    report: dict[str, Any] = {"command": args.command, "noise_multiplier": sigma, "sampling_probability": q,
                              "steps": steps, **extra, "sampler": sampler, "accountant": "zcdp"}
    if sampler == "poisson":
        if args.command != "epsilon":
            msg = ("the zcdp accountant has only a heuristic epsilon for --sampler poisson; "
                   "use `dpacct epsilon`, or --accountant rdp/pld for a certified delta")
            raise ValueError(msg)
        result = zcdp.random_sampling_epsilon_heuristic(noise_multiplier=sigma, sampling_probability=q, steps=steps,
                                                        delta=_check.delta(args.delta))
        report.update(delta=float(args.delta), epsilon=result.epsilon, kind=result.kind, rho=result.rho,
                      order=result.order, max_order=result.max_order)
        return report
    if extra:  # exact integer arithmetic when the batch and dataset sizes are known
        epochs = -(-steps * extra["batch_size"] // extra["dataset_size"])
    else:  # the same count as the one-call API's shuffle/deterministic accounting
        epochs = participations(sampling_probability=q, steps=steps)
    report["epochs"] = epochs
    if args.command == "epsilon":
        r = zcdp.shuffled_epochs_epsilon(noise_multiplier=sigma, epochs=epochs, delta=_check.delta(args.delta))
        report.update(delta=r.delta, rho=r.rho, epsilon=r.zcdp_epsilon, kind=r.zcdp_kind,
                      effective_noise_multiplier=r.effective_noise_multiplier,
                      gaussian_epsilon=r.gaussian_epsilon, gaussian_kind=r.gaussian_kind, tight=r.tight)
        return report
    eps = _check.epsilon(args.epsilon)
    rho = zcdp.random_reshuffling_rho([sigma] * epochs)
    report.update(epsilon=eps, rho=rho, delta=float(zcdp.rho_to_delta(rho=rho, epsilon=eps)), kind=zcdp.ZCDP_KIND)
    if epochs:
        sigma_eff = sigma / math.sqrt(epochs)
        report.update(effective_noise_multiplier=sigma_eff,
                      gaussian_delta=float(gaussian.delta_for_epsilon(noise_multiplier=sigma_eff, epsilon=eps)),
                      gaussian_kind=zcdp.GAUSSIAN_KIND, tight="gaussian_delta")
    return report


# -- samplers: `dpacct compare` and `dpacct epsilon --sampler shuffle` ---------------------------


def _shuffle_details(args: argparse.Namespace, q: float, steps: int, accountant: str, delta: float) -> dict[str, Any]:
    """The honest interval for a shuffled run: certified upper bound and the shuffle lower bound."""
    from dpacct.api import shuffle_epsilon_details

    return shuffle_epsilon_details(noise_multiplier=args.noise_multiplier, sampling_probability=q, steps=steps,
                                   delta=delta, accountant=accountant)


def _add_compare_parser(sub: Any) -> None:
    """The ``compare`` subcommand: every batch sampler's guarantee side by side (ABLQ, zero-out)."""
    p = sub.add_parser("compare", help="deterministic, Poisson and shuffled batches side by side (Chua et al. 2024)")
    p.add_argument("--noise-multiplier", "--sigma", dest="noise_multiplier", type=float, required=True,
                   help="noise standard deviation / clipping norm (sigma)")
    p.add_argument("--steps", type=float, required=True, help="batches per epoch T (Poisson rate q = 1/T)")
    p.add_argument("--epochs", type=float, default=1, help="epochs E (default 1)")
    target = p.add_mutually_exclusive_group(required=True)
    target.add_argument("--delta", type=float, help="compare epsilons at this delta")
    target.add_argument("--epsilon", type=float, help="compare deltas at this epsilon")
    p.add_argument("--permutation", choices=("fresh", "same"), default="fresh",
                   help="several epochs of shuffled batches: a new permutation each epoch (default) or one reused")
    p.add_argument("--json", action="store_true", help="print one JSON object instead of a table")
    p.add_argument("--plot", metavar="FILE.png",
                   help="also draw epsilon vs sigma (with --delta) or delta vs epsilon (with --epsilon) "
                        "for the three samplers (needs matplotlib)")
    p.add_argument("--points", type=int, default=12, help="points in the --plot sweep (default 12)")


def _run_compare(args: argparse.Namespace) -> dict[str, Any]:
    from dpacct.ablq import compare_samplers

    steps = _check.count("steps", args.steps)
    epochs = _check.count("epochs", args.epochs)
    result = compare_samplers(noise_multiplier=args.noise_multiplier, steps=steps, epochs=epochs,
                              delta=args.delta, epsilon=args.epsilon, permutation=args.permutation)
    report: dict[str, Any] = {"command": "compare", **result.as_dict()}
    if args.plot is not None:
        report["plot"] = _plot_compare(args, steps, epochs)
    return report


def _print_compare(report: dict[str, Any]) -> None:
    quantity = report["quantity"]
    fixed = "delta" if quantity == "epsilon" else "epsilon"
    print(f"ABLQ, {report['adjacency']} adjacency: sigma = {report['noise_multiplier']:.6g}, "
          f"T = {report['steps']} batches per epoch, E = {report['epochs']} epoch(s), {fixed} = {report[fixed]:.6g}")
    print(f"{'sampler':<14} {'kind':<12} {quantity:>12}  method")
    for row in report["rows"]:
        print(f"{row['sampler']:<14} {row['kind']:<12} {row[quantity]:>12.6g}  {row['method']}")
    print("shuffled batches: the truth lies between the shuffle lower and upper bounds; "
          "the Poisson numbers are not a guarantee for them.")
    if "plot" in report:
        print(f"plot written to {report['plot']}")


def _progress(total: int, label: str) -> Any:
    """A progress callback on stderr: tqdm when installed, else a plain counter."""
    try:
        from tqdm import tqdm
    except ImportError:
        state = {"done": 0}

        def tick() -> None:
            state["done"] += 1
            print(f"\r{label}: {state['done']}/{total}", end="\n" if state["done"] == total else "",
                  file=sys.stderr, flush=True)

        return tick
    bar = tqdm(total=total, desc=label, file=sys.stderr)

    def tick_tqdm() -> None:
        bar.update(1)
        if bar.n >= total:
            bar.close()

    return tick_tqdm


def _plot_compare(args: argparse.Namespace, steps: int, epochs: int) -> str:
    """Sweep sigma (or epsilon) and draw the three samplers like Figures 1/3 of Chua et al. 2024."""
    from dpacct.ablq import plot_samplers, sweep_samplers

    points = _check.count("points", args.points)
    if points < 2:
        msg = f"points must be an integer >= 2, got {points}"
        raise ValueError(msg)
    sigma = _check.noise_multiplier(args.noise_multiplier)
    if args.delta is not None:
        grid = [sigma * 2.0 ** (2.0 * i / (points - 1) - 1.0) for i in range(points)]  # sigma/2 .. 2 sigma
        sweep = sweep_samplers(noise_multipliers=grid, steps=steps, epochs=epochs, delta=args.delta,
                               progress=_progress(points, "compare sweep"))
    else:
        top = max(2.0 * _check.epsilon(args.epsilon), 1.0)
        grid = [top * i / (points - 1) for i in range(points)]
        sweep = sweep_samplers(noise_multipliers=[sigma], steps=steps, epochs=epochs, epsilons=grid,
                               progress=_progress(points, "compare sweep"))
    try:
        plot_samplers(sweep, args.plot)
    except ImportError as error:
        raise ValueError(str(error)) from error  # one-line error, exit status 2
    return str(args.plot)


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``dpacct`` command; returns the exit status."""
    args = _parser().parse_args(argv)
    if args.command == "tradeoff":
        return fdp_cli.run(args)
    try:
        report = _run(args)
    except (ValueError, TypeError) as error:
        print(f"dpacct: error: {error}", file=sys.stderr)
        return 2
    try:
        _print(report, args.json)
    except BrokenPipeError:  # `dpacct ... | head`: the reader left; not an error of ours
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # no second error at exit
    return 0


if __name__ == "__main__":
    sys.exit(main())

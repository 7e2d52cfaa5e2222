"""``dpacct compare``: every batch sampler's guarantee for the user's run, side by side (Chua et al. 2024 and after)."""

from __future__ import annotations

import argparse
import importlib.util
import sys
from typing import Any

from dpacct import _check
from dpacct.cli._base import CLIError, Command, Notes, add_run_arguments, run_from_args
from dpacct.run import Run

__all__ = ["COMMANDS"]


def _add(p: argparse.ArgumentParser) -> None:
    p.add_argument("--noise-multiplier", "--sigma", dest="noise_multiplier", type=float, required=True,
                   help="noise standard deviation / clipping norm (sigma)")
    add_run_arguments(p)
    target = p.add_mutually_exclusive_group(required=True)
    target.add_argument("--delta", type=float, help="compare epsilons at this delta")
    target.add_argument("--epsilon", type=float, help="compare deltas at this epsilon")
    p.add_argument("--permutation", choices=("fresh", "same"), default="fresh",
                   help="several epochs of shuffled batches: a new permutation each epoch (default) or one reused")
    p.add_argument("--max-batch-size", dest="max_batch_size", type=int, default=None,
                   help="also truncated Poisson: Poisson batches cut to at most this many records "
                        "(needs --epochs, --batch-size and --dataset-size)")
    p.add_argument("--estimates", action="store_true",
                   help="also the Monte-Carlo estimates of balls-in-bins and random allocation (labelled estimate: "
                        "NOT a bound; slow), where the certified interval is wider than 1 %%")
    p.add_argument("--json", action="store_true", help="print one JSON object instead of a table")
    p.add_argument("--plot", metavar="FILE.png",
                   help="also draw epsilon vs sigma (with --delta) or delta vs epsilon (with --epsilon) "
                        "for the three samplers (needs matplotlib)")
    p.add_argument("--points", type=int, default=12, help="points in the --plot sweep (default 12)")


def _keywords(run: Run) -> dict[str, Any]:
    if run.by_epochs:
        return {"epochs": run.epochs, "batch_size": run.batch_size, "dataset_size": run.dataset_size,
                "drop_last": run.drop_last}
    return {"sampling_probability": run.sampling_probability, "steps": run.total_steps}


def _run(args: argparse.Namespace, notes: Notes) -> dict[str, Any]:
    from dpacct.samplers.run_comparison import compare_run

    sigma = _check.noise_multiplier(args.noise_multiplier)
    if args.plot is not None:  # check the dependency and the sweep before computing anything
        if importlib.util.find_spec("matplotlib") is None:
            msg = "--plot needs matplotlib: pip install 'dpacct[plot]'"
            raise CLIError(msg)
        points = _check.count("points", args.points)
        if points < 2:
            msg = f"--points must be an integer >= 2, got {points}"
            raise CLIError(msg)
    try:
        run = run_from_args(args)
    except CLIError as error:
        if args.steps is not None and args.sampling_probability is None and args.epochs is None:
            msg = (f"{error}. --steps is the total number of steps, as in every subcommand; the former "
                   "`compare --steps T` (batches per epoch) is now `--q 1/T --steps T*E`")
            raise CLIError(msg) from None
        raise
    if run.steps("shuffle") < 1:
        msg = "--steps must be an integer >= 1 for compare, got 0"
        raise CLIError(msg)
    if args.max_batch_size is not None:
        _check.count("--max-batch-size", args.max_batch_size, minimum=1)
        if not run.by_epochs:
            msg = "--max-batch-size (truncated Poisson) needs --epochs, --batch-size and --dataset-size"
            raise CLIError(msg)
    with notes.capture():
        result = compare_run(noise_multiplier=sigma, delta=args.delta, epsilon=args.epsilon,
                             permutation=args.permutation, max_batch_size=args.max_batch_size,
                             estimates=args.estimates, **_keywords(run))
    report: dict[str, Any] = {"command": "compare", **result.as_dict()}
    if args.plot is not None:
        report["plot"] = _plot(args, sigma, run)
    return report


def _print(report: dict[str, Any]) -> None:
    quantity = report["quantity"]
    fixed = "delta" if quantity == "epsilon" else "epsilon"
    steps = report["steps_by_sampler"]
    print(f"zero-out adjacency: sigma = {report['noise_multiplier']:.6g}, {fixed} = {report[fixed]:.6g}; "
          f"Poisson: {steps['poisson']} steps; shuffle/deterministic: {steps['shuffle']} steps, "
          f"{report['participations']} participation(s) per record")
    width = max(14, *(len(row["sampler"]) for row in report["rows"]))
    print(f"{'sampler':<{width}} {'kind':<12} {quantity:>12}  method")
    for row in report["rows"]:
        print(f"{row['sampler']:<{width}} {row['kind']:<12} {row['value']:>12.6g}  {row['method']}")
    print("each sampler's truth lies between its lower and upper bounds; the Poisson numbers are not a "
          "guarantee for the other samplers.")
    best = report["best_certified"]
    print(f"best certified guarantee for this run: {best['sampler']} ({quantity} <= {best['value']:.6g})")
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


def _plot(args: argparse.Namespace, sigma: float, run: Run) -> str:
    """Sweep sigma (or epsilon) for the run and draw the three samplers like Figures 1/3 of Chua et al. 2024."""
    import numpy as np

    from dpacct.samplers import SamplerSweep, plot_samplers
    from dpacct.samplers.run_comparison import compare_run

    points = int(args.points)
    tick = _progress(points, "compare sweep")
    if args.delta is not None:
        xs = [sigma * 2.0 ** (2.0 * i / (points - 1) - 1.0) for i in range(points)]  # sigma/2 .. 2 sigma
        compared = []
        for x in xs:
            compared.append(compare_run(noise_multiplier=x, delta=args.delta, max_batch_size=args.max_batch_size,
                                        **_keywords(run)))
            tick()
        x_name, at, quantity = "noise_multiplier", float(args.delta), "epsilon"
    else:
        top = max(2.0 * _check.epsilon(args.epsilon), 1.0)
        xs = [top * i / (points - 1) for i in range(points)]
        compared = []
        for x in xs:
            compared.append(compare_run(noise_multiplier=sigma, epsilon=x, max_batch_size=args.max_batch_size,
                                        **_keywords(run)))
            tick()
        x_name, at, quantity = "epsilon", sigma, "delta"

    def column(i: int) -> Any:
        return np.array([float(c.rows[i][1]) for c in compared], dtype=np.float64)

    # Further samplers (rows 6 on): per sampler its tightest certified upper bound (the smallest)
    # and its best lower bound (the largest) at every point.
    def series(c: Any) -> dict[tuple[str, str], float]:
        out: dict[tuple[str, str], float] = {}
        for name, v in c.rows[6:]:
            if v.kind in ("upper bound", "lower bound"):
                pick = min if v.kind == "upper bound" else max
                key = (name, str(v.kind))
                out[key] = pick(out.get(key, float(v)), float(v))
        return out

    keyed = [series(c) for c in compared]
    extra = [(f"{name} {kind}", kind, np.array([k[(name, kind)] for k in keyed]))
             for name, kind in keyed[0] if all((name, kind) in k for k in keyed)]
    sweep = SamplerSweep(x_name=x_name, x=np.array(xs), quantity=quantity, at=at,  # type: ignore[arg-type]
                         steps=run.lower_bound_batches_per_epoch(), epochs=max(1, run.full_epochs()),
                         deterministic=column(0), poisson_lower=column(1), poisson_upper=column(2),
                         poisson_rdp=column(3), shuffle_lower=column(4), shuffle_upper=column(5), seconds=0.0,
                         extra=tuple(extra))
    plot_samplers(sweep, args.plot)
    return str(args.plot)


COMMANDS = (
    Command("compare", "deterministic, Poisson and shuffled batches for one run, side by side (Chua et al. 2024)",
            _add, _run, _print),
)

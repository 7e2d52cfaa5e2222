"""``dpacct tradeoff``: the f-DP curve of a DP-SGD (or DP-SGD-JL) run, and the attack risk it allows.

Examples::

    dpacct tradeoff --sigma 1.1 --q 0.0042667 --steps 10000 --fpr 0.001 0.01
    dpacct tradeoff --sigma 1.0 --q 0.01 --steps 1000 --jl-dim 30 --fpr 0.01 --json
    dpacct tradeoff --sigma 1.1 --epochs 60 --batch-size 256 --dataset-size 60000 --plot curve.png
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import math
import sys
from typing import Any

import numpy as np

from dpacct import _check
from dpacct.fdp import gdp
from dpacct.fdp.risk import SAMPLERS, tradeoff_for_run
from dpacct.fdp.tradeoff import TradeoffCurve
from dpacct.results import to_json

__all__ = ["add_parser", "jl_epsilon_report", "run"]

_DEFAULT_ALPHAS = (0.001, 0.01, 0.1)


HELP = "f-DP trade-off curve and membership-inference risk (max TPR at a given FPR)"


def add_parser(subparsers: Any) -> argparse.ArgumentParser:
    """Add the ``tradeoff`` subcommand to an ``argparse`` subparsers object."""
    p: argparse.ArgumentParser = subparsers.add_parser("tradeoff", help=HELP)
    add_arguments(p)
    return p


def add_arguments(p: argparse.ArgumentParser) -> None:
    """The flags of ``dpacct tradeoff``."""
    p.add_argument("--noise-multiplier", "--sigma", dest="noise_multiplier", type=float, required=True,
                   help="noise standard deviation / clipping norm (sigma)")
    p.add_argument("--sampling-probability", "--q", dest="sampling_probability", type=float,
                   help="Poisson sampling rate q = batch size / dataset size")
    p.add_argument("--steps", type=float, help="number of noisy steps T")
    p.add_argument("--epochs", type=float, help="epochs E (with --batch-size and --dataset-size)")
    p.add_argument("--batch-size", type=int, help="expected batch size b")
    p.add_argument("--dataset-size", type=int, help="dataset size n")
    p.add_argument("--sampler", default="poisson", help=f"batch sampler: {', '.join(SAMPLERS)}")
    p.add_argument("--jl-dim", dest="jl_dim", type=int, default=None,
                   help="DP-SGD-JL: number r of JL projections used to estimate per-sample norms")
    p.add_argument("--jl-projections", dest="jl_projections", default="shared",
                   help="shared (one set per batch, the default; certified) or per-example (the paper's model)")
    p.add_argument("--fpr", type=float, nargs="+", default=None,
                   help="false-positive rates at which to bound the attack's true-positive rate")
    p.add_argument("--alpha", type=float, nargs="+", default=None, help="type-I errors at which to print f(alpha)")
    p.add_argument("--plot", default=None, metavar="FILE.png", help="draw the curve(s) to a PNG (needs matplotlib)")
    p.add_argument("--json", action="store_true", help="print one JSON object instead of a table")


def _sampling(args: argparse.Namespace) -> tuple[float, int]:
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
        return batch / size, _check.ceil_count(epochs * size / batch)  # more steps only raise the risk
    if args.sampling_probability is None or args.steps is None:
        msg = "give --q and --steps, or --epochs, --batch-size and --dataset-size"
        raise ValueError(msg)
    return _check.probability("sampling_probability", args.sampling_probability), _check.count("steps", args.steps)


def _report(args: argparse.Namespace) -> tuple[dict[str, Any], TradeoffCurve, TradeoffCurve | None]:
    sigma = _check.noise_multiplier(args.noise_multiplier)
    q, steps = _sampling(args)
    projections = {"shared": "shared", "per-example": "per_example", "per_example": "per_example"}.get(
        args.jl_projections)
    if projections is None:
        msg = f"--jl-projections must be 'shared' or 'per-example', got {args.jl_projections!r}"
        raise ValueError(msg)
    if args.jl_dim is not None and args.jl_dim < 1:
        msg = f"--jl-dim must be an integer >= 1, got {args.jl_dim}"
        raise ValueError(msg)
    _check.one_of("--sampler", args.sampler, SAMPLERS)
    curve = tradeoff_for_run(noise_multiplier=sigma, sampling_probability=q, steps=steps, sampler=args.sampler,
                             jl_dim=args.jl_dim, projections=projections)
    alphas = list(args.alpha) if args.alpha else ([] if args.fpr else list(_DEFAULT_ALPHAS))
    fprs = list(args.fpr) if args.fpr else list(_DEFAULT_ALPHAS)
    for name, values in (("--alpha", alphas), ("--fpr", fprs)):
        for v in values:
            if not 0.0 <= v <= 1.0:
                msg = f"{name} must be in [0, 1], got {v!r}"
                raise ValueError(msg)
    report: dict[str, Any] = {"command": "tradeoff", "noise_multiplier": sigma, "sampling_probability": q,
                              "steps": steps, "sampler": args.sampler}
    if args.jl_dim is not None:
        report["jl_dim"] = args.jl_dim
        report["jl_projections"] = projections
    report["method"] = curve.method
    report["curve_kind"] = curve.kind
    if alphas:
        bounds = curve.bounds(np.asarray(alphas))
        report["alpha"] = alphas
        report["tradeoff_certified"] = np.atleast_1d(np.asarray(bounds.lower)).tolist()
        report["tradeoff_optimistic"] = np.atleast_1d(np.asarray(bounds.upper)).tolist()
    tpr = curve.tpr_bounds(np.asarray(fprs))
    report["fpr"] = fprs
    report["tpr_upper_bound"] = np.atleast_1d(np.asarray(tpr.upper)).tolist()
    report["tpr_lower_bound"] = np.atleast_1d(np.asarray(tpr.lower)).tolist()
    report["advantage"] = to_json(curve.advantage())
    report["gap"] = curve.gap()
    clt: TradeoffCurve | None = None
    if args.sampler == "poisson":
        mu = gdp.mu_poisson_clt_approx(noise_multiplier=sigma, sampling_probability=q, steps=steps)
        clt = gdp.tradeoff_poisson_clt_approx(noise_multiplier=sigma, sampling_probability=q, steps=steps)
        entry = to_json(mu)
        entry["tpr_at_fpr"] = np.atleast_1d(np.asarray(clt.tpr(np.asarray(fprs)).value)).tolist()
        if args.jl_dim is not None:
            entry["note"] = "CLT of plain DP-SGD; no CLT applies to DP-SGD-JL (its moments diverge)"
        report["gdp_clt_approx"] = entry
    return report, curve, clt


def _plot(curve: TradeoffCurve, clt: TradeoffCurve | None, path: str, title: str, clt_label: str) -> None:
    if importlib.util.find_spec("matplotlib") is None:
        msg = "--plot needs matplotlib: pip install matplotlib"
        raise ValueError(msg)
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    alpha, beta = curve.arrays(400)
    fig, ax = plt.subplots(figsize=(5, 5))
    ax.plot(alpha, beta, "-", color="C0", label="certified (below the true curve)")
    ax.plot(alpha, np.asarray(curve.optimistic(alpha)), ":", color="C0", label="optimistic (above the true curve)")
    if clt is not None:
        ax.plot(alpha, np.asarray(clt(alpha)), "--", color="C3", label=clt_label)
    ax.plot([0, 1], [1, 0], color="0.7", lw=0.8, label="perfect privacy")
    ax.set_xlabel("type-I error alpha (attack FPR)")
    ax.set_ylabel("type-II error f(alpha) (1 - attack TPR)")
    ax.set_xlim(0, 1)
    ax.set_ylim(0, 1)
    ax.set_title(title, fontsize=9)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


_LABELS = {
    "noise_multiplier": "noise multiplier (sigma)",
    "sampling_probability": "sampling probability (q)",
    "steps": "steps (T)",
    "jl_dim": "JL projections (r)",
    "jl_projections": "JL projections model",
    "curve_kind": "curve",
}


def _print(report: dict[str, Any]) -> None:
    for key in ("noise_multiplier", "sampling_probability", "steps", "sampler", "jl_dim", "jl_projections",
                "method", "curve_kind"):
        if key in report:
            value = report[key]
            print(f"{_LABELS.get(key, key):<26}  {value:.6g}" if isinstance(value, float)
                  else f"{_LABELS.get(key, key):<26}  {value}")
    if "alpha" in report:
        print(f"\n{'alpha':>10}  {'f(alpha) certified':>19}  {'f(alpha) optimistic':>20}")
        for a, lo, up in zip(report["alpha"], report["tradeoff_certified"], report["tradeoff_optimistic"]):
            print(f"{a:>10.4g}  {lo:>19.6g}  {up:>20.6g}")
    clt = report.get("gdp_clt_approx")
    header = f"\n{'FPR':>10}  {'max TPR (upper bound)':>21}  {'TPR lower bound':>16}"
    print(header + (f"  {'GDP CLT (heuristic)':>20}" if clt else ""))
    for i, (f, up, lo) in enumerate(zip(report["fpr"], report["tpr_upper_bound"], report["tpr_lower_bound"])):
        line = f"{f:>10.4g}  {up:>21.6g}  {lo:>16.6g}"
        if clt:
            line += f"  {clt['tpr_at_fpr'][i]:>20.6g}"
        print(line)
    adv = report["advantage"]
    print(f"\nmembership advantage (TPR - FPR) <= {float(adv['value']):.6g} ({adv['kind']})")
    print(f"numerical gap between the curves    {report['gap']:.3g}")
    if clt:
        print(f"GDP CLT mu ~ {float(clt['value']):.6g} (heuristic, not a bound)" +
              (f"; {clt['note']}" if "note" in clt else ""))
    if "plot" in report:
        print(f"plot written to {report['plot']}")


def jl_epsilon_report(*, noise_multiplier: float, sampling_probability: float, steps: int, jl_dim: int,
                      projections: str = "shared", delta: float) -> dict[str, Any]:
    """The report of ``dpacct epsilon --jl-dim r`` (for the main CLI to print): certified bounds on epsilon.

    ``epsilon`` is the certified upper bound (``inf`` with a ``note`` for r = 1, 2);
    ``epsilon_lower_bound`` the certified lower bound (for shared projections the largest over the realised
    pairs, ``lower_by_copies``).

    Examples
    --------
    >>> r = jl_epsilon_report(noise_multiplier=1.0, sampling_probability=0.1, steps=10, jl_dim=100, delta=1e-5)
    >>> r["kind"], r["jl_projections"], r["epsilon_lower_bound"] <= r["epsilon"]
    ('upper bound', 'shared', True)
    """
    from dpacct.fdp.accountant import FDPAccountant
    from dpacct.fdp.jl import DPSGDJLMechanism

    model = {"shared": "shared", "per-example": "per_example", "per_example": "per_example"}.get(projections)
    if model is None:
        msg = f"--jl-projections must be 'shared' or 'per-example', got {projections!r}"
        raise ValueError(msg)
    mechanism = DPSGDJLMechanism(noise_multiplier=noise_multiplier, sampling_probability=sampling_probability,
                                 jl_dim=jl_dim, projections="shared" if model == "shared" else "per_example")
    details = FDPAccountant().compose(mechanism, _check.count("steps", steps)).get_epsilon_details(delta)
    report: dict[str, Any] = {"command": "epsilon", "noise_multiplier": mechanism.noise_multiplier,
                              "sampling_probability": mechanism.sampling_probability, "steps": steps,
                              "jl_dim": mechanism.jl_dim, "jl_projections": model, "accountant": "fdp",
                              "delta": delta}
    report.update(details)
    return report


def report(args: argparse.Namespace) -> dict[str, Any]:
    """The report of ``dpacct tradeoff`` (drawing the plot first when ``--plot`` is given)."""
    result, curve, clt = _report(args)
    if args.plot:
        title = f"sigma={result['noise_multiplier']:g}, q={result['sampling_probability']:g}, T={result['steps']}"
        if "jl_dim" in result:
            title += f", JL r={result['jl_dim']} ({result['jl_projections']})"
        clt_label = "GDP CLT (heuristic, not a bound)"
        if "jl_dim" in result:
            clt_label = "GDP CLT of plain DP-SGD (heuristic; none exists for JL)"
        _plot(curve, clt, args.plot, title, clt_label)
        result["plot"] = str(args.plot)
    return result


def print_report(result: dict[str, Any]) -> None:
    """The table of ``dpacct tradeoff``."""
    _print(result)


def run(args: argparse.Namespace) -> int:
    """Run ``dpacct tradeoff`` alone; returns the exit status (2 with a one-line error for bad input)."""
    try:
        report_ = report(args)
    except (ValueError, TypeError) as error:
        print(f"dpacct: error: {error}", file=sys.stderr)
        return 2
    if args.json:
        print(json.dumps(report_))
    else:
        _print(report_)
    return 0

"""``dpacct epsilon``, ``dpacct delta`` and ``dpacct sigma``: one run, any sampler, any accountant.

The CLI talks to accountants only through the accountant protocol
(:class:`dpacct.accountant.Accountant`): it composes the run's mechanisms, reads
``get_epsilon_details``/``get_delta``, and, where an accountant refuses a mechanism but
offers a labelled ``heuristic_epsilon``, prints it only with ``--allow-heuristic``.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import Any, TypeVar

from dpacct import _check
from dpacct.accountant import (
    DEFAULT_ACCOUNTANT,
    UnsupportedMechanismError,
    accountant_factory,
    available_accountants,
    make_accountant,
)
from dpacct._search import BudgetUnreachableError
from dpacct.api import SAMPLERS, accountant_for_run, explain_failure, shuffle_lower_bound
from dpacct.cli._base import CLIError, Command, Notes, add_run_arguments, print_table, run_from_args
from dpacct.mechanisms import GaussianMechanism, PoissonSampledGaussianMechanism
from dpacct.results import KINDS, Value, to_json
from dpacct.run import INDEPENDENT_SAMPLERS, Run

__all__ = ["COMMANDS", "PREFERENCE", "default_accountant"]

#: Default accountants, tightest certified first (the Python API's default first); the next one is used if one
#: cannot handle a run.
PREFERENCE = (DEFAULT_ACCOUNTANT, "rdp")

T = TypeVar("T")


def default_accountant() -> str:
    """The tightest certified accountant available: PLD when present, else RDP."""
    available = available_accountants()
    return next(name for name in PREFERENCE if name in available)


def _add_common(parser: argparse.ArgumentParser, *, with_sigma: bool) -> None:
    if with_sigma:
        parser.add_argument("--noise-multiplier", "--sigma", dest="noise_multiplier", type=float, required=True,
                            help="noise standard deviation / clipping norm (sigma)")
    add_run_arguments(parser)
    parser.add_argument("--accountant", default=None,
                        help=f"accounting method for Poisson sampling: {', '.join(available_accountants())} "
                             "(default: the tightest certified one available)")
    parser.add_argument("--sampler", default="poisson", choices=SAMPLERS,
                        help="how batches are drawn (default poisson); shuffle and deterministic use the exact "
                             "Gaussian curve of each record's participations (one per epoch); fixed_size and "
                             "fixed_size_replacement: exactly --batch-size records a step; truncated_poisson: Poisson "
                             "batches cut to --max-batch-size (certified PLD intervals)")
    parser.add_argument("--max-batch-size", dest="max_batch_size", type=int, default=None,
                        help="with --sampler truncated_poisson: the cap B on the Poisson batch size")
    parser.add_argument("--assume-poisson", dest="assume_poisson", action="store_true",
                        help="with --sampler shuffle: report the Poisson number anyway (NOT a guarantee for "
                             "shuffled batches; prints a warning)")
    parser.add_argument("--allow-heuristic", dest="allow_heuristic", action="store_true",
                        help="where the accountant has no certified bound (zcdp with Poisson sampling), print "
                             "its labelled heuristic number (NOT a guarantee)")
    parser.add_argument("--json", action="store_true", help="print one JSON object instead of a table")


def _add_epsilon(parser: argparse.ArgumentParser) -> None:
    _add_common(parser, with_sigma=True)
    parser.add_argument("--delta", type=float, required=True, help="target delta in (0, 1)")
    parser.add_argument("--jl-dim", dest="jl_dim", type=int, default=None,
                        help="DP-SGD-JL: per-sample norms estimated from r JL projections (f-DP accountant)")
    parser.add_argument("--jl-projections", dest="jl_projections", default="shared",
                        choices=("shared", "per-example"),
                        help="one set of projections per batch (default; certified for what jvp computes) or "
                             "one per example (the paper's model)")


def _add_delta(parser: argparse.ArgumentParser) -> None:
    _add_common(parser, with_sigma=True)
    parser.add_argument("--epsilon", type=float, required=True, help="target epsilon >= 0")


def _add_sigma(parser: argparse.ArgumentParser) -> None:
    _add_common(parser, with_sigma=False)
    parser.add_argument("--epsilon", type=float, required=True, help="target epsilon > 0")
    parser.add_argument("--delta", type=float, required=True, help="target delta in (0, 1)")


def _reason(error: BaseException) -> str:
    return explain_failure(error)


def _with_fallback(compute: Callable[[str], T], accountant: str, explicit: bool, notes: Notes) -> tuple[T, str]:
    """``compute(accountant)``; if it fails internally, the next default (with a note) or a clean error."""
    candidates = [accountant] if explicit else [accountant] + [a for a in PREFERENCE if a != accountant]
    for i, name in enumerate(candidates):
        try:
            return compute(name), name
        except (UnsupportedMechanismError, BudgetUnreachableError):
            raise  # about the run or the budget, not about this accountant's numerics
        except (ValueError, ArithmeticError, RuntimeError, MemoryError) as error:
            if isinstance(error, CLIError):
                raise
            others = [a for a in available_accountants() if a != name and a in PREFERENCE]
            if i + 1 < len(candidates):
                notes.note(f"the {name} accountant could not handle this run ({_reason(error)}); "
                           f"reporting {candidates[i + 1]} instead")
                continue
            hint = f"; try --accountant {others[0]}" if others else ""
            msg = f"the {name} accountant could not compute this run: {_reason(error)}{hint}"
            raise CLIError(msg) from error
    raise AssertionError("unreachable")  # pragma: no cover


def _checked(args: argparse.Namespace) -> tuple[float | None, Run, str, bool]:
    sigma = None if getattr(args, "noise_multiplier", None) is None else _check.noise_multiplier(args.noise_multiplier)
    run = run_from_args(args)
    explicit = args.accountant is not None
    accountant = _check.one_of("accountant", args.accountant if explicit else default_accountant(),
                               available_accountants())
    if args.assume_poisson and args.sampler != "shuffle":
        msg = f"--assume-poisson applies only to --sampler shuffle, got --sampler {args.sampler}"
        raise CLIError(msg)
    if (args.max_batch_size is None) != (args.sampler != "truncated_poisson"):
        msg = ("--sampler truncated_poisson needs --max-batch-size" if args.max_batch_size is None
               else f"--max-batch-size applies only to --sampler truncated_poisson, got --sampler {args.sampler}")
        raise CLIError(msg)
    if args.max_batch_size is not None:
        _check.count("--max-batch-size", args.max_batch_size, minimum=1)
        if not run.by_epochs:
            msg = "--sampler truncated_poisson needs --epochs, --batch-size and --dataset-size"
            raise CLIError(msg)
    return sigma, run, accountant, explicit


def _run_header(args: argparse.Namespace, sigma: float | None, run: Run) -> dict[str, Any]:
    report: dict[str, Any] = {"command": args.command}
    if sigma is not None:
        report["noise_multiplier"] = sigma
    report.update(run.describe())
    if run.by_epochs:
        report["sampling_probability"] = run.sampling_probability
    report["sampler"] = args.sampler
    report["steps"] = run.steps(args.sampler)
    if args.sampler not in INDEPENDENT_SAMPLERS:
        report["participations"] = run.participations(args.sampler)
    return report


def _poisson_accountant(name: str, sigma: float, run: Run) -> Any:
    mechanism = PoissonSampledGaussianMechanism(noise_multiplier=sigma, sampling_probability=run.sampling_probability)
    count = run.steps("poisson") if run.sampling_probability > 0.0 else 0
    return make_accountant(name).compose(mechanism, count)


def _heuristic_or_error(name: str, error: UnsupportedMechanismError, args: argparse.Namespace, sigma: float,
                        run: Run) -> Value:
    offer = getattr(accountant_factory(name), "heuristic_epsilon", None)
    if offer is None:
        msg = f"the {name} accountant cannot account for Poisson-sampled steps; use --accountant rdp or pld"
        raise CLIError(msg) from error
    if args.command != "epsilon":
        msg = (f"the {name} accountant has no certified bound for --sampler poisson, and only a heuristic epsilon; "
               "use --accountant rdp or pld for a certified delta")
        raise CLIError(msg) from error
    if not args.allow_heuristic:
        msg = (f"the {name} accountant has no certified bound for --sampler poisson; use --accountant rdp or pld, "
               "or pass --allow-heuristic for its heuristic number (NOT a guarantee)")
        raise CLIError(msg) from error
    value: Value = offer(noise_multiplier=sigma, sampling_probability=run.sampling_probability,
                         steps=run.steps("poisson"), delta=_check.delta(args.delta))
    return value


def _run_epsilon_or_delta(args: argparse.Namespace, notes: Notes) -> dict[str, Any]:
    sigma, run, accountant, explicit = _checked(args)
    assert sigma is not None
    quantity = "epsilon" if args.command == "epsilon" else "delta"
    target = _check.delta(args.delta) if quantity == "epsilon" else _check.epsilon(args.epsilon)
    if getattr(args, "jl_dim", None) is not None:
        return _run_jl(args, sigma, run, target)
    report = _run_header(args, sigma, run)
    results: list[dict[str, Any]] = []
    fixed = "delta" if quantity == "epsilon" else "epsilon"
    report[fixed] = target

    def poisson_number(name: str) -> dict[str, Any]:
        with notes.capture():
            acct = _poisson_accountant(name, sigma, run)
            if quantity == "epsilon":
                return acct.get_epsilon_details(target)  # type: ignore[no-any-return]
            return {"delta": float(acct.get_delta(target)), "kind": "upper bound"}

    if args.sampler == "poisson" or args.assume_poisson:
        try:
            details, used = _with_fallback(poisson_number, accountant, explicit, notes)
        except UnsupportedMechanismError as error:
            value = _heuristic_or_error(accountant, error, args, sigma, run)
            report.update(accountant=accountant, epsilon=float(value), kind="heuristic",
                          kind_detail="heuristic, NOT a guarantee",
                          method=value.method, **dict(value.details))
            report["results"] = [to_json(value)]
            notes.warn(f"{value.method}; the accountant's own guarantee does not cover Poisson sampling")
            return report
        report["accountant"] = used
        kind = str(details.pop("kind"))
        report[quantity] = details.pop(quantity)
        report["kind"] = next((k for k in KINDS if kind.startswith(k)), "upper bound")
        if kind != report["kind"]:
            report["kind_detail"] = kind
        report.update(details)
        method = f"{used}, {run.steps('poisson')} Poisson-sampled steps at q={run.sampling_probability:.6g}"
        results.append(to_json(Value(value=report[quantity], quantity=quantity,  # type: ignore[arg-type]
                                     kind="upper bound", method=method)))
        if args.assume_poisson:
            with notes.capture():
                accountant_for_run(run, noise_multiplier=sigma, sampler="shuffle", assume_poisson=True)
            report["kind"] = "heuristic"
            report["kind_detail"] = ("Poisson-sampling upper bound, NOT a guarantee for shuffled batches "
                                     "(--assume-poisson)")
            report["accounted_as"] = "poisson"
            results[0]["kind"] = "heuristic"
            results[0]["method"] += " (assumed Poisson for a shuffled run: NOT a guarantee)"
            results.extend(_shuffle_results(run, sigma, quantity, target))
            report["shuffle_interval"] = {
                "sampler": "shuffle",
                f"{quantity}_lower_bound": results[-2]["value"],
                f"{quantity}_upper_bound": results[-1]["value"],
                "kind": "certified interval for the shuffled run as it really is",
            }
        report["results"] = results
        return report

    if args.sampler in ("fixed_size", "fixed_size_replacement"):
        return _run_fixed_size(args, report, sigma, run, quantity, target)
    if args.sampler == "truncated_poisson":
        return _run_truncated(args, report, sigma, run, quantity, target)

    # shuffle / deterministic / balls-in-bins / random allocation: the Gaussian curve of the participations
    # (exact for deterministic batches, a certified upper bound for the others)
    exact = accountant_for_run(run, noise_multiplier=sigma, sampler=args.sampler)
    value_now = float(exact.get_epsilon(target)) if quantity == "epsilon" else float(exact.get_delta(target))
    k = run.participations(args.sampler)
    method = f"exact Gaussian curve of {k} participation(s), sigma/sqrt({k})"
    report["accountant"] = "gaussian (exact)"
    report[quantity] = value_now
    if args.sampler == "deterministic":
        report["kind"] = "exact"
        results.append(to_json(Value(value=value_now, quantity=quantity,  # type: ignore[arg-type]
                                     kind="exact", method=method)))
    elif args.sampler == "balls_in_bins":
        report["kind"] = "upper bound"
        report["kind_detail"] = ("the smallest of the dominating pair's PLD, its Renyi DP and the deterministic "
                                 "curve (deterministic schedules dominate balls-in-bins)")
        report["accountant"] = "balls_in_bins"
        results.extend(_balls_in_bins_results(run, sigma, quantity, target))
        report[f"{quantity}_lower_bound"] = results[0]["value"]
        report["lower_bound_method"] = results[0]["method"]
    elif args.sampler == "random_allocation":
        report["kind"] = "upper bound"
        report["kind_detail"] = "deterministic schedules dominate random allocation (a mixture of them)"
        results.extend(_random_allocation_results(run, sigma, quantity, target))
        report[f"{quantity}_lower_bound"] = results[0]["value"]
        report["lower_bound_method"] = results[0]["method"]
    else:
        report["kind"] = "upper bound"
        report["kind_detail"] = "deterministic batches dominate shuffling"
        results.extend(_shuffle_results(run, sigma, quantity, target))
        report[f"{quantity}_lower_bound"] = results[0]["value"]  # kind "lower bound"
        report["lower_bound_method"] = results[0]["method"]
    if explicit:  # the accountant the user asked for, on the same mechanisms (looser, for reference)
        mechanism = GaussianMechanism(noise_multiplier=sigma, neighboring_relation="zero_out")
        other = make_accountant(accountant)
        if other.supports(mechanism):
            other.compose(mechanism, k)
            with notes.capture():
                number = float(other.get_epsilon(target)) if quantity == "epsilon" else float(other.get_delta(target))
            report[f"{accountant}_{quantity}"] = number
            results.append(to_json(Value(value=number, quantity=quantity,  # type: ignore[arg-type]
                                         kind="upper bound", method=f"{accountant} accountant, same {k} Gaussians")))
            notes.note(f"for {args.sampler} batches the exact Gaussian curve is reported; "
                       f"the {accountant} number ({number:.6g}) is a looser upper bound")
    report["results"] = results
    return report


def _run_fixed_size(args: argparse.Namespace, report: dict[str, Any], sigma: float, run: Run, quantity: str,
                    target: float) -> dict[str, Any]:
    """Fixed-size batches (add/remove adjacency): certified PLD interval, and RDP without replacement."""
    from dpacct.samplers.fixed_size import fixed_size_bounds

    replacement = args.sampler == "fixed_size_replacement"
    try:
        b, n = run.fixed_size_counts(replacement)
    except ValueError as error:
        msg = f"--sampler {args.sampler} needs --epochs, --batch-size and --dataset-size"
        raise CLIError(msg) from error
    keywords = {"delta": target} if quantity == "epsilon" else {"epsilon": target}
    steps = run.steps(args.sampler) if run.sampling_probability > 0.0 else 0
    bounds = fixed_size_bounds(noise_multiplier=sigma, batch_size=b, dataset_size=n, steps=steps,
                               replacement=replacement, neighboring_relation="add_remove", **keywords)
    report.update(accountant="pld", adjacency="add_remove", kind="upper bound", method=bounds.upper.method)
    report[quantity] = float(bounds.upper.value)
    report[f"{quantity}_lower_bound"] = float(bounds.lower.value)
    results = [to_json(bounds.lower.as_value()), to_json(bounds.upper.as_value())]
    if bounds.rdp_upper is not None and bounds.rdp_upper.method != bounds.upper.method:
        results.append(to_json(bounds.rdp_upper.as_value()))
    report["results"] = results
    return report


def _run_truncated(args: argparse.Namespace, report: dict[str, Any], sigma: float, run: Run, quantity: str,
                   target: float) -> dict[str, Any]:
    """Truncated Poisson batches (add/remove): the certified PLD interval."""
    acct = accountant_for_run(run, noise_multiplier=sigma, accountant="pld", sampler="truncated_poisson",
                              max_batch_size=args.max_batch_size)
    lower, upper = (acct.epsilon_bounds(target) if quantity == "epsilon"  # type: ignore[attr-defined]
                    else acct.delta_bounds(target))  # type: ignore[attr-defined]
    method = (f"PLD, overflow-labelled mixture (dpacct.samplers.truncated_poisson); {run.steps('poisson')} steps "
              f"at q={run.sampling_probability:.6g}, n={run.dataset_size}, B={args.max_batch_size}, add_remove")
    report.update(accountant="pld", adjacency="add_remove", kind="upper bound", method=method,
                  max_batch_size=args.max_batch_size)
    report[quantity] = float(upper)
    report[f"{quantity}_lower_bound"] = float(lower)
    report["results"] = [
        to_json(Value(value=float(lower), quantity=quantity, kind="lower bound",  # type: ignore[arg-type]
                      method="PLD, realised by all other records zero")),
        to_json(Value(value=float(upper), quantity=quantity, kind="upper bound", method=method)),  # type: ignore[arg-type]
    ]
    return report


def _balls_in_bins_results(run: Run, sigma: float, quantity: str, target: float) -> list[dict[str, Any]]:
    """Balls-in-bins: [certified lower bound, certified upper bound] (dpacct.samplers.allocation)."""
    from dpacct.samplers.allocation import allocation_rows

    rows = allocation_rows(noise_multiplier=sigma, quantity=quantity,  # type: ignore[arg-type]
                           at=target, steps_per_epoch_upper=max(1, run.batches_per_epoch()),
                           steps_per_epoch_lower=max(1, run.lower_bound_batches_per_epoch()),
                           epochs_upper=max(1, run.participations("balls_in_bins")), epochs_lower=run.full_epochs())
    upper = next(v for _, v in rows if v.kind == "upper bound")
    lower = next(v for _, v in rows if v.kind == "lower bound")
    return [to_json(lower), to_json(upper)]


def _random_allocation_results(run: Run, sigma: float, quantity: str, target: float) -> list[dict[str, Any]]:
    """Random allocation of k participations among all T steps: [certified lower bound, certified upper bound]."""
    from dpacct.samplers.allocation import allocation_rows

    k, total = run.participations("random_allocation"), max(1, run.steps("random_allocation"))
    if k < 1:
        return [to_json(Value(value=0.0, quantity=quantity, kind=kind,  # type: ignore[arg-type]
                              method="no participation")) for kind in ("lower bound", "upper bound")]
    rows = allocation_rows(noise_multiplier=sigma, quantity=quantity,  # type: ignore[arg-type]
                           at=target, steps_per_epoch_upper=max(total, k), steps_per_epoch_lower=max(total, k),
                           epochs_upper=1, epochs_lower=1, participations=k)
    upper = next(v for _, v in rows if v.kind == "upper bound")
    lower = next(v for _, v in rows if v.kind == "lower bound")
    return [to_json(lower), to_json(upper)]


def _shuffle_results(run: Run, sigma: float, quantity: str, target: float) -> list[dict[str, Any]]:
    """The honest interval for the shuffled run: [shuffle lower bound, deterministic upper bound]."""
    exact = accountant_for_run(run, noise_multiplier=sigma, sampler="shuffle")
    upper = float(exact.get_epsilon(target)) if quantity == "epsilon" else float(exact.get_delta(target))
    if quantity == "epsilon":
        lower, method = shuffle_lower_bound(run, noise_multiplier=sigma, delta=target)
    else:
        lower, method = shuffle_lower_bound(run, noise_multiplier=sigma, epsilon=target)
    k = run.participations("shuffle")
    return [
        to_json(Value(value=min(lower, upper), quantity=quantity, kind="lower bound",  # type: ignore[arg-type]
                      method=method)),
        to_json(Value(value=upper, quantity=quantity, kind="upper bound",  # type: ignore[arg-type]
                      method=f"deterministic batches dominate shuffling: exact Gaussian curve of {k} participation(s)")),
    ]


def _run_jl(args: argparse.Namespace, sigma: float, run: Run, delta: float) -> dict[str, Any]:
    """``dpacct epsilon --jl-dim r``: DP-SGD-JL through the f-DP accountant (Poisson batches)."""
    from dpacct.fdp.cli import jl_epsilon_report

    if args.sampler != "poisson":
        msg = "--jl-dim accounts Poisson-sampled DP-SGD-JL; use it with --sampler poisson"
        raise CLIError(msg)
    if args.accountant not in (None, "fdp"):
        msg = f"--jl-dim is accounted by the f-DP accountant; drop --accountant {args.accountant}"
        raise CLIError(msg)
    report = jl_epsilon_report(noise_multiplier=sigma, sampling_probability=run.sampling_probability,
                               steps=run.steps("poisson"), jl_dim=args.jl_dim, projections=args.jl_projections,
                               delta=delta)
    value = Value(value=report["epsilon"], quantity="epsilon", kind="upper bound",
                  method=f"f-DP, DP-SGD-JL with r={args.jl_dim} ({args.jl_projections} projections)")
    report["results"] = [to_json(value)]
    return report


def _run_sigma(args: argparse.Namespace, notes: Notes) -> dict[str, Any]:
    from dpacct.calibration import calibrate

    _, run, accountant, explicit = _checked(args)
    if args.assume_poisson:
        msg = "--assume-poisson is not available for sigma: calibrate a shuffled run with --sampler shuffle"
        raise CLIError(msg)
    epsilon = _check.positive("epsilon", args.epsilon)
    delta = _check.delta(args.delta)
    run_keywords: dict[str, Any] = (
        {"epochs": run.epochs, "batch_size": run.batch_size, "dataset_size": run.dataset_size,
         "drop_last": run.drop_last}
        if run.by_epochs else {"sampling_probability": run.sampling_probability, "steps": run.total_steps}
    )

    def solve(name: str) -> Any:
        with notes.capture():
            extra = {} if args.max_batch_size is None else {"max_batch_size": args.max_batch_size}
            return calibrate(epsilon=epsilon, delta=delta, accountant=name, sampler=args.sampler, **run_keywords,
                             **extra)

    result, used = _with_fallback(solve, accountant, explicit, notes)
    report = _run_header(args, None, run)
    report.update(noise_multiplier=result.noise_multiplier, accountant=used if args.sampler in INDEPENDENT_SAMPLERS
                  else "gaussian (exact)", delta=result.delta, target_epsilon=result.target_epsilon,
                  epsilon=result.epsilon, kind="upper bound",
                  kind_detail="achieved epsilon, <= target", evaluations=result.evaluations)
    report["results"] = [to_json(Value(value=result.noise_multiplier, quantity="noise_multiplier",
                                       kind="upper bound", method="smallest noise multiplier meeting the budget "
                                       "(safe end of the search bracket)"))]
    return report


COMMANDS = (
    Command("epsilon", "epsilon (upper bound) of a run for a given delta", _add_epsilon, _run_epsilon_or_delta,
            print_table),
    Command("delta", "delta (upper bound) of a run for a given epsilon", _add_delta, _run_epsilon_or_delta,
            print_table),
    Command("sigma", "smallest noise multiplier meeting an (epsilon, delta) budget", _add_sigma, _run_sigma,
            print_table),
)

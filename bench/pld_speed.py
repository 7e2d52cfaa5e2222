"""PLD epsilon queries beside dp-accounting and prv-accountant on every case of issue 10's speed item.

Usage: PYTHONPATH=$PWD python bench/pld_speed.py [--skip-prv] [--quick] [--dpacct-only]

For each case: dp-accounting's PLD at its default grid (1e-4, pessimistic estimate)
and prv-accountant (eps_error 0.01, upper estimate) are timed once each (CPU
seconds, median of up to three calls); dpacct is timed cold (``dpacct.pld.clear_cache()``) at its default
accuracy (0.005) and at "matched" accuracy: the largest ``relative_accuracy`` in
0.005 down to 1e-5 whose certified upper bound is at most
dp-accounting's pessimistic estimate (so dpacct's answer is at least as tight).
Agreement is checked first: every peer's epsilon must lie within 2 % of dpacct's
certified interval (they are estimates with their own errors). Prints a markdown
table and the geometric means of the speed ratios.
"""

from __future__ import annotations

import argparse
import math
import time
from collections.abc import Callable
from typing import Any

import dpacct
from dpacct.pld import PLDAccountant

CASES: list[tuple[str, float, float, int, float]] = [  # label, sigma, q, T, delta
    ("bench s=1.1 q=0.00427 T=1e3", 1.1, 256 / 60000, 1_000, 1e-5),
    ("bench s=1.1 q=0.00427 T=1e4", 1.1, 256 / 60000, 10_000, 1e-5),
    ("bench s=1.1 q=0.00427 T=1e5", 1.1, 256 / 60000, 100_000, 1e-5),
    ("bench s=4 q=0.01 T=1e4", 4.0, 0.01, 10_000, 1e-5),
    ("bench s=0.8 q=0.001 T=1e4", 0.8, 0.001, 10_000, 1e-5),
    ("bench s=2 q=0.1 T=1e3", 2.0, 0.1, 1_000, 1e-5),
    ("s=0.4 q=1e-5 T=1e5 d=1e-6", 0.4, 1e-5, 100_000, 1e-6),
    ("s=0.3 q=1e-5 T=1e5 d=1e-6", 0.3, 1e-5, 100_000, 1e-6),
    ("s=0.4 q=1e-6 T=1e5 d=1e-6", 0.4, 1e-6, 100_000, 1e-6),
    ("s=0.5 q=1e-7 T=1e7 d=1e-6", 0.5, 1e-7, 10_000_000, 1e-6),
    ("s=0.8 q=1e-3 T=1e6 d=1e-6", 0.8, 1e-3, 1_000_000, 1e-6),
    ("s=1 q=0.01 T=1e5 d=1e-10", 1.0, 0.01, 100_000, 1e-10),
    *[(f"s=1 q=1e-3 T=1e4 d=1e-{k}", 1.0, 1e-3, 10_000, 10.0**-k) for k in (6, 8, 10, 12, 14)],
    *[(f"s=1 q=1e-3 T=1e{k} d=1e-5", 1.0, 1e-3, 10**k, 1e-5) for k in (2, 3, 4, 5, 6, 7)],
]
ACCURACIES = (0.005, 0.002, 0.001, 5e-4, 2e-4, 1e-4, 5e-5, 2e-5, 1e-5)


def cpu(f: Callable[[], Any]) -> tuple[Any, float]:
    """The value and the median CPU seconds of up to three calls (one when a call takes over 0.5 s)."""
    times = []
    value = None
    for _ in range(3):
        start = time.process_time()
        value = f()
        times.append(time.process_time() - start)
        if times[-1] > 0.5:
            break
    return value, sorted(times)[len(times) // 2]


def dpacct_bounds(sigma: float, q: float, steps: int, delta: float, accuracy: float) -> tuple[float, float]:
    dpacct.pld.clear_cache()  # a cold query
    acct = PLDAccountant(relative_accuracy=accuracy).step(noise_multiplier=sigma, sampling_probability=q, count=steps)
    lower, upper = acct.epsilon_bounds(delta)
    return float(lower), float(upper)


def dp_accounting_epsilon(sigma: float, q: float, steps: int, delta: float) -> float:
    import dp_accounting
    from dp_accounting.pld import pld_privacy_accountant

    acct = pld_privacy_accountant.PLDAccountant()  # value_discretization_interval = 1e-4
    acct.compose(dp_accounting.PoissonSampledDpEvent(q, dp_accounting.GaussianDpEvent(sigma)), steps)
    return float(acct.get_epsilon(delta))


def prv_epsilon(sigma: float, q: float, steps: int, delta: float) -> float:
    from prv_accountant import PRVAccountant
    from prv_accountant.privacy_random_variables import PoissonSubsampledGaussianMechanism

    prv = PoissonSubsampledGaussianMechanism(noise_multiplier=sigma, sampling_probability=q)
    acct = PRVAccountant(prvs=prv, max_self_compositions=steps, eps_error=0.01, delta_error=delta / 1000)
    _, _, upper = acct.compute_epsilon(delta=delta, num_self_compositions=steps)
    return float(upper)


def geometric_mean(values: list[float]) -> float:
    values = [v for v in values if math.isfinite(v) and v > 0.0]
    return math.exp(sum(math.log(v) for v in values) / len(values)) if values else math.nan


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--skip-prv", action="store_true", help="do not run prv-accountant")
    parser.add_argument("--quick", action="store_true", help="only the bench grid (first six cases)")
    parser.add_argument(
        "--dpacct-only", action="store_true",
        help="time dpacct alone (the better of two cold CPU times per case) and print the geometric mean: "
        "run once per tree (PYTHONPATH=TREE) to compare two versions",
    )
    args = parser.parse_args()
    cases = CASES[:6] if args.quick else CASES
    if args.dpacct_only:
        print(f"dpacct from {dpacct.__file__}")
        times = []
        for label, sigma, q, steps, delta in cases:
            runs = [cpu(lambda: dpacct_bounds(sigma, q, steps, delta, 0.005)) for _ in range(2)]
            (lower, upper), t_ours = min(runs, key=lambda run: run[1])
            times.append(t_ours)
            print(f"| {label} | [{lower:.6g}, {upper:.6g}] | {(upper - lower) / upper:.3%} | {t_ours * 1e3:.1f} ms |",
                  flush=True)
        print(f"\ngeometric mean of dpacct's CPU: {geometric_mean(times) * 1e3:.1f} ms")
        return
    print("| case | dpacct [lower, upper] | CPU s | dp-accounting (1e-4) | CPU s | ratio | matched acc. | "
          "upper | CPU s | ratio | prv-accountant | CPU s | ratio |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    ratios, matched_ratios, prv_ratios = [], [], []
    for label, sigma, q, steps, delta in cases:
        (lower, upper), t_ours = cpu(lambda: dpacct_bounds(sigma, q, steps, delta, 0.005))
        try:
            peer, t_peer = cpu(lambda: dp_accounting_epsilon(sigma, q, steps, delta))
        except Exception as error:  # noqa: BLE001 - report the peer's failure in the table
            peer, t_peer = math.nan, math.nan
            print(f"<!-- dp-accounting failed on {label}: {error!r} -->")
        if math.isfinite(peer) and not (lower * 0.98 <= peer <= upper * 1.02):
            print(f"<!-- disagreement on {label}: dp-accounting {peer} vs [{lower}, {upper}] -->")
        ratio = t_peer / t_ours
        ratios.append(ratio)
        matched, t_matched, up_matched = math.nan, math.nan, math.nan
        if math.isfinite(peer):
            for accuracy in ACCURACIES:
                (_, up), t = cpu(lambda: dpacct_bounds(sigma, q, steps, delta, accuracy))
                if up <= peer:
                    matched, t_matched, up_matched = accuracy, t, up
                    break
                if t > 10.0:  # finer grids would only take longer
                    break
        matched_ratio = t_peer / t_matched if math.isfinite(t_matched) else math.nan
        matched_ratios.append(matched_ratio)
        prv, t_prv = math.nan, math.nan
        if not args.skip_prv and steps < 1_000_000:  # prv-accountant takes minutes beyond (124 s at T=1e6)
            try:
                prv, t_prv = cpu(lambda: prv_epsilon(sigma, q, steps, delta))
            except Exception as error:  # noqa: BLE001
                print(f"<!-- prv-accountant failed on {label}: {error!r} -->")
        prv_ratio = t_prv / t_ours if math.isfinite(t_prv) else math.nan
        prv_ratios.append(prv_ratio)
        print(f"| {label} | [{lower:.6g}, {upper:.6g}] | {t_ours:.4f} | {peer:.6g} | {t_peer:.3f} | {ratio:.1f}x | "
              f"{matched:g} | {up_matched:.6g} | {t_matched:.4f} | {matched_ratio:.1f}x | {prv:.6g} | {t_prv:.3f} | "
              f"{prv_ratio:.1f}x |", flush=True)
    print(f"\ngeometric mean of dp-accounting / dpacct: default accuracy {geometric_mean(ratios):.1f}x "
          f"(min {min(ratios):.1f}x); matched accuracy {geometric_mean(matched_ratios):.1f}x "
          f"(min {min(r for r in matched_ratios if math.isfinite(r)):.1f}x)")
    if not args.skip_prv:
        finite = [r for r in prv_ratios if math.isfinite(r)]
        print(f"prv-accountant / dpacct: geometric mean {geometric_mean(prv_ratios):.1f}x, min {min(finite):.1f}x"
              if finite else "prv-accountant: no case ran")


if __name__ == "__main__":
    main()

"""Random epsilon queries over issue 10's whole range: how often the PLD engine misses 1 % or 2 s.

Usage: python bench/pld_sweep.py [--queries N] [--seed S] [--min-rate Q] [--max-rate Q]
                                 [--min-sigma S] [--max-sigma S] [--delta] [--halves] [--memory]

Draws sigma log-uniform in [min-sigma, max-sigma] (default 0.3 .. 10), q log-uniform in
[min-rate, max-rate] (default 1e-8 .. 1), T log-uniform in [1, 1e8] and delta log-uniform in
[1e-15, 0.1], answers epsilon(delta) cold (``dpacct.pld.clear_cache()`` before each query) and
prints every query that misses the issue's targets (certified width <= 1 % of epsilon, <= 2 CPU
seconds), then a summary.
With ``--delta`` each query is instead a delta query at the upper bound of the same draw's
epsilon interval (the "matching epsilon" of issue 10 item 2), judged by its relative width
(delta_upper - delta_lower) / delta_upper and its own CPU seconds.
Two soundness checks run on every query, against code the interval does not use:
the lower bound may not exceed RDP's epsilon (an upper bound, Mironov 2017, arXiv:1702.07476),
and the certified lower bound on delta at the upper epsilon may not exceed delta.
With ``--halves`` a third: the upper bound may not fall below the lower bound of the same query with half the
steps (epsilon and delta grow with T). It catches an upper bound that is far too small, which the
other two cannot: sigma=0.034, q=0.365, T=1.6e7, delta=2.7e-15 once gave [7.27e6, 7.27e6] against a lower bound
of 1.2e9 at T=8e6. (Each query is then answered twice; the timings are those of the first.)
With ``--memory`` each timed query runs alone in a fresh Python process, whose peak resident memory (ru_maxrss,
the interpreter and numpy included, about 100 MB) is the issue's third target (<= 1 GB); its bounds and CPU seconds
are the ones judged (with ``--delta`` the epsilon query that gives the delta query its epsilon runs alone too).
"""

from __future__ import annotations

import argparse
import json
import math
import random
import subprocess
import sys
import time
from collections.abc import Callable
from typing import Any

import dpacct
from dpacct.pld import PLDAccountant, clear_cache
from dpacct.rdp import RDPAccountant


def log_uniform(rng: random.Random, low: float, high: float) -> float:
    return math.exp(rng.uniform(math.log(low), math.log(high)))


def lower_at_half_steps(sigma: float, q: float, steps: int, query: Callable[[PLDAccountant], Any]) -> float:
    """The certified lower bound of ``query`` on the same run with ``steps // 2`` steps, cold (``--halves``)."""
    clear_cache()
    return float(query(PLDAccountant().step(noise_multiplier=sigma, sampling_probability=q, count=steps // 2)).lower)


CHILD = r"""
import json, resource, sys, time
from dpacct.pld import PLDAccountant
kind, sigma, q, steps, value = sys.argv[1], float(sys.argv[2]), float(sys.argv[3]), int(sys.argv[4]), float(sys.argv[5])
acct = PLDAccountant().step(noise_multiplier=sigma, sampling_probability=q, count=steps)
start = time.process_time()
lower, upper = acct.epsilon_bounds(value) if kind == "epsilon" else acct.delta_bounds(value)
cpu = time.process_time() - start
print(json.dumps([float(lower), float(upper), cpu, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024]))
"""


def alone(kind: str, sigma: float, q: float, steps: int, value: float) -> tuple[float, float, float, float]:
    """``kind`` ("epsilon" or "delta") answered in a fresh process: (lower, upper, CPU seconds, peak MiB)."""
    command = [sys.executable, "-c", CHILD, kind, repr(sigma), repr(q), str(steps), repr(value)]
    out = subprocess.run(command, capture_output=True, text=True, check=True).stdout
    lower, upper, cpu, peak = json.loads(out.strip().splitlines()[-1])
    return lower, upper, cpu, peak


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--seed", type=int, default=10)
    parser.add_argument("--min-rate", type=float, default=1e-8)
    parser.add_argument("--max-rate", type=float, default=1.0)
    parser.add_argument("--min-sigma", type=float, default=0.3)
    parser.add_argument("--max-sigma", type=float, default=10.0)
    parser.add_argument("--delta", action="store_true", help="time delta queries at the upper epsilon instead")
    parser.add_argument("--halves", action="store_true", help="also check the upper bound against T/2's lower bound")
    parser.add_argument("--memory", action="store_true", help="each query in a fresh process; judge its peak memory")
    args = parser.parse_args()
    rng = random.Random(args.seed)
    wide, slow, unsound, heavy, cpu_all, widths, peaks = 0, 0, 0, 0, [], [], []
    print(f"dpacct {dpacct.__version__}, seed {args.seed}, q in [{args.min_rate:g}, {args.max_rate:g}]"
          + (f", sigma in [{args.min_sigma:g}, {args.max_sigma:g}]" if (args.min_sigma, args.max_sigma) != (0.3, 10.0)
             else ""))
    memory = " peak MB |" if args.memory else ""
    if args.delta:
        print("| sigma | q | T | query | delta lower | delta upper | width | CPU s |" + memory + " misses |")
    else:
        print("| sigma | q | T | delta | lower | upper | width | CPU s |" + memory + " misses |")
    print("| --- " * (10 if args.memory else 9) + "|")
    for _ in range(args.queries):
        sigma = log_uniform(rng, args.min_sigma, args.max_sigma)
        q = min(log_uniform(rng, args.min_rate, args.max_rate), 1.0)
        steps = max(1, int(log_uniform(rng, 1.0, 1e8)))
        delta = log_uniform(rng, 1e-15, 0.1)
        clear_cache()
        acct = PLDAccountant().step(noise_multiplier=sigma, sampling_probability=q, count=steps)
        peak = 0.0
        if args.memory:
            lower, upper, cpu, peak = alone("epsilon", sigma, q, steps, delta)
        else:
            start = time.process_time()
            lower, upper = (float(x) for x in acct.epsilon_bounds(delta))
            cpu = time.process_time() - start
        rdp = float(RDPAccountant().step(noise_multiplier=sigma, sampling_probability=q, count=steps).get_epsilon(delta))
        if args.delta:
            if not math.isfinite(upper):
                continue
            if args.memory:
                d_lower, d_upper, cpu, peak = alone("delta", sigma, q, steps, upper)
            else:
                clear_cache()
                fresh = PLDAccountant().step(noise_multiplier=sigma, sampling_probability=q, count=steps)
                start = time.process_time()
                d_lower, d_upper = (float(x) for x in fresh.delta_bounds(upper))
                cpu = time.process_time() - start
            width = (d_upper - d_lower) / d_upper if d_upper > 0.0 else 0.0
            misses = ["UNSOUND: delta lower bound at the upper epsilon > delta"] if d_lower > delta * (1.0 + 1e-6) else []
            if args.halves and steps >= 2:
                half_lower = lower_at_half_steps(sigma, q, steps, lambda acct: acct.delta_bounds(upper))
                if d_upper < half_lower * (1.0 - 1e-9):
                    misses.append(f"UNSOUND: delta upper < {half_lower:.6g}, the lower bound at T/2")
            row = f"| {sigma:.3g} | {q:.3g} | {steps} | eps={upper:.6g} | {d_lower:.6g} | {d_upper:.6g} "
        else:
            delta_lower = float(acct.delta_bounds(upper).lower) if math.isfinite(upper) else 0.0
            width = (upper - lower) / upper if upper > 0.0 else 0.0
            misses = []
            if lower > rdp * (1.0 + 1e-9):
                misses.append("UNSOUND: lower > RDP")
            if delta_lower > delta * (1.0 + 1e-6):
                misses.append("UNSOUND: delta lower bound at the upper epsilon > delta")
            if args.halves and steps >= 2:
                half_lower = lower_at_half_steps(sigma, q, steps, lambda acct: acct.epsilon_bounds(delta))
                if upper < half_lower * (1.0 - 1e-9):
                    misses.append(f"UNSOUND: upper < {half_lower:.6g}, the lower bound at T/2")
            row = f"| {sigma:.3g} | {q:.3g} | {steps} | {delta:.3g} | {lower:.6g} | {upper:.6g} "
        if width > 0.01:
            misses.append("width > 1 %")
        if cpu > 2.0:
            misses.append("CPU > 2 s")
        if peak > 1024.0:
            misses.append("memory > 1 GB")
        unsound += any(m.startswith("UNSOUND") for m in misses)
        wide += width > 0.01
        slow += cpu > 2.0
        heavy += peak > 1024.0
        cpu_all.append(cpu)
        widths.append(width)
        peaks.append(peak)
        if misses:
            shown = f" {peak:.0f} |" if args.memory else ""
            print(f"{row}| {100 * width:.2f} % | {cpu:.2f} |{shown} {', '.join(misses)} |", flush=True)
    cpu_all.sort()
    widths.sort()
    n = len(cpu_all)
    print()
    print(f"{n} queries: {unsound} unsound, {wide} wider than 1 %, {slow} over 2 CPU s; "
          f"median width {100 * widths[n // 2]:.2f} %, median CPU {cpu_all[n // 2]:.3f} s, "
          f"largest CPU {cpu_all[-1]:.2f} s, CPU of all {sum(cpu_all):.1f} s"
          + (f"; {heavy} over 1 GB, largest peak {max(peaks):.0f} MB" if args.memory else ""))


if __name__ == "__main__":
    main()

"""delta(0) (the total variation distance) and a delta query at tiny sampling rates, cold, one query each.

Usage: python bench/pld_total_variation.py [TREE] [--random N [--seed S]]

With ``--random N``, N random delta(0) queries instead of the fixed rows: sigma log-uniform in [0.3, 3], q
in [1e-8, 1e-4], the expected hits T q in [0.1, 100] (T at most 1e8), and a summary line (queries wider
than 1 %, over 2 s, CPU of all).

TREE (default: the installed dpacct) is a checkout with its extension built in place, so that an older
revision can be timed the same way (``git worktree add /tmp/old REV``, then ``python setup.py build_ext
--inplace`` there). Prints one Markdown row per query: the certified interval, its relative width and the
query's CPU seconds (``dpacct.pld.clear_cache()`` before each). The T = 2 row's exact value, 4.533794e-8, is
the two-step mpmath quadrature of ``tests/test_pld_reference.py``.
"""

from __future__ import annotations

import argparse
import math
import random
import sys
import time

ROWS = [
    (0.331, 2.75e-8, 2, 0.0),
    (0.331, 2.75e-8, 10, 0.0),
    (0.331, 2.75e-8, 100_000, 0.0),
    (0.331, 2.75e-8, 1_464_836, 0.0),
    (0.5, 3e-6, 100_000, 0.0),
    (0.621, 5.86e-8, 99_445_309, 0.0),
    (0.635, 2.8e-6, 339_151, 0.0837118),
]


def random_rows(count: int, seed: int) -> list[tuple[float, float, int, float]]:
    rng = random.Random(seed)

    def log_uniform(low: float, high: float) -> float:
        return math.exp(rng.uniform(math.log(low), math.log(high)))

    rows = []
    for _ in range(count):
        sigma, q, hits = log_uniform(0.3, 3.0), log_uniform(1e-8, 1e-4), log_uniform(0.1, 100.0)
        rows.append((sigma, q, min(max(1, int(hits / q)), 10**8), 0.0))
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("tree", nargs="?", help="a checkout with its extension built in place")
    parser.add_argument("--random", type=int, default=0, help="this many random delta(0) queries")
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    if args.tree:
        sys.path.insert(0, args.tree)
    import dpacct
    from dpacct.pld import PLDAccountant, clear_cache

    print(f"dpacct from {dpacct.__file__}")
    print("| query | certified interval | width | CPU s |")
    print("| --- | --- | --- | --- |")
    wide, slow, total = 0, 0, 0.0
    for sigma, q, steps, epsilon in random_rows(args.random, args.seed) if args.random else ROWS:
        clear_cache()
        acct = PLDAccountant().step(noise_multiplier=sigma, sampling_probability=q, count=steps)
        start = time.process_time()
        lower, upper = (float(x) for x in acct.delta_bounds(epsilon))
        cpu = time.process_time() - start
        width = (upper - lower) / upper if upper > 0.0 else 0.0
        wide, slow, total = wide + (width > 0.01), slow + (cpu > 2.0), total + cpu
        print(f"| sigma={sigma:.4g} q={q:.3g} T={steps:g} delta({epsilon:g}) | [{lower:.6g}, {upper:.6g}] "
              f"| {100.0 * width:.2f} % | {cpu:.2f} |", flush=True)
    print(f"\n{wide} wider than 1 %, {slow} over 2 CPU s, CPU of all {total:.1f} s")


if __name__ == "__main__":
    main()

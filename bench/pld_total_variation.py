"""delta(0) (the total variation distance) and a delta query at tiny sampling rates, cold, one query each.

Usage: python bench/pld_total_variation.py [TREE]

TREE (default: the installed dpacct) is a checkout with its extension built in place, so that an older
revision can be timed the same way (``git worktree add /tmp/old REV``, then ``python setup.py build_ext
--inplace`` there). Prints one Markdown row per query: the certified interval, its relative width and the
query's CPU seconds (``dpacct.pld.clear_cache()`` before each). The T = 2 row's exact value, 4.533794e-8, is
the two-step mpmath quadrature of ``tests/test_pld_reference.py``.
"""

from __future__ import annotations

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


def main() -> None:
    if len(sys.argv) > 1:
        sys.path.insert(0, sys.argv[1])
    import dpacct
    from dpacct.pld import PLDAccountant, clear_cache

    print(f"dpacct from {dpacct.__file__}")
    print("| query | certified interval | width | CPU s |")
    print("| --- | --- | --- | --- |")
    for sigma, q, steps, epsilon in ROWS:
        clear_cache()
        acct = PLDAccountant().step(noise_multiplier=sigma, sampling_probability=q, count=steps)
        start = time.process_time()
        lower, upper = (float(x) for x in acct.delta_bounds(epsilon))
        cpu = time.process_time() - start
        width = (upper - lower) / upper if upper > 0.0 else 0.0
        print(f"| sigma={sigma} q={q:g} T={steps:g} delta({epsilon:g}) | [{lower:.6g}, {upper:.6g}] "
              f"| {100.0 * width:.2f} % | {cpu:.2f} |")


if __name__ == "__main__":
    main()

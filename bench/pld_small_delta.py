"""Small deltas on the Poisson cases of the bench grid and of Chua et al. (issue 10, item 3).

Usage: python bench/pld_small_delta.py [TREE]

For each case and each target delta in 1e-4, 1e-6, ..., 1e-14, the epsilon query's certified upper bound
eps_u(delta) is taken, and then delta is queried at that epsilon, cold (``dpacct.pld.clear_cache()`` before
each query): the delta interval there is what item 3 judges (1 % relative down to 1e-12, certified below).
Prints one Markdown row per (case, delta): the epsilon interval, the delta interval at eps_u, the delta
interval's relative width and the CPU seconds of each query. TREE (default: the installed dpacct) is a
checkout with its extension built in place, to compare revisions the same way.

The cases: the six of ``bench/cases.py`` (Abadi et al. 2016's sigma=4, q=0.01 among them), delta(0.5) at
sigma=1, q=1e-3, T=1000 (Chua et al., ICML 2024, Figure 7), and the two Poisson cases of their Section 4
(sigma=0.4, q=1e-4, T=1e4 and sigma=0.4, q=1e-5, T=1e5).
"""

from __future__ import annotations

import sys
import time

CASES = [
    (1.1, 256 / 60000, 1_000),
    (1.1, 256 / 60000, 10_000),
    (1.1, 256 / 60000, 100_000),
    (4.0, 0.01, 10_000),
    (0.8, 0.001, 10_000),
    (2.0, 0.1, 1_000),
    (1.0, 1e-3, 1_000),
    (0.4, 1e-4, 10_000),
    (0.4, 1e-5, 100_000),
]
DELTAS = [1e-4, 1e-6, 1e-8, 1e-10, 1e-12, 1e-14]
# delta at given epsilons, with the published figures: Chua et al. (ICML 2024, arXiv:2403.17673), Section 4,
# delta_P(4) <= 1.18e-5 at sigma=0.4, T=1e4 (their PLD estimate); issue 10's delta(0.5) at sigma=1, q=1e-3,
# T=1000 (Figure 7), 2.058e-10.
AT_EPSILON = [(0.4, 1e-4, 10_000, 4.0, "1.18e-5 (Chua et al.)"), (1.0, 1e-3, 1_000, 0.5, "2.058e-10 (issue 10)")]


def main() -> None:
    if len(sys.argv) > 1:
        sys.path.insert(0, sys.argv[1])
    import dpacct
    from dpacct.pld import PLDAccountant, clear_cache

    print(f"dpacct from {dpacct.__file__}")
    print("| case | delta | eps interval | CPU s | delta at eps_u | width | CPU s | misses |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- |")
    misses = {"width": 0, "unsound": 0}
    total = 0
    worst = (0.0, "")
    for sigma, q, steps in CASES:
        for delta in DELTAS:
            acct = PLDAccountant().step(noise_multiplier=sigma, sampling_probability=q, count=steps)
            clear_cache()
            start = time.process_time()
            eps_lower, eps_upper = (float(x) for x in acct.epsilon_bounds(delta))
            eps_cpu = time.process_time() - start
            clear_cache()
            start = time.process_time()
            d_lower, d_upper = (float(x) for x in acct.delta_bounds(eps_upper))
            d_cpu = time.process_time() - start
            width = (d_upper - d_lower) / d_upper if d_upper > 0.0 else 0.0
            flags = []
            if d_lower > delta * (1.0 + 1e-9):
                flags.append("unsound")  # delta(eps_u) <= delta is what eps_u certifies
                misses["unsound"] += 1
            if width > 0.01 and d_upper >= 1e-12:
                flags.append("width > 1 %")
                misses["width"] += 1
            total += 1
            label = f"sigma={sigma:g} q={q:.3g} T={steps:g}"
            if width > worst[0]:
                worst = (width, f"{label} delta={delta:g}")
            print(f"| {label} | {delta:g} | [{eps_lower:.6g}, {eps_upper:.6g}] | {eps_cpu:.3f} "
                  f"| [{d_lower:.6g}, {d_upper:.6g}] | {100.0 * width:.2f} % | {d_cpu:.3f} | {', '.join(flags)} |")
    print()
    print("| case | epsilon | delta interval | width | CPU s | published |")
    print("| --- | --- | --- | --- | --- | --- |")
    for sigma, q, steps, epsilon, published in AT_EPSILON:
        acct = PLDAccountant().step(noise_multiplier=sigma, sampling_probability=q, count=steps)
        clear_cache()
        start = time.process_time()
        d_lower, d_upper = (float(x) for x in acct.delta_bounds(epsilon))
        cpu = time.process_time() - start
        print(f"| sigma={sigma:g} q={q:.3g} T={steps:g} | {epsilon:g} | [{d_lower:.6g}, {d_upper:.6g}] "
              f"| {100.0 * (d_upper - d_lower) / d_upper if d_upper > 0.0 else 0.0:.2f} % | {cpu:.3f} | {published} |")
    print()
    print(f"{total} delta queries: {misses['unsound']} unsound, {misses['width']} wider than 1 % at delta >= 1e-12; "
          f"widest {100.0 * worst[0]:.2f} % ({worst[1]})")


if __name__ == "__main__":
    main()

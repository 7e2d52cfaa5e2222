"""Regenerate the sampler figures of Chua et al. (ICML 2024) from dpacct alone, and time them.

Figure 1 style: epsilon vs sigma at a fixed delta and T, for deterministic batches (exact),
Poisson batches (PLD lower/upper, RDP upper) and shuffled batches (lower bound and the
deterministic upper bound). Figure 3 style: delta vs epsilon at a fixed sigma and T.

Usage::

    python bench/ablq_figures.py OUTDIR [--steps 10000] [--delta 1e-6] [--sigma 0.4] [--points 15]

Writes OUTDIR/ablq_epsilon_vs_sigma.png and OUTDIR/ablq_delta_vs_epsilon.png (PNGs are not
committed) and prints the wall time of each sweep and the number of points. Needs
matplotlib (``pip install -e ".[plot]"``).

Reference: L. Chua, B. Ghazi, P. Kamath, R. Kumar, P. Manurangsi, A. Sinha, C. Zhang,
"How Private are DP-SGD Implementations?", ICML 2024, arXiv:2403.17673, Figures 1 and 3.
"""

from __future__ import annotations

import argparse
import os
import platform
import sys
import time
from collections.abc import Callable

import numpy as np

from dpacct import __version__
from dpacct.samplers import plot_samplers, sweep_samplers


def _progress(total: int, label: str) -> Callable[[], None]:
    state = {"done": 0}

    def tick() -> None:
        state["done"] += 1
        print(f"\r{label}: {state['done']}/{total}", end="\n" if state["done"] == total else "",
              file=sys.stderr, flush=True)

    return tick


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("outdir", help="folder for the PNG files")
    parser.add_argument("--steps", type=int, default=10_000, help="batches per epoch T (default 1e4)")
    parser.add_argument("--delta", type=float, default=1e-6, help="delta of the epsilon-vs-sigma figure")
    parser.add_argument("--sigma", type=float, default=0.4, help="sigma of the delta-vs-epsilon figure")
    parser.add_argument("--points", type=int, default=15, help="points per sweep")
    args = parser.parse_args()
    os.makedirs(args.outdir, exist_ok=True)
    print(f"dpacct {__version__}, Python {platform.python_version()}, {platform.machine()}, "
          f"{os.cpu_count()} CPUs; T = {args.steps}, {args.points} points per sweep")

    sigmas = np.geomspace(0.3, 3.0, args.points)
    start = time.perf_counter()
    sweep = sweep_samplers(noise_multipliers=list(sigmas), steps=args.steps, delta=args.delta,
                           progress=_progress(args.points, "epsilon vs sigma"))
    path = os.path.join(args.outdir, "ablq_epsilon_vs_sigma.png")
    plot_samplers(sweep, path)
    print(f"Figure 1 style (epsilon vs sigma, delta = {args.delta:g}): {time.perf_counter() - start:.1f} s -> {path}")
    print("  sigma   deterministic   Poisson PLD [lower, upper]   shuffle lower")
    for i, s in enumerate(sweep.x):
        print(f"  {s:5.3f}   {sweep.deterministic[i]:12.4f}   [{sweep.poisson_lower[i]:8.4f}, {sweep.poisson_upper[i]:8.4f}]"
              f"   {sweep.shuffle_lower[i]:12.4f}")

    epsilons = np.linspace(0.0, 16.0, args.points)
    start = time.perf_counter()
    sweep = sweep_samplers(noise_multipliers=[args.sigma], steps=args.steps, epsilons=list(epsilons),
                           progress=_progress(args.points, "delta vs epsilon"))
    path = os.path.join(args.outdir, "ablq_delta_vs_epsilon.png")
    plot_samplers(sweep, path)
    print(f"Figure 3 style (delta vs epsilon, sigma = {args.sigma:g}): {time.perf_counter() - start:.1f} s -> {path}")
    print("  eps     deterministic   Poisson PLD upper   shuffle lower")
    for i, e in enumerate(sweep.x):
        print(f"  {e:5.2f}   {sweep.deterministic[i]:12.4e}   {sweep.poisson_upper[i]:12.4e}   {sweep.shuffle_lower[i]:12.4e}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Time the balls-in-bins analyses and compare them with the paper's public code.

Usage: ``PYTHONPATH=. python bench/allocation.py [--peer PATH]`` where PATH is the
``random_allocation/external_sources/Monte_Carlo_external.py`` file of the
``random-allocation`` package (Feldman and Shenfeld, PyPI), which carries the
``BnBAccountant`` of Chua et al. 2025 (arXiv:2412.16802). The peer is optional: without it
only dpacct is timed. Not part of the test run.
"""

from __future__ import annotations

import argparse
import importlib.util
import time
from typing import Any

from dpacct.samplers import (
    delta_allocation_estimate,
    delta_allocation_lower,
    delta_allocation_upper,
    delta_poisson_bounds,
    delta_shuffle_lower,
)


def _peer(path: str | None) -> Any:
    if path is None:
        return None
    spec = importlib.util.spec_from_file_location("bnb_peer", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _timed(f: Any) -> tuple[Any, float]:
    start = time.perf_counter()
    out = f()
    return out, time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--peer", default=None)
    parser.add_argument("--samples", type=int, default=2000)
    args = parser.parse_args()
    peer = _peer(args.peer)
    sigma, eps = 0.8, 2.0
    print(f"sigma={sigma}, epsilon={eps}, one epoch; MC samples={args.samples}")
    print("| t | upper (s) | lower | lower (s) | estimate [95 % normal CI] | est (s) | shuffle lower | "
          "poisson PLD [lo, up] | peer lower (s) | peer MC mean, UCB (s) |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for t in (1_000, 10_000, 100_000, 1_000_000):
        up, t_up = _timed(lambda: float(delta_allocation_upper(noise_multiplier=sigma, steps=t, epsilon=eps)))
        lo, t_lo = _timed(lambda: float(delta_allocation_lower(noise_multiplier=sigma, steps=t, epsilon=eps)))
        samples = args.samples if t <= 100_000 else max(2, args.samples // 10)
        mc, t_mc = _timed(lambda: delta_allocation_estimate(noise_multiplier=sigma, steps=t, epsilon=eps,
                                                             samples=samples, interval="normal"))
        shuffle = float(delta_shuffle_lower(noise_multiplier=sigma, steps=t, epsilon=eps))
        poisson = delta_poisson_bounds(noise_multiplier=sigma, steps=t, epsilon=eps) if t <= 10_000 else None
        pois = f"[{float(poisson.lower.value):.3e}, {float(poisson.upper.value):.3e}]" if poisson else "-"
        peer_lo = peer_mc = "-"
        if peer is not None:
            acc = peer.BnBAccountant()
            value, t_plo = _timed(lambda: acc.get_deltas_lower_bound(sigma, (eps,), t, 1)[0])
            peer_lo = f"{value:.3e} ({t_plo:.2f})"
            if t <= 100_000:
                est, t_pmc = _timed(lambda: acc.estimate_deltas(sigma, (eps,), t, samples, 1,
                                                                 peer.AdjacencyType.REMOVE, True)[0])
                peer_mc = f"{est.mean:.3e}, {est.get_upper_confidence_bound(0.05):.3e} ({t_pmc:.2f})"
        print(f"| {t:.0e} | {up:.4f} ({t_up:.4f}) | {lo:.3e} | {t_lo:.2f} | {mc.estimate:.3e} "
              f"[{mc.lower:.3e}, {mc.upper:.3e}] ({samples}) | {t_mc:.2f} | {shuffle:.3e} | {pois} | "
              f"{peer_lo} | {peer_mc} |")


if __name__ == "__main__":
    main()

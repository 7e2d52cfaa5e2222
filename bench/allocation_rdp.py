"""Balls-in-bins: the certified upper bound through the pair's Renyi DP, beside the other bounds.

Usage: ``PYTHONPATH=. python bench/allocation_rdp.py``. For each run (sigma, t steps per
epoch, E epochs, delta) it prints epsilon of deterministic batches (the former certified
upper bound), the Renyi-DP upper bound (``dpacct.samplers.allocation_rdp``, both
directions), the certified lower bound, Poisson batches at rate 1/t by PLD, and the CPU
seconds of the Renyi-DP bound (first call for the (sigma, t) pair; later calls are cached).
Not part of the test run.
"""

from __future__ import annotations

import time

from dpacct.pld import PLDAccountant
from dpacct.samplers import epsilon_allocation_lower, epsilon_allocation_upper
from dpacct.samplers import allocation_rdp as rdp
from dpacct import gaussian

CASES = [
    (1.0, 1_000, 1, 1e-5),
    (1.0, 1_000, 10, 1e-5),
    (0.8, 100, 5, 1e-5),
    (2.0, 10_000, 1, 1e-5),
    (0.5, 1_000, 1, 1e-5),
    (1.0, 235, 5, 1e-5),
    (4.0, 100_000, 3, 1e-6),
    (1.0, 10, 1, 1e-5),
]


def main() -> None:
    print("| sigma | t | E | delta | deterministic | RDP upper | lower | Poisson PLD (rate 1/t) | RDP CPU s |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    for sigma, t, e, delta in CASES:
        rdp._log_phi.cache_clear()
        rdp._remove_log_moments.cache_clear()
        start = time.process_time()
        upper = float(epsilon_allocation_upper(noise_multiplier=sigma, steps=t, epochs=e, delta=delta))
        cpu = time.process_time() - start
        det = float(gaussian.epsilon_for_delta(noise_multiplier=sigma / e**0.5, delta=delta))
        lower = float(epsilon_allocation_lower(noise_multiplier=sigma, steps=t, epochs=e, delta=delta))
        poisson = PLDAccountant().step(noise_multiplier=sigma, sampling_probability=1.0 / t, count=t * e)
        lo, up = poisson.epsilon_bounds(delta)
        print(f"| {sigma} | {t} | {e} | {delta:g} | {det:.4g} | {upper:.4g} | {lower:.4g} | "
              f"[{lo:.4g}, {up:.4g}] | {cpu:.2f} |")


if __name__ == "__main__":
    main()

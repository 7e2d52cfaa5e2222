"""PLD noise calibration over issue 10's range, beside dp-accounting's (item 4: under 50 ms of CPU).

Usage: ``PYTHONPATH=. python bench/pld_calibration.py [--no-peer]``. For q = 0.004,
T in {2500, 10000, 25000}, delta = 1e-5 and target epsilon in {1, 3, 8}: dpacct's smallest
certified noise multiplier with the default PLD accountant (CPU milliseconds, cold:
``dpacct.pld.clear_cache()`` first; median of 3), its number of PLD queries, and
dp-accounting's ``calibrate_dp_mechanism`` with its PLD accountant (timed once; seconds).
Agreement first: dp-accounting's sigma must lie within 1 % of ours (its epsilon is an
estimate, ours a certified bound). Not part of the test run.
"""

from __future__ import annotations

import argparse
import statistics
import time

import dpacct
from peers import _dpa_calibrate_pld  # type: ignore[import-not-found]
from cases import Case  # type: ignore[import-not-found]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--no-peer", action="store_true")
    args = parser.parse_args()
    q, delta = 0.004, 1e-5
    print("| T | target eps | sigma | achieved eps | PLD queries | dpacct CPU ms | dp-accounting sigma | "
          "dp-accounting CPU ms | ratio |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    worst = 0.0
    for steps in (2_500, 10_000, 25_000):
        for target in (1.0, 3.0, 8.0):
            times = []
            for _ in range(3):
                dpacct.pld.clear_cache()
                start = time.process_time()
                result = dpacct.calibrate(epsilon=target, delta=delta, sampling_probability=q, steps=steps,
                                          accountant="pld")
                times.append(1e3 * (time.process_time() - start))
            ms = statistics.median(times)
            worst = max(worst, ms)
            peer_sigma, peer_ms, ratio = "-", "-", "-"
            if not args.no_peer:
                start = time.process_time()
                sigma, _ = _dpa_calibrate_pld(Case(1.0, q, steps, delta), target)
                elapsed = 1e3 * (time.process_time() - start)
                assert abs(sigma / result.noise_multiplier - 1.0) < 0.01, (sigma, result.noise_multiplier)
                peer_sigma, peer_ms, ratio = f"{sigma:.5f}", f"{elapsed:.0f}", f"{elapsed / ms:.0f}x"
            print(f"| {steps} | {target:g} | {result.noise_multiplier:.5f} | {result.epsilon:.5f} | "
                  f"{result.evaluations} | {ms:.1f} | {peer_sigma} | {peer_ms} | {ratio} |")
    print(f"\nlargest dpacct CPU time: {worst:.1f} ms (target: under 50 ms)")


if __name__ == "__main__":
    main()

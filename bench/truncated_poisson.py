"""Truncated Poisson batches: dpacct beside dp-accounting (agreement first, then CPU time).

Run (dp-accounting from the ``bench`` extra)::

    PYTHONPATH=$PWD python bench/truncated_poisson.py

For each case: plain Poisson (dpacct's certified interval at the same q), dpacct's certified
truncated interval, dp-accounting's pessimistic epsilon for its
``TruncatedSubsampledGaussianDpEvent`` (value_discretization_interval=1e-4), and the CPU
seconds (``time.process_time``) of each. Add/remove adjacency, as dp-accounting's.
"""

from __future__ import annotations

import importlib.metadata
import platform
import time

from scipy import stats

from dpacct.mechanisms import PoissonSampledGaussianMechanism
from dpacct.pld import PLDAccountant
from dpacct.samplers import epsilon_truncated_poisson_bounds

# (dataset_size, sampling_probability, max_batch_size, noise_multiplier, steps, delta)
CASES = [
    (60000, 256 / 60000, 320, 1.1, 10000, 1e-5),
    (60000, 256 / 60000, 300, 1.1, 10000, 1e-5),
    (60000, 256 / 60000, 280, 1.1, 10000, 1e-5),
    (1_000_000, 1e-3, 1100, 1.0, 10000, 1e-5),
]


def main() -> None:
    try:
        from dp_accounting import dp_event
        from dp_accounting.pld import pld_privacy_accountant
        peer_version = importlib.metadata.version("dp-accounting")
    except ImportError:  # the peer is optional
        dp_event = None
        peer_version = "not installed"
    print(f"dpacct vs dp-accounting {peer_version}; {platform.machine()}, Python {platform.python_version()}\n")
    print("| n | q | B | sigma | T | P(overflow) | Poisson [lo, up] | truncated [lo, up] | dp-accounting | "
          "dpacct CPU s | dp-acc. CPU s | ratio |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    for n, q, b, sigma, steps, delta in CASES:
        mech = PoissonSampledGaussianMechanism(noise_multiplier=sigma, sampling_probability=q)
        p_lo, p_up = PLDAccountant().compose(mech, steps).epsilon_bounds(delta)
        start = time.process_time()
        bounds = epsilon_truncated_poisson_bounds(noise_multiplier=sigma, sampling_probability=q, steps=steps,
                                                  dataset_size=n, max_batch_size=b, delta=delta)
        ours = time.process_time() - start
        peer, theirs = float("nan"), float("nan")
        if dp_event is not None:
            start = time.process_time()
            acct = pld_privacy_accountant.PLDAccountant(value_discretization_interval=1e-4)
            event = dp_event.TruncatedSubsampledGaussianDpEvent(
                dataset_size=n, sampling_probability=q, truncated_batch_size=b, noise_multiplier=sigma)
            acct.compose(dp_event.SelfComposedDpEvent(event, steps))
            peer = acct.get_epsilon(delta)
            theirs = time.process_time() - start
        overflow = stats.binom.sf(b - 1, n - 1, q)
        print(f"| {n} | {q:.4g} | {b} | {sigma} | {steps} | {overflow:.3g} | [{float(p_lo):.4f}, {float(p_up):.4f}] | "
              f"[{float(bounds.lower.value):.4f}, {float(bounds.upper.value):.4f}] | {peer:.4f} | {ours:.2f} | "
              f"{theirs:.2f} | {theirs / ours:.1f} |")


if __name__ == "__main__":
    main()

"""Regenerate tests/reference/truncated_poisson_dp_accounting.json: dp-accounting's truncated Poisson numbers.

dp-accounting (``TruncatedSubsampledGaussianDpEvent``, PLD accountant, pessimistic,
``value_discretization_interval=1e-4``; arXiv:2508.15089) is the peer. Run with an
interpreter that has it installed (``pip install -e ".[bench]"``)::

    python bench/make_truncated_poisson_reference.py

dp-accounting offers no optimistic (lower) estimate for this event, so only its
pessimistic epsilon/delta is stored. The tests compare dpacct's certified interval
with these numbers without needing dp-accounting installed.
"""

from __future__ import annotations

import importlib.metadata
import json
import pathlib
import time

from dp_accounting import dp_event
from dp_accounting.pld import pld_privacy_accountant

OUT = pathlib.Path(__file__).resolve().parents[1] / "tests" / "reference" / "truncated_poisson_dp_accounting.json"

# (dataset_size, sampling_probability, max_batch_size, noise_multiplier, steps, quantity, at)
GRID = [
    (60000, 256 / 60000, 60000, 1.1, 1000, "epsilon", 1e-5),
    (60000, 256 / 60000, 320, 1.1, 1000, "epsilon", 1e-5),
    (60000, 256 / 60000, 300, 1.1, 1000, "epsilon", 1e-5),
    (60000, 256 / 60000, 280, 1.1, 1000, "epsilon", 1e-5),
    (1000, 0.01, 20, 1.0, 100, "epsilon", 1e-5),
    (1000, 0.01, 15, 1.0, 100, "epsilon", 1e-5),
    (10000, 0.01, 120, 0.8, 1000, "epsilon", 1e-5),
    (1000, 0.01, 15, 1.0, 100, "delta", 1.0),
    (3, 0.5, 2, 1.0, 1, "delta", 0.5),
    (3, 0.5, 2, 1.0, 1, "delta", 1.0),
    (4, 0.5, 2, 1.0, 1, "delta", 1.0),
]


def main() -> None:
    cases = []
    for n, q, b, sigma, steps, quantity, at in GRID:
        start = time.process_time()
        acct = pld_privacy_accountant.PLDAccountant(value_discretization_interval=1e-4)
        event = dp_event.TruncatedSubsampledGaussianDpEvent(
            dataset_size=n, sampling_probability=q, truncated_batch_size=b, noise_multiplier=sigma)
        acct.compose(dp_event.SelfComposedDpEvent(event, steps))
        value = acct.get_epsilon(at) if quantity == "epsilon" else acct.get_delta(at)
        cases.append({
            "dataset_size": n, "sampling_probability": q, "max_batch_size": b, "noise_multiplier": sigma,
            "steps": steps, "quantity": quantity, "at": at, "dp_accounting_pessimistic": float(value),
            "cpu_seconds": round(time.process_time() - start, 3),
        })
        print(cases[-1])
    data = {
        "source": "dp-accounting TruncatedSubsampledGaussianDpEvent, PLDAccountant(value_discretization_interval=1e-4), "
                  "add/remove (ADD_OR_REMOVE_ONE); produced by bench/make_truncated_poisson_reference.py",
        "dp_accounting_version": importlib.metadata.version("dp-accounting"),
        "cases": cases,
    }
    OUT.write_text(json.dumps(data, indent=1) + "\n")


if __name__ == "__main__":
    main()

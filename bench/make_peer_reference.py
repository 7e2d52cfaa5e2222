"""Regenerate tests/reference/peer_pld.json: peer libraries' epsilons stored as test data.

Run with an interpreter that has dp-accounting and prv-accountant installed
(``pip install -e ".[bench]"``)::

    python bench/make_peer_reference.py

The tests compare dpacct's certified PLD interval with these numbers without
needing the peers installed.
"""

from __future__ import annotations

import importlib.metadata
import json
import pathlib
import time

import dp_accounting
from dp_accounting.pld import pld_privacy_accountant
from prv_accountant import PRVAccountant
from prv_accountant.privacy_random_variables import PoissonSubsampledGaussianMechanism

OUT = pathlib.Path(__file__).resolve().parents[1] / "tests" / "reference" / "peer_pld.json"

GRID = [
    (sigma, q, steps, delta)
    for sigma in (0.8, 1.1, 2.0)
    for q in (0.001, 256 / 60000, 0.02)
    for steps in (100, 1000, 10000)
    for delta in (1e-5,)
] + [(4.0, 0.01, 10000, 1e-5), (1.1, 256 / 60000, 10000, 1e-8)]


def main() -> None:
    cases = []
    start = time.perf_counter()
    for sigma, q, steps, delta in GRID:
        acct = pld_privacy_accountant.PLDAccountant()  # pessimistic, value_discretization_interval=1e-4
        acct.compose(dp_accounting.PoissonSampledDpEvent(q, dp_accounting.GaussianDpEvent(sigma)), steps)
        dpa = acct.get_epsilon(delta)
        prv = PRVAccountant(
            prvs=PoissonSubsampledGaussianMechanism(noise_multiplier=sigma, sampling_probability=q),
            max_self_compositions=steps, eps_error=0.01, delta_error=delta / 1000,
        )
        low, est, up = prv.compute_epsilon(delta=delta, num_self_compositions=steps)
        cases.append({
            "noise_multiplier": sigma, "sampling_probability": q, "steps": steps, "delta": delta,
            "dp_accounting_pld_epsilon": dpa,
            "prv_accountant_epsilon": {"lower": low, "estimate": est, "upper": up},
        })
    data = {
        "source": "bench/make_peer_reference.py",
        "calls": {
            "dp_accounting": "PLDAccountant().compose(PoissonSampledDpEvent(q, GaussianDpEvent(sigma)), steps).get_epsilon(delta)",
            "prv_accountant": "PRVAccountant(prvs=PoissonSubsampledGaussianMechanism(noise_multiplier=sigma, sampling_probability=q), max_self_compositions=steps, eps_error=0.01, delta_error=delta/1000).compute_epsilon(delta, steps)",
        },
        "versions": {name: importlib.metadata.version(name) for name in ("dp-accounting", "prv-accountant")},
        "seconds": round(time.perf_counter() - start, 1),
        "cases": cases,
    }
    OUT.write_text(json.dumps(data, indent=1) + "\n")
    print(f"wrote {len(cases)} cases to {OUT} in {data['seconds']} s")


if __name__ == "__main__":
    main()

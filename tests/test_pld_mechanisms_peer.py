"""Laplace, Poisson-subsampled Laplace and mixtures of Gaussians against dp-accounting's stored PLD output.

tests/reference/pld_mechanisms_dp_accounting.json (made by
bench/make_pld_mechanism_reference.py with dp-accounting 0.6.0) holds dp-accounting's
epsilon(1e-5) from its pessimistic and optimistic discretisations at its default grid
(1e-4). If both libraries are right the truth lies in both intervals, so each interval's
upper end is at least the other's lower end (up to 1e-9 relative for the stored rounding);
and dpacct's certified upper bound is no looser than dp-accounting's pessimistic estimate
by more than its default relative accuracy (0.5 %).
"""

from __future__ import annotations

import json
import pathlib

import pytest

from dpacct.mechanisms import LaplaceMechanism, MixtureOfGaussiansMechanism, PoissonSampledMechanism
from dpacct.pld import PLDAccountant

CASES = json.loads((pathlib.Path(__file__).parent / "reference" / "pld_mechanisms_dp_accounting.json").read_text())


def _mechanism(case: dict[str, object]) -> object:
    if case["kind"] == "laplace":
        base: object = LaplaceMechanism(noise_multiplier=case["noise_multiplier"])  # type: ignore[arg-type]
    else:
        base = MixtureOfGaussiansMechanism(noise_multiplier=case["noise_multiplier"],  # type: ignore[arg-type]
                                           sensitivities=tuple(case["sensitivities"]),  # type: ignore[arg-type]
                                           probabilities=tuple(case["probabilities"]))  # type: ignore[arg-type]
    q = float(case["sampling_probability"])  # type: ignore[arg-type]
    return base if q == 1.0 else PoissonSampledMechanism(mechanism=base, sampling_probability=q)  # type: ignore[arg-type]


@pytest.mark.parametrize("case", CASES["cases"], ids=lambda c: f"{c['kind']}-q{c['sampling_probability']}-T{c['steps']}")
def test_interval_agrees_with_dp_accounting(case: dict[str, object]) -> None:
    acct = PLDAccountant().compose(_mechanism(case), int(case["steps"]))  # type: ignore[arg-type, call-overload]
    lower, upper = acct.epsilon_bounds(float(case["delta"]))  # type: ignore[arg-type]
    pess, opt = float(case["epsilon_pessimistic"]), float(case["epsilon_optimistic"])  # type: ignore[arg-type]
    assert upper >= opt * (1 - 1e-9)
    assert lower <= pess * (1 + 1e-9)
    assert upper <= pess * 1.005

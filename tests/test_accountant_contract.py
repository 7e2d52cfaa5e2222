"""The contract every registered accountant keeps (run over the registry, so a new family is checked on arrival).

An accountant is asked which mechanisms it supports (never special-cased by name); the
checks are the protocol's promises: exact zero for nothing composed, all-or-nothing
composition, scalar in -> float out and arrays in -> arrays out, ValueError naming the
parameter, monotone in the budget and in the number of compositions, get_delta and
get_epsilon consistent, and never below the exact Gaussian curve (a closed form,
Balle & Wang 2018, arXiv:1805.06530) for a composition of Gaussian mechanisms.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

import dpacct
from dpacct.accountant import Accountant, UnsupportedMechanismError
from dpacct.mechanisms import GaussianMechanism, PoissonSampledGaussianMechanism
from dpacct.results import KINDS

NAMES = dpacct.available_accountants()
CANDIDATES = (
    PoissonSampledGaussianMechanism(noise_multiplier=2.0, sampling_probability=0.05),
    GaussianMechanism(noise_multiplier=20.0),
)


def _mechanism(acct: Accountant) -> PoissonSampledGaussianMechanism | GaussianMechanism:
    for mechanism in CANDIDATES:
        if acct.supports(mechanism):
            return mechanism
    pytest.skip(f"{type(acct).__name__} supports none of the DP-SGD mechanisms")


@pytest.fixture(params=NAMES)
def name(request: pytest.FixtureRequest) -> str:
    return str(request.param)


def test_every_accountant_is_built_by_name_and_supports_a_gaussian(name: str) -> None:
    acct = dpacct.make_accountant(name)
    assert isinstance(acct, Accountant)
    assert acct.supports(GaussianMechanism(noise_multiplier=1.0)) is True
    assert acct.supports("not a mechanism") is False  # type: ignore[arg-type]


def test_nothing_composed_is_exactly_free(name: str) -> None:
    acct = dpacct.make_accountant(name)
    assert acct.get_epsilon(1e-5) == 0.0 and acct.get_delta(0.0) == 0.0 and len(acct) == 0


def test_composition_is_all_or_nothing(name: str) -> None:
    acct = dpacct.make_accountant(name)
    mechanism = _mechanism(acct)
    acct.compose(mechanism, 7)
    before = acct.get_epsilon(1e-5)
    with pytest.raises(UnsupportedMechanismError):
        acct.compose("not a mechanism", 3)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="count must be an integer >= 0"):
        acct.compose(mechanism, -1)
    assert acct.get_epsilon(1e-5) == before and len(acct) == 7 and acct.history == ((mechanism, 7),)


def test_scalar_in_float_out_array_in_array_out(name: str) -> None:
    acct = dpacct.make_accountant(name)
    acct.compose(_mechanism(acct), 10)
    assert isinstance(acct.get_epsilon(1e-5), float) and isinstance(acct.get_delta(1.0), float)
    deltas = np.array([[1e-3, 1e-5], [1e-7, 1e-9]])
    eps = np.asarray(acct.get_epsilon(deltas))
    assert eps.shape == deltas.shape
    for index in np.ndindex(deltas.shape):
        assert eps[index] == acct.get_epsilon(float(deltas[index]))


@pytest.mark.parametrize(("method", "bad", "message"), [
    ("get_epsilon", 0.0, "delta must be in \\(0, 1\\)"),
    ("get_epsilon", 1.5, "delta must be in \\(0, 1\\)"),
    ("get_delta", -1.0, "epsilon must be finite and >= 0"),
    ("get_delta", math.nan, "epsilon must be finite and >= 0"),
])
def test_bad_targets_name_the_parameter(name: str, method: str, bad: float, message: str) -> None:
    acct = dpacct.make_accountant(name)
    acct.compose(_mechanism(acct), 3)
    with pytest.raises(ValueError, match=message):
        getattr(acct, method)(bad)


def test_monotone_in_the_budget_and_in_the_count(name: str) -> None:
    acct = dpacct.make_accountant(name)
    mechanism = _mechanism(acct)
    acct.compose(mechanism, 20)
    eps = np.asarray(acct.get_epsilon(np.array([1e-2, 1e-4, 1e-6, 1e-8])))
    assert np.all(np.diff(eps) >= 0.0)  # smaller delta, larger epsilon
    deltas = np.asarray(acct.get_delta(np.array([0.1, 0.5, 1.0, 2.0])))
    assert np.all(np.diff(deltas) <= 0.0) and np.all((deltas >= 0.0) & (deltas <= 1.0))
    more = dpacct.make_accountant(name).compose(mechanism, 40)
    assert more.get_epsilon(1e-5) >= acct.get_epsilon(1e-5)


def test_delta_at_the_reported_epsilon_meets_the_delta(name: str) -> None:
    """get_delta(get_epsilon(delta)) <= delta: both are upper bounds of the same curve (relative 1e-6)."""
    acct = dpacct.make_accountant(name)
    acct.compose(_mechanism(acct), 30)
    for delta in (1e-3, 1e-6):
        eps = float(acct.get_epsilon(delta))
        assert float(acct.get_delta(eps)) <= delta * (1 + 1e-6)


def test_never_below_the_exact_gaussian_curve(name: str) -> None:
    """k Gaussians with sigma are exactly one Gaussian with sigma/sqrt(k): no upper bound may go below it."""
    acct = dpacct.make_accountant(name)
    sigma, k = 20.0, 25
    acct.compose(GaussianMechanism(noise_multiplier=sigma), k)
    for delta in (1e-3, 1e-5, 1e-9):
        exact = dpacct.gaussian.epsilon_for_delta(noise_multiplier=sigma / math.sqrt(k), delta=delta)
        assert float(acct.get_epsilon(delta)) >= exact * (1 - 1e-9)
    for eps in (0.1, 0.5):
        exact_delta = dpacct.gaussian.delta_for_epsilon(noise_multiplier=sigma / math.sqrt(k), epsilon=eps)
        assert float(acct.get_delta(eps)) >= exact_delta * (1 - 1e-9)


def test_epsilon_details_say_what_the_number_is(name: str) -> None:
    acct = dpacct.make_accountant(name)
    acct.compose(_mechanism(acct), 5)
    details = acct.get_epsilon_details(1e-5)
    assert details["epsilon"] == acct.get_epsilon(1e-5)
    assert any(str(details["kind"]).startswith(kind) for kind in KINDS)


def test_guide_is_optional_and_safe(name: str) -> None:
    """A noise-multiplier guide, when offered, brackets a sigma whose epsilon meets the target."""
    from dpacct.accountant import accountant_guide

    guide = accountant_guide(name)(sampling_probability=0.01, steps=100, delta=1e-5, epsilon=2.0)
    if guide is None:
        return
    def epsilon(sigma: float) -> float:
        step = PoissonSampledGaussianMechanism(noise_multiplier=sigma, sampling_probability=0.01)
        return float(dpacct.make_accountant(name).compose(step, 100).get_epsilon(1e-5))

    # the safe end meets the target, or else the fallback calibration restarts from does
    assert epsilon(guide.safe) <= 2.0 or (guide.fallback is not None and epsilon(guide.fallback) <= 2.0)
    if guide.unsafe is not None:
        assert guide.unsafe < guide.safe and epsilon(guide.unsafe) > 2.0

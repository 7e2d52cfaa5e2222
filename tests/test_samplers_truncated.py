"""Truncated Poisson batches (dpacct.samplers.truncated_poisson): pairs, bounds, peers, properties, errors."""

from __future__ import annotations

import itertools
import json
import math
import pathlib

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats

from dpacct import gaussian
from dpacct.mechanisms import PoissonSampledGaussianMechanism
from dpacct.pld import PLDAccountant
from dpacct.samplers import (
    delta_truncated_poisson_bounds,
    epsilon_truncated_poisson_bounds,
    truncated_poisson_pair,
    truncated_poisson_rows,
)

REFERENCE = pathlib.Path(__file__).parent / "reference" / "truncated_poisson_dp_accounting.json"

# Trapezoid rule over mean +- 14 sigma with 20001 points: the integrand (p - e^eps q)_+ is
# continuous and piecewise smooth, so the quadrature error is below 1e-8 here (doubling the
# points changes the results by less than 1e-9); the mass beyond 14 sigma is < 1e-43.
TOL_QUADRATURE = 1e-7
# Delta queries aim at a 2 % gap between the certified bounds of a pair (relative_accuracy 0.02).
RTOL_GRID = 0.02
# dpacct's epsilon interval is 0.5 % wide; dp-accounting's grid (1e-4) is finer, so where both
# use the same pair dpacct's upper bound may exceed its number by up to that gap.
RTOL_PEER = 0.01


# -- an independent oracle: enumerate every Poisson draw and truncation ------------------------


def _output_law(values: list[float], q: float, b: int) -> dict[float, float]:
    """Law of the batch sum (the Gaussian's mean) for 1-d records: every Poisson draw, every kept B-subset."""
    law: dict[float, float] = {}
    n = len(values)
    for mask in range(1 << n):
        drawn = [i for i in range(n) if mask >> i & 1]
        p = q ** len(drawn) * (1.0 - q) ** (n - len(drawn))
        if p == 0.0:
            continue
        kept = [tuple(drawn)] if len(drawn) <= b else list(itertools.combinations(drawn, b))
        for subset in kept:
            mean = round(sum(values[i] for i in subset), 12)
            law[mean] = law.get(mean, 0.0) + p / len(kept)
    return law


def _hockey_stick(p: dict[float, float], q: dict[float, float], epsilon: float, sigma: float) -> float:
    """H_eps(P || Q) of two Gaussian mixtures with common noise sigma, by the trapezoid rule."""
    means = [*p, *q]
    x = np.linspace(min(means) - 14 * sigma, max(means) + 14 * sigma, 20001)

    def density(law: dict[float, float]) -> np.ndarray:
        return sum(w * stats.norm.pdf(x, loc=m, scale=sigma) for m, w in law.items())  # type: ignore[return-value]

    return float(np.trapezoid(np.maximum(density(p) - math.exp(epsilon) * density(q), 0.0), x))


def _exact_delta(others: list[float], q: float, b: int, sigma: float, epsilon: float, relation: str) -> float:
    """The exact one-step delta(epsilon) of one pair of neighbouring datasets, max over both orders."""
    with_target = _output_law([*others, 1.0], q, b)
    without = _output_law(others, q, b) if relation == "add_remove" else _output_law([*others, 0.0], q, b)
    return max(_hockey_stick(with_target, without, epsilon, sigma), _hockey_stick(without, with_target, epsilon, sigma))


EXHAUSTIVE = [  # (n, B, q, sigma)
    (3, 2, 1.0, 1.0),
    (4, 2, 0.5, 1.0),
    (5, 3, 0.7, 1.0),
    (6, 2, 0.3, 1.0),
    (8, 3, 0.4, 1.0),
]
EPSILONS = [0.0, 0.5, 1.0, 2.0]
# The exhaustive cases run at a coarser grid (one step, fast): still certified, the gap is wider.
RTOL_COARSE = 0.1


def _datasets(n: int) -> list[list[float]]:
    m = n - 1
    rng = np.random.default_rng(n)
    return [[-1.0] * m, [0.0] * m, [1.0] * m, [(-1.0) ** i for i in range(m)], rng.uniform(-1.0, 1.0, m).tolist()]


@pytest.mark.parametrize("relation", ["add_remove", "zero_out"])
@pytest.mark.parametrize(("n", "b", "q", "sigma"), EXHAUSTIVE)
def test_exhaustive_small_cases_lie_in_the_interval(relation: str, n: int, b: int, q: float, sigma: float) -> None:
    """For n <= 8 and one step, every enumerated dataset's exact delta is below the upper bound, and the others-zero dataset's is above the lower."""
    bounds = delta_truncated_poisson_bounds(noise_multiplier=sigma, sampling_probability=q, steps=1, dataset_size=n,
                                            max_batch_size=b, epsilon=EPSILONS, neighboring_relation=relation,
                                            relative_accuracy=RTOL_COARSE)
    lower, upper = np.asarray(bounds.lower.value), np.asarray(bounds.upper.value)
    for k, eps in enumerate(EPSILONS):
        exact = [_exact_delta(others, q, b, sigma, eps, relation) for others in _datasets(n)]
        assert max(exact) <= upper[k] + TOL_QUADRATURE
        realised = _exact_delta([0.0] * (n - 1), q, b, sigma, eps, relation)
        if q == 1.0 and relation == "add_remove":  # the others -x* are realised too (and dominate)
            realised = max(realised, _exact_delta([-1.0] * (n - 1), q, b, sigma, eps, relation))
        assert lower[k] <= realised + TOL_QUADRATURE
        assert lower[k] >= realised * (1 - RTOL_COARSE) - TOL_QUADRATURE  # the lower bound is that dataset's delta


def test_every_step_overflowing_is_tight() -> None:
    """At q = 1 (add/remove) the others equal to -x* realise the dominating pair: the upper bound is their exact delta."""
    bounds = delta_truncated_poisson_bounds(noise_multiplier=1.0, sampling_probability=1.0, steps=1, dataset_size=3,
                                            max_batch_size=2, epsilon=EPSILONS[:3])
    for k, eps in enumerate(EPSILONS[:3]):
        exact = _exact_delta([-1.0, -1.0], 1.0, 2, 1.0, eps, "add_remove")
        assert exact <= float(bounds.upper.value[k]) <= exact * (1 + RTOL_GRID) + TOL_QUADRATURE
        # ... and that dataset is one of the realised ones: the lower bound meets it.
        assert exact * (1 - RTOL_GRID) - TOL_QUADRATURE <= float(bounds.lower.value[k]) <= exact + TOL_QUADRATURE


def test_truncation_can_hurt() -> None:
    """Truncation is not free: n=3, B=2, q=1 has delta(1) = 0.3066 for real datasets, above the untruncated 0.1269."""
    exact = _exact_delta([-1.0, -1.0], 1.0, 2, 1.0, 1.0, "add_remove")
    untruncated = float(gaussian.delta_for_epsilon(noise_multiplier=1.0, epsilon=1.0))
    assert exact == pytest.approx(0.30661, abs=1e-4)
    assert untruncated == pytest.approx(0.12694, abs=1e-4)
    assert exact > 2 * untruncated


def _subsampled_gaussian_delta(shift: float, rate: float, sigma: float, epsilon: float) -> float:
    """Closed form: delta(epsilon) of PS(shift, rate), noise sigma, max over the remove and add directions."""
    a = shift / sigma  # in units of sigma: shift a, unit noise
    e = math.exp(epsilon)
    # remove: (1 - r) N(0) + r N(a) against N(0); the loss exceeds epsilon for x > x_r.
    x_r = (math.log((e - 1.0 + rate) / rate) + a * a / 2.0) / a
    remove = (1 - rate) * stats.norm.sf(x_r) + rate * stats.norm.sf(x_r - a) - e * stats.norm.sf(x_r)
    # add: N(0) against (1 - r) N(0) + r N(a); the loss exceeds epsilon for x < x_a (if anywhere).
    inner = 1.0 / e - 1.0 + rate
    add = 0.0
    if inner > 0.0:
        x_a = (math.log(inner / rate) + a * a / 2.0) / a
        add = stats.norm.cdf(x_a) - e * ((1 - rate) * stats.norm.cdf(x_a) + rate * stats.norm.cdf(x_a - a))
    return float(max(remove, add))


def test_truncation_can_help() -> None:
    """Nor is it always worse: n=1000, B=100, q=1 is exactly PS(2, 0.1) (closed form), far below the untruncated Gaussian."""
    bounds = delta_truncated_poisson_bounds(noise_multiplier=1.0, sampling_probability=1.0, steps=1, dataset_size=1000,
                                            max_batch_size=100, epsilon=1.0)
    exact = _subsampled_gaussian_delta(2.0, 0.1, 1.0, 1.0)
    untruncated = float(gaussian.delta_for_epsilon(noise_multiplier=1.0, epsilon=1.0))
    assert exact * (1 - RTOL_GRID) <= float(bounds.lower.value) <= exact <= float(bounds.upper.value)
    assert float(bounds.upper.value) <= exact * (1 + RTOL_GRID)
    assert exact == pytest.approx(0.01966, abs=1e-4)
    assert float(bounds.upper.value) < untruncated / 6


# -- no truncation: the Poisson numbers, bit for bit ----------------------------------------------


@pytest.mark.parametrize("relation", ["add_remove", "zero_out"])
@pytest.mark.parametrize("b", [1000, 5000])
def test_no_truncation_is_poisson_exactly(relation: str, b: int) -> None:
    """With B >= n no batch is ever cut: both bounds are the Poisson PLD accountant's numbers, exactly."""
    kw = dict(noise_multiplier=1.0, sampling_probability=0.02, steps=200, dataset_size=1000, max_batch_size=b,
              neighboring_relation=relation)
    mech = PoissonSampledGaussianMechanism(noise_multiplier=1.0, sampling_probability=0.02,
                                           neighboring_relation=relation)  # type: ignore[arg-type]
    eps = epsilon_truncated_poisson_bounds(delta=1e-6, **kw)  # type: ignore[arg-type]
    lo, up = PLDAccountant().compose(mech, 200).epsilon_bounds(1e-6)
    assert (float(eps.lower.value), float(eps.upper.value)) == (float(lo), float(up))
    dlt = delta_truncated_poisson_bounds(epsilon=1.0, **kw)  # type: ignore[arg-type]
    lo, up = PLDAccountant(relative_accuracy=0.02).compose(mech, 200).delta_bounds(1.0)
    assert (float(dlt.lower.value), float(dlt.upper.value)) == (float(lo), float(up))
    assert not eps.pair.truncates


def test_realised_rate_is_expected_kept_fraction() -> None:
    """The realised rate is E[min(Binomial(n, q), B)] / n (every record is equally likely to be kept)."""
    n, q, b = 40, 0.3, 9
    k = np.arange(n + 1)
    expected = float(np.sum(stats.binom.pmf(k, n, q) * np.minimum(k, b))) / n
    pair = truncated_poisson_pair(noise_multiplier=1.0, sampling_probability=q, dataset_size=n, max_batch_size=b)
    assert pair.realised_sampling_probability == pytest.approx(expected, rel=1e-11)
    assert pair.realised_sampling_probability <= expected
    assert math.fsum(w for w, _, _ in pair.components) + pair.zero_loss_weight == pytest.approx(1.0, abs=1e-12)


# -- dp-accounting, stored -----------------------------------------------------------------------


def _reference_cases() -> list[dict[str, float]]:
    return json.loads(REFERENCE.read_text())["cases"]  # type: ignore[no-any-return]


@pytest.mark.parametrize("case", _reference_cases(), ids=lambda c: f"n{c['dataset_size']}-B{c['max_batch_size']}-"
                         f"T{c['steps']}-{c['quantity']}{c['at']}")
def test_against_dp_accounting(case: dict[str, float]) -> None:
    """dp-accounting's pessimistic number (stored) is never far below dpacct's upper bound, and equals it without truncation.

    dp-accounting's overflow component is the replace-one pair (components 4 apart), looser
    than dpacct's shift-2 add/remove pair, so dpacct's upper bound may lie below it; it may
    exceed it only by dpacct's grid gap (``RTOL_PEER``). Without truncation both are Poisson.
    """
    kw = dict(noise_multiplier=case["noise_multiplier"], sampling_probability=case["sampling_probability"],
              steps=int(case["steps"]), dataset_size=int(case["dataset_size"]),
              max_batch_size=int(case["max_batch_size"]))
    peer = case["dp_accounting_pessimistic"]
    if case["quantity"] == "epsilon":
        bounds = epsilon_truncated_poisson_bounds(delta=case["at"], **kw)  # type: ignore[arg-type]
    else:
        # One-step delta queries on the default grid take seconds; at 0.1 the bound stays certified and,
        # on these cases, 10-15 % below dp-accounting's (whose overflow pair is looser).
        accuracy = RTOL_COARSE if case["steps"] == 1 else 0.02
        bounds = delta_truncated_poisson_bounds(epsilon=case["at"], relative_accuracy=accuracy,
                                                **kw)  # type: ignore[arg-type]
    lower, upper = float(bounds.lower.value), float(bounds.upper.value)
    assert lower <= upper
    assert upper <= peer * (1 + RTOL_PEER)
    if not bounds.pair.truncates or bounds.pair.overflow_probability < 1e-9:
        assert upper == pytest.approx(peer, rel=RTOL_PEER)
        assert lower <= peer


# -- rows for the comparison table ----------------------------------------------------------------


def test_rows_are_labelled_values() -> None:
    """The comparison rows are a certified lower and upper bound, PLD, in that order, lower <= upper."""
    rows = truncated_poisson_rows(noise_multiplier=1.0, sampling_probability=0.01, steps=100, dataset_size=1000,
                                  max_batch_size=15, quantity="epsilon", at=1e-5)
    assert [(s, v.kind, v.quantity) for s, v in rows] == [
        ("truncated_poisson", "lower bound", "epsilon"), ("truncated_poisson", "upper bound", "epsilon")]
    assert all(v.method.startswith("PLD, ") for _, v in rows)
    assert float(rows[0][1].value) <= float(rows[1][1].value)
    drows = truncated_poisson_rows(noise_multiplier=1.0, sampling_probability=0.01, steps=100, dataset_size=1000,
                                   max_batch_size=15, quantity="delta", at=1.0)
    assert [v.quantity for _, v in drows] == ["delta", "delta"]


# -- properties ----------------------------------------------------------------------------------

_SETTINGS = settings(max_examples=6, deadline=None)
_case = st.tuples(st.integers(5, 200), st.integers(1, 30), st.floats(0.01, 0.5), st.floats(0.7, 3.0),
                  st.integers(1, 20), st.sampled_from(["add_remove", "zero_out"]))


@_SETTINGS
@given(_case)
def test_upper_at_least_lower(case: tuple[int, int, float, float, int, str]) -> None:
    """The certified interval is never crossed."""
    n, b, q, sigma, steps, relation = case
    bounds = delta_truncated_poisson_bounds(noise_multiplier=sigma, sampling_probability=q, steps=steps,
                                            dataset_size=n, max_batch_size=b, epsilon=0.5,
                                            neighboring_relation=relation)  # type: ignore[arg-type]
    assert 0.0 <= float(bounds.lower.value) <= float(bounds.upper.value) <= 1.0


@settings(max_examples=4, deadline=None)
@given(_case)
def test_monotone_in_noise_and_steps(case: tuple[int, int, float, float, int, str]) -> None:
    """Delta does not grow with sigma and does not shrink with T (each component is Blackwell-monotone in sigma).

    The grid is chosen per query, so two certified upper bounds of ordered curves can be
    out of order by the grid gap: compared with that slack (``RTOL_GRID``).
    """
    n, b, q, sigma, steps, relation = case
    kw = dict(sampling_probability=q, dataset_size=n, max_batch_size=b, epsilon=0.5, neighboring_relation=relation)
    base = delta_truncated_poisson_bounds(noise_multiplier=sigma, steps=steps, **kw)  # type: ignore[arg-type]
    quieter = delta_truncated_poisson_bounds(noise_multiplier=sigma * 1.3, steps=steps, **kw)  # type: ignore[arg-type]
    longer = delta_truncated_poisson_bounds(noise_multiplier=sigma, steps=2 * steps, **kw)  # type: ignore[arg-type]
    up, low = float(base.upper.value), float(base.lower.value)
    assert float(quieter.upper.value) <= up * (1 + RTOL_GRID) + 1e-12
    assert float(longer.upper.value) >= up * (1 - RTOL_GRID)
    assert float(quieter.lower.value) <= low * (1 + RTOL_GRID) + 1e-12
    assert float(longer.lower.value) >= low * (1 - RTOL_GRID)


@_SETTINGS
@given(st.integers(5, 200), st.integers(1, 30), st.floats(0.01, 0.9), st.floats(0.01, 0.9))
def test_realised_rate_monotone_in_q(n: int, b: int, q1: float, q2: float) -> None:
    """The lower bound's rate E[min(Binomial(n, q), B)] / n does not decrease with q (a theorem: min(., B) is monotone)."""
    lo_q, hi_q = sorted((q1, q2))
    low = truncated_poisson_pair(noise_multiplier=1.0, sampling_probability=lo_q, dataset_size=n, max_batch_size=b)
    high = truncated_poisson_pair(noise_multiplier=1.0, sampling_probability=hi_q, dataset_size=n, max_batch_size=b)
    assert low.realised_sampling_probability <= high.realised_sampling_probability * (1 + 1e-10)


# -- bad input -----------------------------------------------------------------------------------

_GOOD = dict(noise_multiplier=1.0, sampling_probability=0.1, steps=10, dataset_size=100, max_batch_size=20)


@pytest.mark.parametrize(("change", "message"), [
    ({"max_batch_size": 0}, r"^max_batch_size must be an integer >= 1, got 0"),
    ({"max_batch_size": 2.5}, r"^max_batch_size must be an integer >= 1, got 2.5"),
    ({"dataset_size": 0}, r"^dataset_size must be an integer >= 1, got 0"),
    ({"sampling_probability": 1.5}, r"^sampling_probability must be in \[0, 1\]"),
    ({"sampling_probability": -0.1}, r"^sampling_probability must be in \[0, 1\]"),
    ({"noise_multiplier": -1.0}, r"^noise_multiplier must be"),
    ({"steps": 0}, r"^steps must be an integer >= 1, got 0"),
    ({"neighboring_relation": "replace_one"}, r"^neighboring_relation must be one of"),
])
def test_bad_input_names_the_parameter(change: dict[str, object], message: str) -> None:
    """Each bad value raises ValueError naming the parameter and the allowed range."""
    with pytest.raises(ValueError, match=message):
        delta_truncated_poisson_bounds(**{**_GOOD, **change, "epsilon": 1.0})  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=message):
        epsilon_truncated_poisson_bounds(**{**_GOOD, **change, "delta": 1e-5})  # type: ignore[arg-type]


def test_bad_query_values() -> None:
    """Bad epsilon, delta and quantity values name themselves."""
    with pytest.raises(ValueError, match=r"^epsilon"):
        delta_truncated_poisson_bounds(**_GOOD, epsilon=-1.0)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=r"^delta"):
        epsilon_truncated_poisson_bounds(**_GOOD, delta=0.0)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=r"^quantity must be one of"):
        truncated_poisson_rows(**_GOOD, quantity="mu", at=1.0)  # type: ignore[arg-type]


def test_batch_larger_than_dataset_is_allowed() -> None:
    """B > n is allowed: nothing is ever cut (plain Poisson), and the pair says so."""
    pair = truncated_poisson_pair(noise_multiplier=1.0, sampling_probability=0.1, dataset_size=10, max_batch_size=11)
    assert not pair.truncates and pair.components == ((1.0, 1.0, 0.1),)

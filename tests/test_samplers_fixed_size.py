"""Fixed-size batches (dpacct.samplers.fixed_size): small datasets enumerated exactly, closed forms, peers.

The exhaustive tests take one step (T = 1) on datasets of n <= 6 one-dimensional
gradients in [-1, 1]: the mechanism's output is then an explicit mixture of Gaussians
over every possible batch, and delta(eps) = int (p - e^eps q)_+ is computed by the
trapezoid rule on 400,001 points over +-12 sigma beyond the means (error below 1e-10
for these smooth integrands; the tolerance 1e-9 covers it). Every realised delta must
lie below the certified upper bound, and the datasets the module docstring names must
reach the certified lower bound.
"""

from __future__ import annotations

import itertools
import json
import math
import pathlib

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.stats import norm

from dpacct import _core
from dpacct.mechanisms import FixedSizeSampledGaussianMechanism, PoissonSampledGaussianMechanism
from dpacct.pld import PLDAccountant
from dpacct.rdp.curves import mechanism_rdp
from dpacct.samplers import compare_run, fixed_size_bounds

REFERENCE = pathlib.Path(__file__).parent / "reference" / "fixed_size_dp_accounting.json"
EPSILONS = (0.0, 0.5, 1.0, 2.0)


def _sums(gradients: list[float], b: int, replacement: bool) -> np.ndarray:
    """The batch sum of every equally likely batch."""
    pick = itertools.product(range(len(gradients)), repeat=b) if replacement else itertools.combinations(
        range(len(gradients)), b)
    return np.array([sum(gradients[i] for i in batch) for batch in pick], dtype=np.float64)


def _densities(p_means: np.ndarray, q_means: np.ndarray, sigma: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    lo = min(p_means.min(), q_means.min()) - 12.0 * sigma
    hi = max(p_means.max(), q_means.max()) + 12.0 * sigma
    x = np.linspace(lo, hi, 400_001)

    def density(means: np.ndarray) -> np.ndarray:
        values, counts = np.unique(means, return_counts=True)
        return sum(c * norm.pdf(x, loc=v, scale=sigma) for v, c in zip(values, counts)) / means.size

    return x, density(p_means), density(q_means)


def _deltas(p_means: np.ndarray, q_means: np.ndarray, sigma: float, eps: tuple[float, ...]) -> tuple[list[float], ...]:
    """delta(eps) of (P, Q) and of (Q, P) for every eps."""
    x, p, q = _densities(p_means, q_means, sigma)
    forward = [float(np.trapezoid(np.maximum(p - math.exp(e) * q, 0.0), x)) for e in eps]
    backward = [float(np.trapezoid(np.maximum(q - math.exp(e) * p, 0.0), x)) for e in eps]
    return forward, backward


def _bounds(sigma: float, b: int, n: int, replacement: bool, relation: str, eps: float) -> tuple[float, float]:
    res = fixed_size_bounds(noise_multiplier=sigma, batch_size=b, dataset_size=n, steps=1, epsilon=eps,
                            replacement=replacement, neighboring_relation=relation)
    return float(res.lower.value), float(res.upper.value)


def _neighbours(relation: str, rng: np.random.Generator, n: int) -> list[tuple[list[float], list[float]]]:
    """Pairs (D, D') of the relation: the extreme datasets of the docstring, then random ones."""
    out = []
    for trial in range(4):
        others = [-1.0] * (n - 1) if trial == 0 else list(rng.uniform(-1.0, 1.0, n - 1))
        x = 1.0 if trial == 0 else float(rng.uniform(-1.0, 1.0))
        if relation == "add_remove":
            out.append((others + [x], others))  # D' = D + {x}: sizes n and n - 1
        elif relation == "replace_one":
            y = -1.0 if trial == 0 else float(rng.uniform(-1.0, 1.0))
            out.append((others + [x], others + [y]))
        else:  # zero-out
            out.append((others + [x], others + [0.0]))
    return out


@pytest.mark.parametrize("relation", ["add_remove", "replace_one", "zero_out"])
@pytest.mark.parametrize(("n", "b", "replacement"), [(4, 2, False), (5, 3, False), (4, 2, True), (3, 3, True)])
def test_every_small_dataset_lies_below_the_upper_bound(relation: str, n: int, b: int, replacement: bool) -> None:
    rng = np.random.default_rng(7)
    sigma = 1.0
    bounds = {eps: _bounds(sigma, b, n, replacement, relation, eps) for eps in EPSILONS}
    for big, small in _neighbours(relation, rng, n):
        if relation == "add_remove" and b > len(small):
            continue
        p, q = _sums(big, b, replacement), _sums(small, b, replacement)
        for order in _deltas(p, q, sigma, EPSILONS):  # both orders
            for eps, value in zip(EPSILONS, order):
                assert value <= bounds[eps][1] + 1e-9


@pytest.mark.parametrize(("n", "b"), [(4, 2), (6, 3)])
def test_add_remove_without_replacement_is_tight(n: int, b: int) -> None:
    """Others -1, x = +1: M(D') = (1 - g) N(-b) + g N(2 - b), M(D) = N(-b) exactly (g = b/n)."""
    sigma = 1.0
    big, small = [-1.0] * (n - 1) + [1.0], [-1.0] * (n - 1)
    p, q = _sums(big, b, False), _sums(small, b, False)
    for eps, exact in zip(EPSILONS, _deltas(p, q, sigma, EPSILONS)[0]):
        lower, upper = _bounds(sigma, b, n, False, "add_remove", eps)
        assert lower - 1e-9 <= exact <= upper + 1e-9
        assert upper - lower <= 0.01 * upper + 1e-9  # the certified gap of the PLD engine


def test_replace_one_realised_pair_reaches_the_lower_bound() -> None:
    """Others -1, x = +1, x' = -1 realise the remove pair: the lower bound is reached."""
    sigma, n, b = 1.0, 5, 2
    others = [-1.0] * (n - 1)
    p, q = _sums(others + [1.0], b, False), _sums(others + [-1.0], b, False)
    for eps, exact in zip(EPSILONS, _deltas(p, q, sigma, EPSILONS)[0]):
        lower, _ = _bounds(sigma, b, n, False, "replace_one", eps)
        assert exact >= lower - 1e-9


def test_zero_out_realised_pair_reaches_the_lower_bound() -> None:
    """Others -1, x = +1 against x zeroed: g N(2) + (1 - g) N(0) against g N(1) + (1 - g) N(0), shifted."""
    sigma, n, b = 1.0, 5, 2
    others = [-1.0] * (n - 1)
    p, q = _sums(others + [1.0], b, False), _sums(others + [0.0], b, False)
    for eps, exact in zip(EPSILONS, _deltas(p, q, sigma, EPSILONS)[0]):
        lower, upper = _bounds(sigma, b, n, False, "zero_out", eps)
        assert lower - 1e-9 <= exact <= upper + 1e-9


def test_full_batch_is_the_gaussian_at_half_the_noise() -> None:
    """b = n: every step releases the whole sum; a neighbour moves it by up to 2: N(2, s^2) against N(0, s^2)."""
    sigma, steps = 3.0, 10
    mu = 2.0 * math.sqrt(steps) / sigma
    for eps in (0.0, 1.0, 3.0):
        exact = norm.cdf(-eps / mu + mu / 2) - math.exp(eps) * norm.cdf(-eps / mu - mu / 2)
        for relation in ("add_remove", "replace_one"):
            res = fixed_size_bounds(noise_multiplier=sigma, batch_size=50, dataset_size=50, steps=steps,
                                    epsilon=eps, neighboring_relation=relation)
            assert res.lower.value <= exact * (1 + 1e-9) + 1e-15
            assert exact <= res.upper.value * (1 + 1e-9)
            assert res.upper.value <= exact * 1.01


def test_add_remove_without_replacement_equals_poisson_at_half_sigma() -> None:
    fixed = PLDAccountant().compose(FixedSizeSampledGaussianMechanism(noise_multiplier=2.0, batch_size=64,
                                                                       dataset_size=10_000), 500)
    poisson = PLDAccountant().compose(PoissonSampledGaussianMechanism(noise_multiplier=1.0,
                                                                      sampling_probability=64 / 10_000), 500)
    assert fixed.epsilon_bounds(1e-6) == poisson.epsilon_bounds(1e-6)


def test_rdp_order_two_closed_form() -> None:
    """D_2((1-g) N(0) + g N(2), N(0)) = log(1 + g^2 (e^{4/s^2} - 1)) at s = sigma."""
    sigma, b, n = 3.0, 100, 10_000
    g = b / n
    m = FixedSizeSampledGaussianMechanism(noise_multiplier=sigma, batch_size=b, dataset_size=n,
                                          neighboring_relation="replace_one")
    ours = float(mechanism_rdp(m, np.array([2.0]))[0])
    exact = math.log1p(g * g * math.expm1(4.0 / sigma**2))
    assert exact <= ours <= exact * (1 + 1e-6)


def test_rdp_replace_one_sensitivity_is_two_dp_accounting_issue_378() -> None:
    """dp-accounting applies its without-replacement RDP to sensitivity 1 (issue #378).

    Ours is the exact RDP of a realised pair (test above), so dp-accounting's value at
    sigma lying below it shows the underestimate; its value at sigma/2 (the right
    sensitivity, through the looser Wang-Balle-Kasiviswanathan bound) lies above.
    Reference: tests/reference/fixed_size_dp_accounting.json, made by
    bench/make_fixed_size_reference.py with dp-accounting 0.6.0.
    """
    data = json.loads(REFERENCE.read_text())
    for case in data["cases"]:
        orders = np.array(case["orders"])
        m = FixedSizeSampledGaussianMechanism(noise_multiplier=case["sigma"], batch_size=case["batch_size"],
                                              dataset_size=case["dataset_size"], neighboring_relation="replace_one")
        ours = mechanism_rdp(m, orders)
        assert np.all(np.array(case["rdp_at_sigma"]) <= ours * (1 + 1e-9))
        assert np.all(ours <= np.array(case["rdp_at_half_sigma"]) * (1 + 1e-9))
        # The underestimate is real somewhere on every case's grid.
        assert np.any(np.array(case["rdp_at_sigma"]) < 0.95 * ours)


def test_symmetrised_step_dominates_both_orders() -> None:
    """One step of the symmetrised pair is at least max(delta_remove, delta_add) (closed forms, T = 1)."""
    sigma, g, d = 0.8, 0.05, 1e-3
    r = _core.pld.gaussian_step(sigma, g, "remove", d, -80.0, 2**24)
    a = _core.pld.gaussian_step(sigma, g, "add", d, -80.0, 2**24)
    sym = _core.pld.symmetrised_step(r, a, r)
    composed = _core.pld.ComposedPld([sym], [1.0], 0.0, 2**24)
    eps = np.array([0.0, 0.1, 0.5, 1.0, 2.0, 4.0])
    upper = composed.delta_bounds(eps)[1]

    def exact(first: str) -> np.ndarray:
        x = np.linspace(-15, 16, 2_000_001)
        p = (1 - g) * norm.pdf(x, scale=sigma) + g * norm.pdf(x, loc=1.0, scale=sigma)
        q = norm.pdf(x, scale=sigma)
        if first == "add":
            p, q = q, p
        return np.array([np.trapezoid(np.maximum(p - math.exp(e) * q, 0.0), x) for e in eps])

    assert np.all(upper >= np.maximum(exact("remove"), exact("add")) - 1e-10)


def test_compare_has_fixed_size_rows() -> None:
    c = compare_run(noise_multiplier=2.0, epochs=2, batch_size=100, dataset_size=5_000, delta=1e-5)
    names = {name for name, _ in c.rows}
    assert {"fixed_size", "fixed_size_replacement"} <= names
    p_lower = c.value("poisson", "lower bound").value
    for name in ("fixed_size", "fixed_size_replacement"):
        lower, upper = c.value(name, "lower bound").value, c.value(name, "upper bound").value
        assert lower <= upper
        # Never more private than Poisson at the same rate (the Poisson pairs are realised).
        assert upper >= p_lower
        assert "zero_out" in c.value(name, "upper bound").method


@settings(max_examples=12, deadline=None)
@given(sigma=st.floats(0.6, 8.0), steps=st.integers(1, 3000), q=st.floats(1e-4, 0.2))
def test_monotone_and_ordered(sigma: float, steps: int, q: float) -> None:
    n = 100_000
    b = max(1, round(q * n))
    kw = {"batch_size": b, "dataset_size": n, "delta": 1e-5}
    base = fixed_size_bounds(noise_multiplier=sigma, steps=steps, **kw)
    assert base.lower.value <= base.upper.value
    more_noise = fixed_size_bounds(noise_multiplier=sigma * 1.25, steps=steps, **kw)
    assert more_noise.lower.value <= base.upper.value
    more_steps = fixed_size_bounds(noise_multiplier=sigma, steps=steps + 50, **kw)
    assert base.lower.value <= more_steps.upper.value
    replace = fixed_size_bounds(noise_multiplier=sigma, steps=steps, neighboring_relation="replace_one", **kw)
    assert base.lower.value <= replace.upper.value


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"batch_size": 11, "dataset_size": 10}, "batch_size must be an integer in \\[1, dataset_size = 10\\]"),
        ({"batch_size": 0, "dataset_size": 10}, "batch_size"),
        ({"batch_size": 2, "dataset_size": 10, "neighboring_relation": "swap"}, "neighboring_relation"),
        ({"batch_size": 2, "dataset_size": 10, "replacement": "yes"}, "replacement must be True or False"),
        ({"batch_size": 2, "dataset_size": 10, "noise_multiplier": 0.0}, "noise_multiplier"),
    ],
)
def test_bad_input_is_rejected_by_name(kwargs: dict[str, object], match: str) -> None:
    args: dict[str, object] = {"noise_multiplier": 1.0, "steps": 10, "delta": 1e-5, **kwargs}
    with pytest.raises(ValueError, match=match):
        fixed_size_bounds(**args)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [({"estimates": "yes"}, "estimates must be True or False"),
     ({"max_batch_size": 0, "epochs": 1, "batch_size": 10, "dataset_size": 100}, "max_batch_size must be an integer"),
     ({"max_batch_size": 10}, "max_batch_size \\(truncated Poisson\\) needs the run as epochs")],
)
def test_compare_run_rejects_bad_sampler_options(kwargs: dict[str, object], match: str) -> None:
    run: dict[str, object] = {"sampling_probability": 0.01, "steps": 100}
    if "epochs" in kwargs:
        run = {}
    with pytest.raises(ValueError, match=match):
        compare_run(noise_multiplier=1.0, delta=1e-5, **run, **kwargs)  # type: ignore[arg-type]

"""DP-SGD-JL: one step of both projection models against mpmath quadrature, the {x} vs {x, x} regression,
monotonicity in r and convergence to plain DP-SGD, and the heavy tail of r = 1, 2."""

from __future__ import annotations

import math
import tomllib
from pathlib import Path

import numpy as np
import pytest

from dpacct import _core
from dpacct.fdp import DPSGDJLMechanism, FDPAccountant
from dpacct.fdp import jl
from dpacct.fdp.calibration import jl_dim_for_budget, noise_multiplier_for_budget

REFERENCE = tomllib.loads((Path(__file__).parent / "reference" / "fdp_jl_quadrature.toml").read_text())["case"]
RTOL_QUAD = 1e-4  # mpmath at 15 digits with split intervals: far better than the 3 digits quoted in the issue
D_STEP = 0.02  # one step on a fixed grid: the connect-the-dots error is ~D^2/8 in epsilon
RTOL_MONOTONE = 0.03  # epsilon upper bounds at relative_accuracy 0.02 (plus bucket error) may wiggle by this much


def _one_step(model: str, r: int, sigma: float, epsilon: float, quantiles: int = 48) -> tuple[float, float]:
    """Certified (lower, upper) delta(epsilon) of one q = 1 step, max over both directions, at a fixed grid."""
    w_cap = jl.cap_for_budget(r=r, noise_multiplier=sigma, budget=1e-12)
    lower = upper = 0.0
    for direction in ("remove", "add"):
        kwargs = {"noise_multiplier": sigma, "sampling_probability": 1.0, "r": r, "w_cap": w_cap,
                  "quantiles": quantiles, "direction": direction, "discretization": D_STEP}
        if model == "shared":
            step = jl.shared_step(cache={}, **kwargs)  # type: ignore[arg-type]
        else:
            step = jl.per_example_step(**kwargs)  # type: ignore[arg-type]
        lo, up = _core.pld.ComposedPld([step], [1.0], 0.0, 2**22).delta_bounds(np.array([epsilon]))
        lower, upper = max(lower, float(lo[0])), max(upper, float(up[0]))
    return lower, upper


def test_reference_values_match_the_issue() -> None:
    """The stored quadrature reproduces the figures quoted for q = 1, T = 1, r = 5, sigma = 2 at epsilon = 2."""
    case = next(c for c in REFERENCE if c["r"] == 5)
    assert case["paper_pair"] == pytest.approx(1.44e-3, rel=5e-3)
    assert case["copies_pair"] == pytest.approx(3.85e-3, rel=5e-3)
    assert case["revealed"] == pytest.approx(6.64e-3, rel=5e-3)


@pytest.mark.parametrize("case", REFERENCE, ids=lambda c: f"r{c['r']}")
def test_per_example_step_brackets_paper_pair(case: dict[str, float]) -> None:
    """Per-example projections: the certified bounds of one step bracket the paper's pair (mpmath)."""
    lower, upper = _one_step("per_example", int(case["r"]), case["sigma"], case["epsilon"])
    assert lower <= case["paper_pair"] * (1 + RTOL_QUAD)
    assert upper >= case["paper_pair"] * (1 - RTOL_QUAD)
    assert upper <= 2.0 * case["paper_pair"]  # and it is informative


@pytest.mark.parametrize("case", REFERENCE, ids=lambda c: f"r{c['r']}")
def test_shared_step_brackets_revealed_mixture_and_covers_copies(case: dict[str, float]) -> None:
    """Shared projections: the step brackets E_W[delta_Gauss(mu_W)] and lies above the {x} vs {x, x} pair."""
    lower, upper = _one_step("shared", int(case["r"]), case["sigma"], case["epsilon"])
    assert lower <= case["revealed"] * (1 + RTOL_QUAD)
    assert upper >= case["revealed"] * (1 - RTOL_QUAD)
    assert upper >= case["paper_pair"]
    if "copies_pair" in case:  # regression: the paper's pair is not a worst case for shared projections
        assert upper >= case["copies_pair"]
        assert case["copies_pair"] > 2.5 * case["paper_pair"]


def _copies_lower(r: int, sigma: float, epsilon: float, copies: int, quantiles: int = 64) -> float:
    """Certified lower bound on delta(epsilon) of one q = 1 step of the copies pair, max over both directions."""
    w_cap = jl.cap_for_budget(r=r, noise_multiplier=sigma, budget=1e-12)
    cells = jl.copies_cells(noise_multiplier=sigma, sampling_probability=1.0, r=r, copies=copies, w_cap=w_cap,
                            quantiles=quantiles, spread=16 * quantiles)
    lower = 0.0
    for direction in ("remove", "add"):
        step = jl.copies_step(cells, direction=direction, discretization=0.005)
        lo, _ = _core.pld.ComposedPld([step], [1.0], 0.0, 2**22).delta_bounds(np.array([epsilon]))
        lower = max(lower, float(lo[0]))
    return lower


def test_copies_pair_lower_bound_brackets_the_x_xx_regression() -> None:
    """{x} vs {x, x} under shared projections (q = 1, T = 1, r = 5, sigma = 2, epsilon = 2).

    The certified lower bound from the copies pair lies below the mpmath value
    3.848e-3 and the shared upper bound above it; it is informative (within 10 %
    of it: the bucket brackets are first order in the bucket width, about 2 %
    here) and exceeds the paper's pair's exact 1.445e-3, so the paper's pair is
    certified not to be a worst case for shared projections.
    """
    case = next(c for c in REFERENCE if c["r"] == 5)
    lower = _copies_lower(5, 2.0, 2.0, copies=2)
    _, shared_upper = _one_step("shared", 5, 2.0, 2.0)
    assert lower <= case["copies_pair"] * (1 + RTOL_QUAD) <= shared_upper
    assert lower >= 0.9 * case["copies_pair"]
    assert lower > 2.5 * case["paper_pair"]


def test_copies_pair_with_one_copy_is_the_paper_pair() -> None:
    """k = 1 (the record alone) is the paper's pair: its lower bound stays below the mpmath value, within 10 %."""
    case = next(c for c in REFERENCE if c["r"] == 3)
    lower = _copies_lower(3, 1.5, 1.0, copies=1)
    assert 0.9 * case["paper_pair"] <= lower <= case["paper_pair"] * (1 + RTOL_QUAD)


def test_copies_cells_bracket_probabilities() -> None:
    """The cell brackets are ordered and bracket total mass 1 under both datasets (q = 0.3, k = 3)."""
    w_cap = jl.cap_for_budget(r=8, noise_multiplier=1.0, budget=1e-12)
    p_lo, p_hi, q_lo, q_hi = jl.copies_cells(noise_multiplier=1.0, sampling_probability=0.3, r=8, copies=3,
                                             w_cap=w_cap, quantiles=32, spread=256)
    assert np.all(p_lo <= p_hi) and np.all(q_lo <= q_hi) and np.all(p_lo >= 0.0)
    assert math.fsum(p_lo.tolist()) <= 1.0 <= math.fsum(p_hi.tolist())
    assert math.fsum(q_lo.tolist()) <= 1.0 <= math.fsum(q_hi.tolist())
    assert math.fsum(p_hi.tolist()) - math.fsum(p_lo.tolist()) < 0.02


def _epsilon_bounds(r: int | None, projections: str = "shared") -> tuple[float, float]:
    acct = FDPAccountant(quantiles=32, relative_accuracy=0.02)
    if r is None:
        acct.step(noise_multiplier=1.0, sampling_probability=0.1, count=20)
    else:
        acct.compose(DPSGDJLMechanism(noise_multiplier=1.0, sampling_probability=0.1, jl_dim=r,
                                      projections=projections), 20)  # type: ignore[arg-type]
    lower, upper = acct.epsilon_bounds(1e-5)
    return float(lower), float(upper)


@pytest.mark.parametrize("projections", ["shared", "per_example"])
def test_epsilon_falls_with_r_and_converges_to_dpsgd(projections: str) -> None:
    """Epsilon falls as r grows (smaller r, much larger epsilon) and approaches plain DP-SGD by r = 1e4."""
    plain_lower, plain_upper = _epsilon_bounds(None)
    previous = math.inf
    for r in (10, 100, 10_000):
        lower, upper = _epsilon_bounds(r, projections)
        assert lower <= upper
        assert upper <= previous * (1 + RTOL_MONOTONE)
        assert upper >= plain_lower  # JL only adds randomness to the sensitivity: never below DP-SGD
        previous = upper
    assert previous == pytest.approx(plain_upper, rel=RTOL_MONOTONE)
    assert _epsilon_bounds(10, projections)[1] > 1.5 * plain_upper


def test_shared_is_above_per_example() -> None:
    """The shared-projection bound is at least the per-example one; its lower bound at least the paper pair's."""
    shared = _epsilon_bounds(10, "shared")
    per_example = _epsilon_bounds(10, "per_example")
    assert shared[1] >= per_example[1] * (1 - RTOL_MONOTONE)
    assert shared[0] >= per_example[0] * (1 - 1e-12)


@pytest.mark.slow
def test_copies_raise_the_shared_lower_bound() -> None:
    """q = 1, T = 2, r = 5, sigma = 2: the two-copy pair's delta(2) lower bound beats the paper pair's (1.6x)."""
    acct = FDPAccountant(quantiles=32, relative_accuracy=0.05)
    acct.compose(DPSGDJLMechanism(noise_multiplier=2.0, sampling_probability=1.0, jl_dim=5), 2)
    bounds = acct.delta_bounds(2.0)
    by_copies = bounds.details["lower_by_copies"]
    assert bounds.lower == max(by_copies.values())
    assert by_copies[2] > 1.3 * by_copies[1]
    assert bounds.lower <= bounds.upper


def test_mechanism_validation() -> None:
    """DPSGDJLMechanism is keyword-only and checks its parameters with dpacct's wording."""
    with pytest.raises(ValueError, match=r"^jl_dim must be an integer >= 1, got 0"):
        DPSGDJLMechanism(noise_multiplier=1.0, sampling_probability=0.1, jl_dim=0)
    with pytest.raises(ValueError, match=r"^projections must be one of"):
        DPSGDJLMechanism(noise_multiplier=1.0, sampling_probability=0.1, jl_dim=3, projections="some")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=r"^sampling_probability must be in \[0, 1\], got 2.0"):
        DPSGDJLMechanism(noise_multiplier=1.0, sampling_probability=2.0, jl_dim=3)
    with pytest.raises(TypeError):
        DPSGDJLMechanism(1.0, 0.1, 3)  # type: ignore[misc]


def test_buckets_are_a_probability_partition() -> None:
    """Bucket masses, the revealed bottom and the top sum to 1, the bottom absorbing the rounding."""
    b = jl.make_buckets(5, 1e-3, 64)
    total = math.fsum(b.masses.tolist()) + b.bottom + b.top
    assert total == pytest.approx(1.0, abs=1e-12)
    assert total >= 1.0 - 1e-15
    assert np.all(np.diff(b.edges) > 0) and b.edges[0] == 1e-3


@pytest.mark.slow
@pytest.mark.parametrize("r", [1, 2])
def test_heavy_tail_is_astronomical_but_finite(r: int) -> None:
    """r = 1, 2: a finite certified upper bound (half of delta spent on revealing the smallest W), far above 100,
    the note says why, and the realised lower bound lies below it."""
    acct = FDPAccountant(quantiles=32, relative_accuracy=0.02, copies=1)
    acct.compose(DPSGDJLMechanism(noise_multiplier=1.0, sampling_probability=0.1, jl_dim=r), 20)
    bounds = acct.epsilon_bounds(1e-5)
    assert math.isfinite(bounds.upper) and bounds.upper > 1e4
    assert 100.0 < bounds.lower <= bounds.upper
    assert bounds.details["revealed_tail_mass"] <= 0.5e-5 * (1 + 1e-5)  # half of delta, plus the bucket rounding
    assert "astronomically large but finite" in bounds.details["note"]


@pytest.mark.slow
def test_issue_run_numbers() -> None:
    """sigma = 1, q = 0.01, T = 1000, r = 30, delta = 1e-5: shared ~2.6, the paper's pair ~2.01, DP-SGD ~1.83."""
    def eps(projections: str | None) -> tuple[float, float]:
        acct = FDPAccountant()
        if projections is None:
            acct.step(noise_multiplier=1.0, sampling_probability=0.01, count=1000)
        else:
            acct.compose(DPSGDJLMechanism(noise_multiplier=1.0, sampling_probability=0.01, jl_dim=30,
                                          projections=projections), 1000)  # type: ignore[arg-type]
        lower, upper = acct.epsilon_bounds(1e-5)
        return float(lower), float(upper)

    shared, paper, plain = eps("shared"), eps("per_example"), eps(None)
    assert shared[1] == pytest.approx(2.6, abs=0.1)
    assert paper[0] <= 2.01 <= paper[1] * 1.01
    assert plain[0] <= 1.83 <= plain[1] * 1.01


@pytest.mark.slow
def test_calibration_round_trips() -> None:
    """sigma for a budget meets it; the smallest r for a budget meets it and r - 1 does not."""
    res = noise_multiplier_for_budget(epsilon=4.0, delta=1e-5, sampling_probability=0.1, steps=20, jl_dim=30,
                                      relative_tolerance=0.02, quantiles=32)
    assert res.epsilon <= 4.0
    dim = jl_dim_for_budget(epsilon=4.5, delta=1e-5, noise_multiplier=1.0, sampling_probability=0.1, steps=20,
                            quantiles=32)
    assert dim.epsilon <= 4.5
    assert _epsilon_bounds(dim.jl_dim - 1)[1] > 4.5 or dim.jl_dim == 1


hypothesis = pytest.importorskip("hypothesis")
from hypothesis import given  # noqa: E402
from hypothesis import strategies as st  # noqa: E402


@given(r1=st.integers(3, 40), extra=st.integers(0, 60), sigma=st.floats(1.0, 3.0), more_noise=st.floats(1.0, 1.5))
@hypothesis.settings(max_examples=6)
def test_bounds_are_consistent_with_monotonicity(r1: int, extra: int, sigma: float, more_noise: float) -> None:
    """The truth falls in r and in sigma, so a larger r (or sigma) has a lower bound below the smaller one's upper bound."""
    lower_small_r, upper_small_r = _one_step("shared", r1, sigma, 1.0, quantiles=16)
    lower_big_r, upper_big_r = _one_step("shared", r1 + extra, sigma * more_noise, 1.0, quantiles=16)
    assert lower_small_r <= upper_small_r and lower_big_r <= upper_big_r
    assert lower_big_r <= upper_small_r

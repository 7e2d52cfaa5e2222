"""Generic discrete PLD: certified bounds against the exact Gaussian curve, the PLD accountant and numpy."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.special import log_ndtr

from dpacct import PLDAccountant, PoissonSampledGaussianMechanism, gaussian
from dpacct.pld_discrete import DiscretePLD

D = 1e-3  # loss grid width used throughout
# With edges on the grid, each step's loss moves by <= D under either rounding, so the
# two bounds on epsilon are at most 2 k D apart after k steps (plus bisection noise).
EPS_GAP_PER_STEP = 4 * D  # per step the upper spread moves a loss by <= D and the nearest label by <= D/2; x2 margin
# Mass conservation: the pessimistic deficit charge is 4 ulps plus n ulps^2; the
# single-step PMF is a plain copy, so the sum is within n ulps of 1.
ULP = np.finfo(float).eps


def _mixture_log_cdf(t: np.ndarray, sigma: float, q: float) -> np.ndarray:
    """log CDF of (1-q) N(0, s^2) + q N(1, s^2); via the survival function right of 1/2 to stay accurate near F = 1."""
    log_1mq, log_q = math.log1p(-q), math.log(q)
    left = np.logaddexp(log_1mq + log_ndtr(t / sigma), log_q + log_ndtr((t - 1) / sigma))
    log_sf = np.logaddexp(log_1mq + log_ndtr(-t / sigma), log_q + log_ndtr((1 - t) / sigma))
    right = np.log1p(-np.exp(np.minimum(log_sf, -math.log(2.0))))  # sf <= 1/2 for t >= 1/2 when q < 1/2
    return np.where(t < 0.5, left, right)


def _mixture_pld(sigma: float, q: float, *, pessimistic: bool, reverse: bool) -> DiscretePLD:
    """Poisson-subsampled Gaussian, remove direction (reverse=True: add direction), SPEC §5."""
    log_1mq, log_q = math.log1p(-q), math.log(q)
    x = np.linspace(-12 * sigma, 1 + 12 * sigma, 40001)
    return DiscretePLD.from_log_cdfs(
        log_cdf_p=lambda t: _mixture_log_cdf(t, sigma, q),
        log_cdf_q=lambda t: log_ndtr(t / sigma),
        log_pdf_p=lambda t: np.logaddexp(log_1mq - 0.5 * (t / sigma) ** 2, log_q - 0.5 * ((t - 1) / sigma) ** 2),
        log_pdf_q=lambda t: -0.5 * (t / sigma) ** 2,
        grid=x,
        discretization=D,
        pessimistic=pessimistic,
        reverse=reverse,
    )


@pytest.mark.parametrize(("sigma", "count"), [(1.0, 1), (2.0, 4), (3.0, 9), (0.7, 3)])
def test_gaussian_compositions_bracket_the_exact_curve(sigma: float, count: int) -> None:
    """k Gaussians are one Gaussian with sigma/sqrt(k) (Balle & Wang 2018): lower <= exact <= upper, gap <= 2kD."""
    upper = DiscretePLD.from_gaussian(noise_multiplier=sigma, discretization=D).self_compose(count)
    lower = DiscretePLD.from_gaussian(noise_multiplier=sigma, discretization=D, pessimistic=False).self_compose(count)
    eps = np.array([0.0, 0.25, 1.0, 2.0, 4.0])
    exact = gaussian.delta_for_epsilon(noise_multiplier=sigma / math.sqrt(count), epsilon=eps)
    assert np.all(lower.get_delta(eps) <= exact)
    assert np.all(exact <= upper.get_delta(eps))
    for delta in (1e-2, 1e-5, 1e-8):
        e_exact = gaussian.epsilon_for_delta(noise_multiplier=sigma / math.sqrt(count), delta=delta)
        e_low, e_up = lower.get_epsilon(delta), upper.get_epsilon(delta)
        assert e_low <= e_exact <= e_up
        assert e_up - e_low <= EPS_GAP_PER_STEP * count + 1e-9


def test_subsampled_gaussian_agrees_with_pld_accountant() -> None:
    """The mixture pair, both directions, brackets the same truth as PLDAccountant's certified interval."""
    sigma, q, count = 1.0, 0.1, 20
    eps = np.array([0.5, 1.0, 2.0])
    ours = {}
    for pessimistic in (True, False):
        d = [
            _mixture_pld(sigma, q, pessimistic=pessimistic, reverse=r).self_compose(count).get_delta(eps)
            for r in (False, True)
        ]
        ours[pessimistic] = np.maximum(d[0], d[1])
    mechanism = PoissonSampledGaussianMechanism(noise_multiplier=sigma, sampling_probability=q)
    acct = PLDAccountant().compose(mechanism, count)
    lower, upper = acct.delta_bounds(eps)
    assert np.all(ours[False] <= upper)
    assert np.all(lower <= ours[True])
    assert np.all(ours[False] <= ours[True])
    # Accuracy: each step's loss moves by at most D (rounding) plus the loss's change across
    # one cell (|L'| <= 1/sigma^2 = 1 times the cell width 26 sigma / 40000), so our
    # bounds are within count * shift in epsilon of the truth, hence of the accountant's bounds.
    shift = count * (D + 26 * sigma / 40000 / sigma**2)
    upper_left, lower_right = acct.delta_bounds(eps - shift).upper, acct.delta_bounds(eps + shift).lower
    assert np.all(ours[True] <= upper_left)
    assert np.all(ours[False] >= lower_right)


def test_reverse_is_the_add_direction() -> None:
    """reverse=True gives a different curve than the remove direction (the mixture pair is asymmetric)."""
    eps = np.array([0.5, 1.0])
    remove = _mixture_pld(1.0, 0.1, pessimistic=True, reverse=False).get_delta(eps)
    add = _mixture_pld(1.0, 0.1, pessimistic=True, reverse=True).get_delta(eps)
    assert not np.allclose(remove, add, rtol=1e-3)


def _step(masses: np.ndarray, losses: np.ndarray) -> DiscretePLD:
    """A pessimistic step: cells with the given P-masses, Q-masses e^-L P (L at the right edge), masses[-1] at +inf."""
    with np.errstate(divide="ignore"):  # zero masses become -inf log-masses, as intended
        log_p = np.log(masses)
    log_q = log_p - np.append(losses, np.inf)  # the +inf cell has no Q-mass
    return DiscretePLD.from_cells(log_p=log_p, log_q=log_q, log_ratio_at_edges=losses, discretization=1.0)


def test_composition_of_cells_brackets_exact_enumeration() -> None:
    """Cells with one loss each (on the grid): the composed bounds bracket delta by exact enumeration."""
    # Partition (-inf, 0], (0, 1], (1, 2], (2, inf) with P = (.1, .4, .3, .2) and losses -1, 0.5, 1, +inf:
    # the loss is constant on each cell only at the grid points, so spread cells are checked one-sided.
    log_p = np.log([0.1, 0.4, 0.3, 0.2])
    losses = np.array([-1.0, 0.5, 1.0, np.inf])
    log_q = np.log([0.1, 0.4, 0.3, 0.0 + 1e-300]) - np.where(np.isfinite(losses), losses, 0.0)
    log_q[-1] = -np.inf
    upper = DiscretePLD.from_cells(log_p=log_p, log_q=log_q, log_ratio_at_edges=[-1.0, 1.0, 1.0], discretization=0.5)
    lower = DiscretePLD.from_cells(log_p=log_p, log_q=log_q, discretization=0.5, pessimistic=False)
    p = np.array([0.1, 0.4, 0.3])
    for count in (1, 2, 3):
        exact_losses, exact_p = np.zeros(1), np.ones(1)
        for _ in range(count):  # enumerate the finite part
            exact_losses = (exact_losses[:, None] + losses[None, :3]).ravel()
            exact_p = (exact_p[:, None] * p[None, :]).ravel()
        for eps in (0.0, 0.5, 1.0, 2.0):
            exact = float(np.sum(exact_p * np.clip(1.0 - np.exp(eps - exact_losses), 0.0, None))) + 1 - 0.8**count
            assert lower.self_compose(count).get_delta(eps) <= exact * (1 + 1e-12) + 1e-15
            assert exact <= upper.self_compose(count).get_delta(eps) * (1 + 1e-12) + 1e-15


def test_single_step_pmf_conserves_mass() -> None:
    """sum(pmf) + infinity_mass == 1 within n ulps for one step; a composition has no pmf()."""
    one = DiscretePLD.from_gaussian(noise_multiplier=1.0, discretization=D)
    pmf = one.pmf()
    assert abs(pmf.mass.sum() + pmf.infinity_mass - 1.0) <= pmf.mass.size * ULP
    assert np.all(pmf.mass >= 0.0)
    with pytest.raises(ValueError, match=r"^pmf\(\) is available for a single step, got a composition of 5 steps"):
        one.self_compose(5).pmf()


def test_missing_mass_goes_to_infinity_when_pessimistic() -> None:
    """P-mass absent from the cells is charged to the +inf atom (pessimistic) and dropped (optimistic)."""
    log_p = np.log([0.2, 0.3])  # 0.5 missing
    pess = DiscretePLD.from_cells(log_p=log_p, log_q=np.log([0.5, 0.5]), log_ratio_at_edges=[0.0], discretization=0.1)
    assert pess.pmf().infinity_mass >= 0.8  # 0.3 (right tail cell) + 0.5 missing
    opt = DiscretePLD.from_cells(log_p=log_p, log_q=np.log([0.5, 0.5]), discretization=0.1, pessimistic=False)
    assert opt.pmf().infinity_mass == 0.0
    assert opt.get_delta(0.0) == pytest.approx(0.0)  # both buckets have loss < 0


def test_epsilon_inverts_delta() -> None:
    """get_delta(get_epsilon(delta)) <= delta for the upper bound, and > delta just below the lower bound's epsilon."""
    upper = DiscretePLD.from_gaussian(noise_multiplier=0.8).self_compose(3)
    lower = DiscretePLD.from_gaussian(noise_multiplier=0.8, pessimistic=False).self_compose(3)
    for delta in (1e-3, 1e-6, 1e-9):
        e = upper.get_epsilon(delta)
        assert upper.get_delta(e) <= delta
        assert upper.get_delta(e - 1e-6) > delta
        e = lower.get_epsilon(delta)
        assert lower.get_delta(e) > delta
        assert lower.get_delta(e + 1e-6) <= delta


def test_identity_and_infinite_atom() -> None:
    """Zero compositions give delta 0; an atom at +inf larger than delta gives epsilon = inf."""
    assert DiscretePLD.from_gaussian(noise_multiplier=1.0).self_compose(0).get_delta(0.5) == 0.0
    step = _step(np.array([0.5, 0.5]), np.array([0.0]))  # half the mass at +inf
    assert step.get_delta(100.0) >= 0.5
    assert step.get_epsilon(0.1) == math.inf


@settings(max_examples=15)
@given(
    sigma=st.floats(0.5, 4.0),
    count=st.integers(1, 6),
    eps=st.floats(0.0, 6.0),
)
def test_pessimistic_is_above_optimistic(sigma: float, count: int, eps: float) -> None:
    """The upper bound is never below the lower bound, and both bracket the exact Gaussian curve."""
    upper = DiscretePLD.from_gaussian(noise_multiplier=sigma, discretization=1e-2).self_compose(count)
    lower = DiscretePLD.from_gaussian(noise_multiplier=sigma, discretization=1e-2, pessimistic=False)
    lower = lower.self_compose(count)
    exact = gaussian.delta_for_epsilon(noise_multiplier=sigma / math.sqrt(count), epsilon=eps)
    assert lower.get_delta(eps) <= exact <= upper.get_delta(eps)


@settings(max_examples=15)
@given(sigma=st.floats(0.5, 4.0), count=st.integers(1, 6), eps=st.floats(0.0, 6.0))
def test_delta_grows_with_count(sigma: float, count: int, eps: float) -> None:
    """One more composed step never lowers the certified upper bound on delta (nor delta itself)."""
    one = DiscretePLD.from_gaussian(noise_multiplier=sigma, discretization=1e-2)
    assert one.self_compose(count + 1).get_delta(eps) >= one.self_compose(count).get_delta(eps)


def test_bad_input_raises() -> None:
    """Bad cells, ratios, sizes and arguments raise ValueError/TypeError naming the parameter."""
    lp, lq, lp3 = np.log([0.5, 0.5]), np.log([0.5, 0.5]), np.log([0.3, 0.3, 0.4])
    with pytest.raises(ValueError, match=r"^log_ratio_at_edges must be non-decreasing"):
        DiscretePLD.from_cells(log_p=lp3, log_q=lp3, log_ratio_at_edges=[1.0, 0.0], discretization=0.1)
    with pytest.raises(ValueError, match=r"^log_ratio_at_edges is required"):
        DiscretePLD.from_cells(log_p=lp, log_q=lq, discretization=0.1)
    with pytest.raises(ValueError, match=r"^log_p must be <= 0"):
        DiscretePLD.from_cells(log_p=[0.5, -1.0], log_q=lq, log_ratio_at_edges=[0.0], discretization=0.1)
    with pytest.raises(ValueError, match=r"^log_p must describe at most probability 1"):
        DiscretePLD.from_cells(log_p=np.log([0.9, 0.9]), log_q=lq, log_ratio_at_edges=[0.0], discretization=0.1)
    with pytest.raises(ValueError, match=r"^log_p and log_q must have the same length"):
        DiscretePLD.from_cells(log_p=lp, log_q=np.log([1.0]), log_ratio_at_edges=[0.0], discretization=0.1)
    with pytest.raises(ValueError, match=r"^log_ratio_at_edges must be a 1-d array of length"):
        DiscretePLD.from_cells(log_p=lp, log_q=lq, log_ratio_at_edges=[0.0, 1.0], discretization=0.1)
    with pytest.raises(ValueError, match=r"^discretization must be finite and > 0, got -1.0"):
        DiscretePLD.from_cells(log_p=lp, log_q=lq, log_ratio_at_edges=[0.0], discretization=-1.0)
    with pytest.raises(TypeError, match=r"^pessimistic must be a bool"):
        DiscretePLD.from_cells(
            log_p=lp, log_q=lq, log_ratio_at_edges=[0.0], discretization=0.1, pessimistic=1  # type: ignore[arg-type]
        )
    with pytest.raises(ValueError, match=r"^the losses span \d+ grid points \(more than 2\); increase discretization"):
        DiscretePLD.from_cells(log_p=lp3, log_q=lp3, log_ratio_at_edges=[0.0, 5.0], discretization=0.1, max_size=2)
    with pytest.raises(ValueError, match=r"^discretization 0.001 is too fine for noise_multiplier 1.0: .* increase"):
        DiscretePLD.from_gaussian(noise_multiplier=1.0, max_size=64)
    with pytest.raises(ValueError, match=r"^the composed PLD needs an FFT larger than max_size 40000 .*increase discretization"):
        DiscretePLD.from_gaussian(noise_multiplier=1.0, max_size=40000).self_compose(2).get_delta(1.0)
    with pytest.raises(ValueError, match=r"^grid must be a non-empty 1-d array of finite, strictly increasing"):
        DiscretePLD.from_log_cdfs(
            log_cdf_p=log_ndtr, log_cdf_q=log_ndtr, grid=[1.0, 0.0], discretization=0.1, pessimistic=False
        )
    with pytest.raises(ValueError, match=r"^log_pdf_p and log_pdf_q are required"):
        DiscretePLD.from_log_cdfs(log_cdf_p=log_ndtr, log_cdf_q=log_ndtr, grid=[0.0, 1.0], discretization=0.1)
    with pytest.raises(ValueError, match=r"^log_cdf_p must be non-decreasing"):
        DiscretePLD.from_log_cdfs(
            log_cdf_p=lambda t: log_ndtr(-t), log_cdf_q=log_ndtr, grid=[0.0, 1.0], discretization=0.1, pessimistic=False
        )
    one = DiscretePLD.from_gaussian(noise_multiplier=1.0)
    with pytest.raises(ValueError, match=r"^other must have discretization 0.001, got 0.01"):
        one.compose(DiscretePLD.from_gaussian(noise_multiplier=1.0, discretization=0.01))
    with pytest.raises(ValueError, match=r"^other must have pessimistic=True, got False"):
        one.compose(DiscretePLD.from_gaussian(noise_multiplier=1.0, pessimistic=False))
    with pytest.raises(TypeError, match=r"^other must be a DiscretePLD, got float"):
        one.compose(1.0)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=r"^count must be an integer >= 0, got -1"):
        one.self_compose(-1)
    with pytest.raises(ValueError, match=r"^epsilon must be finite and >= 0, got -1.0"):
        one.get_delta(-1.0)
    with pytest.raises(ValueError, match=r"^delta must be in \(0, 1\), got 0.0"):
        one.get_epsilon(0.0)
    with pytest.raises(ValueError, match=r"^noise_multiplier must be finite and > 0, got 0.0"):
        DiscretePLD.from_gaussian(noise_multiplier=0.0)

"""Large noise multipliers (sigma from 10 to 1e4), where every loss of a Poisson-subsampled step is ~ q / sigma.

- A step's loss is bounded on one side by log(1 - q) (remove) or -log(1 - q) (add). At large sigma the e^-80
  point lies far inside that bound (-1.3e-5 against -0.01 at sigma=1e4, q=0.01); kept whole, the empty cells
  out to the bound set the coarse step's width and left the spike of spread 1e-6 inside one cell, the guide's
  slope was 2.5x too small, and sigma=1e4, q=0.01, T=1e8, delta=1e-15 stayed 8 % wide in 2.3 s
  (``clamp_range`` in ``pld/monotone.hpp``: such a side now ends where the other does).
- An epsilon query's FFT window leaves out e^cut of the tilted mass per side, charged to the bounds. Where
  delta is small because the composed spread is (not because epsilon is far out), the tilt lifts delta by only
  a few e-folds and the default cut's charges were 15-25 % of delta (``_epsilon_window_tail``).

Reference: the central limit of the composition, mu-GDP with mu = q sqrt(T (e^{1/sigma^2} - 1)) (Bu, Dong,
Long, Su 2019, arXiv:1911.11607, Theorem 5; delta(eps) of mu-GDP from Dong, Roth, Su 2019, arXiv:1905.02383,
Corollary 2.13), computed in mpmath. It is an estimate, not a bound: here the composed loss's skewness is at
most 1.3e-4 (measured from the steps' cumulants), and the Edgeworth term it leaves moves epsilon by far less
than the 0.1 % allowed below.
"""

from __future__ import annotations

import math

import mpmath as mp
import numpy as np
import pytest

from dpacct.pld import PLDAccountant
from dpacct.pld import accountant as accountant_module


def clt_epsilon(sigma: float, q: float, steps: int, delta: float) -> float:
    """epsilon(delta) of mu-GDP, mu the central limit of the Poisson-subsampled Gaussian composition."""
    with mp.workdps(40):
        s, p = mp.mpf(sigma), mp.mpf(q)
        mu = p * mp.sqrt(steps * mp.expm1(1 / s**2))

        def excess(e: mp.mpf) -> mp.mpf:
            return mp.ncdf(-e / mu + mu / 2) - mp.exp(e) * mp.ncdf(-e / mu - mu / 2) - mp.mpf(delta)

        low, high = mp.mpf(0), 40 * mu + 1
        for _ in range(200):
            middle = (low + high) / 2
            low, high = (middle, high) if excess(middle) > 0 else (low, middle)
        return float(low)


CASES = [
    # (sigma, q, T, delta): the first from the range corner; the others from bench/pld_sweep.py
    # --min-sigma 10 --max-sigma 10000 --seed 30, which were 24 % and 1.7 % wide before.
    (1e4, 0.01, 10**8, 1e-15),
    (516.416790886204, 3.6778410798497065e-08, 6628, 7.523660212837648e-13),
    (1528.3242177906059, 2.437545323380262e-07, 67944, 1.1756301752238727e-15),
]


@pytest.mark.parametrize(("sigma", "q", "steps", "delta"), CASES)
def test_large_sigma_epsilon_is_tight_around_the_central_limit(
    sigma: float, q: float, steps: int, delta: float
) -> None:
    """Within the default 0.5 %, and holding the central limit's epsilon within 0.1 % (see the module notes)."""
    acct = PLDAccountant().step(noise_multiplier=sigma, sampling_probability=q, count=steps)
    lower, upper = (float(x) for x in acct.epsilon_bounds(delta))
    assert 0.0 < lower <= upper and upper - lower <= 0.005 * upper, (lower, upper)
    clt = clt_epsilon(sigma, q, steps, delta)
    assert lower <= clt * (1 + 1e-3) and clt * (1 - 1e-3) <= upper, (lower, clt, upper)
    # The skewness the tolerance rests on, from the steps' cumulants (both directions alike).
    spec = acct._groups()[0][0]
    k2, k3, _ = acct._coarse_cumulants(spec, "remove")
    assert abs(k3) / k2**1.5 / math.sqrt(steps) < 1.3e-4


@pytest.mark.parametrize("direction", ["remove", "add"])
def test_a_bounded_side_far_beyond_the_tail_ends_where_the_other_does(direction: str) -> None:
    """At sigma=1e4, q=0.01 the coarse step spans the e^-80 points (~1.3e-5), not the bound 0.01, and still holds
    all the mass; at sigma=1 the bounded side is kept whole (its e^-80 point is within half the bound of it)."""
    acct = PLDAccountant().step(noise_multiplier=1e4, sampling_probability=0.01, count=10)
    step = accountant_module._coarse_step(acct._groups()[0][0], direction)
    assert step.max_abs_loss < 2e-5
    log_upper = np.asarray(step.log_upper)
    total = float(np.exp(np.logaddexp.reduce(log_upper))) + float(step.infinity_upper)
    assert abs(total - 1.0) < 1e-12
    moderate = PLDAccountant().step(noise_multiplier=1.0, sampling_probability=0.01, count=10)
    plain = accountant_module._build_step(moderate._groups()[0][0], direction, 1e-4)
    bound = math.log1p(-0.01)
    if direction == "remove":
        assert plain.upper_low * plain.discretization <= bound  # kept whole down to log(1 - q)
    else:
        assert (plain.upper_low + plain.log_upper.size - 1) * plain.discretization >= -bound


def test_tiny_epsilon_at_large_sigma_takes_the_saddle_tilt_and_finer_cells() -> None:
    """sigma=1165, q=1.04e-8, T=3797, delta=1.2e-13 (bench/pld_sweep.py --min-sigma 10 --seed 32): every loss within
    9e-11 and epsilon ~ 1.7e-9. It was [0, 2.19e-9]: the Chernoff slope's tilt (1.07e10) overshot the saddle
    point's (5.7e9), and the grids stopped at 1e-12. Now within 2 % (measured 1.53 %) around the central limit."""
    sigma, q, steps, delta = 1164.6610562746516, 1.043760943205836e-08, 3797, 1.2258240699071128e-13
    acct = PLDAccountant().step(noise_multiplier=sigma, sampling_probability=q, count=steps)
    lower, upper = (float(x) for x in acct.epsilon_bounds(delta))
    assert 0.0 < lower <= upper and upper - lower <= 0.02 * upper, (lower, upper)
    clt = clt_epsilon(sigma, q, steps, delta)
    assert lower <= clt * (1 + 1e-3) and clt * (1 - 1e-3) <= upper, (lower, clt, upper)


@pytest.mark.parametrize(("sigma", "steps", "epsilon"), [(1.0, 10, 20.0), (20.0, 10_000, 40.0), (5.0, 1000, 100.0)])
def test_saddle_tilt_of_a_gaussian_composition(sigma: float, steps: int, epsilon: float) -> None:
    """T Gaussian steps (q = 1): the loss is N(T / 2 s^2, T / s^2), K'(lambda) = T (1/2 + lambda) / s^2, so the tilt
    whose tilted mean is epsilon is epsilon s^2 / T - 1/2 (within 1 %: the guides' cumulant comes from the coarse
    step, whose cells add D^2 / 4 of variance); a cap below it is returned as is, and 0 where the mean is above."""
    acct = PLDAccountant().step(noise_multiplier=sigma, sampling_probability=1.0, count=steps)
    groups = acct._groups()
    exact = epsilon * sigma**2 / steps - 0.5
    assert exact > 0.0
    assert acct._saddle_tilt(groups, "remove", epsilon, 100.0 * exact) == pytest.approx(exact, rel=1e-2)
    assert acct._saddle_tilt(groups, "remove", epsilon, 0.5 * exact) == 0.5 * exact
    assert acct._saddle_tilt(groups, "remove", 0.1 * steps / (2 * sigma**2), 10.0 * exact) == 0.0


def test_window_cut_deepens_only_where_the_tilt_lifts_delta_little() -> None:
    """On the bench grid the default cut serves; where every loss is ~ q / sigma it deepens."""
    bench = PLDAccountant().step(noise_multiplier=1.1, sampling_probability=256 / 60000, count=10_000)
    groups = bench._groups()
    guide = bench._guide_epsilon(groups, "remove", 1e-5)
    tilt = bench._tilt(guide.slope, 1e-5)
    assert bench._epsilon_window_tail(groups, "remove", 1e-5, tilt, 1.98) == accountant_module._WINDOW_TAIL
    sigma, q, steps, delta = CASES[1]
    tiny = PLDAccountant().step(noise_multiplier=sigma, sampling_probability=q, count=steps)
    groups = tiny._groups()
    guide = tiny._guide_epsilon(groups, "remove", delta)
    cut = tiny._epsilon_window_tail(groups, "remove", delta, tiny._tilt(guide.slope, delta), 1.9e-8)
    assert accountant_module._DEEPEST_WINDOW_TAIL <= cut < -33.0

"""Composition in stages (``compose_block`` and ``coarsen`` in ``cpp/include/dpacct/pld/``).

Ghazi, Kamath, Kumar, Manurangsi, "Faster Privacy Accounting via Evolving Discretization", ICML 2022,
arXiv:2207.04381: blocks of B steps composed on a fine grid, re-spread onto a coarser one and composed
there. Each block must be a certified step in its own right, so it is checked entry by entry against an
exact (mpmath) convolution where nothing is cut, and through its delta curve against the closed form of
a Gaussian composition where the window cuts tails; the staged answers against the closed form, against
the one-grid composer, and against the old intervals of the queries they speed up.
"""

from __future__ import annotations

import math
from typing import Any

import mpmath as mp
import numpy as np
import pytest
from scipy.stats import norm

import dpacct
from dpacct import _core
from dpacct.pld import PLDAccountant

_LOG_TAIL = -80.0


def _gaussian_delta(epsilon: float, mu: float) -> float:
    """delta(epsilon) of mu-GDP, which T Gaussian steps of noise sigma are with mu = sqrt(T) / sigma
    (Dong, Roth, Su 2019, arXiv:1905.02383, Cor. 2.13)."""
    return float(norm.cdf(-epsilon / mu + mu / 2) - math.exp(epsilon) * norm.cdf(-epsilon / mu - mu / 2))


def _exact_power(log_mass: np.ndarray, count: int) -> list[mp.mpf]:
    """The count-fold convolution of exp(log_mass), exactly enough (40 digits)."""
    with mp.workdps(40):
        base = [mp.e ** mp.mpf(float(v)) if np.isfinite(v) else mp.mpf(0) for v in log_mass]
        out = [mp.mpf(1)]
        for _ in range(count):
            new = [mp.mpf(0)] * (len(out) + len(base) - 1)
            for i, a in enumerate(out):
                if a == 0:
                    continue
                for j, b in enumerate(base):
                    new[i + j] += a * b
            out = new
        return out


@pytest.mark.parametrize("tilt", [0.0, 3.0])
@pytest.mark.parametrize("direction", ["remove", "add"])
def test_block_entries_bound_the_exact_composition(direction: str, tilt: float) -> None:
    """A randomized-response-like pair, Poisson-subsampled, five steps: the block's window is the whole
    support (nothing cut), so each upper mass must be at least the exact convolution of the step's upper
    masses, each label's P-mass at most and Q-mass at least the exact convolutions of the labels' masses,
    and the +inf masses bracket 1 - (1 - m)^5."""
    log_p = np.log(np.array([0.55, 0.3, 0.1, 0.05]))
    log_q = np.log(np.array([0.1, 0.2, 0.3, 0.4]))
    step = _core.pld.finite_step(log_p, log_q, 0.3, direction, 0.01, 2**20)
    count = 5
    block = _core.pld.compose_block(step, float(count), tilt, 2**20, -60.0)
    assert block.discretization == step.discretization
    for log_block, low_block, log_step, low_step, up in (
        (block.log_upper, block.upper_low, step.log_upper, step.upper_low, True),
        (block.log_p, block.label_low, step.log_p, step.label_low, False),
        (block.log_q, block.label_low, step.log_q, step.label_low, True),
    ):
        exact = _exact_power(np.asarray(log_step), count)
        start = count * low_step
        for k, value in enumerate(exact):
            i = start + k - low_block
            computed = float(log_block[i]) if 0 <= i < len(log_block) else -math.inf
            with mp.workdps(40):
                if up:
                    assert value == 0 or computed >= float(mp.log(value)), (k, computed, value)
                elif value == 0:
                    assert computed == -math.inf, (k, computed)
                else:
                    assert computed <= float(mp.log(value)), (k, computed, value)
    assert block.infinity_upper >= 1 - (1 - step.infinity_upper) ** count - 1e-15
    assert block.infinity_lower <= 1 - (1 - step.infinity_lower) ** count + 1e-15


@pytest.mark.parametrize(("sigma", "count", "tilt"), [(20.0, 4096, 2.0), (5.0, 1024, 0.5), (50.0, 4096, 4.0)])
def test_block_with_cut_tails_is_a_certified_step(sigma: float, count: int, tilt: float) -> None:
    """A block of Gaussian steps (q = 1) whose window cuts the tails (mass below moved up, above sent to
    +inf, round-off charged per entry): composed once, alone or re-spread four times coarser, its delta
    bounds must bracket the closed form of the count-fold composition."""
    acct = PLDAccountant().step(noise_multiplier=sigma, sampling_probability=1.0, count=count)
    spec = acct._groups()[0][0]
    mu = math.sqrt(count) / sigma
    for direction in ("remove", "add"):
        step = acct._step(spec, direction, 2e-3 * mu / math.sqrt(count), _LOG_TAIL)
        block = _core.pld.compose_block(step, float(count), tilt, 2**22, -60.0)
        for part in (block, _core.pld.coarsen(block, 4)):
            composed = _core.pld.ComposedPld([part], [1.0], tilt, 2**22)
            for epsilon in (0.0, 0.5 * mu * mu, mu * mu / 2 + 2 * mu, mu * mu / 2 + 4 * mu):
                exact = _gaussian_delta(epsilon, mu)
                lower, upper = (float(x[0]) for x in composed.delta_bounds(np.array([epsilon])))
                assert lower <= exact <= upper, (direction, epsilon, lower, exact, upper)


def test_staged_composition_brackets_the_closed_form() -> None:
    """sigma = 300, T = 1e6 Gaussian steps: blocks of 4096 re-spread 32 times coarser, 244 of them and the
    576 steps left composed there, bracket the exact epsilon(1e-5) of mu = sqrt(T) / sigma within 0.02 %
    (measured 0.009 %; one grid at the same spread: 0.003 % on 2^21 points, the stages 2^15 and 2^17)."""
    sigma, count, delta = 300.0, 10**6, 1e-5
    mu = math.sqrt(count) / sigma
    from scipy.optimize import brentq

    exact = brentq(lambda e: _gaussian_delta(e, mu) - delta, 0.0, 200.0, xtol=1e-13)
    acct = PLDAccountant().step(noise_multiplier=sigma, sampling_probability=1.0, count=count)
    spec = acct._groups()[0][0]
    block_steps, ratio = 4096, 32
    d = 30e-4 * exact / math.sqrt(count) / math.sqrt(1 + ratio * ratio / block_steps)
    tilt = 0.5 * exact / mu**2 + 0.5
    step = acct._step(spec, "remove", d, -40.0)
    block = _core.pld.compose_block(step, float(block_steps), tilt, 2**22, -60.0)
    blocks, rest = divmod(count, block_steps)
    composed = _core.pld.ComposedPld(
        [_core.pld.coarsen(block, ratio), _core.pld.coarsen(step, ratio)], [float(blocks), float(rest)], tilt, 2**22
    )
    lower, upper, _ = composed.epsilon_bounds(delta)
    assert lower <= exact <= upper
    assert upper - lower <= 2e-4 * upper


def _one_grid(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(PLDAccountant, "_stages", lambda *args: None)
    monkeypatch.setattr(dpacct.pld.accountant, "_split_stages", lambda *args: (0, 1))


def test_long_run_is_composed_in_stages_and_agrees_with_one_grid(monkeypatch: pytest.MonkeyPatch) -> None:
    """sigma = 1, q = 1e-3, T = 1e7 (issue 10's speed list): one grid took 2^19 points per direction, the
    stages 2^16 and 2^14 (107 -> 45 ms). Both intervals are certified: they must overlap, and the staged
    one meet the default 0.5 % (measured [25.5336, 25.6408], one grid [25.5170, 25.6362])."""
    calls: list[float] = []
    block = _core.pld.compose_block

    def spy(*args: Any) -> Any:
        calls.append(args[1])
        return block(*args)

    monkeypatch.setattr(_core.pld, "compose_block", spy)
    staged = PLDAccountant().step(noise_multiplier=1.0, sampling_probability=1e-3, count=10**7).epsilon_bounds(1e-5)
    assert calls and all(b == 4096.0 for b in calls)
    _one_grid(monkeypatch)
    single = PLDAccountant().step(noise_multiplier=1.0, sampling_probability=1e-3, count=10**7).epsilon_bounds(1e-5)
    assert staged.lower <= single.upper and single.lower <= staged.upper
    assert staged.upper - staged.lower <= 0.005 * staged.upper


def test_split_composition_in_stages_agrees_with_one_grid(monkeypatch: pytest.MonkeyPatch) -> None:
    """sigma = 0.5, q = 1e-7, T = 1e7: the split composition's G (1e7 small steps on a grid of 6e-8) in
    blocks of 4096 re-spread 32 times coarser: its window went from 2^20 points to blocks of 2^18 and 2^15
    (the query 685 -> 458 ms). Against the same split composed on one grid, both certified: they overlap,
    and the staged one meets 0.5 %."""
    captured: list[tuple[Any, ...]] = []
    split = _core.pld.SplitComposedPld

    def spy(*args: Any, **kwargs: Any) -> Any:
        captured.append(args)
        return split(*args, **kwargs)

    monkeypatch.setattr(_core.pld, "SplitComposedPld", spy)
    lower, upper = PLDAccountant().step(noise_multiplier=0.5, sampling_probability=1e-7, count=10**7).epsilon_bounds(1e-6)
    assert upper - lower <= 0.005 * upper
    staged = [args for args in captured if args[7] > 1]
    assert staged
    for args in staged:
        one, many = split(*args[:7]), split(*args)
        for delta in (1e-6, 1e-4):
            lo1, up1, _ = one.epsilon_bounds(delta)
            lo2, up2, _ = many.epsilon_bounds(delta)
            assert lo1 <= up2 and lo2 <= up1, (delta, lo1, up1, lo2, up2)


def test_block_arguments_are_checked() -> None:
    step = _core.pld.gaussian_step(1.0, 1.0, "remove", 1e-2, _LOG_TAIL, 2**20)
    with pytest.raises(ValueError, match="count"):
        _core.pld.compose_block(step, 0.5, 1.0, 2**20, -60.0)
    with pytest.raises(ValueError, match="tilt"):
        _core.pld.compose_block(step, 4.0, -1.0, 2**20, -60.0)
    with pytest.raises(ValueError, match="log_window_tail"):
        _core.pld.compose_block(step, 4.0, 1.0, 2**20, -10.0)
    with pytest.raises(ValueError, match="increase discretization"):
        _core.pld.compose_block(step, 1e6, 1.0, 2**10, -60.0)
    with pytest.raises(ValueError, match="ratio"):
        _core.pld.coarsen(step, 0)


@pytest.mark.parametrize("ratio", [7, 64, 2489])
def test_coarsened_step_is_certified_and_its_labels_are_sums(ratio: int) -> None:
    """``coarsen`` against the fine step in mpmath (30 digits, from the same doubles): its delta at every epsilon is
    at least the fine step's (a pessimistic stand-in: spreads of e^{-L}, mass moved up or added) and within
    1e-12 of it plus the spread's own change (the fine cells' losses move to the coarse grid points around them:
    at most their mass times 1 - e^{-D_c}); each coarse label's P-mass at most, and its Q-mass at least, the sum of
    its fine labels' (nearest coarse label), within the charge for their rounding, about 0.7 ratio + 4.5 ulps and
    3 ulps of the log (4e-13 at a ratio of 2489). The sums run in linear space per coarse cell and are rounded outward
    (the log_add chains before had been neither: on c1d901c a P-label exceeded its sum by 1e-16 of itself)."""
    with mp.workdps(30):
        acct = PLDAccountant().step(noise_multiplier=0.8, sampling_probability=0.01, count=1)
        spec = acct._groups()[0][0]
        step = acct._step(spec, "remove", 1e-4, -40.0)
        coarse = _core.pld.coarsen(step, ratio)
        d, dc = step.discretization, coarse.discretization

        def delta(pmf: Any, epsilon: float, width: float) -> Any:
            total = mp.mpf(pmf.infinity_upper)
            for j, value in enumerate(pmf.log_upper):
                loss = (pmf.upper_low + j) * mp.mpf(width)
                if value > -math.inf and loss > epsilon:
                    total += mp.exp(mp.mpf(float(value))) * (1 - mp.exp(epsilon - loss))
            return total

        for epsilon in (0.0, 0.02, 0.05, 0.1, 0.2):
            fine, coarse_delta = delta(step, epsilon, d), delta(coarse, epsilon, dc)
            assert coarse_delta >= fine, (ratio, epsilon, fine, coarse_delta)
            assert coarse_delta - fine <= (1 - mp.exp(-dc)) * mp.mpf(1) + 1e-12 * fine, (ratio, epsilon)
        sums_p: dict[int, Any] = {}
        sums_q: dict[int, Any] = {}
        for j, (p, q) in enumerate(zip(step.log_p, step.log_q)):
            label = (2 * (step.label_low + j) + ratio) // (2 * ratio)
            sums_p[label] = sums_p.get(label, mp.mpf(0)) + (mp.exp(mp.mpf(float(p))) if p > -math.inf else 0)
            sums_q[label] = sums_q.get(label, mp.mpf(0)) + (mp.exp(mp.mpf(float(q))) if q > -math.inf else 0)
        for j, (p, q) in enumerate(zip(coarse.log_p, coarse.log_q)):
            label = coarse.label_low + j
            exact_p, exact_q = sums_p.get(label, mp.mpf(0)), sums_q.get(label, mp.mpf(0))
            got_p = mp.exp(mp.mpf(float(p))) if p > -math.inf else mp.mpf(0)
            got_q = mp.exp(mp.mpf(float(q))) if q > -math.inf else mp.mpf(0)
            # (split.cpp's run_log, in ulps at 1, u = 2.2e-16: ratio / 2 + 4.5 relative and ratio / 5 absolute against a
            # sum of at least 1, an ulp of log sum (at most log ratio), and of the stored log half an ulp, the
            # correction and one more: up to 2.5 u |log|, 3 here; 10 % over.)
            unit = 2.2205e-16 * 1.1

            def charge(value: float) -> float:
                logs = math.log(ratio) + 3.0 * abs(value) if value > -math.inf else 0.0
                return unit * (0.7 * ratio + 4.5 + logs)

            charge_p, charge_q = charge(float(p)), charge(float(q))
            assert got_p <= exact_p and got_p >= exact_p * (1 - charge_p), (ratio, label, got_p, exact_p)
            assert got_q >= exact_q and got_q <= exact_q * (1 + charge_q), (ratio, label, got_q, exact_q)


def test_coarse_cells_wider_than_the_exponent_range_stay_certified() -> None:
    """Cells of 1419 (sigma=0.034, q=0.365, the width a long run's staged composition chose): the connect-the-dots
    fraction expm1(s) / expm1(span) overflowed to inf / inf beyond a span of 709.8, and the NaN summed into every
    cell of the run. Now no entry is NaN, the upper mass is kept, and delta at every epsilon is at least the fine
    step's (mpmath at 30 digits, from the same doubles)."""
    with mp.workdps(30):
        acct = PLDAccountant().step(noise_multiplier=0.034, sampling_probability=0.365, count=1)
        step = acct._step(acct._groups()[0][0], "remove", 44.35331729157697, -59.34)
        coarse = _core.pld.coarsen(step, 32)
        assert coarse.discretization > 1000.0
        for values in (coarse.log_upper, coarse.log_p, coarse.log_q):
            assert not np.isnan(np.asarray(values)).any()

        def delta(pmf: Any, epsilon: float) -> Any:
            total = mp.mpf(pmf.infinity_upper)
            for j, value in enumerate(pmf.log_upper):
                loss = (pmf.upper_low + j) * mp.mpf(pmf.discretization)
                if value > -math.inf and loss > epsilon:
                    total += mp.exp(mp.mpf(float(value))) * (1 - mp.exp(epsilon - loss))
            return total

        for epsilon in (0.0, 1.0, 100.0, 400.0, 700.0):
            assert delta(coarse, epsilon) >= delta(step, epsilon), epsilon
        assert delta(coarse, -1e4) >= delta(step, -1e4) > 0.99


def test_long_run_at_tiny_sigma_is_not_below_its_mean_loss() -> None:
    """sigma=0.034, q=0.365, T=1.6e7, delta=2.7e-15 (a draw of the sweep below sigma = 0.2): the remove direction's
    staged composition read NaN masses and its upper bound on epsilon came out as 0, so the answer was the add
    direction's 7.27e6, against a true epsilon of about 2.52e9.

    Reference (independent of the grids): with L the composed loss under P, delta(eps) >= (1 - e^{-t}) P(L > eps + t),
    and Cantelli's inequality P(L <= T mu - a) <= T v / (T v + a^2) with mu, v the mean and variance of one step's
    loss (mpmath quadrature at 30 digits). With a = 3 sqrt(T v) and t = 1, delta(eps) >= 0.56 > delta for
    eps <= T mu - a - 1, so epsilon(delta) exceeds that (2.513e9); the central limit puts it near 2.522e9."""
    sigma, q, steps, delta = 0.034, 0.365, 16_000_000, 2.7e-15
    with mp.workdps(30):
        s, rate = mp.mpf(sigma), mp.mpf(q)

        def loss(x: Any) -> Any:
            return mp.log(1 - rate + rate * mp.exp((2 * x - 1) / (2 * s * s)))

        def moment(power: int) -> Any:
            def under(centre: float) -> Any:
                def density(x: Any) -> Any:
                    return mp.npdf(x, centre, s) * loss(x) ** power

                return mp.quad(density, [centre - 40 * s, centre - 8 * s, centre, centre + 8 * s, centre + 40 * s])

            return (1 - rate) * under(0.0) + rate * under(1.0)

        mean = moment(1)
        variance = moment(2) - mean**2
        floor = float(steps * mean - 3 * mp.sqrt(steps * variance) - 1)
    assert 2.5e9 < floor < 2.52e9
    bounds = PLDAccountant().step(noise_multiplier=sigma, sampling_probability=q, count=steps).epsilon_bounds(delta)
    assert bounds.upper >= floor, (bounds, floor)
    assert 0.5 * bounds.upper <= bounds.lower <= bounds.upper

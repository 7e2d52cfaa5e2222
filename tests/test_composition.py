"""Classic (eps, delta) composition, amplification by sampling, and DP-dropout calibration."""

from __future__ import annotations

import math

import mpmath as mp
import numpy as np
import pytest

import dpacct
from dpacct import GaussianMechanism, ZCDPAccountant
from dpacct.composition import (
    advanced_composition,
    basic_composition,
    classical_gaussian_noise_multiplier,
    dpd_ac_noise_multiplier,
    dpd_zcdp_noise_multiplier,
    dropout_rates,
    optimal_composition_delta,
    optimal_composition_epsilon,
    poisson_subsampling,
)
from dpacct.zcdp import random_sampling_epsilon_heuristic

hypothesis = pytest.importorskip("hypothesis")
from hypothesis import given  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

RTOL_CLOSED = 1e-12  # closed forms in doubles, plus the deliberate upward nudge of a few ulps
# Optimal composition: log-binomials from gammaln (abs. error ~1e-16 k log k) and a deliberate
# 1e-9 relative upward slack; 40-digit mpmath is the reference.
RTOL_OPTIMAL = 2e-9


def mp_kov_delta_i(eps: float, delta: float, k: int, i: int) -> mp.mpf:
    """KOV 2015 Thm 3.3 delta_i at eps_g = (k - 2i) eps, by the literal finite sum at 40 digits."""
    with mp.workdps(40):
        e = mp.mpf(eps)
        s = mp.fsum(mp.binomial(k, l) * (mp.exp((k - l) * e) - mp.exp((k - 2 * i + l) * e)) for l in range(i))
        pure = s / (1 + mp.exp(e)) ** k
        return 1 - (1 - mp.mpf(delta)) ** k * (1 - pure)


def mp_hockey_stick(eps: float, k: int, total: float) -> mp.mpf:
    """Brute-force hockey-stick divergence of k-fold randomized response at total epsilon, 40 digits."""
    with mp.workdps(40):
        e, g = mp.mpf(eps), mp.mpf(total)
        return mp.fsum(
            mp.binomial(k, l) * max(mp.mpf(0), mp.exp((k - l) * e) - mp.exp(g + l * e)) for l in range(k + 1)
        ) / (1 + mp.exp(e)) ** k


def test_basic_and_advanced_closed_forms() -> None:
    """Basic: (k eps, k delta); advanced: eps sqrt(2k log(1/delta')) + k eps (e^eps - 1) (Dwork & Roth Thm 3.20)."""
    b = basic_composition(epsilon=0.1, delta=1e-7, count=30)
    np.testing.assert_allclose([b.epsilon, b.delta], [3.0, 3e-6], rtol=RTOL_CLOSED)
    assert b.epsilon >= 3.0 and b.delta >= 3e-6
    a = advanced_composition(epsilon=0.1, delta=1e-7, count=30, delta_slack=1e-6)
    expected = 0.1 * math.sqrt(60 * math.log(1e6)) + 30 * 0.1 * math.expm1(0.1)
    np.testing.assert_allclose([a.epsilon, a.delta], [expected, 30e-7 + 1e-6], rtol=RTOL_CLOSED)
    assert a.epsilon >= expected


@pytest.mark.parametrize(("eps", "delta", "k"), [(0.5, 0.0, 5), (0.1, 1e-6, 20), (1.0, 1e-3, 7), (0.05, 0.0, 30)])
def test_optimal_matches_kov_theorem_3_3(eps: float, delta: float, k: int) -> None:
    """At eps_g = (k - 2i) eps the exact delta equals KOV's delta_i (brute force in mpmath)."""
    for i in range(k // 2 + 1):
        value = optimal_composition_delta(epsilon=eps, delta=delta, count=k, total_epsilon=(k - 2 * i) * eps)
        reference = float(mp_kov_delta_i(eps, delta, k, i))
        assert value >= reference
        np.testing.assert_allclose(value, reference, rtol=RTOL_OPTIMAL, atol=1e-300)


@pytest.mark.parametrize(("eps", "k", "total"), [(0.3, 10, 0.45), (0.1, 25, 1.234), (1.0, 3, 0.2)])
def test_optimal_between_kov_points(eps: float, k: int, total: float) -> None:
    """Between KOV's points the delta is the randomized-response hockey stick (Murtagh & Vadhan Thm 1.5)."""
    value = optimal_composition_delta(epsilon=eps, delta=0.0, count=k, total_epsilon=total)
    reference = float(mp_hockey_stick(eps, k, total))
    assert value >= reference
    np.testing.assert_allclose(value, reference, rtol=RTOL_OPTIMAL)


def test_optimal_single_mechanism_closed_form() -> None:
    """k = 1, pure eps: delta(eps_g) = (e^eps - e^eps_g)/(1 + e^eps), so eps_opt = log(e^eps - d (1 + e^eps))."""
    eps, target = 1.0, 0.01
    expected = math.log(math.exp(eps) - target * (1 + math.exp(eps)))
    value = optimal_composition_epsilon(epsilon=eps, delta=0.0, count=1, total_delta=target)
    assert value >= expected
    np.testing.assert_allclose(value, expected, rtol=1e-9)


def test_optimal_large_k_is_finite_and_beats_advanced() -> None:
    """k = 10^4 evaluates in log space, and the optimal epsilon is below advanced composition's."""
    k, eps, delta, slack = 10_000, 0.01, 1e-9, 1e-6
    total_delta = k * delta + slack
    optimal = optimal_composition_epsilon(epsilon=eps, delta=delta, count=k, total_delta=total_delta)
    advanced = advanced_composition(epsilon=eps, delta=delta, count=k, delta_slack=slack)
    assert math.isfinite(optimal) and 0 < optimal < advanced.epsilon
    d = optimal_composition_delta(epsilon=eps, delta=delta, count=k, total_epsilon=optimal)
    assert d <= total_delta


def test_optimal_epsilon_fails_closed() -> None:
    """If 1 - (1 - delta)^k already exceeds the target, no epsilon works: inf."""
    assert optimal_composition_epsilon(epsilon=0.1, delta=1e-3, count=100, total_delta=1e-3) == math.inf


def test_poisson_subsampling_closed_form() -> None:
    """(log(1 + nu (e^eps - 1)), nu delta) (Li, Qardaji, Su 2012); nu = 1 is the identity."""
    r = poisson_subsampling(epsilon=2.0, delta=1e-4, sampling_probability=0.05)
    np.testing.assert_allclose([r.epsilon, r.delta], [math.log(1 + 0.05 * math.expm1(2.0)), 5e-6], rtol=RTOL_CLOSED)
    one = poisson_subsampling(epsilon=2.0, delta=1e-4, sampling_probability=1.0)
    np.testing.assert_allclose([one.epsilon, one.delta], [2.0, 1e-4], rtol=RTOL_CLOSED)
    assert poisson_subsampling(epsilon=2.0, delta=1e-4, sampling_probability=0.0) == (0.0, 0.0)


def test_classical_gaussian_only_below_one() -> None:
    """sigma = sqrt(2 log(1.25/delta))/eps for eps < 1 (Dwork & Roth Thm A.1), refused for eps >= 1."""
    np.testing.assert_allclose(classical_gaussian_noise_multiplier(epsilon=0.5, delta=1e-5),
                               math.sqrt(2 * math.log(1.25e5)) / 0.5, rtol=RTOL_CLOSED)
    with pytest.raises(ValueError, match=r"^epsilon must be in \(0, 1\) for the classical Gaussian calibration"):
        classical_gaussian_noise_multiplier(epsilon=1.0, delta=1e-5)


def test_dpd_ac_meets_its_budget() -> None:
    """Forward check: amplifying (eps0, delta0) at nu and composing T steps advancedly stays within (eps, delta)."""
    eps, delta, steps, nu = 1.0, 1e-5, 1000, 0.01
    r = dpd_ac_noise_multiplier(epsilon=eps, delta=delta, steps=steps, sampling_probability=nu)
    eps0, delta0 = r.details["per_step_epsilon"], r.details["per_step_delta"]
    assert eps0 < 1
    np.testing.assert_allclose(r.noise_multiplier, math.sqrt(2 * math.log(1.25 / delta0)) / eps0, rtol=RTOL_CLOSED)
    step = poisson_subsampling(epsilon=eps0, delta=delta0, sampling_probability=nu)
    total = advanced_composition(epsilon=step.epsilon, delta=step.delta, count=steps, delta_slack=delta / 2)
    assert total.epsilon <= eps * (1 + 1e-12) and total.delta <= delta * (1 + 1e-12)
    np.testing.assert_allclose(total.epsilon, eps, rtol=1e-9)  # and it spends the budget


def test_dpd_ac_refuses_eps0_of_one_or_more() -> None:
    """The classical formula needs eps0 < 1: a tiny sampling rate pushes eps0 over and is refused."""
    with pytest.raises(ValueError, match=r"^the per-step epsilon0 = .* must be < 1 for the classical Gaussian"):
        dpd_ac_noise_multiplier(epsilon=4.0, delta=1e-5, steps=100, sampling_probability=0.001)


def test_dpd_zcdp_heuristic_is_much_smaller_than_ac() -> None:
    """Ermiş & Cemgil (arXiv:1712.01665): under zCDP (Yu et al.'s random-sampling accounting) sigma is several times smaller than DPD-AC."""
    args = {"epsilon": 1.0, "delta": 1e-5, "steps": 1000, "sampling_probability": 0.01}
    ac = dpd_ac_noise_multiplier(**args)
    zc = dpd_zcdp_noise_multiplier(**args, accounting="heuristic_random_sampling")
    assert zc.noise_multiplier < ac.noise_multiplier / 4
    assert zc.kind.startswith("heuristic") and ac.kind == "certified"
    achieved = random_sampling_epsilon_heuristic(noise_multiplier=zc.noise_multiplier, sampling_probability=0.01,
                                                 steps=1000, delta=1e-5).epsilon
    assert achieved <= 1.0 and achieved > 1.0 - 1e-9


def test_dpd_zcdp_random_reshuffling_is_certified() -> None:
    """The certified zCDP calibration (E = ceil(T nu) disjoint epochs) re-accounts to <= the target."""
    r = dpd_zcdp_noise_multiplier(epsilon=1.0, delta=1e-5, steps=1000, sampling_probability=0.01,
                                  accounting="random_reshuffling")
    acct = ZCDPAccountant().compose(GaussianMechanism(noise_multiplier=r.noise_multiplier), 10)
    assert r.kind == "certified" and acct.get_epsilon(1e-5) <= 1.0
    slightly_less = ZCDPAccountant().compose(GaussianMechanism(noise_multiplier=r.noise_multiplier * (1 - 1e-9)), 10)
    assert slightly_less.get_epsilon(1e-5) > 1.0 - 1e-6


def test_dropout_rates_closed_form() -> None:
    """a = (2 C sigma)^2 / theta^2 and p = a / (1 + a); a zero weight is always dropped (Ermiş & Cemgil, arXiv:1712.01665)."""
    theta = np.array([[0.5, -2.0], [0.0, 1e-3]])
    r = dropout_rates(noise_multiplier=1.5, clip_norm=0.1, weights=theta)
    with np.errstate(divide="ignore", invalid="ignore"):  # the zero weight: a = inf (and inf/inf) is expected
        a = (2 * 0.1 * 1.5) ** 2 / theta**2
        p = a / (1 + a)
    np.testing.assert_allclose(r.variance_ratio, a, rtol=RTOL_CLOSED)
    finite = np.isfinite(a)
    np.testing.assert_allclose(np.asarray(r.drop_probability)[finite], p[finite], rtol=RTOL_CLOSED)
    assert np.asarray(r.drop_probability)[1, 0] == 1.0
    scalar = dropout_rates(noise_multiplier=1.0, clip_norm=0.5, weights=2.0)
    assert scalar == (0.25, 0.2)


@given(eps=st.floats(0.001, 2.0), k=st.integers(1, 300), slack=st.floats(1e-9, 0.1), delta=st.floats(0.0, 1e-6))
def test_optimal_never_exceeds_advanced_or_basic(eps: float, k: int, slack: float, delta: float) -> None:
    """Optimal composition is at most advanced and basic composition at the same total delta."""
    advanced = advanced_composition(epsilon=eps, delta=delta, count=k, delta_slack=slack)
    if advanced.delta >= 1.0:
        return
    optimal = optimal_composition_epsilon(epsilon=eps, delta=delta, count=k, total_delta=advanced.delta)
    assert optimal <= advanced.epsilon
    assert optimal <= basic_composition(epsilon=eps, delta=delta, count=k).epsilon


@given(eps=st.floats(0.0, 5.0), nu=st.floats(0.0, 1.0), factor=st.floats(1.0, 2.0))
def test_subsampling_monotone(eps: float, nu: float, factor: float) -> None:
    """Amplified epsilon grows with eps and with the sampling rate, and never exceeds eps."""
    base = poisson_subsampling(epsilon=eps, delta=0.0, sampling_probability=nu).epsilon
    assert base <= eps * (1 + 1e-12)
    assert poisson_subsampling(epsilon=eps * factor, delta=0.0, sampling_probability=nu).epsilon >= base
    assert poisson_subsampling(epsilon=eps, delta=0.0, sampling_probability=min(1.0, nu * factor)).epsilon >= base


def test_dp_dropout_paper_procedure_reproduces_the_published_sigmas() -> None:
    """Ermiş & Cemgil (arXiv:1712.01665) report sigma = 10.88 (DPD-AC) and 3.23 (DPD-zCDP) for
    epsilon = 0.5, delta = 1e-4, nu = 0.01, E = 200 epochs; the paper's procedure, composed over
    the E rounds, reproduces both to the two decimals printed (tolerance 0.005)."""
    from dpacct.composition import PAPER_KIND, dpd_paper_noise_multiplier

    kwargs = {"epsilon": 0.5, "delta": 1e-4, "epochs": 200, "sampling_probability": 0.01}
    ac = dpd_paper_noise_multiplier(**kwargs, method="DPD-AC")  # type: ignore[arg-type]
    zc = dpd_paper_noise_multiplier(**kwargs, method="DPD-zCDP")  # type: ignore[arg-type]
    assert abs(ac.noise_multiplier - 10.88) < 0.005 and abs(zc.noise_multiplier - 3.23) < 0.005
    assert ac.kind == zc.kind == PAPER_KIND and "NOT a guarantee" in PAPER_KIND
    # the sound calibrations of the same run need far more noise
    sound_ac = dpacct.composition.dpd_ac_noise_multiplier(epsilon=0.5, delta=1e-4, steps=20_000,
                                                         sampling_probability=0.01)
    sound_zc = dpacct.composition.dpd_zcdp_noise_multiplier(epsilon=0.5, delta=1e-4, steps=20_000,
                                                           sampling_probability=0.01, accounting="random_reshuffling")
    assert sound_ac.noise_multiplier > 6 * ac.noise_multiplier and sound_zc.noise_multiplier > 20 * zc.noise_multiplier
    # Tight accounting of the 20,000 Poisson-sampled steps (certified PLD interval): the DPD-zCDP
    # sigma is not (0.5, 1e-4)-DP at all (lower bound about 1.50); the DPD-AC one happens to be
    # (upper bound about 0.372), although the procedure does not prove it.
    def pld(sigma: float) -> tuple[float, float]:
        lower, upper = dpacct.PLDAccountant().step(noise_multiplier=sigma, sampling_probability=0.01,
                                                   count=20_000).epsilon_bounds(1e-4)
        return float(lower), float(upper)

    assert pld(zc.noise_multiplier)[0] > 1.4
    assert pld(ac.noise_multiplier)[1] < 0.5


def test_dp_dropout_paper_procedure_checks_its_inputs() -> None:
    from dpacct.composition import dpd_paper_noise_multiplier

    with pytest.raises(ValueError, match="method must be one of"):
        dpd_paper_noise_multiplier(epsilon=0.5, delta=1e-4, epochs=200, sampling_probability=0.01, method="AC")
    with pytest.raises(ValueError, match="delta_split must be in"):
        dpd_paper_noise_multiplier(epsilon=0.5, delta=1e-4, epochs=200, sampling_probability=0.01,
                                   method="DPD-AC", delta_split=1.0)

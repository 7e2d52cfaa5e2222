"""zCDP: rho of mechanisms, conversions against closed forms and mpmath, RF accounting, the RS heuristic."""

from __future__ import annotations

import math

import mpmath as mp
import numpy as np
import pytest

import dpacct
from dpacct import GaussianMechanism, PoissonSampledGaussianMechanism, RDPAccountant, UnsupportedMechanismError, gaussian
from dpacct.zcdp import (
    HEURISTIC_KIND,
    ZCDPAccountant,
    gaussian_rho,
    rho_from_pure_dp,
    random_reshuffling_rho,
    random_sampling_epsilon_heuristic,
    delta_from_rho,
    epsilon_from_rho,
    shuffled_epochs_epsilon,
)

hypothesis = pytest.importorskip("hypothesis")
from hypothesis import given  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

# Closed forms evaluated in doubles: a few ulps of rounding plus the deliberate upward
# nudge (8 eps relative) of the converted values.
RTOL_CLOSED = 1e-12
# The exact 1-d minimisation (brentq to 1e-12 in alpha; f is flat at its minimum, so the
# value error is quadratic in it) against a 40-digit mpmath minimisation.
RTOL_MINIMUM = 1e-10


def mp_argmin(f: object, low: mp.mpf, high: mp.mpf) -> mp.mpf:
    """Bisection on the sign of mpmath's numerical derivative of a unimodal f (independent of dpacct's algebra)."""
    for _ in range(150):
        mid = mp.sqrt(low * high) if low > 0 else (low + high) / 2  # geometric: alpha spans decades
        if mp.diff(f, mid) > 0:  # type: ignore[arg-type]
            high = mid
        else:
            low = mid
    return (low + high) / 2


def mp_rdp_conversion_min(rho: float, delta: float) -> mp.mpf:
    """min over alpha > 1 of alpha rho + log(1 - 1/alpha) - (log delta + log alpha)/(alpha - 1), at 40 digits."""
    with mp.workdps(40):
        r, d = mp.mpf(rho), mp.mpf(delta)

        def f(a: mp.mpf) -> mp.mpf:
            return a * r + mp.log(1 - 1 / a) - (mp.log(d) + mp.log(a)) / (a - 1)

        high = 2 + 4 * mp.sqrt(mp.log(1 / d) / r)
        return f(mp_argmin(f, 1 + mp.mpf("1e-6") / high, high))


def mp_rdp_delta_min(rho: float, epsilon: float) -> mp.mpf:
    """min over alpha of exp((alpha-1)(alpha rho - eps)) (1 - 1/alpha)^(alpha-1) / alpha, at 40 digits."""
    with mp.workdps(40):
        r, e = mp.mpf(rho), mp.mpf(epsilon)

        def log_delta(a: mp.mpf) -> mp.mpf:
            return (a - 1) * (a * r - e) + (a - 1) * mp.log(1 - 1 / a) - mp.log(a)

        return mp.exp(log_delta(mp_argmin(log_delta, 1 + mp.mpf("1e-9"), 4 + 4 * (e + r) / r)))


def test_gaussian_rho_and_pure_dp_closed_forms() -> None:
    """rho = 1/(2 sigma^2) for the Gaussian and eps^2/2 for pure DP (Bun & Steinke Prop. 1.6, 1.4)."""
    np.testing.assert_allclose(gaussian_rho(noise_multiplier=3.0), 1.0 / 18.0, rtol=RTOL_CLOSED)
    assert gaussian_rho(noise_multiplier=3.0) >= 1.0 / 18.0
    np.testing.assert_allclose(rho_from_pure_dp(epsilon=0.3), 0.045, rtol=RTOL_CLOSED)
    assert rho_from_pure_dp(epsilon=0.0) == 0.0


def test_simple_conversion_reference_value() -> None:
    """rho = 0.5, delta = 1e-5 gives 5.298525912188081 (STYLE.md reference; Bun & Steinke Prop. 1.3)."""
    value = epsilon_from_rho(rho=0.5, delta=1e-5, conversion="classic")
    np.testing.assert_allclose(value, 5.298525912188081, rtol=RTOL_CLOSED)
    assert value >= 5.298525912188081


@pytest.mark.parametrize("rho", [1e-6, 1e-3, 0.05, 0.5, 5.0, 200.0])
@pytest.mark.parametrize("delta", [1e-12, 1e-5, 0.1])
def test_rdp_conversion_is_the_exact_minimum(rho: float, delta: float) -> None:
    """The default conversion equals the mpmath minimum over alpha (from above) and is <= the simple one."""
    value = epsilon_from_rho(rho=rho, delta=delta)
    reference = float(mp_rdp_conversion_min(rho, delta))
    assert value >= max(reference, 0.0)  # a negative minimum still certifies epsilon = 0
    np.testing.assert_allclose(value, max(reference, 0.0), rtol=RTOL_MINIMUM, atol=1e-15)
    assert value <= epsilon_from_rho(rho=rho, delta=delta, conversion="classic")


@pytest.mark.parametrize(("rho", "epsilon"), [(0.01, 0.5), (0.5, 3.0), (0.5, 8.0), (5.0, 20.0)])
def test_rdp_delta_is_the_exact_minimum(rho: float, epsilon: float) -> None:
    """get_delta's RDP conversion equals the mpmath minimum over alpha and is <= the simple delta."""
    value = delta_from_rho(rho=rho, epsilon=epsilon)
    reference = float(mp_rdp_delta_min(rho, epsilon))
    assert value >= reference
    np.testing.assert_allclose(value, reference, rtol=RTOL_MINIMUM)
    simple = math.exp(-((epsilon - rho) ** 2) / (4 * rho))
    assert value <= delta_from_rho(rho=rho, epsilon=epsilon, conversion="classic")
    np.testing.assert_allclose(delta_from_rho(rho=rho, epsilon=epsilon, conversion="classic"), simple, rtol=RTOL_CLOSED)


def test_zcdp_bounds_the_exact_gaussian_curve() -> None:
    """For Gaussians, both zCDP conversions are >= the exact epsilon of sigma_eff (they are upper bounds)."""
    for sigma, k in [(1.0, 1), (6.0, 400), (20.0, 3)]:
        acct = ZCDPAccountant().compose(GaussianMechanism(noise_multiplier=sigma), k)
        exact = gaussian.epsilon_for_delta(noise_multiplier=sigma / math.sqrt(k), delta=1e-5)
        assert acct.get_epsilon(1e-5) >= exact
        assert ZCDPAccountant(conversion="classic").compose(GaussianMechanism(noise_multiplier=sigma), k).get_epsilon(
            1e-5) >= acct.get_epsilon(1e-5)


def test_spec_2_6_reference() -> None:
    """Yu et al. 2019 (Thm 2, random reshuffling): sigma = 6, q = 0.01, 400 epochs, delta = 1e-5: zCDP(RF), simple conversion, eps ~= 21.5."""
    result = shuffled_epochs_epsilon(noise_multiplier=6.0, epochs=400, delta=1e-5, conversion="classic")
    rho = 400 / 72
    np.testing.assert_allclose(result.rho, rho, rtol=RTOL_CLOSED)
    np.testing.assert_allclose(result.zcdp_epsilon, rho + 2 * math.sqrt(rho * math.log(1e5)), rtol=RTOL_CLOSED)
    assert round(result.zcdp_epsilon, 1) == 21.6 and abs(result.zcdp_epsilon - 21.5) < 0.06  # "~= 21.5"
    # The exact Gaussian with sigma/sqrt(E) = 0.3 is the tight number, and smaller.
    assert result.gaussian_epsilon == gaussian.epsilon_for_delta(noise_multiplier=0.3, delta=1e-5)
    assert result.gaussian_epsilon < result.zcdp_epsilon
    assert result.tight == "gaussian_epsilon"
    assert result.gaussian_kind.startswith("tight") and "upper bound" in result.zcdp_kind
    assert shuffled_epochs_epsilon(noise_multiplier=6.0, epochs=400, delta=1e-5).zcdp_epsilon < result.zcdp_epsilon


def test_random_reshuffling_takes_the_max_per_epoch() -> None:
    """An epoch of disjoint batches costs its largest rho (smallest sigma); epochs add (Yu et al. Thm 2)."""
    total = random_reshuffling_rho([[4.0, 2.0, 8.0], 2.0, [10.0]])
    np.testing.assert_allclose(total, 1 / 8 + 1 / 8 + 1 / 200, rtol=RTOL_CLOSED)
    assert random_reshuffling_rho([]) == 0.0
    np.testing.assert_allclose(random_reshuffling_rho([[], 1.0]), 0.5, rtol=RTOL_CLOSED)


def test_accountant_composes_gaussians_additively() -> None:
    """rho of k Gaussians is k/(2 sigma_eff^2); replace-one halves sigma; Poisson q=1 is a Gaussian."""
    acct = ZCDPAccountant().compose(GaussianMechanism(noise_multiplier=2.0), 10)
    np.testing.assert_allclose(acct.rho, 10 / 8, rtol=RTOL_CLOSED)
    replace = ZCDPAccountant().compose(GaussianMechanism(noise_multiplier=4.0, neighboring_relation="replace_one"), 10)
    np.testing.assert_allclose(replace.rho, acct.rho, rtol=RTOL_CLOSED)
    full = ZCDPAccountant().compose(PoissonSampledGaussianMechanism(noise_multiplier=2.0, sampling_probability=1.0), 10)
    assert full.rho == acct.rho
    empty = ZCDPAccountant().compose(PoissonSampledGaussianMechanism(noise_multiplier=2.0, sampling_probability=0.0), 9)
    assert empty.rho == 0.0 and empty.get_epsilon(1e-5) == 0.0 and empty.get_delta(0.0) == 0.0


def test_accountant_refuses_poisson_subsampling() -> None:
    """Poisson subsampling with 0 < q < 1 has no certified zCDP bound: refused, state unchanged, fix named."""
    acct = ZCDPAccountant().compose(GaussianMechanism(noise_multiplier=2.0), 3)
    with pytest.raises(UnsupportedMechanismError, match="no certified zCDP bound.*'rdp' or 'pld'"):
        acct.compose(PoissonSampledGaussianMechanism(noise_multiplier=1.0, sampling_probability=0.01), 5)
    assert acct.rho == ZCDPAccountant().compose(GaussianMechanism(noise_multiplier=2.0), 3).rho
    assert len(acct) == 3
    with pytest.raises(UnsupportedMechanismError):
        dpacct.epsilon(noise_multiplier=1.0, sampling_probability=0.01, steps=10, delta=1e-5, accountant="zcdp")


def test_direct_costs_and_exponential_mechanism() -> None:
    """compose_rho adds rho, pure DP adds eps^2/2, the exponential mechanism eps^2/8 (Cesar & Rogers)."""
    acct = ZCDPAccountant().compose_rho(0.1, 2).compose_pure_dp(0.2).compose_exponential_mechanism(0.4, 3)
    np.testing.assert_allclose(acct.rho, 0.2 + 0.02 + 3 * 0.02, rtol=RTOL_CLOSED)
    assert len(acct) == 6
    assert [what for what, _, _ in acct.direct_history] == ["rho", "pure_dp", "exponential_mechanism"]
    assert acct.effective_noise_multiplier is None
    assert "gaussian_epsilon" not in acct.get_epsilon_details(1e-5)


def test_details_report_the_exact_gaussian_as_tight() -> None:
    """For an all-Gaussian history the details give the exact epsilon of sigma_eff and call it tight."""
    acct = ZCDPAccountant().compose(GaussianMechanism(noise_multiplier=2.0), 3).compose(
        GaussianMechanism(noise_multiplier=4.0), 2)
    details = acct.get_epsilon_details(1e-6)
    sigma_eff = gaussian.composed_noise_multiplier([2.0, 2.0, 2.0, 4.0, 4.0])
    np.testing.assert_allclose(details["effective_noise_multiplier"], sigma_eff, rtol=RTOL_CLOSED)
    np.testing.assert_allclose(details["gaussian_epsilon"],
                               gaussian.epsilon_for_delta(noise_multiplier=sigma_eff, delta=1e-6), rtol=1e-12)
    assert details["tight"] == "gaussian_epsilon" and details["gaussian_epsilon"] < details["epsilon"]


def test_registered_and_vectorised() -> None:
    """make_accountant('zcdp') works, and array deltas/epsilons equal a loop of scalar calls bit for bit."""
    acct = dpacct.make_accountant("zcdp").compose(GaussianMechanism(noise_multiplier=3.0), 7)
    assert isinstance(acct, ZCDPAccountant)
    deltas = np.array([1e-9, 1e-5, 0.01])
    np.testing.assert_array_equal(acct.get_epsilon(deltas), [acct.get_epsilon(float(d)) for d in deltas])
    eps = np.array([[0.0, 1.0], [2.0, 5.0]])
    np.testing.assert_array_equal(acct.get_delta(eps), [[acct.get_delta(float(e)) for e in row] for row in eps])
    assert isinstance(acct.get_epsilon(1e-5), float)


def test_heuristic_closed_form_both_branches() -> None:
    """Yu et al. 2019, Thm 3, by hand: the sqrt branch when delta >= exp(-rho (u-1)^2), the order-u branch otherwise."""
    r = random_sampling_epsilon_heuristic(noise_multiplier=4.0, sampling_probability=0.01, steps=10_000, delta=1e-5)
    rho, u = 10_000 * 0.01**2 / 16, 16 * math.log(1 / 0.04) + 1
    assert math.log(1e5) <= rho * (u - 1) ** 2
    np.testing.assert_allclose([r.rho, r.max_order], [rho, u], rtol=RTOL_CLOSED)
    np.testing.assert_allclose(r.epsilon, rho + 2 * math.sqrt(rho * math.log(1e5)), rtol=RTOL_CLOSED)
    assert r.kind == HEURISTIC_KIND and "not a proven bound" in r.kind
    r = random_sampling_epsilon_heuristic(noise_multiplier=1.0, sampling_probability=0.01, steps=1000, delta=1e-5)
    rho, u = 0.1, math.log(100) + 1
    assert math.log(1e5) > rho * (u - 1) ** 2
    np.testing.assert_allclose(r.epsilon, rho * u + math.log(1e5) / (u - 1), rtol=RTOL_CLOSED)
    assert r.order == u


def test_heuristic_heterogeneous_sums_and_takes_min_order() -> None:
    """Runs of different (sigma, q) add their q^2/sigma^2 and use the smallest U (Yu et al. 2019, Thm 3)."""
    r = random_sampling_epsilon_heuristic(noise_multiplier=[4.0, 2.0], sampling_probability=[0.01, 0.02],
                                          steps=[1000, 500], delta=1e-5)
    np.testing.assert_allclose(r.rho, 1000 * 1e-4 / 16 + 500 * 4e-4 / 4, rtol=RTOL_CLOSED)
    np.testing.assert_allclose(r.max_order, min(16 * math.log(25) + 1, 4 * math.log(25) + 1), rtol=RTOL_CLOSED)


@pytest.mark.parametrize(("sigma", "q", "steps"), [(4.0, 0.01, 10_000), (2.0, 0.02, 5_000), (1.0, 0.01, 1_000),
                                                   (8.0, 0.004, 50_000)])
def test_heuristic_against_rdp_where_valid(sigma: float, q: float, steps: int) -> None:
    """Where q <= 1/(16 sigma) the heuristic lies between the certified RDP epsilon and 3.5x it (empirical)."""
    heuristic = random_sampling_epsilon_heuristic(noise_multiplier=sigma, sampling_probability=q, steps=steps,
                                                  delta=1e-5).epsilon
    certified = RDPAccountant().step(noise_multiplier=sigma, sampling_probability=q, count=steps).get_epsilon(1e-5)
    # q^2/sigma^2 is about twice the small-q RDP slope q^2 (e^(1/sigma^2) - 1)/2, so the heuristic is the
    # larger one here; the factor bounds how far off it is in this regime (not a guarantee elsewhere).
    assert certified <= heuristic <= 3.5 * certified


def test_heuristic_refuses_outside_validity() -> None:
    """q > 1/(16 sigma) is outside Yu et al.'s validity condition: a ValueError that says what to change."""
    with pytest.raises(ValueError, match=r"^sampling_probability must be <= 1/\(16 noise_multiplier\) = 0\.0125 .*"
                                         r"got 0\.02; use noise_multiplier <= 3\.125"):
        random_sampling_epsilon_heuristic(noise_multiplier=5.0, sampling_probability=0.02, steps=10, delta=1e-5)


@given(rho=st.floats(1e-8, 1e3), delta=st.floats(1e-15, 0.5), factor=st.floats(1.0, 10.0))
def test_conversion_properties(rho: float, delta: float, factor: float) -> None:
    """Epsilon is >= 0, <= the simple value, increasing in rho and decreasing in delta; round trip holds."""
    eps = epsilon_from_rho(rho=rho, delta=delta)
    assert 0.0 <= eps <= epsilon_from_rho(rho=rho, delta=delta, conversion="classic")
    assert epsilon_from_rho(rho=rho * factor, delta=delta) >= eps
    assert epsilon_from_rho(rho=rho, delta=min(delta * factor, 0.9)) <= eps
    assert delta_from_rho(rho=rho, epsilon=eps) <= delta * (1 + 1e-9)


@given(sigma=st.floats(0.1, 100.0), k=st.integers(1, 10_000))
def test_composition_is_additive(sigma: float, k: int) -> None:
    """Composing k Gaussians at once equals k times one Gaussian's rho (to rounding)."""
    bulk = ZCDPAccountant().compose(GaussianMechanism(noise_multiplier=sigma), k).rho
    np.testing.assert_allclose(bulk, k * gaussian_rho(noise_multiplier=sigma), rtol=1e-14)


def test_deprecated_conversion_names_still_work_and_warn() -> None:
    """The former rho_to_epsilon / rho_to_delta / pure_dp_to_rho keep working with a DeprecationWarning."""
    from dpacct import zcdp

    with pytest.deprecated_call(match="use dpacct.zcdp.epsilon_from_rho"):
        assert zcdp.rho_to_epsilon(rho=0.5, delta=1e-5) == zcdp.epsilon_from_rho(rho=0.5, delta=1e-5)
    with pytest.deprecated_call(match="delta_from_rho"):
        assert zcdp.rho_to_delta(rho=0.5, epsilon=3.0) == zcdp.delta_from_rho(rho=0.5, epsilon=3.0)
    with pytest.deprecated_call(match="rho_from_pure_dp"):
        assert zcdp.pure_dp_to_rho(epsilon=1.0) == zcdp.rho_from_pure_dp(epsilon=1.0)


def test_results_speak_the_shared_vocabulary() -> None:
    """zCDP and DP-dropout results convert to results.Value with a kind from the shared list."""
    from dpacct import dropout, zcdp

    r = zcdp.shuffled_epochs_epsilon(noise_multiplier=6.0, epochs=400, delta=1e-5)
    zc, exact = r.values()
    assert zc.kind == exact.kind == "upper bound" and float(exact) == r.gaussian_epsilon <= float(zc)
    h = zcdp.random_sampling_epsilon_heuristic(noise_multiplier=4.0, sampling_probability=0.01, steps=10, delta=1e-5)
    assert h.as_value().kind == "heuristic" and not h.as_value().is_guarantee
    paper = dropout.dpd_paper_noise_multiplier(epsilon=0.5, delta=1e-4, epochs=200, sampling_probability=0.01,
                                               method="DPD-zCDP")
    assert paper.as_value().kind == "heuristic" and "NOT a guarantee" in paper.as_value().method
    sound = dropout.dpd_ac_noise_multiplier(epsilon=1.0, delta=1e-5, steps=1000, sampling_probability=0.01)
    assert sound.as_value().kind == "upper bound" and sound.as_value().quantity == "noise_multiplier"


def test_former_conversion_names_are_deprecated_aliases() -> None:
    """zCDP's conversions carry RDP's names; "rdp" and "simple" still give the same numbers, with a warning."""
    for old, new in (("rdp", "improved"), ("simple", "classic")):
        with pytest.warns(DeprecationWarning, match=new):
            value = epsilon_from_rho(rho=0.5, delta=1e-5, conversion=old)
        assert value == epsilon_from_rho(rho=0.5, delta=1e-5, conversion=new)
        with pytest.warns(DeprecationWarning, match=new):
            acct = ZCDPAccountant(conversion=old)
        assert acct.compose(GaussianMechanism(noise_multiplier=2.0), 3).get_epsilon(1e-5) == ZCDPAccountant(
            conversion=new
        ).compose(GaussianMechanism(noise_multiplier=2.0), 3).get_epsilon(1e-5)

"""ABLQ batch samplers (dpacct.ablq): deterministic, Poisson and shuffled batches compared.

References: L. Chua, B. Ghazi, P. Kamath, R. Kumar, P. Manurangsi, A. Sinha, C. Zhang,
"How Private are DP-SGD Implementations?", ICML 2024, arXiv:2403.17673 (values as quoted
in Chua et al. 2024, arXiv:2403.17673); mpmath at 500 digits for the event probabilities; scipy's log_ndtr for an
independent evaluation of the paper's 0.01 grid.
"""

from __future__ import annotations

import json
import math
import time
import warnings

import mpmath
import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from scipy import optimize, special

import dpacct
from dpacct import _core, ablq

# The paper's values are printed to 3 significant digits: a lower bound must be at least
# the printed value and, being the same construction, at most one unit in the last digit above.
PAPER_DIGIT = 1e-3
# The reported shuffle bound moves log P and log Q by 1e-13 (1 + |log|) for floating-point
# safety; P - e^eps Q can cancel by ~100x at the maximum, so comparisons with independent
# evaluations allow 1e-9 (1 + |log delta|) in log delta, nothing more.
RTOL_MARGIN = 1e-9
# mpmath vs the C++ log-space event probabilities: both are accurate to ~1e-15; the
# C++ side combines a handful of log/exp operations, each a few ulp.
RTOL_EVENT = 1e-12


def grid_log_delta(sigma: float, steps: int, epsilon: float) -> float:
    """The paper's scan: max over C in {0, 0.01, ..., 100} of P_S(E_C) - e^eps Q_S(E_C), as a log."""
    c = np.linspace(0.0, 100.0, 10_001)
    log_pow = (steps - 1) * special.log_ndtr(c / sigma)
    with np.errstate(divide="ignore"):  # log(0) = -inf where the event probability underflows: ignored by max
        log_p = np.log(-np.expm1(special.log_ndtr((c - 2.0) / sigma) + log_pow))
        log_q = np.log(-np.expm1(special.log_ndtr((c - 1.0) / sigma) + log_pow))
    log_q_scaled = epsilon + log_q
    ok = log_p > log_q_scaled
    diff = log_p[ok] + np.log(-np.expm1(log_q_scaled[ok] - log_p[ok]))
    return float(diff.max()) if diff.size else -math.inf


def mp_log_event(sigma: float, steps: int, c: float) -> tuple[float, float]:
    """log P_S(E_C), log Q_S(E_C) at 500 digits (1 - Phi(a) Phi(c)^(T-1) cancels down to e^-700 here)."""
    with mpmath.workdps(500):
        s = mpmath.mpf(sigma)
        power = mpmath.ncdf(mpmath.mpf(c) / s) ** (steps - 1)
        p = 1 - mpmath.ncdf((mpmath.mpf(c) - 2) / s) * power
        q = 1 - mpmath.ncdf((mpmath.mpf(c) - 1) / s) * power
        return float(mpmath.log(p)), float(mpmath.log(q))


# -- the paper's visible values (Chua et al. 2024) --------------------------------------------------------


def test_shuffle_lower_bound_at_eps4_matches_paper() -> None:
    """delta_S(4) >= 0.226 at sigma=0.4, T=1e4 (Chua et al. 2024, arXiv:2403.17673, Section 3)."""
    value = float(ablq.delta_shuffle_lower(noise_multiplier=0.4, steps=10_000, epsilon=4.0))
    assert 0.226 <= value < 0.226 * (1 + PAPER_DIGIT)


def test_shuffle_lower_bound_at_eps12_matches_paper() -> None:
    """delta_S(12) >= 7.47e-5 at sigma=0.4, T=1e4 (Chua et al. 2024, arXiv:2403.17673, Section 3)."""
    value = float(ablq.delta_shuffle_lower(noise_multiplier=0.4, steps=10_000, epsilon=12.0))
    assert 7.47e-5 <= value < 7.47e-5 * (1 + PAPER_DIGIT)


def test_deterministic_at_eps4_matches_paper() -> None:
    """delta_D(4) ~= 0.244 at sigma=0.4 (Gaussian curve; Chua et al. 2024, 3 digits)."""
    bound = ablq.delta_deterministic(noise_multiplier=0.4, epsilon=4.0)
    assert bound.kind == "exact"
    assert abs(float(bound) - 0.244) <= 0.0005


def test_shuffle_epsilon_lower_bound_matches_paper() -> None:
    """eps_S(1e-6) >= 14.45 at sigma=0.4, T=1e5 (Chua et al. 2024, arXiv:2403.17673, Section 3)."""
    value = float(ablq.epsilon_shuffle_lower(noise_multiplier=0.4, steps=100_000, delta=1e-6))
    assert 14.45 <= value < 14.46


def test_poisson_delta_at_eps4_matches_paper() -> None:
    """The PLD interval for delta_P(4), sigma=0.4, T=1e4, is consistent with the paper's <= 1.18e-5 and within 3% of it."""
    bounds = ablq.delta_poisson_bounds(noise_multiplier=0.4, steps=10_000, epsilon=4.0)
    lower, upper = float(bounds.lower), float(bounds.upper)
    assert lower <= 1.18e-5  # the paper's number is an upper bound on the truth, so above our lower bound
    assert lower <= upper <= 1.18e-5 * 1.03  # our certified upper bound is no looser than 3% (grid width)
    assert upper <= float(bounds.rdp_upper)
    assert bounds.upper.kind == "upper bound" and bounds.lower.kind == "lower bound"


def test_poisson_epsilon_at_t1e5_matches_paper() -> None:
    """eps_P(1e-6) ~= 3 at sigma=0.4, T=1e5 (PLD; Chua et al. 2024): the certified interval lies within 3 +- 1 %
    and brackets dp-accounting 0.6's PLD value 2.99805 (value_discretization_interval=2e-5; 2.99817 at 1e-4)."""
    bounds = ablq.epsilon_poisson_bounds(noise_multiplier=0.4, steps=100_000, delta=1e-6)
    assert 2.97 <= float(bounds.lower) <= 2.99805 <= float(bounds.upper) <= 3.03
    assert float(bounds.upper) < float(bounds.rdp_upper)


def test_poisson_epsilon_bounds_certified_and_ordered() -> None:
    """Poisson epsilon bounds at T=1000: PLD lower <= PLD upper <= RDP upper, all well below the deterministic epsilon."""
    bounds = ablq.epsilon_poisson_bounds(noise_multiplier=0.4, steps=1000, delta=1e-6)
    det = float(ablq.epsilon_deterministic(noise_multiplier=0.4, delta=1e-6))
    assert 0 < float(bounds.lower) <= float(bounds.upper) <= float(bounds.rdp_upper) < det
    assert float(bounds.upper) - float(bounds.lower) <= 0.02 * float(bounds.upper)  # informative interval


# -- independent references ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("sigma", "steps", "c"),
    [(0.4, 10_000, 2.0), (0.4, 10_000, 3.5), (0.4, 10_000, 12.0), (1.0, 1, 0.5), (2.0, 10**7, 15.0),
     (0.4, 10**7, 4.0), (0.05, 100, 3.0)],
)
def test_event_probabilities_match_mpmath(sigma: float, steps: int, c: float) -> None:
    """log P_S(E_C) and log Q_S(E_C) agree with 500-digit mpmath, including where P, Q are far below 1e-300."""
    log_p, log_q = _core.samplers.log_event(sigma, float(steps), np.array([c]))
    ref_p, ref_q = mp_log_event(sigma, steps, c)
    np.testing.assert_allclose(log_p[0], ref_p, rtol=RTOL_EVENT)
    np.testing.assert_allclose(log_q[0], ref_q, rtol=RTOL_EVENT)


def test_event_probabilities_far_tail_stay_finite() -> None:
    """At C = 1000 (P ~ e^-3e6) the logs are finite, where 1 - Phi(a) Phi(c)^(T-1) would round to 0."""
    log_p, log_q = _core.samplers.log_event(0.4, 1e7, np.array([1000.0]))
    assert np.isfinite(log_p[0]) and np.isfinite(log_q[0]) and log_p[0] > log_q[0]
    # Leading term of the Gaussian tail: log Phi(-x) ~ -x^2/2 - log(x sqrt(2 pi)), x = (C - 2)/sigma.
    x = 998.0 / 0.4
    np.testing.assert_allclose(log_p[0], -x * x / 2 - math.log(x * math.sqrt(2 * math.pi)), rtol=1e-9)


@pytest.mark.parametrize(
    ("sigma", "steps", "epsilon"),
    [(0.4, 10_000, 4.0), (0.4, 10_000, 12.0), (0.4, 100, 1.0), (1.0, 1000, 0.5), (0.8, 10**5, 2.0), (3.0, 10, 0.1)],
)
def test_continuous_maximum_beats_paper_grid(sigma: float, steps: int, epsilon: float) -> None:
    """The continuous maximum over C is >= the best point of the paper's 0.01 grid on [0, 100] (scipy evaluation)."""
    bound = ablq.delta_shuffle_lower(noise_multiplier=sigma, steps=steps, epsilon=epsilon)
    grid = grid_log_delta(sigma, steps, epsilon)
    assert math.log(float(bound)) >= grid - RTOL_MARGIN * (1 + abs(grid))


@given(
    sigma=st.floats(0.2, 4.0),
    steps=st.integers(1, 10**6),
    epsilon=st.floats(0.0, 15.0),
)
def test_continuous_maximum_beats_grid_property(sigma: float, steps: int, epsilon: float) -> None:
    """For random settings, the continuous maximum is never below the paper's grid maximum."""
    grid = grid_log_delta(sigma, steps, epsilon)
    value = float(ablq.delta_shuffle_lower(noise_multiplier=sigma, steps=steps, epsilon=epsilon))
    # Below ~e^-650 the grid's own log(-expm1(.)) works on denormals and is no reference: at
    # sigma = 2.5, T = 1, eps = 15 it gives e^-699.4 where mpmath (and dpacct) give 8.69e-307.
    if grid == -math.inf or grid < -650.0:
        assert value >= 0.0
    else:
        assert value > 0 and math.log(value) >= grid - RTOL_MARGIN * (1 + abs(grid))


@pytest.mark.parametrize("sigma", [0.3, 1.0, 4.0])
def test_single_batch_equals_gaussian_curve(sigma: float) -> None:
    """With T = 1 the events E_C are the Neyman-Pearson sets, so the shuffle lower bound is the exact Gaussian curve."""
    eps = np.array([0.0, 0.5, 2.0, 8.0])
    lower = ablq.delta_shuffle_lower(noise_multiplier=sigma, steps=1, epsilon=eps).value
    exact = ablq.delta_deterministic(noise_multiplier=sigma, epsilon=eps).value
    np.testing.assert_allclose(lower, exact, rtol=1e-7)  # safety margin x cancellation, see RTOL_MARGIN
    e_lower = float(ablq.epsilon_shuffle_lower(noise_multiplier=sigma, steps=1, delta=1e-5))
    e_exact = float(ablq.epsilon_deterministic(noise_multiplier=sigma, delta=1e-5))
    np.testing.assert_allclose(e_lower, e_exact, rtol=1e-8)


@pytest.mark.parametrize(("sigma", "steps", "delta"), [(0.4, 10_000, 1e-6), (1.0, 1000, 1e-5), (2.0, 100, 1e-3)])
def test_epsilon_is_the_root_of_delta(sigma: float, steps: int, delta: float) -> None:
    """The direct epsilon maximisation equals the root of delta_S_lower(eps) = delta found by brentq."""
    def gap(eps: float) -> float:
        value = float(ablq.delta_shuffle_lower(noise_multiplier=sigma, steps=steps, epsilon=eps))
        return math.log(max(value, 1e-300)) - math.log(delta)  # 0 (underflow) counts as far below delta

    root = optimize.brentq(gap, 0.0, 60.0, xtol=1e-12)
    direct = float(ablq.epsilon_shuffle_lower(noise_multiplier=sigma, steps=steps, delta=delta))
    np.testing.assert_allclose(direct, root, rtol=1e-7)


# -- properties ----------------------------------------------------------------------------------


@given(sigma=st.floats(0.2, 5.0), steps=st.integers(1, 10**7), epsilon=st.floats(0.0, 30.0))
def test_lower_bound_below_deterministic(sigma: float, steps: int, epsilon: float) -> None:
    """The shuffle lower bound never exceeds the deterministic curve (its certified upper bound)."""
    interval = ablq.shuffle_interval(noise_multiplier=sigma, steps=steps, epsilon=epsilon)
    assert float(interval.lower) <= float(interval.upper) * (1 + 1e-12)


@given(sigma=st.floats(0.2, 5.0), steps=st.integers(1, 10**7), delta=st.floats(1e-12, 0.5))
def test_epsilon_lower_below_deterministic(sigma: float, steps: int, delta: float) -> None:
    """The shuffle epsilon lower bound never exceeds the deterministic epsilon."""
    lower = float(ablq.epsilon_shuffle_lower(noise_multiplier=sigma, steps=steps, delta=delta))
    upper = float(ablq.epsilon_shuffle_upper(noise_multiplier=sigma, steps=steps, delta=delta))
    assert 0.0 <= lower <= upper * (1 + 1e-12)


@given(sigma=st.floats(0.2, 3.0), steps=st.integers(1, 10**6))
def test_delta_lower_non_increasing_in_epsilon(sigma: float, steps: int) -> None:
    """delta_S_lower(eps) does not increase with eps."""
    values = ablq.delta_shuffle_lower(noise_multiplier=sigma, steps=steps, epsilon=np.linspace(0, 12, 13)).value
    assert np.all(np.diff(values) <= 1e-12 * values[:-1])


@given(steps=st.integers(1, 10**6), delta=st.floats(1e-10, 0.1))
def test_epsilon_lower_non_increasing_in_sigma(steps: int, delta: float) -> None:
    """eps_S_lower(delta) does not increase with the noise multiplier."""
    values = [float(ablq.epsilon_shuffle_lower(noise_multiplier=s, steps=steps, delta=delta))
              for s in (0.3, 0.5, 0.8, 1.3, 2.0, 4.0)]
    assert all(b <= a + 1e-9 for a, b in zip(values, values[1:]))


@given(sigma=st.floats(0.2, 3.0), epsilon=st.floats(0.0, 10.0))
def test_delta_lower_non_increasing_in_steps(sigma: float, epsilon: float) -> None:
    """More batches per epoch hide a record better: delta_S_lower does not increase with T."""
    values = [float(ablq.delta_shuffle_lower(noise_multiplier=sigma, steps=t, epsilon=epsilon))
              for t in (1, 10, 100, 10**4, 10**6, 10**8)]
    assert all(b <= a * (1 + 1e-9) for a, b in zip(values, values[1:]))


def test_vectorised_equals_scalar_loop() -> None:
    """The vectorised call equals a loop of scalar calls, bit for bit."""
    eps = np.array([0.0, 1.0, 4.0, 12.0])
    vector = ablq.delta_shuffle_lower(noise_multiplier=0.4, steps=1000, epsilon=eps).value
    loop = [float(ablq.delta_shuffle_lower(noise_multiplier=0.4, steps=1000, epsilon=e)) for e in eps]
    assert isinstance(vector, np.ndarray) and vector.tolist() == loop


# -- extreme T, extreme eps, speed -------------------------------------------------------------------


@pytest.mark.parametrize("steps", [10**7, 10**9, 10**12])
def test_extreme_steps(steps: int) -> None:
    """T up to 1e12 gives finite, positive, ordered bounds without warnings."""
    d = float(ablq.delta_shuffle_lower(noise_multiplier=0.4, steps=steps, epsilon=4.0))
    e = float(ablq.epsilon_shuffle_lower(noise_multiplier=0.4, steps=steps, delta=1e-6))
    assert 0.0 < d < float(ablq.delta_deterministic(noise_multiplier=0.4, epsilon=4.0))
    assert 0.0 < e <= float(ablq.epsilon_deterministic(noise_multiplier=0.4, delta=1e-6))


def test_large_epsilon_underflows_to_zero_quietly() -> None:
    """At eps = 1000 the lower bound underflows to 0 (a valid lower bound) with no RuntimeWarning."""
    bound = ablq.delta_shuffle_lower(noise_multiplier=0.4, steps=10_000, epsilon=[50.0, 1000.0])
    assert bound.value[0] > 0.0 and bound.value[1] == 0.0


def test_epsilon_for_tiny_delta_and_small_noise() -> None:
    """Small noise (sigma = 0.05) and delta = 1e-300 give a large but finite epsilon lower bound."""
    value = float(ablq.epsilon_shuffle_lower(noise_multiplier=0.05, steps=100, delta=1e-300))
    assert math.isfinite(value) and value > 100


def test_epsilon_sweep_is_fast() -> None:
    """eps_S(delta) at T=1e5 takes milliseconds (median of 20 calls under 20 ms, a loose bound for slow CI)."""
    times = []
    for _ in range(20):
        start = time.perf_counter()
        _core.samplers.epsilon_lower(0.4, 1e5, np.array([1e-6]))
        times.append(time.perf_counter() - start)
    assert float(np.median(times)) < 0.02


# -- epochs, permutation, comparison --------------------------------------------------------------


def test_same_permutation_epochs_is_sigma_over_sqrt_e() -> None:
    """E epochs with the same permutation equal one epoch with sigma/sqrt(E), and stay below deterministic with E epochs."""
    multi = ablq.delta_shuffle_lower(noise_multiplier=1.2, steps=1000, epsilon=2.0, epochs=4, permutation="same")
    single = ablq.delta_shuffle_lower(noise_multiplier=0.6, steps=1000, epsilon=2.0)
    assert float(multi) == float(single)
    assert float(multi) <= float(ablq.delta_deterministic(noise_multiplier=1.2, epsilon=2.0, epochs=4))
    assert multi.kind == "lower bound" and "same permutation" in multi.method


def test_compare_samplers_table() -> None:
    """compare_samplers gives every sampler's numbers, correctly ordered and labelled, and a JSON-ready dict."""
    c = ablq.compare_samplers(noise_multiplier=0.4, steps=1000, delta=1e-6)
    assert c.deterministic.kind == "exact"
    assert float(c.poisson.lower) <= float(c.poisson.upper) <= float(c.poisson.rdp_upper)
    assert float(c.shuffle.lower) <= float(c.shuffle.upper) == float(c.deterministic)
    assert float(c.poisson.upper) < float(c.shuffle.lower)  # the paper's point: Poisson is far too optimistic
    kinds = {(r["sampler"], r["kind"]) for r in c.rows()}
    assert ("shuffle", "lower bound") in kinds and ("shuffle", "upper bound") in kinds
    assert json.loads(json.dumps(c.as_dict()))["quantity"] == "epsilon"


def test_compare_samplers_needs_exactly_one_target() -> None:
    """Giving both or neither of delta and epsilon is an error naming both."""
    with pytest.raises(ValueError, match="exactly one of delta"):
        ablq.compare_samplers(noise_multiplier=1.0, steps=10)
    with pytest.raises(ValueError, match="exactly one of delta"):
        ablq.compare_samplers(noise_multiplier=1.0, steps=10, delta=1e-5, epsilon=1.0)


@pytest.mark.parametrize(
    ("kwargs", "error", "message"),
    [
        ({"steps": 0}, ValueError, r"^steps must be an integer >= 1, got 0$"),
        ({"steps": 2.5}, ValueError, r"^steps must be an integer >= 1, got 2\.5$"),
        ({"epochs": 0}, ValueError, r"^epochs must be an integer >= 1, got 0$"),
        ({"noise_multiplier": -1.0}, ValueError, r"^noise_multiplier must be finite and > 0, got -1\.0$"),
        ({"epsilon": -1.0}, ValueError, r"^epsilon must be finite and >= 0, got -1\.0$"),
        ({"epsilon": math.nan}, ValueError, r"^epsilon must be finite and >= 0, got nan$"),
        ({"permutation": "random"}, ValueError, r"^permutation must be one of 'fresh', 'same'"),
        ({"permutation": 1}, TypeError, r"^permutation must be a string, got int$"),
    ],
)
def test_shuffle_lower_rejects(kwargs: dict[str, object], error: type[Exception], message: str) -> None:
    """delta_shuffle_lower names the parameter, the allowed range and the value."""
    good: dict[str, object] = {"noise_multiplier": 1.0, "steps": 10, "epsilon": 1.0}
    with pytest.raises(error, match=message):
        ablq.delta_shuffle_lower(**{**good, **kwargs})  # type: ignore[arg-type]


def test_core_rejects_bad_input() -> None:
    """The C++ kernel validates its own input with the project's message format."""
    with pytest.raises(ValueError, match=r"^steps must be finite and >= 1, got 0\.5$"):
        _core.samplers.log_delta_lower(1.0, 0.5, np.array([1.0]))
    with pytest.raises(ValueError, match=r"^delta must be in \(0, 1\), got 0$"):
        _core.samplers.epsilon_lower(1.0, 10.0, np.array([0.0]))
    with pytest.raises(ValueError, match=r"^threshold must be finite, got inf$"):
        _core.samplers.log_event(1.0, 10.0, np.array([math.inf]))


# -- the sampler-aware one-call API ----------------------------------------------------------------


def test_api_deterministic_is_gaussian_composition() -> None:
    """sampler='deterministic' accounts ceil(steps*q) zero-out Gaussians: PLD >= the exact sigma/sqrt(k) curve, within 1%."""
    exact = float(dpacct.gaussian.epsilon_for_delta(noise_multiplier=2.0 / math.sqrt(3), delta=1e-5))
    for accountant in ("rdp", "pld"):
        value = float(dpacct.epsilon(noise_multiplier=2.0, sampling_probability=0.01, steps=300, delta=1e-5,
                                     accountant=accountant, sampler="deterministic"))
        assert value >= exact
    pld = float(dpacct.epsilon(noise_multiplier=2.0, sampling_probability=0.01, steps=300, delta=1e-5,
                               accountant="pld", sampler="deterministic"))
    assert pld <= exact * 1.01


def test_api_participations_round_off() -> None:
    """ceil(steps*q) absorbs float round-off (0.1*30 = 3.0000000000000004 -> 3) but counts partial epochs."""
    assert dpacct.api.participations(sampling_probability=0.1, steps=30) == 3
    assert dpacct.api.participations(sampling_probability=0.1, steps=31) == 4
    assert dpacct.api.participations(sampling_probability=0.0, steps=31) == 0


def test_api_shuffle_is_never_the_poisson_number() -> None:
    """sampler='shuffle' returns the deterministic upper bound, far above Poisson, without warning."""
    kwargs = {"noise_multiplier": 0.4, "sampling_probability": 1e-3, "steps": 1000, "delta": 1e-6}
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        shuffle = float(dpacct.epsilon(**kwargs, sampler="shuffle"))  # type: ignore[arg-type]
        det = float(dpacct.epsilon(**kwargs, sampler="deterministic"))  # type: ignore[arg-type]
    poisson = float(dpacct.epsilon(**kwargs))  # type: ignore[arg-type]
    assert shuffle == det and shuffle > 1.3 * poisson


def test_api_assume_poisson_warns() -> None:
    """assume_poisson=True returns the Poisson number and says it is not a guarantee."""
    kwargs = {"noise_multiplier": 0.4, "sampling_probability": 1e-3, "steps": 1000, "delta": 1e-6}
    with pytest.warns(dpacct.PoissonAssumptionWarning, match="NOT a privacy guarantee"):
        value = float(dpacct.epsilon(**kwargs, sampler="shuffle", assume_poisson=True))  # type: ignore[arg-type]
    assert value == float(dpacct.epsilon(**kwargs))  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=r"^assume_poisson applies only to sampler='shuffle'"):
        dpacct.epsilon(**kwargs, assume_poisson=True)  # type: ignore[arg-type]


def test_api_shuffle_details_interval() -> None:
    """The shuffle details give the honest interval: lower bound (first epoch) <= certified upper bound."""
    details = dpacct.api.shuffle_epsilon_details(noise_multiplier=0.4, sampling_probability=1e-3, steps=1000,
                                                 delta=1e-6)
    assert 14.45 <= details["epsilon_lower_bound"] <= details["epsilon"]
    short = dpacct.api.shuffle_epsilon_details(noise_multiplier=0.4, sampling_probability=1e-3, steps=10, delta=1e-6)
    assert short["epsilon_lower_bound"] == 0.0 and "shorter than one epoch" in short["lower_bound_method"]


@pytest.mark.parametrize("sampler", ["poisson", "shuffle", "deterministic"])
def test_calibrate_every_sampler(sampler: str) -> None:
    """calibrate(sampler=...) meets the budget for every sampler; shuffled runs need at least the deterministic noise."""
    result = dpacct.calibrate(epsilon=2.0, delta=1e-5, sampling_probability=0.01, steps=500, sampler=sampler)
    assert result.epsilon <= 2.0 and result.sampler == sampler
    if sampler != "poisson":
        exact = float(dpacct.gaussian.epsilon_for_delta(noise_multiplier=result.noise_multiplier / math.sqrt(5),
                                                        delta=1e-5))
        assert exact <= 2.0


def test_fresh_permutation_is_the_default_for_several_epochs() -> None:
    """With E > 1 the default is a fresh permutation per epoch: the max-statistic PLD bound, below deterministic."""
    from dpacct.samplers.shuffle_fresh import delta_shuffle_lower_fresh


    fresh = ablq.delta_shuffle_lower(noise_multiplier=1.2, steps=1000, epsilon=2.0, epochs=4)
    direct = delta_shuffle_lower_fresh(noise_multiplier=1.2, steps=1000, epochs=4, epsilon=2.0)
    assert float(fresh) == float(direct)
    assert fresh.kind == "lower bound" and "fresh permutation" in fresh.method
    assert float(fresh) <= float(ablq.delta_deterministic(noise_multiplier=1.2, epsilon=2.0, epochs=4))
    # A fresh permutation hides a record's position each epoch: the bound is far below the
    # same-permutation one, where the E answers at one position add up (sigma / sqrt(E)).
    same = ablq.delta_shuffle_lower(noise_multiplier=1.2, steps=1000, epsilon=2.0, epochs=4, permutation="same")
    assert float(fresh) < float(same)
    eps = ablq.epsilon_shuffle_lower(noise_multiplier=1.2, steps=1000, delta=1e-6, epochs=4)
    assert "fresh permutation" in eps.method
    assert float(eps) <= float(ablq.epsilon_deterministic(noise_multiplier=1.2, delta=1e-6, epochs=4))


def test_one_epoch_ignores_the_permutation_scheme() -> None:
    """For one epoch 'fresh' and 'same' are the same setting and give the same (C++) bound."""
    a = ablq.delta_shuffle_lower(noise_multiplier=0.4, steps=10_000, epsilon=4.0, permutation="fresh")
    b = ablq.delta_shuffle_lower(noise_multiplier=0.4, steps=10_000, epsilon=4.0, permutation="same")
    assert float(a) == float(b) and a.threshold is not None


def test_conjectured_estimate_is_exported_and_labelled() -> None:
    """The Monte-Carlo estimate under Conjecture 3.2 is reachable from dpacct.ablq and says it is conjectured."""
    r = ablq.delta_shuffle_conjectured_mc(noise_multiplier=1.0, steps=1, epsilon=1.0, samples=2000)
    assert "conjectured" in r.kind and r.lower <= r.estimate <= r.upper


def test_bounds_speak_the_shared_vocabulary() -> None:
    """Each ablq number converts to a results.Value, each pair to a certified results.Interval."""
    comparison = dpacct.ablq.compare_samplers(noise_multiplier=2.0, steps=100, delta=1e-5)
    value = comparison.shuffle.lower.as_value()
    assert value.kind == "lower bound" and value.quantity == "epsilon" and not value.is_guarantee
    assert float(value) == float(comparison.shuffle.lower) and value.details["sampler"] == "shuffle"
    interval = comparison.shuffle.as_interval()
    assert interval.lower <= interval.upper and interval.upper == comparison.shuffle.upper.value
    lower, upper = comparison.poisson.as_interval()
    assert lower <= upper


def test_a_bound_is_a_value() -> None:
    """ablq/samplers.Bound is a results.Value: to_json and is_guarantee work on it directly."""
    from dpacct.results import Value, to_json

    bound = dpacct.samplers.epsilon_deterministic(noise_multiplier=1.0, delta=1e-5)
    assert isinstance(bound, Value) and bound.is_guarantee and bound.kind == "exact"
    assert to_json(bound)["value"] == float(bound) and to_json(bound)["kind"] == "exact"
    lower = dpacct.samplers.epsilon_shuffle_lower(noise_multiplier=1.0, steps=100, delta=1e-5)
    assert not lower.is_guarantee


def test_single_batch_near_underflow_matches_mpmath() -> None:
    """sigma = 2.5, T = 1, eps = 15: the lower bound is the Gaussian curve, 8.6938e-307 by mpmath (50 digits)."""
    value = float(ablq.delta_shuffle_lower(noise_multiplier=2.5, steps=1, epsilon=15.0))
    with mpmath.workdps(50):
        mu, e = mpmath.mpf(1) / mpmath.mpf(2.5), mpmath.mpf(15)
        exact = float(mpmath.ncdf(-e / mu + mu / 2) - mpmath.exp(e) * mpmath.ncdf(-e / mu - mu / 2))
    assert value <= exact and value >= exact * (1 - 1e-7)

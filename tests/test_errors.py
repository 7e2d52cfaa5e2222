"""Every public entry point rejects bad input with the documented message (the wording is API)."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest

import dpacct
from dpacct import GaussianMechanism, PoissonSampledGaussianMechanism, RDPAccountant

GOOD: dict[str, Any] = {"noise_multiplier": 1.0, "sampling_probability": 0.01, "steps": 100, "delta": 1e-5}

BAD_VALUES = [
    ("noise_multiplier", -1.0, ValueError, r"^noise_multiplier must be finite and > 0, got -1\.0$"),
    ("noise_multiplier", 0.0, ValueError, r"^noise_multiplier must be finite and > 0, got 0\.0$"),
    ("noise_multiplier", math.nan, ValueError, r"^noise_multiplier must be finite and > 0, got nan$"),
    ("noise_multiplier", math.inf, ValueError, r"^noise_multiplier must be finite and > 0, got inf$"),
    ("noise_multiplier", "1.0", TypeError, r"^noise_multiplier must be a real number, got str$"),
    ("sampling_probability", 1.5, ValueError, r"^sampling_probability must be in \[0, 1\], got 1\.5$"),
    ("sampling_probability", -0.1, ValueError, r"^sampling_probability must be in \[0, 1\], got -0\.1$"),
    ("sampling_probability", math.nan, ValueError, r"^sampling_probability must be in \[0, 1\], got nan$"),
    ("steps", -3, ValueError, r"^steps must be an integer >= 0, got -3$"),
    ("steps", 10.5, ValueError, r"^steps must be an integer >= 0, got 10\.5$"),
    ("steps", True, TypeError, r"^steps must be an integer, got bool$"),
    ("delta", 0.0, ValueError, r"^delta must be in \(0, 1\), got 0\.0$"),
    ("delta", 1.0, ValueError, r"^delta must be in \(0, 1\), got 1\.0$"),
    ("delta", math.nan, ValueError, r"^delta must be in \(0, 1\), got nan$"),
    ("delta", [1e-5, 2.0], ValueError, r"^delta must be in \(0, 1\), got 2\.0 at index 1$"),
]


@pytest.mark.parametrize(("name", "value", "error", "message"), BAD_VALUES)
def test_epsilon_rejects(name: str, value: Any, error: type[Exception], message: str) -> None:
    """dpacct.epsilon names the parameter, the allowed range and the value."""
    with pytest.raises(error, match=message):
        dpacct.epsilon(**{**GOOD, name: value})


@pytest.mark.parametrize(("name", "value", "error", "message"), [b for b in BAD_VALUES if b[0] != "delta"])
def test_calibrate_rejects(name: str, value: Any, error: type[Exception], message: str) -> None:
    """dpacct.calibrate validates the known quantities the same way."""
    args: dict[str, Any] = {"epsilon": 1.0, "delta": 1e-5, **{k: v for k, v in GOOD.items() if k != "delta"}}
    args[name] = value
    unknown = next(k for k in ("noise_multiplier", "steps", "sampling_probability") if k != name)
    args[unknown] = None
    with pytest.raises(error, match=message):
        dpacct.calibrate(**args)


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda: dpacct.delta(**{**{k: v for k, v in GOOD.items() if k != "delta"}, "epsilon": -1.0}),
         r"^epsilon must be finite and >= 0, got -1\.0$"),
        (lambda: dpacct.delta(**{**{k: v for k, v in GOOD.items() if k != "delta"}, "epsilon": math.inf}),
         r"^epsilon must be finite and >= 0, got inf$"),
        (lambda: RDPAccountant(orders=[2.0, 0.5]), r"^orders must all be > 1, got 0\.5 at index 1$"),
        (lambda: RDPAccountant(orders=[]), r"^orders must be a non-empty 1-d array"),
        (lambda: RDPAccountant(conversion="best"), r"^conversion must be one of 'improved', 'classic', got 'best'$"),
        (lambda: dpacct.epsilon(**GOOD, accountant="magic"), r"^accountant must be one of"),
        (lambda: dpacct.epsilon(**GOOD, sampler="shuffled"), r"^sampler must be one of"),
        (lambda: GaussianMechanism(noise_multiplier=1.0, neighboring_relation="swap"),  # type: ignore[arg-type]
         r"^neighboring_relation must be one of"),
        (lambda: PoissonSampledGaussianMechanism(noise_multiplier=1.0, sampling_probability=0.1,
                                                 neighboring_relation="replace_one"),
         r"^neighboring_relation must be one of 'add_remove', 'zero_out', got 'replace_one'$"),
        (lambda: dpacct.calibrate(epsilon=0.0, delta=1e-5, sampling_probability=0.1, steps=10),
         r"^epsilon must be finite and > 0, got 0\.0$"),
        (lambda: dpacct.calibrate(epsilon=1.0, delta=1e-5, sampling_probability=0.1, steps=10, rtol=0.5),
         r"^rtol must be in \(0, 0\.1\], got 0\.5$"),
        (lambda: dpacct.gaussian.epsilon_for_delta(noise_multiplier=1.0, delta=-1.0),
         r"^delta must be in \(0, 1\), got -1\.0$"),
        (lambda: dpacct.rdp.subsampled_gaussian_rdp(noise_multiplier=1.0, sampling_probability=0.1, orders=1.0),
         r"^orders must all be > 1, got 1\.0$"),
        (lambda: dpacct.rdp.epsilon_from_rdp(orders=[2.0, 3.0], rdp=[0.1], delta=1e-5),
         r"^rdp must have the same shape as orders"),
    ],
)
def test_other_entry_points_reject(call: Any, message: str) -> None:
    """Accountants, mechanisms, conversions and the Gaussian curve reject bad input clearly."""
    with pytest.raises(ValueError, match=message):
        call()


def test_cpp_kernel_validates_too() -> None:
    """The C++ kernel enforces the same constraints with the same wording (for direct _core users)."""
    with pytest.raises(ValueError, match=r"^noise_multiplier must be finite and > 0, got -1$"):
        dpacct._core.rdp.subsampled_gaussian(0.1, -1.0, np.array([2.0]))
    with pytest.raises(ValueError, match=r"^rdp must all be >= 0, got nan at index 0$"):
        dpacct._core.rdp.epsilon_from_rdp(np.array([2.0]), np.array([math.nan]), np.array([1e-5]), "improved")


def test_extreme_valid_inputs_work() -> None:
    """T = 10^7, delta = 1e-15, sigma = 0.2 and q = 1e-8 give finite answers, no NaN, with either accountant."""
    for accountant in ("pld", "rdp"):
        assert math.isfinite(dpacct.epsilon(noise_multiplier=1.0, sampling_probability=1e-3, steps=10**7, delta=1e-15,
                                            accountant=accountant))
        eps = dpacct.epsilon(noise_multiplier=0.2, sampling_probability=0.5, steps=1000, delta=1e-5,
                             accountant=accountant)
        assert math.isfinite(eps) and eps > 0
    tiny = {"noise_multiplier": 1.0, "sampling_probability": 1e-8, "steps": 100}
    assert 0 < dpacct.epsilon(**tiny, delta=1e-5, accountant="rdp") < 1.0
    # PLD's certified answer is exactly 0 there: a record is sampled at all with probability 1e-6 < delta, and the
    # total variation distance delta(0) is below that.
    assert dpacct.epsilon(**tiny, delta=1e-5) == 0.0
    assert dpacct.delta(**tiny, epsilon=0.0) <= 1e-6


@pytest.mark.parametrize(
    ("call", "error", "message"),
    [
        (lambda: dpacct.zcdp.epsilon_from_rho(rho=-1.0, delta=1e-5), ValueError, r"^rho must be finite and >= 0, got -1\.0$"),
        (lambda: dpacct.zcdp.epsilon_from_rho(rho=1.0, delta=0.0), ValueError, r"^delta must be in \(0, 1\), got 0\.0$"),
        (lambda: dpacct.zcdp.epsilon_from_rho(rho=1.0, delta=1e-5, conversion="x"), ValueError,
         r"^conversion must be one of 'improved', 'classic', got 'x'$"),
        (lambda: dpacct.zcdp.delta_from_rho(rho=math.inf, epsilon=1.0), ValueError, r"^rho must be finite and >= 0, got inf$"),
        (lambda: dpacct.zcdp.gaussian_rho(noise_multiplier=0.0), ValueError,
         r"^noise_multiplier must be finite and > 0, got 0\.0$"),
        (lambda: dpacct.ZCDPAccountant().compose_rho(math.nan), ValueError, r"^rho must be finite and >= 0, got nan$"),
        (lambda: dpacct.ZCDPAccountant().compose_pure_dp(-1.0), ValueError, r"^epsilon must be finite and >= 0, got -1\.0$"),
        (lambda: dpacct.ZCDPAccountant().compose_exponential_mechanism(1.0, count=-2), ValueError,
         r"^count must be an integer >= 0, got -2$"),
        (lambda: dpacct.zcdp.random_reshuffling_rho([[1.0, -2.0]]), ValueError,
         r"^noise_multiplier must be finite and > 0, got -2\.0 in epoch 0$"),
        (lambda: dpacct.zcdp.random_reshuffling_rho(3.0), TypeError, r"^epochs must be a sequence"),
        (lambda: dpacct.zcdp.shuffled_epochs_epsilon(noise_multiplier=1.0, epochs=-1, delta=1e-5), ValueError,
         r"^epochs must be an integer >= 0, got -1$"),
        (lambda: dpacct.zcdp.random_sampling_epsilon_heuristic(noise_multiplier=1.0, sampling_probability=1.5, steps=1,
                                                                delta=1e-5), ValueError,
         r"^sampling_probability must be in \[0, 1\], got 1\.5$"),
        (lambda: dpacct.zcdp.random_sampling_epsilon_heuristic(noise_multiplier=[1.0, 2.0], sampling_probability=0.01,
                                                                steps=[1, 2, 3], delta=1e-5), ValueError,
         r"^noise_multiplier, sampling_probability and steps must broadcast together"),
        (lambda: dpacct.schedules.TimeBased(initial_noise_multiplier=10.0, decay=-0.1), ValueError,
         r"^decay must be finite and >= 0, got -0\.1$"),
        (lambda: dpacct.schedules.Step(initial_noise_multiplier=10.0, decay=0.5, period=0), ValueError,
         r"^period must be an integer >= 1, got 0$"),
        (lambda: dpacct.schedules.Polynomial(initial_noise_multiplier=1.0, final_noise_multiplier=2.0, decay=1.0,
                                             period=5), ValueError,
         r"^final_noise_multiplier must be <= initial_noise_multiplier = 1\.0, got 2\.0$"),
        (lambda: dpacct.schedules.ValidationBased(initial_noise_multiplier=1.0, decay=1.0), ValueError,
         r"^decay must be in \(0, 1\) for the validation-based schedule, got 1\.0$"),
        (lambda: dpacct.schedules.Uniform(initial_noise_multiplier=1.0).noise_multiplier(-1), ValueError,
         r"^epoch must be an integer >= 0, got -1$"),
        (lambda: dpacct.schedules.allocate_budget(dpacct.schedules.Uniform(initial_noise_multiplier=1.0), rho_total=0.0),
         ValueError, r"^rho_total must be finite and > 0, got 0\.0$"),
        (lambda: dpacct.schedules.allocate_budget("abc", rho_total=1.0), TypeError, r"^schedule must be a Schedule"),
        (lambda: dpacct.schedules.allocate_budget([1.0, math.nan], rho_total=1.0), ValueError,
         r"^noise multipliers must be finite and >= 0, got nan at epoch 1$"),
        (lambda: dpacct.schedules.allocate_budget_epsilon([1.0], epsilon=1.0, delta=1e-5, accountant="nope"),
         ValueError, r"^accountant must be one of"),
        (lambda: dpacct.schedules.solve_decay("uniform", initial_noise_multiplier=1.0, rho_total=1.0, target_epochs=2),
         ValueError, r"^kind must be one of 'time', 'exponential', 'step', 'polynomial', got 'uniform'$"),
        (lambda: dpacct.schedules.solve_decay("time", initial_noise_multiplier=1.0, rho_total=1.0, target_epochs=0),
         ValueError, r"^target_epochs must be an integer >= 1, got 0$"),
        (lambda: dpacct.composition.advanced_composition(epsilon=1.0, delta=0.0, count=3, delta_slack=0.0), ValueError,
         r"^delta_slack must be in \(0, 1\), got 0\.0$"),
        (lambda: dpacct.composition.basic_composition(epsilon=1.0, delta=1.5, count=3), ValueError,
         r"^delta must be in \[0, 1\], got 1\.5$"),
        (lambda: dpacct.composition.optimal_composition_delta(epsilon=-1.0, delta=0.0, count=3, total_epsilon=1.0),
         ValueError, r"^epsilon must be finite and >= 0, got -1\.0$"),
        (lambda: dpacct.composition.optimal_composition_epsilon(epsilon=1.0, delta=0.0, count=3, total_delta=1.0),
         ValueError, r"^delta must be in \(0, 1\), got 1\.0$"),
        (lambda: dpacct.composition.poisson_subsampling(epsilon=1.0, delta=0.0, sampling_probability=2.0), ValueError,
         r"^sampling_probability must be in \[0, 1\], got 2\.0$"),
        (lambda: dpacct.composition.dpd_ac_noise_multiplier(epsilon=1.0, delta=1e-5, steps=0, sampling_probability=0.1),
         ValueError, r"^steps must be an integer >= 1, got 0$"),
        (lambda: dpacct.composition.dpd_zcdp_noise_multiplier(epsilon=1.0, delta=1e-5, steps=10,
                                                              sampling_probability=0.1, accounting="moments"),
         ValueError, r"^accounting must be one of 'random_reshuffling', 'heuristic_random_sampling', got 'moments'$"),
        (lambda: dpacct.composition.dropout_rates(noise_multiplier=1.0, clip_norm=0.0, weights=[1.0]), ValueError,
         r"^clip_norm must be finite and > 0, got 0\.0$"),
        (lambda: dpacct.composition.dropout_rates(noise_multiplier=1.0, clip_norm=1.0, weights=[1.0, math.inf]),
         ValueError, r"^weights must all be finite, got inf$"),
        (lambda: dpacct.composition.dropout_rates(noise_multiplier=1.0, clip_norm=1.0, weights="w"), TypeError,
         r"^weights must be a real number or an array of them, got str$"),
    ],
)
def test_zcdp_schedules_composition_reject(call: Any, error: type[Exception], message: str) -> None:
    """zCDP, schedule and composition entry points name the parameter, the allowed range and the value."""
    with pytest.raises(error, match=message):
        call()


def test_zcdp_extreme_valid_inputs_work() -> None:
    """Tiny and huge rho, delta = 1e-300 and k = 10^5 optimal composition give finite, non-NaN answers."""
    for rho in (1e-300, 1e-12, 1e6):
        for d in (1e-300, 0.5):
            value = dpacct.zcdp.epsilon_from_rho(rho=rho, delta=d)
            assert math.isfinite(value) and value >= 0
    assert 0.0 <= dpacct.zcdp.delta_from_rho(rho=1e6, epsilon=1e3) <= 1.0
    big = dpacct.composition.optimal_composition_delta(epsilon=0.001, delta=1e-12, count=100_000, total_epsilon=0.5)
    assert 0.0 < big < 1.0


@pytest.mark.parametrize(
    ("call", "error", "message"),
    [
        (lambda: dpacct.epsilon(**GOOD, sampler="shuffle", assume_poisson=1), TypeError,
         r"^assume_poisson must be a bool, got int$"),
        (lambda: dpacct.epsilon(**GOOD, sampler="deterministic", assume_poisson=True), ValueError,
         r"^assume_poisson applies only to sampler='shuffle', got sampler='deterministic'$"),
        (lambda: dpacct.epsilon(**{**GOOD, "sampling_probability": 1.5}, sampler="shuffle"), ValueError,
         r"^sampling_probability must be in \[0, 1\], got 1\.5$"),
        (lambda: dpacct.epsilon(**{**GOOD, "steps": -1}, sampler="deterministic"), ValueError,
         r"^steps must be an integer >= 0, got -1$"),
        (lambda: dpacct.compare_samplers(noise_multiplier=0.0, steps=10, delta=1e-5), ValueError,
         r"^noise_multiplier must be finite and > 0, got 0\.0$"),
        (lambda: dpacct.compare_samplers(noise_multiplier=1.0, steps=10, delta=1.0), ValueError,
         r"^delta must be in \(0, 1\), got 1\.0$"),
        (lambda: dpacct.compare_samplers(noise_multiplier=1.0, steps=10, epochs=0, epsilon=1.0), ValueError,
         r"^epochs must be an integer >= 1, got 0$"),
        (lambda: dpacct.ablq.epsilon_shuffle_lower(noise_multiplier=1.0, steps=10, delta=[1e-5, 0.0]), ValueError,
         r"^delta must be in \(0, 1\), got 0\.0 at index 1$"),
        (lambda: dpacct.ablq.epsilon_poisson_bounds(noise_multiplier=1.0, steps=True, delta=1e-5), TypeError,
         r"^steps must be an integer, got bool$"),
        (lambda: dpacct.api.shuffle_epsilon_details(noise_multiplier=1.0, sampling_probability=0.1, steps=10,
                                                    delta=math.nan), ValueError,
         r"^delta must be in \(0, 1\), got nan$"),
    ],
)
def test_sampler_entry_points_reject(call: Any, error: type[Exception], message: str) -> None:
    """The sampler-aware API (samplers, assume_poisson, dpacct.ablq) rejects bad input with the documented wording."""
    with pytest.raises(error, match=message):
        call()

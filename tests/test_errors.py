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
    """T = 10^7, delta = 1e-15, sigma = 0.2 and q = 1e-8 give finite answers, no NaN."""
    assert math.isfinite(dpacct.epsilon(noise_multiplier=1.0, sampling_probability=1e-3, steps=10**7, delta=1e-15))
    eps = dpacct.epsilon(noise_multiplier=0.2, sampling_probability=0.5, steps=1000, delta=1e-5)
    assert math.isfinite(eps) and eps > 0
    assert 0 < dpacct.epsilon(noise_multiplier=1.0, sampling_probability=1e-8, steps=100, delta=1e-5) < 1.0

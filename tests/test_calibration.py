"""Calibration of noise multiplier, steps and sampling probability: always within budget."""

from __future__ import annotations

import pytest

import dpacct

Q = 256 / 60000


@pytest.mark.parametrize("target", [0.5, 1.0, 3.0, 8.0])
def test_noise_multiplier_meets_budget_and_is_tight(target: float) -> None:
    """RDP: the returned sigma meets the budget and sigma * (1 - 1e-5) does not (rtol=1e-6; PLD resolves sigma
    to 0.1 %, below)."""
    r = dpacct.calibrate(epsilon=target, delta=1e-5, sampling_probability=Q, steps=10_000, accountant="rdp")
    assert r.solved_for == "noise_multiplier"
    assert r.epsilon <= target
    recomputed = dpacct.epsilon(noise_multiplier=r.noise_multiplier, sampling_probability=Q, steps=10_000, delta=1e-5,
                                accountant="rdp")
    assert recomputed == r.epsilon
    smaller = dpacct.epsilon(noise_multiplier=r.noise_multiplier * (1 - 1e-5), sampling_probability=Q,
                             steps=10_000, delta=1e-5, accountant="rdp")
    assert smaller > target


def test_the_default_accountant_is_pld_as_on_the_command_line() -> None:
    """calibrate, epsilon and delta without accountant= are PLD's (the command line's default too), and PLD's
    sigma is below RDP's for the same budget (its certified upper bound is the tighter)."""
    default = dpacct.calibrate(epsilon=2.0, delta=1e-5, sampling_probability=Q, steps=10_000)
    named = dpacct.calibrate(epsilon=2.0, delta=1e-5, sampling_probability=Q, steps=10_000, accountant="pld")
    assert default == named and default.accountant == "pld"
    rdp = dpacct.calibrate(epsilon=2.0, delta=1e-5, sampling_probability=Q, steps=10_000, accountant="rdp")
    assert default.noise_multiplier < rdp.noise_multiplier
    run = {"noise_multiplier": 1.1, "sampling_probability": Q, "steps": 10_000}
    assert dpacct.epsilon(**run, delta=1e-5) == dpacct.epsilon(**run, delta=1e-5, accountant="pld")
    assert dpacct.delta(**run, epsilon=2.0) == dpacct.delta(**run, epsilon=2.0, accountant="pld")


def test_steps_is_the_largest_within_budget() -> None:
    """T meets the budget and T + 1 does not."""
    r = dpacct.calibrate(epsilon=2.0, delta=1e-5, noise_multiplier=1.0, sampling_probability=0.01)
    assert r.solved_for == "steps" and r.epsilon <= 2.0
    over = dpacct.epsilon(noise_multiplier=1.0, sampling_probability=0.01, steps=r.steps + 1, delta=1e-5)
    assert over > 2.0


def test_sampling_probability_is_the_largest_within_budget() -> None:
    """q meets the budget and q * (1 + 1e-5) does not."""
    r = dpacct.calibrate(epsilon=2.0, delta=1e-5, noise_multiplier=1.0, steps=1000)
    assert r.solved_for == "sampling_probability" and r.epsilon <= 2.0
    over = dpacct.epsilon(noise_multiplier=1.0, sampling_probability=r.sampling_probability * (1 + 1e-5),
                          steps=1000, delta=1e-5)
    assert over > 2.0


def test_full_sampling_when_budget_allows() -> None:
    """If even q = 1 meets the budget, q = 1 is returned."""
    r = dpacct.calibrate(epsilon=5.0, delta=1e-5, noise_multiplier=10.0, steps=10)
    assert r.sampling_probability == 1.0


def test_unreachable_budgets_raise() -> None:
    """Budgets no configuration can meet raise a ValueError that says why."""
    with pytest.raises(ValueError, match="a single step already gives epsilon"):
        dpacct.calibrate(epsilon=0.01, delta=1e-5, noise_multiplier=0.5, sampling_probability=1.0)
    with pytest.raises(ValueError, match="exactly one of noise_multiplier, sampling_probability, steps"):
        dpacct.calibrate(epsilon=1.0, delta=1e-5, steps=10)
    with pytest.raises(ValueError, match="cannot be calibrated when sampling_probability or steps is 0"):
        dpacct.calibrate(epsilon=1.0, delta=1e-5, sampling_probability=0.01, steps=0)


@pytest.mark.parametrize(("steps", "target"), [(2_500, 8.0), (25_000, 1.0)])
def test_pld_secant_guide_proves_both_ends_with_the_default_accountant(steps: int, target: float) -> None:
    """The PLD guide's bracket: the safe end meets the target and the unsafe end does not, each
    by a query of the default PLD accountant, within 0.1 %; calibration reports its queries."""
    from dpacct.pld.guide import PLD_MIN_RTOL, noise_multiplier_guide

    q, delta = 0.004, 1e-5
    guide = noise_multiplier_guide(sampling_probability=q, steps=steps, delta=delta, epsilon=target)
    assert guide.unsafe is not None and guide.safe_epsilon is not None and guide.unsafe_epsilon is not None
    assert guide.safe <= guide.unsafe * (1 + PLD_MIN_RTOL)
    at = {s: dpacct.epsilon(noise_multiplier=s, sampling_probability=q, steps=steps, delta=delta, accountant="pld")
          for s in (guide.safe, guide.unsafe)}
    assert at[guide.safe] == guide.safe_epsilon <= target < at[guide.unsafe] == guide.unsafe_epsilon
    result = dpacct.calibrate(epsilon=target, delta=delta, sampling_probability=q, steps=steps, accountant="pld")
    assert (result.noise_multiplier, result.epsilon) == (guide.safe, guide.safe_epsilon)
    assert result.evaluations == guide.evaluations >= 2


@pytest.mark.parametrize("target", [1.0, 3.0])
def test_pld_noise_calibration_meets_budget_and_is_near_the_smallest_certified_sigma(target: float) -> None:
    """PLD calibration meets the budget, beats RDP's sigma, and 0.3% less noise no longer certifies the target."""
    q, steps, delta = 256 / 60000, 10_000, 1e-5
    result = dpacct.calibrate(epsilon=target, delta=delta, sampling_probability=q, steps=steps, accountant="pld")
    assert result.epsilon <= target
    again = dpacct.epsilon(noise_multiplier=result.noise_multiplier, sampling_probability=q, steps=steps,
                           delta=delta, accountant="pld")
    assert again == result.epsilon  # the reported epsilon is the accountant's, re-computed
    rdp_sigma = dpacct.calibrate(epsilon=target, delta=delta, sampling_probability=q, steps=steps,
                                 accountant="rdp").noise_multiplier
    assert result.noise_multiplier < rdp_sigma
    # The solver resolves sigma to 0.1% (calibration._PLD_MIN_RTOL); 0.3% less noise must fail the budget.
    smaller = dpacct.epsilon(noise_multiplier=result.noise_multiplier * (1 - 3e-3), sampling_probability=q,
                             steps=steps, delta=delta, accountant="pld")
    assert smaller > target

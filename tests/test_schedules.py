"""Noise schedules and budget allocation: Yu et al. 2019 (Sec. IV-A) references, exact stopping rule, solver, cross-accountant runs."""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest

import dpacct
from dpacct import GaussianMechanism, PLDAccountant, RDPAccountant, ZCDPAccountant, gaussian
from dpacct.schedules import (
    Exponential,
    Polynomial,
    Schedule,
    Step,
    TimeBased,
    Uniform,
    ValidationBased,
    allocate_budget,
    allocate_budget_epsilon,
    make_schedule,
    solve_decay,
)

hypothesis = pytest.importorskip("hypothesis")
from hypothesis import given  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

# Schedule values are one or two floating-point operations away from the closed form.
RTOL_SIGMA = 1e-14
RHO = 0.78125  # the budget of Yu et al. 2019, Sec. IV-A

YU_EPOCHS = [
    pytest.param(Uniform(initial_noise_multiplier=8.0), 100, id="uniform-8"),
    pytest.param(TimeBased(initial_noise_multiplier=10.0, decay=0.05), 38, id="time-0.05"),
    pytest.param(Step(initial_noise_multiplier=10.0, decay=0.6, period=10), 31, id="step-0.6-10"),
    pytest.param(Exponential(initial_noise_multiplier=10.0, decay=0.01), 71, id="exponential-0.01"),
    pytest.param(Polynomial(initial_noise_multiplier=10.0, final_noise_multiplier=2.0, decay=3.0, period=100), 44,
                 id="polynomial-3-2-100"),
]


def exact_total(sigmas: list[float]) -> Fraction:
    """Exact rational sum of 1/(2 sigma^2) for the given float sigmas."""
    return sum((Fraction(1, 2) / Fraction(s) ** 2 for s in sigmas), Fraction(0))


@pytest.mark.parametrize(("schedule", "epochs"), YU_EPOCHS)
def test_spec_2_5_reference_epochs(schedule: Schedule, epochs: int) -> None:
    """Yu et al. 2019, Sec. IV-A: rho_total = 0.78125, sigma0 = 10 gives 100/38/31/71/44 epochs."""
    allocation = allocate_budget(schedule, rho_total=RHO)
    assert allocation.epochs == epochs
    assert allocation.budget_exhausted


@pytest.mark.parametrize(("schedule", "epochs"), YU_EPOCHS)
def test_stops_before_the_epoch_that_would_exceed(schedule: Schedule, epochs: int) -> None:
    """Exactly: the epochs that fit cost <= the budget, and one more epoch would cost more."""
    sigmas = [schedule.noise_multiplier(t) for t in range(epochs + 1)]
    assert exact_total(sigmas[:epochs]) <= Fraction(RHO) < exact_total(sigmas)
    allocation = allocate_budget(schedule, rho_total=RHO)
    np.testing.assert_array_equal(allocation.noise_multipliers, sigmas[:epochs])
    np.testing.assert_allclose(allocation.cumulative_rho[-1], float(exact_total(sigmas[:epochs])), rtol=1e-14)


def test_uniform_budget_boundary_is_decided_exactly() -> None:
    """100 epochs at sigma 8 cost exactly 0.78125: they fit; a budget one ulp smaller affords 99."""
    assert allocate_budget(Uniform(initial_noise_multiplier=8.0), rho_total=RHO).epochs == 100
    smaller = math.nextafter(RHO, 0.0)
    assert allocate_budget(Uniform(initial_noise_multiplier=8.0), rho_total=smaller).epochs == 99


def test_schedule_formulas() -> None:
    """Each schedule follows its formula (Yu et al. 2019, Sec. IV-A), vectorised and scalar, and iterates from epoch 0."""
    t = np.arange(0, 130)
    cases = [
        (TimeBased(initial_noise_multiplier=10.0, decay=0.05), 10.0 / (1 + 0.05 * t)),
        (Exponential(initial_noise_multiplier=10.0, decay=0.01), 10.0 * np.exp(-0.01 * t)),
        (Step(initial_noise_multiplier=10.0, decay=0.6, period=10), 10.0 * 0.6 ** (t // 10)),
        (Polynomial(initial_noise_multiplier=10.0, final_noise_multiplier=2.0, decay=3.0, period=100),
         np.where(t < 100, 8.0 * np.clip(1 - t / 100, 0, 1) ** 3 + 2.0, 2.0)),
        (Uniform(initial_noise_multiplier=8.0), np.full(t.shape, 8.0)),
    ]
    for schedule, expected in cases:
        np.testing.assert_allclose(schedule.noise_multipliers(t), expected, rtol=RTOL_SIGMA)
        assert schedule.noise_multiplier(7) == schedule.noise_multipliers([7])[0]
        first = [s for _, s in zip(range(1100), schedule)]
        np.testing.assert_array_equal(first, schedule.noise_multipliers(np.arange(1100)))


def test_validation_based_decays_when_accuracy_stalls() -> None:
    """sigma <- k sigma after a comparison whose windowed mean improved by <= threshold (Yu et al. 2019, Sec. IV-A)."""
    vb = ValidationBased(initial_noise_multiplier=8.0, decay=0.5, period=2, window=2, threshold=0.01)
    # comparisons after checks 2, 4, 6: means 0.55, 0.75 (+0.2: keep), 0.755 (+0.005: decay)
    sigmas = vb.noise_multipliers([0.5, 0.6, 0.7, 0.8, 0.75, 0.76, 0.9])
    np.testing.assert_array_equal(sigmas, [8, 8, 8, 8, 8, 8, 4, 4])
    assert vb.noise_multipliers([]).tolist() == [8.0]
    allocation = allocate_budget(sigmas, rho_total=0.05)
    assert allocation.epochs == 6 and allocation.budget_exhausted  # six epochs at 1/128, the 4.0 one does not fit


def test_max_epochs_and_finite_sequences_are_not_exhaustion() -> None:
    """Stopping at max_epochs or at the end of a sequence is reported as budget_exhausted = False."""
    capped = allocate_budget(Uniform(initial_noise_multiplier=100.0), rho_total=1.0, max_epochs=50)
    assert capped.epochs == 50 and not capped.budget_exhausted
    short = allocate_budget([5.0, 5.0], rho_total=1.0)
    assert short.epochs == 2 and not short.budget_exhausted


@pytest.mark.parametrize(
    ("kind", "options", "target", "spec_decay"),
    [("time", {}, 38, 0.05), ("exponential", {}, 71, 0.01), ("step", {"period": 10}, 31, 0.6),
     ("polynomial", {"period": 100, "final_noise_multiplier": 2.0}, 44, 3.0)],
)
def test_solve_decay_returns_the_least_noisy_end(kind: str, options: dict[str, float], target: int,
                                                 spec_decay: float) -> None:
    """The solved k gives exactly the target; just past it (less noise) gives fewer; the published k is on the noisy side."""
    solution = solve_decay(kind, initial_noise_multiplier=10.0, rho_total=RHO, target_epochs=target, **options)
    assert solution.epochs == target == solution.allocation.epochs

    def count(k: float) -> int:
        schedule = make_schedule(kind, initial_noise_multiplier=10.0, decay=k, **options)  # type: ignore[arg-type]
        return allocate_budget(schedule, rho_total=RHO).epochs

    assert count(solution.decay) == target
    if kind == "step":  # more decay = smaller k
        assert count(solution.decay - 1e-9) < target and solution.decay <= spec_decay
    else:
        assert count(solution.decay + 1e-9 * max(1.0, solution.decay)) < target and solution.decay >= spec_decay


def test_solve_decay_rejects_unreachable_targets() -> None:
    """More epochs than the undecayed schedule affords is refused, naming the achievable maximum."""
    with pytest.raises(ValueError, match=r"^target_epochs must be <= 156 \(no decay\) for this budget, got 200$"):
        solve_decay("time", initial_noise_multiplier=10.0, rho_total=RHO, target_epochs=200)


def test_heterogeneous_run_through_every_accountant() -> None:
    """A decaying schedule's epochs account consistently through zCDP, RDP and PLD against the exact Gaussian."""
    sigmas = allocate_budget(TimeBased(initial_noise_multiplier=10.0, decay=0.05), rho_total=RHO).noise_multipliers
    rho = float(np.sum(0.5 / sigmas**2))
    zcdp, rdp, pld = ZCDPAccountant(), RDPAccountant(), PLDAccountant()
    for sigma in sigmas:
        for acct in (zcdp, rdp, pld):
            acct.compose(GaussianMechanism(noise_multiplier=float(sigma)))
    np.testing.assert_allclose(zcdp.rho, rho, rtol=1e-13)
    np.testing.assert_allclose(rdp.rdp, rdp.orders * rho, rtol=1e-12)  # RDP(alpha) = alpha rho, order by order
    sigma_eff = gaussian.composed_noise_multiplier(sigmas)
    np.testing.assert_allclose(zcdp.effective_noise_multiplier, sigma_eff, rtol=1e-13)
    exact = gaussian.epsilon_for_delta(noise_multiplier=sigma_eff, delta=1e-5)
    assert zcdp.get_epsilon(1e-5) >= exact and rdp.get_epsilon(1e-5) >= exact
    lower, upper = pld.epsilon_bounds(1e-5)
    assert lower <= exact <= upper
    np.testing.assert_allclose(upper, exact, rtol=0.02)  # PLD default accuracy ~0.5% of epsilon


@pytest.mark.parametrize("accountant", ["zcdp", "rdp", "pld"])
def test_epsilon_budget_through_any_accountant(accountant: str) -> None:
    """The (eps, delta) allocation fits the budget, and for zCDP/RDP one more epoch would not."""
    schedule = Exponential(initial_noise_multiplier=10.0, decay=0.01)
    result = allocate_budget_epsilon(schedule, epsilon=3.0, delta=1e-5, accountant=accountant)
    assert result.epochs > 10 and result.epsilon <= 3.0 and result.budget_exhausted
    acct = dpacct.make_accountant(accountant)
    for sigma in schedule.noise_multipliers(np.arange(result.epochs + 1)):
        acct.compose(GaussianMechanism(noise_multiplier=float(sigma)))
    if accountant != "pld":
        assert acct.get_epsilon(1e-5) > 3.0


@given(sigma=st.floats(0.5, 50.0), rho=st.floats(1e-3, 10.0))
def test_uniform_count_is_the_exact_floor(sigma: float, rho: float) -> None:
    """Uniform sigma affords floor(rho / (1/(2 sigma^2))) epochs, computed in exact rationals."""
    cost = Fraction(1, 2) / Fraction(sigma) ** 2
    expected = min(math.floor(Fraction(rho) / cost), 100_000)
    assert allocate_budget(Uniform(initial_noise_multiplier=sigma), rho_total=rho).epochs == expected


@given(k=st.floats(0.0, 1.0), rho=st.floats(0.01, 2.0), factor=st.floats(1.0, 3.0))
def test_allocation_monotone(k: float, rho: float, factor: float) -> None:
    """More budget never affords fewer epochs; more decay never affords more."""
    base = allocate_budget(TimeBased(initial_noise_multiplier=10.0, decay=k), rho_total=rho).epochs
    assert allocate_budget(TimeBased(initial_noise_multiplier=10.0, decay=k), rho_total=rho * factor).epochs >= base
    assert allocate_budget(TimeBased(initial_noise_multiplier=10.0, decay=k * factor + 0.01),
                           rho_total=rho).epochs <= base

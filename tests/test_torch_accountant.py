"""dpacct.torch.PrivacyAccountant: one accounting step per noised optimizer step, for the sampler in use."""

from __future__ import annotations

import io
import math

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from scipy import stats  # noqa: E402
from torch.utils.data import DataLoader, TensorDataset  # noqa: E402

import dpacct  # noqa: E402
from dpacct import gaussian  # noqa: E402
from dpacct.mechanisms import GaussianMechanism, MixtureOfGaussiansMechanism  # noqa: E402
from dpacct.pld import PLDAccountant  # noqa: E402
from dpacct.schedules import Exponential, TimeBased  # noqa: E402
from dpacct.torch import (  # noqa: E402
    BudgetExhaustedError,
    DeterministicBatchSampler,
    PoissonBatchSampler,
    PrivacyAccountant,
    ShuffleBatchSampler,
    plan_epochs,
    with_epoch_clock,
)

# The same mechanisms composed by the same accountant give the same float; RDP sums runs
# in a different order when they are split differently, hence 1e-12.
RTOL_SAME = 1e-12
# PLD's default relative accuracy (its upper bound is within about 0.5% of the truth).
RTOL_PLD = 0.01


def _model() -> tuple[torch.nn.Module, torch.optim.Optimizer]:
    model = torch.nn.Linear(3, 1)
    return model, torch.optim.SGD(model.parameters(), lr=0.1)


def _fake_grads(model: torch.nn.Module) -> None:
    for p in model.parameters():
        p.grad = torch.ones_like(p)


def test_poisson_steps_match_the_one_call_api() -> None:
    """T Poisson steps give dpacct.epsilon(sampler='poisson') exactly, and len() is T."""
    sampler = PoissonBatchSampler(dataset_size=60_000, sampling_probability=256 / 60_000)
    acct = PrivacyAccountant(sampler, delta=1e-5, accountant="rdp", noise_multiplier=1.1)
    for _ in range(1000):
        acct.step()
    expected = dpacct.epsilon(noise_multiplier=1.1, sampling_probability=256 / 60_000, steps=1000, delta=1e-5,
                              accountant="rdp")
    np.testing.assert_allclose(acct.get_epsilon(), expected, rtol=RTOL_SAME)
    assert len(acct) == 1000 and acct.history == ((1.1, 256 / 60_000, 1000),)


def test_hook_counts_optimizer_steps_not_backward_passes() -> None:
    """Gradient accumulation: three backward passes and one optimizer.step() are one accounting step."""
    model, opt = _model()
    sampler = PoissonBatchSampler(dataset_size=100, sampling_probability=0.1)
    acct = PrivacyAccountant(sampler, delta=1e-5, accountant="rdp", noise_multiplier=1.0).attach(opt)
    for _ in range(4):
        for _ in range(3):
            model(torch.randn(5, 3)).sum().backward()
        opt.step()
        opt.zero_grad()
    assert len(acct) == 4
    acct.detach()
    _fake_grads(model)
    opt.step()
    assert len(acct) == 4


def test_noise_multiplier_is_read_from_the_optimizer_when_it_has_one() -> None:
    """An optimizer with a noise_multiplier attribute (opacus' DPOptimizer) sets the accounted noise."""
    model, opt = _model()
    opt.noise_multiplier = 2.5  # type: ignore[attr-defined]
    acct = PrivacyAccountant(PoissonBatchSampler(dataset_size=100, sampling_probability=0.1), delta=1e-5,
                             accountant="rdp").attach(opt)
    _fake_grads(model)
    opt.step()
    assert acct.history == ((2.5, 0.1, 1),)


@pytest.mark.parametrize("accountant", ["rdp", "pld"])
def test_budget_stops_before_the_step_that_would_exceed(accountant: str) -> None:
    """The refused step raises before touching the parameters; the steps taken fit, one more would not."""
    q, sigma, target = 0.05, 2.0, 1.0
    model, opt = _model()
    acct = PrivacyAccountant(PoissonBatchSampler(dataset_size=1000, sampling_probability=q), delta=1e-5,
                             accountant=accountant, max_epsilon=target, noise_multiplier=sigma).attach(opt)
    taken = 0
    while True:
        _fake_grads(model)
        exhausted = acct.exhausted
        before = [p.detach().clone() for p in model.parameters()]
        try:
            opt.step()
        except BudgetExhaustedError:
            assert exhausted
            assert all(torch.equal(a, b) for a, b in zip(before, model.parameters()))
            break
        assert not exhausted
        taken += 1
    assert len(acct) == taken > 10

    def eps(steps: int) -> float:
        return float(dpacct.epsilon(noise_multiplier=sigma, sampling_probability=q, steps=steps, delta=1e-5,
                                    accountant=accountant))

    assert eps(taken) <= target < eps(taken + 1)
    with pytest.raises(BudgetExhaustedError, match="not taken"):
        acct.step()
    assert len(acct) == taken


def _run_epochs(loader: DataLoader, acct: PrivacyAccountant, epochs: int, stop_after: int | None = None) -> None:
    for e in range(epochs):
        for i, _ in enumerate(loader):
            if e == epochs - 1 and stop_after is not None and i == stop_after:
                break
            acct.step()


def test_shuffled_batches_get_the_honest_bound_not_the_poisson_number() -> None:
    """Shuffled batches: one zero-out Gaussian per epoch (a partial epoch counts), as dpacct.epsilon(sampler='shuffle')."""
    data = TensorDataset(torch.zeros(100, 1))
    loader = DataLoader(data, batch_sampler=ShuffleBatchSampler(dataset_size=100, batch_size=10))
    acct = PrivacyAccountant(loader, delta=1e-5, accountant="pld", noise_multiplier=2.0)
    _run_epochs(loader, acct, 3, stop_after=2)
    assert len(acct) == 22
    assert acct.mechanisms() == ((GaussianMechanism(noise_multiplier=2.0, neighboring_relation="zero_out"), 3),)
    honest = dpacct.epsilon(noise_multiplier=2.0, sampling_probability=0.1, steps=22, delta=1e-5,
                            accountant="pld", sampler="shuffle")
    # dpacct.epsilon gives the exact Gaussian curve for shuffled runs; the hook's PLD accountant
    # certifies an upper bound on the same three Gaussians, within its default 0.5 % accuracy.
    assert honest <= acct.get_epsilon() <= honest * 1.005
    poisson = dpacct.epsilon(noise_multiplier=2.0, sampling_probability=0.1, steps=22, delta=1e-5, accountant="pld")
    assert acct.get_epsilon() > 2 * poisson  # the Poisson number would be far too small here


def test_plain_shuffled_loader_needs_an_epoch_clock() -> None:
    """A plain DataLoader(shuffle=True) is identified but needs with_epoch_clock for per-epoch accounting."""
    loader = DataLoader(TensorDataset(torch.zeros(20, 1)), batch_size=5, shuffle=True)
    with pytest.raises(ValueError, match="with_epoch_clock"):
        PrivacyAccountant(loader, delta=1e-5, noise_multiplier=1.0)
    clocked = with_epoch_clock(loader)
    acct = PrivacyAccountant(clocked, delta=1e-5, accountant="rdp", noise_multiplier=1.0)
    _run_epochs(clocked, acct, 2)
    assert len(acct) == 8 and acct.mechanisms()[0][1] == 2


def test_accumulation_across_an_epoch_boundary_is_charged_twice() -> None:
    """A step holding the last batch of one epoch and the first of the next may hold a record twice (sigma/sqrt 2)."""
    sampler = DeterministicBatchSampler(dataset_size=5, batch_size=1)
    acct = PrivacyAccountant(sampler, delta=1e-5, accountant="rdp", noise_multiplier=2.0, accumulation_steps=2)
    seen = 0
    for _ in range(2):
        for _ in sampler:
            seen += 1
            if seen % 2 == 0:
                acct.step()
    assert len(acct) == 5
    # Worst record: position 5 of epoch 1 and position 1 of epoch 2, both in step 3 (sensitivity 2):
    # mu^2 = 4 / sigma^2, exactly two Gaussians of sigma / sqrt(2).
    assert acct.mechanisms() == ((GaussianMechanism(noise_multiplier=2.0 / math.sqrt(2), neighboring_relation="zero_out"), 2),)


def test_poisson_accumulation_is_a_binomial_mixture() -> None:
    """k Poisson batches summed into one step hold a record Binomial(k, q) times: a mixture of Gaussians (PLD only)."""
    sampler = PoissonBatchSampler(dataset_size=100, sampling_probability=0.1)
    acct = PrivacyAccountant(sampler, delta=1e-5, accountant="pld", noise_multiplier=1.0, accumulation_steps=3)
    acct.step()
    ((mechanism, count),) = acct.mechanisms()
    assert isinstance(mechanism, MixtureOfGaussiansMechanism) and count == 1
    np.testing.assert_allclose(mechanism.probabilities, stats.binom.pmf(range(4), 3, 0.1), rtol=1e-12)
    assert mechanism.sensitivities == (0.0, 1.0, 2.0, 3.0)
    # Accumulating is worse than one Poisson step at rate 3q (what opacus accounts).
    at_3q = PLDAccountant().step(noise_multiplier=1.0, sampling_probability=0.3).get_epsilon(1e-5)
    assert acct.get_epsilon() > at_3q
    with pytest.raises(ValueError, match="accountant='pld'"):
        PrivacyAccountant(sampler, delta=1e-5, accountant="rdp", noise_multiplier=1.0, accumulation_steps=3)


def test_state_dict_round_trip_gives_the_same_epsilon() -> None:
    """Checkpoint (through torch.save) and resume: same epsilon, len and history; continuing matches no interruption."""
    def fresh() -> PrivacyAccountant:
        sampler = PoissonBatchSampler(dataset_size=1000, sampling_probability=0.02)
        return PrivacyAccountant(sampler, delta=1e-6, accountant="pld")

    first, straight = fresh(), fresh()
    for acct in (first, straight):
        for sigma in [1.0] * 37 + [1.5] * 13:
            acct.step(sigma)
    buffer = io.BytesIO()
    torch.save(first.state_dict(), buffer)
    buffer.seek(0)
    resumed = fresh()
    resumed.load_state_dict(torch.load(buffer))
    assert resumed.get_epsilon() == first.get_epsilon() and len(resumed) == 50
    assert resumed.history == first.history == ((1.0, 0.02, 37), (1.5, 0.02, 13))
    for acct in (resumed, straight):
        for _ in range(5):
            acct.step(1.5)
    assert resumed.get_epsilon() == straight.get_epsilon()


def test_resume_mid_epoch_counts_the_new_permutation_as_a_new_epoch() -> None:
    """Resuming shuffled training mid-epoch: the partial epoch and the new one are two participations."""
    def fresh() -> tuple[ShuffleBatchSampler, PrivacyAccountant]:
        sampler = ShuffleBatchSampler(dataset_size=10, batch_size=5)
        return sampler, PrivacyAccountant(sampler, delta=1e-5, accountant="rdp", noise_multiplier=3.0)

    sampler, acct = fresh()
    for e in range(2):
        for i, _ in enumerate(sampler):
            if e == 1 and i == 1:
                break
            acct.step()
    state = acct.state_dict()
    sampler2, resumed = fresh()
    resumed.load_state_dict(state)
    for _ in sampler2:
        resumed.step()
    assert len(resumed) == 5
    assert resumed.mechanisms() == ((GaussianMechanism(noise_multiplier=3.0, neighboring_relation="zero_out"), 3),)


def test_load_state_dict_refuses_another_sampling_scheme() -> None:
    """A checkpoint from a Poisson run cannot be loaded into a shuffled run's accountant."""
    poisson = PrivacyAccountant(PoissonBatchSampler(dataset_size=10, sampling_probability=0.5), delta=1e-5,
                                noise_multiplier=1.0, accountant="rdp")
    shuffled = PrivacyAccountant(ShuffleBatchSampler(dataset_size=10, batch_size=5), delta=1e-5,
                                 noise_multiplier=1.0, accountant="rdp")
    with pytest.raises(ValueError, match="sampler"):
        shuffled.load_state_dict(poisson.state_dict())
    with pytest.raises(ValueError, match="state_dict"):
        shuffled.load_state_dict({"history": []})


def test_schedule_drives_sigma_per_epoch_and_matches_the_plan() -> None:
    """Poisson epochs under a decaying schedule: per-epoch sigma, heterogeneous accounting equal to the plan."""
    schedule = TimeBased(initial_noise_multiplier=3.0, decay=0.2)
    sampler = PoissonBatchSampler(dataset_size=200, sampling_probability=0.1)
    plan = plan_epochs(schedule, sampler, epsilon=2.0, delta=1e-5, accountant="rdp")
    assert plan.budget_exhausted and 1 < plan.epochs < 1000
    acct = PrivacyAccountant(sampler, delta=1e-5, accountant="rdp", noise_multiplier=schedule, max_epsilon=2.0)
    for _ in range(plan.epochs):
        for _ in sampler:
            acct.step()
    assert [h[0] for h in acct.history] == list(plan.noise_multipliers)
    np.testing.assert_allclose(acct.get_epsilon(), plan.epsilon, rtol=RTOL_SAME)
    # The next epoch does not fit: the plan stopped before it, and the hook refuses it in its course.
    with pytest.raises(BudgetExhaustedError):
        for _ in sampler:
            acct.step()


def test_shuffle_plan_against_the_exact_gaussian() -> None:
    """Shuffled epochs compose to one Gaussian of mu = sqrt(sum 1/sigma_e^2): the plan's epsilon bounds it and is tight."""
    schedule = Exponential(initial_noise_multiplier=8.0, decay=0.05)
    plan = plan_epochs(schedule, ShuffleBatchSampler(dataset_size=1000, batch_size=100), epsilon=2.0, delta=1e-5)

    def exact(epochs: int) -> float:
        sigma = gaussian.composed_noise_multiplier(schedule.noise_multipliers(np.arange(epochs)))
        return float(gaussian.epsilon_for_delta(noise_multiplier=sigma, delta=1e-5))

    assert exact(plan.epochs) <= plan.epsilon <= 2.0
    assert exact(plan.epochs + 1) > 2.0 / (1 + RTOL_PLD)


@pytest.mark.parametrize(("kwargs", "error", "match"), [
    ({"delta": 0.0}, ValueError, r"^delta must be in \(0, 1\), got 0.0"),
    ({"delta": 1e-5, "max_epsilon": -1.0}, ValueError, r"^max_epsilon must be finite and > 0"),
    ({"delta": 1e-5, "accumulation_steps": 0}, ValueError, r"^accumulation_steps must be an integer >= 1"),
    ({"delta": 1e-5, "accountant": "nope"}, ValueError, r"^accountant must be one of"),
])
def test_bad_input(kwargs: dict[str, object], error: type, match: str) -> None:
    """Bad parameters raise with the parameter's name."""
    with pytest.raises(error, match=match):
        PrivacyAccountant(PoissonBatchSampler(dataset_size=10, sampling_probability=0.5), **kwargs)  # type: ignore[arg-type]


def test_missing_noise_multiplier_is_an_error() -> None:
    """Without a noise multiplier anywhere, step() says where to give one."""
    acct = PrivacyAccountant(PoissonBatchSampler(dataset_size=10, sampling_probability=0.5), delta=1e-5)
    with pytest.raises(ValueError, match="noise_multiplier is not set"):
        acct.step()


def test_schedule_without_an_epoch_clock_is_refused() -> None:
    """A per-epoch schedule on a sampler that cannot tell epochs apart raises instead of freezing sigma."""
    from dpacct.torch import SamplingInfo

    info = PoissonBatchSampler(dataset_size=10, sampling_probability=0.5).sampling_info
    assert isinstance(info, SamplingInfo)
    acct = PrivacyAccountant(info, delta=1e-5, noise_multiplier=TimeBased(initial_noise_multiplier=2.0, decay=0.1))
    with pytest.raises(ValueError, match="epoch clock"):
        acct.step()


def test_sampler_and_dataset_sizes_must_agree() -> None:
    """A dpacct sampler built for another dataset size is caught (its q would not be the records' rate)."""
    data = TensorDataset(torch.zeros(50, 1))
    loader = DataLoader(data, batch_sampler=PoissonBatchSampler(dataset_size=40, sampling_probability=0.1))
    with pytest.raises(ValueError, match="dataset_size = 40"):
        PrivacyAccountant(loader, delta=1e-5)


def test_epsilon_interval_for_each_sampler() -> None:
    """Shuffle: [first-epoch shuffle lower bound, deterministic upper bound]; deterministic: exact <= upper; Poisson: PLD."""
    from dpacct import ablq

    data = TensorDataset(torch.zeros(100, 1))
    loader = DataLoader(data, batch_sampler=ShuffleBatchSampler(dataset_size=100, batch_size=10))
    acct = PrivacyAccountant(loader, delta=1e-5, accountant="pld", noise_multiplier=1.0)
    _run_epochs(loader, acct, 2)
    interval = acct.epsilon_interval()
    expected_lower = float(ablq.epsilon_shuffle_lower(noise_multiplier=1.0, steps=10, delta=1e-5))
    assert interval.lower == expected_lower and 0 < interval.lower <= interval.upper == acct.get_epsilon()
    poisson = dpacct.epsilon(noise_multiplier=1.0, sampling_probability=0.1, steps=20, delta=1e-5, accountant="pld")
    assert interval.lower > poisson  # here even the lower bound is above the Poisson number

    sampler = DeterministicBatchSampler(dataset_size=20, batch_size=5)
    det = PrivacyAccountant(sampler, delta=1e-5, accountant="pld", noise_multiplier=2.0)
    _run_epochs(sampler, det, 3)  # type: ignore[arg-type]
    lower, upper = det.epsilon_interval()
    exact = gaussian.epsilon_for_delta(noise_multiplier=2.0 / math.sqrt(3), delta=1e-5)
    np.testing.assert_allclose(lower, exact, rtol=1e-12)
    assert lower <= upper <= lower * (1 + RTOL_PLD)

    pois = PrivacyAccountant(PoissonBatchSampler(dataset_size=100, sampling_probability=0.1), delta=1e-5,
                             accountant="pld", noise_multiplier=1.0)
    for _ in range(20):
        pois.step()
    lower, upper = pois.epsilon_interval()
    assert 0 < lower <= upper <= lower * (1 + RTOL_PLD)


def test_fixed_size_steps_match_the_sampler_analysis() -> None:
    """T fixed-size steps give dpacct.samplers.fixed_size_bounds' certified upper bound (PLD, add/remove)."""
    from dpacct.samplers import fixed_size_bounds
    from dpacct.torch import FixedSizeBatchSampler

    sampler = FixedSizeBatchSampler(dataset_size=10_000, batch_size=100)
    acct = PrivacyAccountant(sampler, delta=1e-5, accountant="pld", noise_multiplier=3.0)
    for _ in range(300):
        acct.step()
    expected = fixed_size_bounds(noise_multiplier=3.0, batch_size=100, dataset_size=10_000, steps=300, delta=1e-5)
    np.testing.assert_allclose(acct.get_epsilon(), expected.upper.value, rtol=RTOL_SAME)
    interval = acct.epsilon_interval()
    assert interval.lower <= interval.upper <= interval.lower * 1.01


def test_fixed_size_refuses_what_it_cannot_account() -> None:
    from dpacct.torch import FixedSizeBatchSampler

    with pytest.raises(ValueError, match="accumulation_steps=2 with fixed-size batches"):
        PrivacyAccountant(FixedSizeBatchSampler(dataset_size=100, batch_size=10), delta=1e-5,
                          noise_multiplier=1.0, accumulation_steps=2)
    with pytest.raises(ValueError, match="fixed_size_replacement batches are accounted only by accountant='pld'"):
        PrivacyAccountant(FixedSizeBatchSampler(dataset_size=100, batch_size=10, replacement=True), delta=1e-5,
                          accountant="rdp", noise_multiplier=1.0)


def test_truncated_poisson_steps_match_the_mechanism() -> None:
    """T capped Poisson steps give the PLD accountant's bound for TruncatedPoissonSampledGaussianMechanism."""
    from dpacct.mechanisms import TruncatedPoissonSampledGaussianMechanism
    from dpacct.torch import TruncatedPoissonBatchSampler

    sampler = TruncatedPoissonBatchSampler(dataset_size=5_000, sampling_probability=0.01, max_batch_size=60)
    acct = PrivacyAccountant(sampler, delta=1e-5, accountant="pld", noise_multiplier=1.5)
    for _ in range(200):
        acct.step()
    direct = PLDAccountant().compose(TruncatedPoissonSampledGaussianMechanism(
        noise_multiplier=1.5, sampling_probability=0.01, dataset_size=5_000, max_batch_size=60), 200)
    np.testing.assert_allclose(acct.get_epsilon(), direct.get_epsilon(1e-5), rtol=RTOL_SAME)
    with pytest.raises(ValueError, match="truncated_poisson batches are accounted only by accountant='pld'"):
        PrivacyAccountant(sampler, delta=1e-5, accountant="rdp", noise_multiplier=1.0)


def test_balls_in_bins_is_accounted_like_dpacct_epsilon() -> None:
    """Balls-in-bins epochs: the smaller of the deterministic curve and the pair's Renyi DP, as dpacct.epsilon gives."""
    from dpacct.torch import BallsInBinsBatchSampler

    sampler = BallsInBinsBatchSampler(dataset_size=1000, steps_per_epoch=100)
    acct = PrivacyAccountant(sampler, delta=1e-5, accountant="pld", noise_multiplier=1.0)
    for _ in range(2):
        for _batch in sampler:
            acct.step()
    expected = dpacct.epsilon(noise_multiplier=1.0, epochs=2, batch_size=10, dataset_size=1000, delta=1e-5,
                              sampler="balls_in_bins")
    assert acct.get_epsilon() == pytest.approx(expected, rel=1e-12)
    deterministic = dpacct.epsilon(noise_multiplier=1.0, epochs=2, batch_size=10, dataset_size=1000, delta=1e-5,
                                   sampler="deterministic")
    assert acct.get_epsilon() < 0.5 * deterministic  # the pair's PLD is far below (0.55 vs 6.2)
    # Larger noise at some steps: the epoch is bounded at its smallest sigma.
    mixed = PrivacyAccountant(sampler, delta=1e-5, accountant="rdp", noise_multiplier=1.0)
    for i, _batch in enumerate(sampler):
        mixed.step(noise_multiplier=1.0 if i % 2 else 3.0)
    one_epoch = dpacct.epsilon(noise_multiplier=1.0, epochs=1, batch_size=10, dataset_size=1000, delta=1e-5,
                               sampler="balls_in_bins")
    assert mixed.get_epsilon() == pytest.approx(one_epoch, rel=1e-12)


def test_balls_in_bins_with_accumulation_keeps_the_epoch_rule() -> None:
    """Accumulated micro-batches merge bins: the per-epoch Gaussian of shuffled batches applies."""
    from dpacct.torch import BallsInBinsBatchSampler

    sampler = BallsInBinsBatchSampler(dataset_size=100, steps_per_epoch=10)
    acct = PrivacyAccountant(sampler, delta=1e-5, accountant="pld", noise_multiplier=2.0, accumulation_steps=2)
    for _batch in sampler:
        acct.step()
    expected = dpacct.epsilon(noise_multiplier=2.0, epochs=1, batch_size=10, dataset_size=100, delta=1e-5,
                              sampler="deterministic")
    # One Gaussian: PLD's closed form is certified and within 1e-9 of the Gaussian curve, which
    # dpacct.gaussian rounds up by up to 1e-9 relative (it aims at delta (1 - 1e-9)).
    assert expected * (1 - 1e-9) <= acct.get_epsilon() <= expected * (1 + RTOL_PLD)


def test_random_allocation_is_accounted_like_dpacct_epsilon() -> None:
    """k participations among all steps: the deterministic curve of k participations, as dpacct.epsilon gives."""
    from dpacct.torch import RandomAllocationBatchSampler

    sampler = RandomAllocationBatchSampler(dataset_size=1000, steps=200, participations=2)
    acct = PrivacyAccountant(sampler, delta=1e-5, accountant="pld", noise_multiplier=1.5)
    for _batch in sampler:
        acct.step()
    expected = dpacct.epsilon(noise_multiplier=1.5, epochs=2, batch_size=10, dataset_size=1000, delta=1e-5,
                              sampler="random_allocation")
    assert expected == dpacct.epsilon(noise_multiplier=1.5, epochs=2, batch_size=10, dataset_size=1000, delta=1e-5,
                                      sampler="deterministic")
    # One Gaussian, certified by PLD within RTOL_PLD of the curve (which dpacct.gaussian rounds up by 1e-9).
    assert expected * (1 - 1e-9) <= acct.get_epsilon() <= expected * (1 + RTOL_PLD)
    # Two micro-batches per step: a step can hold both of a record's batches (sensitivity 2).
    merged = PrivacyAccountant(sampler, delta=1e-5, accountant="pld", noise_multiplier=1.5, accumulation_steps=2)
    for _batch in sampler:
        merged.step()
    four = float(dpacct.gaussian.epsilon_for_delta(noise_multiplier=1.5 / 2.0, delta=1e-5))
    assert four * (1 - 1e-9) <= merged.get_epsilon() <= four * (1 + RTOL_PLD)

"""dpacct.torch samplers: what they draw, what they report, and what identify() refuses."""

from __future__ import annotations

import math

import pytest

torch = pytest.importorskip("torch")

from scipy import stats  # noqa: E402
from torch.utils.data import DataLoader, RandomSampler, TensorDataset, WeightedRandomSampler  # noqa: E402

from dpacct.torch import (  # noqa: E402
    DeterministicBatchSampler,
    PoissonBatchSampler,
    ShuffleBatchSampler,
    UnidentifiedSamplerError,
    empty_safe_collate,
    identify,
    register_sampler,
    with_epoch_clock,
)
from dpacct.torch.samplers import SamplingInfo  # noqa: E402

# Statistical tests below use a fixed seed; each would fail with probability ALPHA on a
# fresh seed if the sampler were right (their false-alarm rate).
ALPHA = 1e-3


def _data(n: int) -> TensorDataset:
    return TensorDataset(torch.arange(n, dtype=torch.float32).unsqueeze(1), torch.arange(n))


def test_poisson_inclusions_are_independent_bernoulli_q() -> None:
    """Each record's number of inclusions over many batches is Binomial(batches, q) (chi-square test, ALPHA)."""
    n, q, epochs = 50, 0.2, 40
    s = PoissonBatchSampler(dataset_size=n, sampling_probability=q, generator=torch.Generator().manual_seed(1))
    counts = torch.zeros(n)
    sizes = []
    for _ in range(epochs):
        for batch in s:
            assert batch == sorted(set(batch))  # no repeats inside a batch
            counts[batch] += 1
            sizes.append(len(batch))
    draws = epochs * s.steps_per_epoch
    assert s.steps_per_epoch == 5 and s.epoch == epochs
    # The total number of inclusions is Binomial(n * draws, q): two-sided test at ALPHA.
    total = int(counts.sum())
    p_value = 2 * min(stats.binom.cdf(total, n * draws, q), stats.binom.sf(total - 1, n * draws, q))
    assert p_value > ALPHA
    # Batch sizes vary (Poisson sampling, not fixed-size).
    assert len(set(sizes)) > 3


def test_poisson_empty_batches_are_yielded_and_collate_to_empty_tensors() -> None:
    """With q n small, empty batches occur; the DataLoader delivers them as empty tensors of the right shape."""
    data = _data(10)
    s = PoissonBatchSampler(dataset_size=10, sampling_probability=0.02, steps_per_epoch=30,
                            generator=torch.Generator().manual_seed(0))
    loader = DataLoader(data, batch_sampler=s, collate_fn=empty_safe_collate(data))
    shapes = [tuple(x.shape) for x, _ in loader]
    assert (0, 1) in shapes and len(shapes) == 30


@pytest.mark.parametrize("drop_last", [False, True])
def test_shuffle_each_epoch_is_a_fresh_partition(drop_last: bool) -> None:
    """Every record is in at most one batch per epoch (exactly one without drop_last); batches have the fixed size."""
    n, b = 23, 5
    s = ShuffleBatchSampler(dataset_size=n, batch_size=b, drop_last=drop_last,
                            generator=torch.Generator().manual_seed(0))
    epochs = [list(s) for _ in range(3)]
    for batches in epochs:
        flat = [i for batch in batches for i in batch]
        assert len(flat) == len(set(flat))
        assert len(batches) == len(s) == (n // b if drop_last else math.ceil(n / b))
        assert all(len(batch) == b for batch in batches[: n // b])
        if not drop_last:
            assert sorted(flat) == list(range(n))
    assert epochs[0] != epochs[1]  # a new permutation each epoch
    info = s.sampling_info
    assert (info.sampler, info.sampling_probability, info.max_participations_per_epoch) == ("shuffle", b / n, 1)
    assert info.neighboring_relation == "zero_out"


def test_deterministic_is_the_same_order_every_epoch() -> None:
    """Deterministic batches cut the records in order, identically each epoch."""
    s = DeterministicBatchSampler(dataset_size=7, batch_size=3)
    assert list(s) == list(s) == [[0, 1, 2], [3, 4, 5], [6]]
    assert s.sampling_info.sampler == "deterministic" and s.epoch == 2


def test_identify_plain_data_loaders() -> None:
    """shuffle=True is shuffled batches (q = b/n), shuffle=False deterministic ones; never Poisson."""
    data = _data(100)
    info = identify(DataLoader(data, batch_size=10, shuffle=True, drop_last=True))
    assert (info.sampler, info.sampling_probability, info.batches_per_epoch) == ("shuffle", 0.1, 10)
    assert identify(DataLoader(data, batch_size=30)).sampler == "deterministic"
    assert identify(DataLoader(data, batch_size=30)).batches_per_epoch == 4


def test_identify_refuses_weighted_sampler_naming_it_and_the_fix() -> None:
    """The WeightedRandomSampler trap (opacus #813): a clear error, not a silent sample rate."""
    data = _data(100)
    loader = DataLoader(data, batch_size=10, sampler=WeightedRandomSampler(torch.ones(100), num_samples=100))
    with pytest.raises(UnidentifiedSamplerError, match=r"WeightedRandomSampler.*PoissonBatchSampler"):
        identify(loader)


def test_identify_refuses_sampling_with_replacement_and_unknown_objects() -> None:
    """Replacement sampling repeats records within an epoch; arbitrary objects are not samplers."""
    data = _data(100)
    loader = DataLoader(data, batch_size=10, sampler=RandomSampler(data, replacement=True))
    with pytest.raises(UnidentifiedSamplerError, match="replacement"):
        identify(loader)
    with pytest.raises(UnidentifiedSamplerError, match="list"):
        identify([1, 2, 3])


def test_register_sampler_is_the_seam_for_new_samplers() -> None:
    """A third-party batch sampler class becomes identifiable through register_sampler."""

    class MyFixedSize:
        pass

    info = SamplingInfo(sampler="shuffle", sampling_probability=0.5, dataset_size=4, batch_size=2.0,
                        batches_per_epoch=2, max_participations_per_epoch=1, neighboring_relation="zero_out",
                        source="MyFixedSize")
    register_sampler(MyFixedSize, lambda s: info)
    assert identify(MyFixedSize()) is info


def test_identify_opacus_poisson_sampler() -> None:
    """opacus' UniformWithReplacementSampler is Poisson sampling at its sample_rate."""
    samplers = pytest.importorskip("opacus.utils.uniform_sampler")
    data = _data(100)
    loader = DataLoader(data, batch_sampler=samplers.UniformWithReplacementSampler(num_samples=100, sample_rate=0.07))
    info = identify(loader)
    assert (info.sampler, info.sampling_probability, info.neighboring_relation) == ("poisson", 0.07, "add_remove")


def test_with_epoch_clock_keeps_the_sampling() -> None:
    """A plain shuffled loader becomes one with a ShuffleBatchSampler of the same size (not Poisson)."""
    data = _data(50)
    loader = with_epoch_clock(DataLoader(data, batch_size=8, shuffle=True, drop_last=True))
    assert isinstance(loader.batch_sampler, ShuffleBatchSampler)
    converted = identify(loader).as_dict()
    plain = identify(DataLoader(data, batch_size=8, shuffle=True, drop_last=True)).as_dict()
    converted.pop("source"), plain.pop("source")
    assert converted == plain
    assert [len(x) for x, _ in loader] == [8] * 6


@pytest.mark.parametrize(("kwargs", "match"), [
    ({"dataset_size": 0, "sampling_probability": 0.1}, r"^dataset_size must be an integer >= 1, got 0"),
    ({"dataset_size": 10, "sampling_probability": 1.5}, r"^sampling_probability must be in \[0, 1\], got 1.5"),
    ({"dataset_size": 10, "sampling_probability": 0.0}, r"^sampling_probability must be in \(0, 1\]"),
])
def test_poisson_sampler_bad_input(kwargs: dict[str, float], match: str) -> None:
    """Bad parameters raise ValueError naming the parameter."""
    with pytest.raises(ValueError, match=match):
        PoissonBatchSampler(**kwargs)  # type: ignore[arg-type]


def test_fixed_size_batches_have_exactly_b_records_and_rate_b_over_n() -> None:
    """Without replacement: b distinct records a step; each record's inclusion count is Binomial(T, b/n)."""
    from dpacct.torch import FixedSizeBatchSampler

    n, b, steps = 50, 5, 400
    s = FixedSizeBatchSampler(dataset_size=n, batch_size=b, steps_per_epoch=steps,
                              generator=torch.Generator().manual_seed(3))
    counts = [0] * n
    for batch in s:
        assert len(batch) == b and len(set(batch)) == b
        for i in batch:
            counts[i] += 1
    # Every record's count within the two-sided ALPHA / n quantiles of Binomial(T, b/n).
    lo, hi = stats.binom.ppf([ALPHA / (2 * n), 1 - ALPHA / (2 * n)], steps, b / n)
    assert all(lo <= c <= hi for c in counts)
    info = s.sampling_info
    assert (info.sampler, info.sampling_probability, info.neighboring_relation) == ("fixed_size", 0.1, "add_remove")
    assert identify(DataLoader(_data(n), batch_sampler=s)).sampler == "fixed_size"


def test_fixed_size_with_replacement_may_repeat_records() -> None:
    from dpacct.torch import FixedSizeBatchSampler

    s = FixedSizeBatchSampler(dataset_size=3, batch_size=3, steps_per_epoch=50, replacement=True,
                              generator=torch.Generator().manual_seed(1))
    batches = list(s)
    assert all(len(b) == 3 for b in batches)
    assert any(len(set(b)) < 3 for b in batches)  # P(no repeat in 50 draws) = (2/9)^50
    assert s.sampling_info.sampler == "fixed_size_replacement"


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [({"dataset_size": 5, "batch_size": 6}, "batch_size must be an integer in \\[1, dataset_size = 5\\]"),
     ({"dataset_size": 5, "batch_size": 2, "replacement": 1}, "replacement must be True or False"),
     ({"dataset_size": 5, "batch_size": 2, "steps_per_epoch": 0}, "steps_per_epoch")],
)
def test_fixed_size_sampler_bad_input(kwargs: dict[str, object], match: str) -> None:
    from dpacct.torch import FixedSizeBatchSampler

    with pytest.raises(ValueError, match=match):
        FixedSizeBatchSampler(**kwargs)  # type: ignore[arg-type]


def test_truncated_poisson_caps_the_batch_and_says_so() -> None:
    """Draws above B are cut to B distinct records of the draw; smaller draws are kept whole."""
    from dpacct.torch import TruncatedPoissonBatchSampler

    s = TruncatedPoissonBatchSampler(dataset_size=200, sampling_probability=0.1, max_batch_size=20,
                                     steps_per_epoch=300, generator=torch.Generator().manual_seed(5))
    sizes = [len(b) for b in s]
    assert max(sizes) == 20 and min(sizes) < 20  # Bin(200, 0.1) exceeds 20 about 40 % of the time
    info = s.sampling_info
    assert (info.sampler, info.max_batch_size, info.neighboring_relation) == ("truncated_poisson", 20, "add_remove")
    assert SamplingInfo.from_dict(info.as_dict()) == info


def test_balls_in_bins_each_epoch_is_a_random_partition() -> None:
    """Every record lands in exactly one of the t batches of each epoch; bin sizes are Binomial(n, 1/t)."""
    from dpacct.torch import BallsInBinsBatchSampler

    n, t = 400, 8
    s = BallsInBinsBatchSampler(dataset_size=n, steps_per_epoch=t, generator=torch.Generator().manual_seed(2))
    for _ in range(3):
        batches = list(s)
        assert len(batches) == t and sorted(i for b in batches for i in b) == list(range(n))
        lo, hi = stats.binom.ppf([ALPHA / (2 * t), 1 - ALPHA / (2 * t)], n, 1 / t)
        assert all(lo <= len(b) <= hi for b in batches)
    assert s.epoch == 3
    info = s.sampling_info
    assert (info.sampler, info.max_participations_per_epoch, info.neighboring_relation) == ("balls_in_bins", 1, "zero_out")


def test_random_allocation_puts_each_record_in_k_distinct_steps() -> None:
    """Every record is in exactly k distinct batches of each epoch; batch sizes are Binomial(n, k/t)."""
    from dpacct.torch import RandomAllocationBatchSampler

    n, t, k = 300, 12, 3
    s = RandomAllocationBatchSampler(dataset_size=n, steps=t, participations=k,
                                     generator=torch.Generator().manual_seed(4))
    for _ in range(2):
        batches = list(s)
        assert len(batches) == t
        assert all(len(set(b)) == len(b) for b in batches)  # a record at most once per step
        counts = torch.bincount(torch.tensor([i for b in batches for i in b]), minlength=n)
        assert bool(torch.all(counts == k))
        lo, hi = stats.binom.ppf([ALPHA / (2 * t), 1 - ALPHA / (2 * t)], n, k / t)
        assert all(lo <= len(b) <= hi for b in batches)
    info = s.sampling_info
    assert (info.sampler, info.max_participations_per_epoch, info.batches_per_epoch) == ("random_allocation", 3, 12)
    assert SamplingInfo.from_dict(info.as_dict()) == info
    with pytest.raises(ValueError, match=r"^participations must be an integer in \[1, steps=12\]"):
        RandomAllocationBatchSampler(dataset_size=n, steps=t, participations=13)

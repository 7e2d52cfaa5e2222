"""Batch samplers that tell the accountant how they draw batches.

How batches are drawn decides which privacy analysis applies (Chua et al., ICML 2024,
arXiv:2403.17673). Each sampler here is a ``torch.utils.data`` batch sampler (pass it
as ``DataLoader(dataset, batch_sampler=...)``) and carries a :class:`SamplingInfo`:

* :class:`PoissonBatchSampler`: every record joins every batch independently with
  probability ``q`` (variable batch size, possibly empty): the standard DP-SGD analysis,
  one Poisson-subsampled Gaussian per step, add/remove adjacency.
* :class:`ShuffleBatchSampler`: a fresh random permutation per epoch cut into batches of a
  fixed size: each record is in at most one batch per epoch. No tight accountant is known;
  the certified upper bound is that of deterministic batches (zero-out adjacency), never
  the Poisson number.
* :class:`DeterministicBatchSampler`: the same cut of a fixed order: exact.
* :class:`BallsInBinsBatchSampler`: each epoch every record goes to one uniformly random
  step of the epoch (batches of random size; Chua et al., AISTATS 2025, arXiv:2412.16802):
  certified upper bound: the smallest of the dominating pair's PLD, its Renyi DP and the
  deterministic curve (at most one participation per epoch;
  :class:`dpacct.samplers.allocation.BallsInBinsAccountant`, with the lower bound).
* :class:`TruncatedPoissonBatchSampler`: Poisson batches cut to at most ``B`` records (a
  uniformly random ``B``-subset of a larger draw): certified PLD bounds from an
  overflow-labelled mixture (:mod:`dpacct.samplers.truncated_poisson`).
* :class:`FixedSizeBatchSampler`: every step an independent batch of exactly ``b``
  records, drawn without (or with) replacement: certified PLD bounds through the Poisson
  pair at half the noise multiplier (add/remove adjacency; :mod:`dpacct.samplers.fixed_size`).

Each sampler counts the epochs it has started (``epoch``), which is the clock the
accountant uses for the per-epoch analyses. :func:`identify` recognises these samplers,
torch's own ``RandomSampler``/``SequentialSampler`` behind a ``batch_size`` and opacus'
``UniformWithReplacementSampler``; anything else (``WeightedRandomSampler``,
sampling with replacement, custom samplers) is refused with an error that names the
sampler and what to use instead: an accountant that guesses the sampler gives a silent,
wrong epsilon.

Adding a sampler (the seam for balls-in-bins batches): give its batch
sampler a ``sampling_info`` property returning a :class:`SamplingInfo` with a new
``sampler`` name and an ``epoch`` attribute, and teach the ledger the per-step mechanism
of that name (:data:`dpacct.torch.accountant.SAMPLER_RULES`); :func:`register_sampler`
lets :func:`identify` recognise third-party sampler classes.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator, Sized
from dataclasses import dataclass, fields
from typing import Any, Literal

import torch
from torch.utils.data import BatchSampler, DataLoader, RandomSampler, Sampler, SequentialSampler

from dpacct import _check

__all__ = [
    "BallsInBinsBatchSampler",
    "DeterministicBatchSampler",
    "FixedSizeBatchSampler",
    "PoissonBatchSampler",
    "RandomAllocationBatchSampler",
    "SamplingInfo",
    "ShuffleBatchSampler",
    "TruncatedPoissonBatchSampler",
    "UnidentifiedSamplerError",
    "empty_safe_collate",
    "identify",
    "register_sampler",
    "with_epoch_clock",
]

SamplerKind = Literal["poisson", "shuffle", "deterministic", "balls_in_bins", "random_allocation", "fixed_size",
                      "fixed_size_replacement", "truncated_poisson"]


class UnidentifiedSamplerError(TypeError):
    """The adapter cannot tell how a data loader draws its batches, so it refuses to guess."""


@dataclass(frozen=True, slots=True, kw_only=True)
class SamplingInfo:
    """What the accountant must know about how batches are drawn.

    Attributes
    ----------
    sampler : str
        Which analysis applies: ``"poisson"``, ``"shuffle"``, ``"deterministic"``,
        ``"balls_in_bins"``, ``"random_allocation"``, ``"fixed_size"``, ``"fixed_size_replacement"``
        or ``"truncated_poisson"``.
    sampling_probability : float
        The true sample rate: the Poisson inclusion probability, or batch size over
        dataset size for fixed-size batches.
    dataset_size : int
        Number of records ``n``.
    batch_size : float
        Fixed batch size, or the expected one (``q n``) for Poisson; use it (a public
        constant) to normalise the noisy gradient sum, never the realised batch size.
    batches_per_epoch : int
        Batches one pass over the sampler yields.
    max_participations_per_epoch : int or None
        Most batches of one epoch a record can be in: 1 for shuffled and deterministic
        batches, ``k`` for random allocation of ``k`` steps, ``None`` (unbounded) for
        Poisson and independent fixed-size batches.
    neighboring_relation : {"add_remove", "zero_out"}
        The adjacency the analysis uses.
    source : str
        The sampler it was read from.
    max_batch_size : int or None
        The cap of truncated Poisson batches (None otherwise).
    """

    sampler: SamplerKind
    sampling_probability: float
    dataset_size: int
    batch_size: float
    batches_per_epoch: int
    max_participations_per_epoch: int | None
    neighboring_relation: Literal["add_remove", "zero_out"]
    source: str
    max_batch_size: int | None = None

    def as_dict(self) -> dict[str, Any]:
        """Plain data (for checkpoints and reports)."""
        return {f.name: getattr(self, f.name) for f in fields(self)}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> SamplingInfo:
        """Inverse of :meth:`as_dict`."""
        return cls(**data)


def _size(name: str, value: Any, minimum: int) -> int:
    n = _check.count(name, value)
    if n < minimum:
        msg = f"{name} must be an integer >= {minimum}, got {n}"
        raise ValueError(msg)
    return n


class _EpochClock:
    """Counts the epochs (passes) a batch sampler has started."""

    epoch: int

    def _start_epoch(self) -> None:
        self.epoch += 1


class PoissonBatchSampler(Sampler[list[int]], _EpochClock):
    """Poisson sampling: each record joins each batch independently with probability q.

    Batches have a random size (mean ``q n``) and may be empty; a DP-SGD step on an
    empty batch still adds noise and still counts. Use ``collate_fn=empty_safe_collate(dataset)``
    with a ``DataLoader`` so that empty batches collate to empty tensors.

    Parameters
    ----------
    dataset_size : int
        Number of records ``n >= 1``.
    sampling_probability : float
        ``q`` in ``(0, 1]``.
    steps_per_epoch : int, optional
        Batches per pass, ``>= 1``; default ``round(1/q)`` (one expected pass over the data).
    generator : torch.Generator, optional
        Source of randomness.

    Examples
    --------
    >>> s = PoissonBatchSampler(dataset_size=100, sampling_probability=0.1, generator=torch.Generator().manual_seed(0))
    >>> s.sampling_info.sampler, s.sampling_info.batches_per_epoch, len(list(s))
    ('poisson', 10, 10)
    """

    def __init__(
        self,
        *,
        dataset_size: int,
        sampling_probability: float,
        steps_per_epoch: int | None = None,
        generator: torch.Generator | None = None,
    ) -> None:
        self.dataset_size = _size("dataset_size", dataset_size, 1)
        q = _check.probability("sampling_probability", sampling_probability)
        if q == 0.0:
            msg = "sampling_probability must be in (0, 1], got 0.0 (no record would ever be used)"
            raise ValueError(msg)
        self.sampling_probability = q
        default = max(1, round(1.0 / q))
        self.steps_per_epoch = default if steps_per_epoch is None else _size("steps_per_epoch", steps_per_epoch, 1)
        self.generator = generator
        self.epoch = 0

    @property
    def sampling_info(self) -> SamplingInfo:
        """Poisson analysis at rate ``q``, add/remove adjacency."""
        return SamplingInfo(sampler="poisson", sampling_probability=self.sampling_probability,
                            dataset_size=self.dataset_size, batch_size=self.sampling_probability * self.dataset_size,
                            batches_per_epoch=self.steps_per_epoch, max_participations_per_epoch=None,
                            neighboring_relation="add_remove", source=type(self).__name__)

    def __len__(self) -> int:
        return self.steps_per_epoch

    def __iter__(self) -> Iterator[list[int]]:
        self._start_epoch()
        for _ in range(self.steps_per_epoch):
            mask = torch.rand(self.dataset_size, generator=self.generator) < self.sampling_probability
            yield mask.nonzero().flatten().tolist()


class FixedSizeBatchSampler(Sampler[list[int]], _EpochClock):
    """Independent fixed-size batches: every step ``batch_size`` records drawn uniformly at random.

    Without replacement (default) each batch is a uniformly random subset; with
    ``replacement=True`` the records are drawn independently and may repeat. Every batch
    has exactly ``batch_size`` records, so a neighbour swaps one gradient of the sum: the
    accountant uses the Poisson pair at half the noise multiplier (rate ``b/n``), which is
    tight under add/remove adjacency (:mod:`dpacct.samplers.fixed_size`). Prefer
    :class:`PoissonBatchSampler` where variable batch sizes are acceptable: at the same rate
    it is never less private, and usually far more.

    Parameters
    ----------
    dataset_size : int
        ``n >= 1``.
    batch_size : int
        ``b`` in ``[1, n]``.
    steps_per_epoch : int, optional
        Batches per pass, ``>= 1``; default ``ceil(n / b)``.
    replacement : bool
        Draw with replacement.
    generator : torch.Generator, optional
        Source of randomness.

    Examples
    --------
    >>> s = FixedSizeBatchSampler(dataset_size=10, batch_size=4, generator=torch.Generator().manual_seed(0))
    >>> [len(b) for b in s], s.sampling_info.sampler
    ([4, 4, 4], 'fixed_size')
    """

    def __init__(
        self,
        *,
        dataset_size: int,
        batch_size: int,
        steps_per_epoch: int | None = None,
        replacement: bool = False,
        generator: torch.Generator | None = None,
    ) -> None:
        self.dataset_size = _size("dataset_size", dataset_size, 1)
        self.batch_size = _size("batch_size", batch_size, 1)
        if self.batch_size > self.dataset_size:
            msg = f"batch_size must be an integer in [1, dataset_size = {self.dataset_size}], got {self.batch_size}"
            raise ValueError(msg)
        if not isinstance(replacement, bool):
            msg = f"replacement must be True or False, got {replacement!r}"
            raise ValueError(msg)
        self.replacement = replacement
        default = math.ceil(self.dataset_size / self.batch_size)
        self.steps_per_epoch = default if steps_per_epoch is None else _size("steps_per_epoch", steps_per_epoch, 1)
        self.generator = generator
        self.epoch = 0

    @property
    def sampling_info(self) -> SamplingInfo:
        """Fixed-size batches drawn independently every step, add/remove adjacency."""
        return SamplingInfo(sampler="fixed_size_replacement" if self.replacement else "fixed_size",
                            sampling_probability=self.batch_size / self.dataset_size,
                            dataset_size=self.dataset_size, batch_size=float(self.batch_size),
                            batches_per_epoch=self.steps_per_epoch, max_participations_per_epoch=None,
                            neighboring_relation="add_remove", source=type(self).__name__)

    def __len__(self) -> int:
        return self.steps_per_epoch

    def __iter__(self) -> Iterator[list[int]]:
        self._start_epoch()
        for _ in range(self.steps_per_epoch):
            if self.replacement:
                batch: list[int] = torch.randint(self.dataset_size, (self.batch_size,), generator=self.generator).tolist()
            else:
                batch = torch.randperm(self.dataset_size, generator=self.generator)[: self.batch_size].tolist()
            yield batch


class BallsInBinsBatchSampler(Sampler[list[int]], _EpochClock):
    """Balls-in-bins: each epoch, every record is put in one of ``steps_per_epoch`` steps uniformly at random.

    Batches have random sizes (mean ``n / t``) and may be empty (use
    ``collate_fn=empty_safe_collate(dataset)``). Each record takes part in exactly one step
    per epoch, like shuffled batches; its certified upper bound is the smaller of the
    deterministic Gaussian curve and the Renyi DP of the dominating pair (zero-out
    adjacency), and its truth is close to Poisson sampling's
    (Chua et al., AISTATS 2025, arXiv:2412.16802; :mod:`dpacct.samplers.allocation`).

    Parameters
    ----------
    dataset_size : int
        ``n >= 1``.
    steps_per_epoch : int
        ``t >= 1``: the bins of one epoch.
    generator : torch.Generator, optional
        Source of the assignments.

    Examples
    --------
    >>> s = BallsInBinsBatchSampler(dataset_size=10, steps_per_epoch=3, generator=torch.Generator().manual_seed(0))
    >>> sorted(i for b in s for i in b), s.sampling_info.max_participations_per_epoch
    ([0, 1, 2, 3, 4, 5, 6, 7, 8, 9], 1)
    """

    def __init__(self, *, dataset_size: int, steps_per_epoch: int, generator: torch.Generator | None = None) -> None:
        self.dataset_size = _size("dataset_size", dataset_size, 1)
        self.steps_per_epoch = _size("steps_per_epoch", steps_per_epoch, 1)
        self.generator = generator
        self.epoch = 0

    @property
    def sampling_info(self) -> SamplingInfo:
        """One participation per epoch in a uniformly random step, zero-out adjacency."""
        return SamplingInfo(sampler="balls_in_bins", sampling_probability=1.0 / self.steps_per_epoch,
                            dataset_size=self.dataset_size, batch_size=self.dataset_size / self.steps_per_epoch,
                            batches_per_epoch=self.steps_per_epoch, max_participations_per_epoch=1,
                            neighboring_relation="zero_out", source=type(self).__name__)

    def __len__(self) -> int:
        return self.steps_per_epoch

    def __iter__(self) -> Iterator[list[int]]:
        self._start_epoch()
        bins = torch.randint(self.steps_per_epoch, (self.dataset_size,), generator=self.generator)
        for step in range(self.steps_per_epoch):
            yield (bins == step).nonzero().flatten().tolist()


class RandomAllocationBatchSampler(Sampler[list[int]], _EpochClock):
    """Random allocation: each epoch, every record is put in ``participations`` distinct random steps of ``steps``.

    Feldman and Shenfeld (2025, arXiv:2502.08202) analyse this sampler; ``participations=1``
    is :class:`BallsInBinsBatchSampler`. Batches have random sizes (mean ``n k / t``) and may
    be empty (use ``collate_fn=empty_safe_collate(dataset)``). For ``k > 1`` no dominating
    pair is proven, so the certified upper bound is the deterministic Gaussian curve of the
    ``k`` participations per epoch (zero-out adjacency; :mod:`dpacct.samplers.allocation`
    has a lower bound and an estimate). Give one epoch the length of your run to allocate
    the participations among all its steps.

    Parameters
    ----------
    dataset_size : int
        ``n >= 1``.
    steps : int
        ``t >= 1``: the steps of one epoch.
    participations : int
        ``k``, ``1 <= k <= t``: the steps of each epoch every record is in.
    generator : torch.Generator, optional
        Source of the assignments.

    Examples
    --------
    >>> s = RandomAllocationBatchSampler(dataset_size=6, steps=4, participations=2,
    ...                                  generator=torch.Generator().manual_seed(0))
    >>> sorted(i for b in s for i in b), s.sampling_info.max_participations_per_epoch
    ([0, 0, 1, 1, 2, 2, 3, 3, 4, 4, 5, 5], 2)
    """

    def __init__(self, *, dataset_size: int, steps: int, participations: int,
                 generator: torch.Generator | None = None) -> None:
        self.dataset_size = _size("dataset_size", dataset_size, 1)
        self.steps = _size("steps", steps, 1)
        self.participations = _size("participations", participations, 1)
        if self.participations > self.steps:
            msg = f"participations must be an integer in [1, steps={self.steps}], got {self.participations}"
            raise ValueError(msg)
        self.generator = generator
        self.epoch = 0

    @property
    def sampling_info(self) -> SamplingInfo:
        """``k`` participations per epoch in uniformly random distinct steps, zero-out adjacency."""
        k, t = self.participations, self.steps
        return SamplingInfo(sampler="random_allocation", sampling_probability=k / t, dataset_size=self.dataset_size,
                            batch_size=self.dataset_size * k / t, batches_per_epoch=t, max_participations_per_epoch=k,
                            neighboring_relation="zero_out", source=type(self).__name__)

    def __len__(self) -> int:
        return self.steps

    def __iter__(self) -> Iterator[list[int]]:
        self._start_epoch()
        # Each record's k steps: the first k of a uniformly random order of the t steps (the
        # argsort of independent uniforms), drawn a block of records at a time.
        steps = torch.empty((self.dataset_size, self.participations), dtype=torch.long)
        block = max(1, 2**22 // self.steps)
        for start in range(0, self.dataset_size, block):
            stop = min(start + block, self.dataset_size)
            keys = torch.rand((stop - start, self.steps), generator=self.generator)
            steps[start:stop] = keys.argsort(dim=1)[:, : self.participations]
        flat = steps.flatten()
        records = torch.arange(self.dataset_size).repeat_interleave(self.participations)
        order = flat.argsort(stable=True)
        counts = torch.bincount(flat, minlength=self.steps).tolist()
        sorted_records = records[order].tolist()
        at = 0
        for step in range(self.steps):
            yield sorted_records[at:at + counts[step]]
            at += counts[step]


class TruncatedPoissonBatchSampler(PoissonBatchSampler):
    """Poisson sampling capped at ``max_batch_size``: a larger draw is cut to a uniformly random subset.

    Large-scale trainers cap the batch to bound memory. The accountant uses the
    overflow-labelled mixture of :mod:`dpacct.samplers.truncated_poisson` (add/remove
    adjacency, only ``accountant="pld"``); choose ``max_batch_size`` a few standard
    deviations above ``q n`` so that batches rarely overflow (each overflowing step is
    charged as a fixed-size one).

    Parameters
    ----------
    dataset_size, sampling_probability, steps_per_epoch, generator
        As :class:`PoissonBatchSampler`.
    max_batch_size : int
        ``B >= 1``.

    Examples
    --------
    >>> s = TruncatedPoissonBatchSampler(dataset_size=100, sampling_probability=0.5, max_batch_size=10,
    ...                                  generator=torch.Generator().manual_seed(0))
    >>> max(len(b) for b in s), s.sampling_info.sampler
    (10, 'truncated_poisson')
    """

    def __init__(
        self,
        *,
        dataset_size: int,
        sampling_probability: float,
        max_batch_size: int,
        steps_per_epoch: int | None = None,
        generator: torch.Generator | None = None,
    ) -> None:
        super().__init__(dataset_size=dataset_size, sampling_probability=sampling_probability,
                         steps_per_epoch=steps_per_epoch, generator=generator)
        self.max_batch_size = _size("max_batch_size", max_batch_size, 1)

    @property
    def sampling_info(self) -> SamplingInfo:
        """Truncated Poisson at rate ``q`` capped at ``B``, add/remove adjacency."""
        return SamplingInfo(sampler="truncated_poisson", sampling_probability=self.sampling_probability,
                            dataset_size=self.dataset_size, batch_size=self.sampling_probability * self.dataset_size,
                            batches_per_epoch=self.steps_per_epoch, max_participations_per_epoch=None,
                            neighboring_relation="add_remove", source=type(self).__name__,
                            max_batch_size=self.max_batch_size)

    def __iter__(self) -> Iterator[list[int]]:
        for batch in super().__iter__():
            if len(batch) > self.max_batch_size:
                keep = torch.randperm(len(batch), generator=self.generator)[: self.max_batch_size].tolist()
                batch = sorted(batch[i] for i in keep)
            yield batch


class _FixedSizeBatchSampler(Sampler[list[int]], _EpochClock):
    _kind: SamplerKind = "shuffle"

    def __init__(self, *, dataset_size: int, batch_size: int, drop_last: bool = False) -> None:
        self.dataset_size = _size("dataset_size", dataset_size, 1)
        self.batch_size = _size("batch_size", batch_size, 1)
        if not isinstance(drop_last, bool):
            msg = f"drop_last must be a bool, got {type(drop_last).__name__}"
            raise TypeError(msg)
        if drop_last and self.batch_size > self.dataset_size:
            msg = f"batch_size must be <= dataset_size = {self.dataset_size} with drop_last=True, got {self.batch_size}"
            raise ValueError(msg)
        self.drop_last = drop_last
        self.epoch = 0

    @property
    def sampling_info(self) -> SamplingInfo:
        """Fixed-size batches: at most one participation per epoch, zero-out adjacency."""
        return SamplingInfo(sampler=self._kind, sampling_probability=min(1.0, self.batch_size / self.dataset_size),
                            dataset_size=self.dataset_size, batch_size=float(self.batch_size),
                            batches_per_epoch=len(self), max_participations_per_epoch=1,
                            neighboring_relation="zero_out", source=type(self).__name__)

    def __len__(self) -> int:
        if self.drop_last:
            return self.dataset_size // self.batch_size
        return math.ceil(self.dataset_size / self.batch_size)

    def _order(self) -> list[int]:
        raise NotImplementedError

    def __iter__(self) -> Iterator[list[int]]:
        self._start_epoch()
        order = self._order()
        for start in range(0, len(self) * self.batch_size, self.batch_size):
            yield order[start : start + self.batch_size]


class ShuffleBatchSampler(_FixedSizeBatchSampler):
    """Shuffled batches: a fresh random permutation each epoch, cut into batches of ``batch_size``.

    Each record is in at most one batch per epoch. The certified epsilon is that of
    deterministic batches (shuffling never does worse); the Poisson number is not a
    guarantee here (Chua et al., ICML 2024, arXiv:2403.17673).

    Parameters
    ----------
    dataset_size : int
        ``n >= 1``.
    batch_size : int
        ``>= 1``.
    drop_last : bool
        Drop the last, smaller batch of each epoch.
    generator : torch.Generator, optional
        Source of the permutations.

    Examples
    --------
    >>> s = ShuffleBatchSampler(dataset_size=10, batch_size=4)
    >>> [len(b) for b in s], s.sampling_info.sampling_probability
    ([4, 4, 2], 0.4)
    """

    _kind: SamplerKind = "shuffle"

    def __init__(self, *, dataset_size: int, batch_size: int, drop_last: bool = False,
                 generator: torch.Generator | None = None) -> None:
        super().__init__(dataset_size=dataset_size, batch_size=batch_size, drop_last=drop_last)
        self.generator = generator

    def _order(self) -> list[int]:
        order: list[int] = torch.randperm(self.dataset_size, generator=self.generator).tolist()
        return order


class DeterministicBatchSampler(_FixedSizeBatchSampler):
    """Batches of ``batch_size`` consecutive records in a fixed order, the same every epoch.

    Examples
    --------
    >>> list(DeterministicBatchSampler(dataset_size=5, batch_size=2, drop_last=True))
    [[0, 1], [2, 3]]
    """

    _kind: SamplerKind = "deterministic"

    def _order(self) -> list[int]:
        return list(range(self.dataset_size))


_REGISTRY: dict[type, Callable[[Any], SamplingInfo]] = {}


def register_sampler(sampler_type: type, describe: Callable[[Any], SamplingInfo]) -> None:
    """Let :func:`identify` recognise ``sampler_type`` (a batch sampler class) through ``describe``."""
    if not isinstance(sampler_type, type):
        msg = f"sampler_type must be a class, got {type(sampler_type).__name__}"
        raise TypeError(msg)
    _REGISTRY[sampler_type] = describe


_ADVICE = ("use dpacct.torch.PoissonBatchSampler (Poisson sampling, the standard DP-SGD analysis), "
           "ShuffleBatchSampler or DeterministicBatchSampler as the DataLoader's batch_sampler")


def _refuse(what: str) -> UnidentifiedSamplerError:
    msg = f"cannot identify how batches are drawn: {what}; {_ADVICE}"
    return UnidentifiedSamplerError(msg)


def _opacus_poisson(batch_sampler: Any, dataset_size: int) -> SamplingInfo | None:
    name = type(batch_sampler).__name__
    if type(batch_sampler).__module__.startswith("opacus") and name == "UniformWithReplacementSampler":
        q = _check.probability("sample_rate", batch_sampler.sample_rate)
        return SamplingInfo(sampler="poisson", sampling_probability=q, dataset_size=int(batch_sampler.num_samples),
                            batch_size=q * int(batch_sampler.num_samples), batches_per_epoch=int(batch_sampler.steps),
                            max_participations_per_epoch=None, neighboring_relation="add_remove", source=name)
    return None


def identify(obj: Any) -> SamplingInfo:
    """How ``obj`` (a ``DataLoader`` or a batch sampler) draws batches, or a clear refusal.

    Recognised: the samplers of this module (and any object with a ``sampling_info``),
    classes added with :func:`register_sampler`, a ``DataLoader`` with ``batch_size`` over
    torch's ``RandomSampler`` without replacement (shuffle) or ``SequentialSampler``
    (deterministic), and opacus' ``UniformWithReplacementSampler`` (Poisson).

    Raises
    ------
    UnidentifiedSamplerError
        For anything else, naming the sampler and what to use instead.

    Examples
    --------
    >>> loader = DataLoader(list(range(100)), batch_size=10, shuffle=True)
    >>> info = identify(loader)
    >>> info.sampler, info.sampling_probability, info.max_participations_per_epoch
    ('shuffle', 0.1, 1)
    """
    info = getattr(obj, "sampling_info", None)
    if isinstance(info, SamplingInfo):
        return info
    for cls in type(obj).__mro__:
        if cls in _REGISTRY:
            return _REGISTRY[cls](obj)
    if not isinstance(obj, DataLoader):
        raise _refuse(f"{type(obj).__name__} is not a DataLoader or a sampler dpacct knows")
    loader = obj
    if not isinstance(loader.dataset, Sized):
        raise _refuse(f"the dataset {type(loader.dataset).__name__} has no len() (an IterableDataset?)")
    n = len(loader.dataset)
    batch_sampler = loader.batch_sampler
    if batch_sampler is None:
        raise _refuse("the DataLoader has no batch sampler (batch_size=None)")
    info = getattr(batch_sampler, "sampling_info", None)
    if isinstance(info, SamplingInfo):
        if info.dataset_size != n:
            msg = (f"the batch sampler has dataset_size = {info.dataset_size} but the DataLoader's dataset has {n} "
                   "records; build the sampler with dataset_size=len(dataset)")
            raise ValueError(msg)
        return info
    for cls in type(batch_sampler).__mro__:
        if cls in _REGISTRY:
            return _REGISTRY[cls](batch_sampler)
    poisson = _opacus_poisson(batch_sampler, n)
    if poisson is not None:
        return poisson
    if type(batch_sampler) is not BatchSampler:
        raise _refuse(f"batch sampler {type(batch_sampler).__name__}")
    inner = batch_sampler.sampler
    b, drop_last = int(batch_sampler.batch_size), bool(batch_sampler.drop_last)
    batches = n // b if drop_last else math.ceil(n / b)
    if type(inner) is RandomSampler:
        if inner.replacement or inner.num_samples != n:
            raise _refuse("RandomSampler with replacement=True or num_samples != len(dataset) "
                          "(records can repeat within an epoch)")
        kind: SamplerKind = "shuffle"
    elif type(inner) is SequentialSampler:
        kind = "deterministic"
    else:
        raise _refuse(f"sampler {type(inner).__name__}")
    return SamplingInfo(sampler=kind, sampling_probability=min(1.0, b / n), dataset_size=n, batch_size=float(b),
                        batches_per_epoch=batches, max_participations_per_epoch=1, neighboring_relation="zero_out",
                        source=f"DataLoader({type(inner).__name__}, batch_size={b}, drop_last={drop_last})")


def with_epoch_clock(loader: DataLoader[Any]) -> DataLoader[Any]:
    """The same loader with the equivalent dpacct batch sampler, so the accountant sees epochs.

    A ``DataLoader`` with ``shuffle=True`` (``RandomSampler``) becomes one with a
    :class:`ShuffleBatchSampler`, ``shuffle=False`` (``SequentialSampler``) one with a
    :class:`DeterministicBatchSampler`, with the same dataset, batch size, ``drop_last``,
    collate function and worker settings. The sampling is never changed (a shuffled loader
    is never turned into a Poisson one). Loaders already using a dpacct sampler are returned
    unchanged.

    Raises
    ------
    UnidentifiedSamplerError
        As :func:`identify`.
    """
    info = identify(loader)
    if isinstance(getattr(loader.batch_sampler, "sampling_info", None), SamplingInfo):
        return loader
    if info.sampler not in ("shuffle", "deterministic"):
        msg = (f"{info.source} is a {info.sampler} sampler without an epoch clock; rebuild the loader with "
               "batch_sampler=dpacct.torch.PoissonBatchSampler(...) or FixedSizeBatchSampler(...)")
        raise UnidentifiedSamplerError(msg)
    assert isinstance(loader.batch_sampler, BatchSampler)  # identify accepted only this for fixed-size batches
    batch_size, drop_last = int(loader.batch_sampler.batch_size), bool(loader.batch_sampler.drop_last)
    batch_sampler: _FixedSizeBatchSampler
    if info.sampler == "shuffle":
        inner = loader.batch_sampler.sampler
        generator = getattr(inner, "generator", None)
        batch_sampler = ShuffleBatchSampler(dataset_size=info.dataset_size, batch_size=batch_size,
                                            drop_last=drop_last, generator=generator)
    else:
        batch_sampler = DeterministicBatchSampler(dataset_size=info.dataset_size, batch_size=batch_size,
                                                  drop_last=drop_last)
    extra: dict[str, Any] = {}
    if loader.num_workers > 0:
        extra = {"prefetch_factor": loader.prefetch_factor, "persistent_workers": loader.persistent_workers}
    return DataLoader(loader.dataset, batch_sampler=batch_sampler, num_workers=loader.num_workers,
                      collate_fn=loader.collate_fn, pin_memory=loader.pin_memory, timeout=loader.timeout,
                      worker_init_fn=loader.worker_init_fn, **extra)


def empty_safe_collate(dataset: Any, collate_fn: Callable[[list[Any]], Any] | None = None) -> Callable[[list[Any]], Any]:
    """A collate function that turns an empty batch into empty tensors of the right shape.

    Poisson batches can be empty; torch's default collate fails on them. The shapes and
    dtypes come from ``dataset[0]`` (every tensor leaf gets a leading dimension 0).

    Examples
    --------
    >>> data = [(torch.zeros(3), torch.tensor(1))] * 4
    >>> x, y = empty_safe_collate(data)([])
    >>> tuple(x.shape), tuple(y.shape)
    ((0, 3), (0,))
    """
    from torch.utils.data import default_collate

    base = default_collate if collate_fn is None else collate_fn

    def collate(batch: list[Any]) -> Any:
        if len(batch) > 0:
            return base(batch)
        one = base([dataset[0]])
        return _empty_like(one)

    return collate


def _empty_like(value: Any) -> Any:
    if isinstance(value, torch.Tensor):
        return value[:0]
    if isinstance(value, tuple):
        return tuple(_empty_like(v) for v in value)
    if isinstance(value, list):
        return [_empty_like(v) for v in value]
    if isinstance(value, dict):
        return {k: _empty_like(v) for k, v in value.items()}
    return value

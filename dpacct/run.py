"""A training run as the user describes it, and how often one record takes part in it.

A run is given either as ``sampling_probability`` and ``steps`` (q and the total number
of noisy steps T) or as ``epochs``, ``batch_size`` and ``dataset_size`` (E, b, n, with
``drop_last`` saying whether a short last batch is dropped). How many steps one record
takes part in depends on the batch sampler:

* ``"poisson"``: every record joins every step independently with probability
  ``q = b / n``; the run is ``T`` steps, with ``T = ceil(E n / b)`` when given in epochs
  (the expected number of batches in E passes, rounded up: more steps only raise epsilon).
* ``"fixed_size"`` / ``"fixed_size_replacement"``: every step a batch of exactly ``b``
  records, drawn without (with) replacement; as many steps as Poisson sampling. Given
  as q and T, ``b/n = q`` (without replacement only).
* ``"truncated_poisson"``: Poisson batches cut to at most ``max_batch_size`` records; as
  many steps as Poisson sampling (needs the dataset size: give the run in epochs).
* ``"balls_in_bins"``: each record in one uniformly random step of each epoch (Chua et
  al., AISTATS 2025): steps and participations as for shuffled batches.
* ``"random_allocation"``: each record in ``k`` distinct uniformly random steps among all
  the run's steps (Feldman and Shenfeld 2025), ``k`` the participations of shuffled
  batches; steps as for shuffled batches.
* ``"shuffle"`` and ``"deterministic"``: each epoch cuts the (shuffled or fixed) data into
  ``ceil(n / b)`` batches, or ``floor(n / b)`` with ``drop_last``; the run is
  ``T = ceil(E * batches per epoch)`` steps and each record takes part in **at most one
  batch per epoch**, whatever the last batch's size: ``ceil(E)`` participations (exactly
  that many for the worst-placed record under deterministic batches). Given as q and T
  instead, an epoch has at least ``floor(1/q)`` batches (``floor(n/b)`` with
  ``drop_last``, ``ceil(n/b)`` without), so a record takes part in at most
  ``ceil(T / floor(1/q))`` steps; exact when ``1/q`` is an integer.

Examples
--------
>>> run = Run.from_epochs(epochs=60, batch_size=256, dataset_size=60_000)
>>> run.steps("poisson"), run.steps("shuffle"), run.participations("shuffle")
(14063, 14100, 60)
>>> Run.from_epochs(epochs=60, batch_size=256, dataset_size=60_000, drop_last=True).steps("deterministic")
14040
>>> Run(sampling_probability=0.1, steps=31).participations("deterministic")
4
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from dpacct import _check

__all__ = ["INDEPENDENT_SAMPLERS", "SAMPLERS", "Run"]

#: Batch samplers a run can be accounted for.
SAMPLERS: tuple[str, ...] = ("poisson", "shuffle", "deterministic", "balls_in_bins", "random_allocation",
                             "fixed_size", "fixed_size_replacement", "truncated_poisson")

#: Samplers that draw every step independently (the run is ``ceil(E n / b)`` steps, no fixed
#: number of participations per record).
INDEPENDENT_SAMPLERS: tuple[str, ...] = ("poisson", "fixed_size", "fixed_size_replacement", "truncated_poisson")

# Round-off in q * T or 1/q (0.1 * 30 = 3.0000000000000004) never adds a step: the one
# rounding rule of dpacct (_check.ceil_count / floor_count).
_ceil = _check.ceil_count
_floor = _check.floor_count


@dataclass(frozen=True, slots=True, init=False)
class Run:
    """One training run: ``sampling_probability`` and ``steps``, or an epoch description.

    Build it with ``Run(sampling_probability=q, steps=T)`` or :meth:`from_epochs`, or from
    whichever the user gave with :meth:`from_arguments`. ``steps`` given directly is the
    total number of noisy steps for every sampler.

    Attributes
    ----------
    sampling_probability : float
        q = batch size / dataset size, in ``[0, 1]``.
    total_steps : int or None
        Total noisy steps T as given (``None`` when the run is given in epochs; the
        count per sampler is :meth:`steps`).
    epochs : float or None
        Passes over the data E ``> 0``.
    batch_size, dataset_size : int or None
        b and n, ``1 <= b <= n``.
    drop_last : bool
        Whether each epoch drops a short last batch (shuffle/deterministic only).
    """

    sampling_probability: float
    total_steps: int | None = None
    epochs: float | None = None
    batch_size: int | None = None
    dataset_size: int | None = None
    drop_last: bool = False

    def __init__(self, *, sampling_probability: float, steps: int) -> None:
        object.__setattr__(self, "sampling_probability", _check.probability("sampling_probability", sampling_probability))
        object.__setattr__(self, "total_steps", _check.count("steps", steps))
        object.__setattr__(self, "epochs", None)
        object.__setattr__(self, "batch_size", None)
        object.__setattr__(self, "dataset_size", None)
        object.__setattr__(self, "drop_last", False)

    @classmethod
    def from_epochs(cls, *, epochs: float, batch_size: int, dataset_size: int, drop_last: bool = False) -> Run:
        """A run of ``epochs`` passes over ``dataset_size`` records in batches of ``batch_size``."""
        e = _check.positive("epochs", epochs)
        b = _check.count("batch_size", batch_size)
        n = _check.count("dataset_size", dataset_size, minimum=1)
        if not 1 <= b <= n:
            msg = f"batch_size must be in [1, dataset_size={n}], got {b}"
            raise ValueError(msg)
        if not isinstance(drop_last, bool):
            msg = f"drop_last must be a bool, got {type(drop_last).__name__}"
            raise TypeError(msg)
        run = cls(sampling_probability=b / n, steps=0)
        object.__setattr__(run, "total_steps", None)
        object.__setattr__(run, "epochs", e)
        object.__setattr__(run, "batch_size", b)
        object.__setattr__(run, "dataset_size", n)
        object.__setattr__(run, "drop_last", drop_last)
        return run

    @classmethod
    def from_arguments(
        cls,
        *,
        sampling_probability: Any = None,
        steps: Any = None,
        epochs: Any = None,
        batch_size: Any = None,
        dataset_size: Any = None,
        drop_last: Any = False,
    ) -> Run:
        """The run from whichever description was given (exactly one of the two), checked.

        Raises
        ------
        ValueError
            If both descriptions or neither is given, one is incomplete, or a value is
            out of range (the message names the parameter).
        """
        by_epochs = (epochs, batch_size, dataset_size)
        if any(v is not None for v in by_epochs):
            if sampling_probability is not None or steps is not None:
                msg = "give either sampling_probability and steps, or epochs, batch_size and dataset_size, not both"
                raise ValueError(msg)
            if any(v is None for v in by_epochs):
                missing = [n for n, v in zip(("epochs", "batch_size", "dataset_size"), by_epochs) if v is None]
                msg = f"epochs, batch_size and dataset_size must be given together; missing {', '.join(missing)}"
                raise ValueError(msg)
            return cls.from_epochs(epochs=epochs, batch_size=batch_size, dataset_size=dataset_size,
                                   drop_last=drop_last)
        if sampling_probability is None or steps is None:
            missing = [n for n, v in (("sampling_probability", sampling_probability), ("steps", steps)) if v is None]
            msg = (f"give sampling_probability and steps, or epochs, batch_size and dataset_size; "
                   f"missing {', '.join(missing)}")
            raise ValueError(msg)
        if drop_last is not False:
            msg = "drop_last applies only to a run given by epochs, batch_size and dataset_size"
            raise ValueError(msg)
        return cls(sampling_probability=sampling_probability, steps=steps)

    @property
    def by_epochs(self) -> bool:
        """Whether the run was described by epochs, batch size and dataset size."""
        return self.epochs is not None

    def batches_per_epoch(self) -> int:
        """Batches in one epoch of shuffled or deterministic batches (the fewest possible for a q, T run)."""
        if self.batch_size is not None and self.dataset_size is not None:
            n, b = self.dataset_size, self.batch_size
            return n // b if self.drop_last else -(-n // b)
        q = self.sampling_probability
        return max(1, _floor(1.0 / q)) if q > 0.0 else 0

    def steps(self, sampler: str = "poisson") -> int:
        """Total noisy steps T of the run under ``sampler``."""
        sampler = _check.one_of("sampler", sampler, SAMPLERS)
        if self.total_steps is not None:
            return self.total_steps
        assert self.epochs is not None and self.batch_size is not None and self.dataset_size is not None
        if sampler in INDEPENDENT_SAMPLERS:
            return _ceil(self.epochs * self.dataset_size / self.batch_size)
        return _ceil(self.epochs * self.batches_per_epoch())

    def participations(self, sampler: str) -> int:
        """Most steps one record takes part in under shuffled or deterministic batches.

        One per epoch (a partial last epoch counts as one). For ``"poisson"`` there is no
        fixed count; this raises.
        """
        sampler = _check.one_of("sampler", sampler, SAMPLERS)
        if sampler in INDEPENDENT_SAMPLERS:
            msg = f"a record of a {sampler} run has no fixed number of participations; use steps({sampler!r})"
            raise ValueError(msg)
        if self.epochs is not None:
            return _ceil(self.epochs)
        t = self.steps(sampler)
        if t == 0 or self.sampling_probability == 0.0:
            return 0
        return _ceil(t / self.batches_per_epoch())

    def full_epochs(self) -> int:
        """Complete epochs of shuffled batches in the run (for the shuffle lower bound)."""
        if self.epochs is not None:
            return _floor(self.epochs)
        per_epoch = self.lower_bound_batches_per_epoch()
        return 0 if per_epoch == 0 else _floor(self.steps("shuffle") / per_epoch)

    def lower_bound_batches_per_epoch(self) -> int:
        """Batches per epoch T for the shuffle lower bound: the most the run can have.

        The lower bound decreases with T (more batches hide a record better), so rounding
        ``n/b`` (or ``1/q``) up keeps it a lower bound.
        """
        if self.batch_size is not None and self.dataset_size is not None:
            return -(-self.dataset_size // self.batch_size)
        q = self.sampling_probability
        return max(1, _ceil(1.0 / q)) if q > 0.0 else 0

    def fixed_size_counts(self, replacement: bool = False) -> tuple[int, int]:
        """``(batch_size, dataset_size)`` for fixed-size batches.

        A run given as q and T has only the rate: without replacement the pair is
        ``(ceil(q 10^9), 10^9)``, a rate within ``1e-9`` above q (only b/n matters then);
        with replacement the batch size itself matters and this raises.
        """
        if self.batch_size is not None and self.dataset_size is not None:
            return self.batch_size, self.dataset_size
        if replacement:
            msg = ("fixed-size batches with replacement need the batch size and dataset size: give epochs, "
                   "batch_size and dataset_size")
            raise ValueError(msg)
        n = 1_000_000_000
        return max(1, math.ceil(self.sampling_probability * n)), n

    def describe(self) -> dict[str, Any]:
        """The run as the user gave it, for reports."""
        if self.epochs is not None:
            out: dict[str, Any] = {"epochs": self.epochs, "batch_size": self.batch_size,
                                   "dataset_size": self.dataset_size}
            if self.drop_last:
                out["drop_last"] = True
            return out
        return {"sampling_probability": self.sampling_probability, "steps": self.total_steps}

"""The privacy accountant of a torch training loop: one accounting step per noised optimizer step.

:class:`PrivacyAccountant` reads how batches are drawn from the sampler
(:mod:`dpacct.torch.samplers`), attaches to any ``torch.optim.Optimizer``, and turns the
steps it sees into dpacct mechanisms:

* Poisson batches: one Poisson-subsampled Gaussian per step at the true rate ``q``
  (add/remove adjacency). A step that sums ``k > 1`` independently drawn Poisson
  batches (gradient accumulation) contains a record ``Binomial(k, q)`` times, so it is
  the mixture-of-Gaussians mechanism with sensitivities ``0..k`` (Ganesh,
  arXiv:2310.15526), accounted with PLD; opacus' ``q k`` is not a bound for it.
* Shuffled or deterministic fixed-size batches: each record is in at most one batch per
  epoch, so by joint convexity over the permutations each epoch is at most one Gaussian
  mechanism with the smallest noise multiplier used in that epoch (zero-out adjacency;
  Chua et al., ICML 2024, arXiv:2403.17673). A step that accumulates batches across an
  epoch boundary may contain a record twice; it is charged as a Gaussian with
  sensitivity 2 to both epochs (see :meth:`PrivacyAccountant.mechanisms`).

The budget is enforced **before** the step that would exceed it: the optimizer's pre-step
hook raises :class:`BudgetExhaustedError` and the parameters are not touched; the
``exhausted`` property lets a loop stop cleanly one step earlier.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Hashable
from typing import Any, Union

import numpy as np
from scipy import stats

from dpacct import _check
from dpacct.accountant import Accountant, available_accountants, make_accountant
from dpacct.results import Interval
from dpacct.mechanisms import (
    BallsInBinsGaussianMechanism,
    FixedSizeSampledGaussianMechanism,
    GaussianMechanism,
    Mechanism,
    MixtureOfGaussiansMechanism,
    PoissonSampledGaussianMechanism,
    TruncatedPoissonSampledGaussianMechanism,
)
from dpacct.schedules import Schedule
from dpacct.torch.samplers import SamplingInfo, identify

__all__ = ["SAMPLER_RULES", "BudgetExhaustedError", "PrivacyAccountant"]

NoiseSpec = Union[float, Schedule, Callable[[int], float], None]
Run = tuple[Hashable, int]

_FORMAT = "dpacct.torch.PrivacyAccountant/1"
_LOOKAHEAD = 1024


class BudgetExhaustedError(RuntimeError):
    """The next optimizer step would take the run over its (epsilon, delta) budget; it was not taken."""


def _poisson_rule(acct: PrivacyAccountant) -> list[tuple[Any, int]]:
    """Per step: Poisson-subsampled Gaussian (k = 1), mixture of Gaussians (k > 1) or the JL mechanism."""
    q, k = acct.sampling.sampling_probability, acct.accumulation_steps
    runs: list[tuple[Any, int]] = []
    for sigma, group in itertools.groupby(acct._steps, key=lambda s: s[0]):
        count = sum(s[3] for s in group)
        mechanism: Any
        if acct.jl_dim is not None:
            from dpacct.fdp import DPSGDJLMechanism  # type: ignore[import-not-found,unused-ignore]

            mechanism = DPSGDJLMechanism(noise_multiplier=sigma, sampling_probability=q, jl_dim=acct.jl_dim,
                                         projections="shared")
        elif k == 1:
            mechanism = PoissonSampledGaussianMechanism(noise_multiplier=sigma, sampling_probability=q)
        else:
            weights = stats.binom.pmf(np.arange(k + 1), k, q)
            weights = weights / math.fsum(weights)
            mechanism = MixtureOfGaussiansMechanism(noise_multiplier=sigma, sensitivities=tuple(range(k + 1)),
                                                    probabilities=tuple(float(w) for w in weights))
        _append(runs, mechanism, count)
    return runs


def _epoch_rule(acct: PrivacyAccountant, participations: float = 1.0) -> list[tuple[Any, int]]:
    """Per epoch: one zero-out Gaussian with the smallest ``sigma / sqrt(span)`` of the steps touching it.

    ``participations``: the Gaussian's sensitivity squared per epoch (1 for shuffled and
    deterministic batches; see :func:`_allocation_rule`).
    """
    worst: dict[int, float] = {}
    for sigma, epoch, span, _ in acct._steps:
        effective = sigma / math.sqrt(span)
        for e in range(epoch - span + 1, epoch + 1):
            worst[e] = min(worst.get(e, math.inf), effective)
    runs: list[tuple[Any, int]] = []
    for e in sorted(worst):
        noise = worst[e] / math.sqrt(participations)
        _append(runs, GaussianMechanism(noise_multiplier=noise, neighboring_relation="zero_out"), 1)
    return runs


def _balls_in_bins_rule(acct: PrivacyAccountant) -> list[tuple[Any, int]]:
    """Per epoch: one balls-in-bins epoch at the smallest sigma of its steps, one batch per step.

    A step with more noise than the epoch's smallest is a post-processing of that step at
    the smallest (add independent noise), so the epoch at the smallest sigma dominates; an
    epoch cut short is a prefix of a whole one (post-processing too). With gradient
    accumulation (or a step spanning epochs) a step merges several bins, and the epoch
    rule of shuffled batches applies instead.
    """
    if acct.accumulation_steps != 1 or any(int(s[2]) != 1 for s in acct._steps):
        return _epoch_rule(acct)
    worst: dict[int, float] = {}
    for sigma, epoch, _span, _ in acct._steps:
        worst[epoch] = min(worst.get(epoch, math.inf), sigma)
    t = max(1, acct.sampling.batches_per_epoch)
    runs: list[tuple[Any, int]] = []
    for e in sorted(worst):
        _append(runs, BallsInBinsGaussianMechanism(noise_multiplier=worst[e], steps_per_epoch=t), 1)
    return runs


def _allocation_rule(acct: PrivacyAccountant) -> list[tuple[Any, int]]:
    """Per epoch: the Gaussian of ``k`` participations, at the smallest ``sigma / sqrt(span)`` touching it.

    A record is in ``k`` distinct batches of each epoch; a noisy step merges at most ``a``
    batches (gradient accumulation), so it holds ``c_s <= min(k, a)`` of them, and the run's
    Gaussians compose to ``mu^2 = sum_s c_s^2 / sigma_s^2`` (Dong, Roth, Su 2019,
    arXiv:1905.02383, Cor. 3.3). By Cauchy-Schwarz over the ``span_s`` epochs a step touches,
    ``c_s^2 <= span_s sum_e c_se^2``, and ``sum_s c_se^2 <= k min(k, a)`` within an epoch: at
    most ``k min(k, a) / sigma_e^2`` per epoch, ``sigma_e`` the smallest ``sigma_s /
    sqrt(span_s)`` of the steps touching it. No dominating pair of random allocation is
    proven for ``k > 1``; with ``k = 1`` this is the epoch rule of shuffled batches.
    """
    k = acct.sampling.max_participations_per_epoch or 1
    return _epoch_rule(acct, participations=float(k * min(k, acct.accumulation_steps)))


def _append(runs: list[tuple[Any, int]], mechanism: Any, count: int) -> None:
    if runs and runs[-1][0] == mechanism:
        runs[-1] = (mechanism, runs[-1][1] + count)
    else:
        runs.append((mechanism, count))


def _fixed_size_rule(acct: PrivacyAccountant) -> list[tuple[Any, int]]:
    """Per step: one fixed-size batch of the Gaussian mechanism (add/remove), grouped by sigma."""
    info = acct.sampling
    runs: list[tuple[Any, int]] = []
    for sigma, group in itertools.groupby(acct._steps, key=lambda s: s[0]):
        count = sum(s[3] for s in group)
        mechanism = FixedSizeSampledGaussianMechanism(noise_multiplier=sigma, batch_size=round(info.batch_size),
                                                      dataset_size=info.dataset_size,
                                                      replacement=info.sampler == "fixed_size_replacement")
        _append(runs, mechanism, count)
    return runs


def _truncated_rule(acct: PrivacyAccountant) -> list[tuple[Any, int]]:
    """Per step: one truncated Poisson batch of the Gaussian mechanism (add/remove), grouped by sigma."""
    info = acct.sampling
    assert info.max_batch_size is not None
    runs: list[tuple[Any, int]] = []
    for sigma, group in itertools.groupby(acct._steps, key=lambda s: s[0]):
        count = sum(s[3] for s in group)
        mechanism = TruncatedPoissonSampledGaussianMechanism(
            noise_multiplier=sigma, sampling_probability=info.sampling_probability, dataset_size=info.dataset_size,
            max_batch_size=info.max_batch_size)
        _append(runs, mechanism, count)
    return runs


#: How each sampler's steps become mechanisms (the seam for new samplers: add a rule).
SAMPLER_RULES: dict[str, Callable[[PrivacyAccountant], list[tuple[Any, int]]]] = {
    "poisson": _poisson_rule,
    "shuffle": _epoch_rule,
    "deterministic": _epoch_rule,
    "balls_in_bins": _balls_in_bins_rule,
    "random_allocation": _allocation_rule,
    "fixed_size": _fixed_size_rule,
    "fixed_size_replacement": _fixed_size_rule,
    "truncated_poisson": _truncated_rule,
}

#: Samplers whose steps are drawn independently (no epoch clock needed).
_INDEPENDENT = ("poisson", "fixed_size", "fixed_size_replacement", "truncated_poisson")


class PrivacyAccountant:
    r"""Accounts a torch training run step by step, for the sampler it actually uses.

    Parameters
    ----------
    sampler : DataLoader, batch sampler or SamplingInfo
        Where the batches come from (see :func:`dpacct.torch.identify`). Shuffled and
        deterministic batches need the epoch clock of a dpacct batch sampler
        (:func:`dpacct.torch.with_epoch_clock` converts a plain ``DataLoader``).
    delta : float
        The delta at which epsilon is reported and the budget is enforced, in ``(0, 1)``.
    accountant : str
        A dpacct accountant: ``"pld"`` (default, tightest), ``"rdp"``, ... With
        ``jl_dim`` the f-DP accountant of :mod:`dpacct.fdp` is used.
    max_epsilon : float, optional
        The budget: the step that would take epsilon above it is refused.
    noise_multiplier : float, Schedule or callable, optional
        The noise multiplier of the steps, or a :mod:`dpacct.schedules` schedule (or a
        function of the epoch, counted from 0) giving it per epoch. A step's noise multiplier
        is taken from, in order: the ``noise_multiplier`` argument of :meth:`step`, a
        ``noise_multiplier`` attribute of the optimizer (opacus' ``DPOptimizer`` has one),
        this parameter.
    accumulation_steps : int
        Loader batches summed into one noised optimizer step (gradient accumulation), ``>= 1``.
        To save memory without it, split one loader batch into chunks
        (``max_physical_batch_size`` of :func:`dpacct.torch.dp_sgd_step`).
    jl_dim : int, optional
        Account DP-SGD-JL steps (:func:`dpacct.torch.dp_sgd_jl_step`) with ``r = jl_dim``
        shared projections (Poisson sampling only).
    **accountant_options
        Passed to the dpacct accountant (e.g. ``relative_accuracy`` for PLD).

    Notes
    -----
    ``len(accountant)`` is the number of noised optimizer steps taken; ``history`` gives
    them as run-length ``(noise_multiplier, sampling_probability, steps)`` runs, and
    :meth:`mechanisms` the dpacct mechanisms they were accounted as.

    Examples
    --------
    >>> from dpacct.torch import PoissonBatchSampler
    >>> acct = PrivacyAccountant(PoissonBatchSampler(dataset_size=60_000, sampling_probability=256 / 60_000),
    ...                          delta=1e-5, accountant="rdp", noise_multiplier=1.1)
    >>> for _ in range(10_000):
    ...     acct.step()
    >>> len(acct), round(acct.get_epsilon(), 3)
    (10000, 2.162)
    """

    def __init__(
        self,
        sampler: Any,
        *,
        delta: float,
        accountant: str = "pld",
        max_epsilon: float | None = None,
        noise_multiplier: NoiseSpec = None,
        accumulation_steps: int = 1,
        jl_dim: int | None = None,
        **accountant_options: Any,
    ) -> None:
        self.sampling = sampler if isinstance(sampler, SamplingInfo) else identify(sampler)
        self._clock = None if isinstance(sampler, SamplingInfo) else _clock_of(sampler)
        if self.sampling.sampler not in SAMPLER_RULES:
            msg = f"no accounting rule for sampler {self.sampling.sampler!r}; add one to dpacct.torch.SAMPLER_RULES"
            raise ValueError(msg)
        if self.sampling.sampler not in _INDEPENDENT and self._clock is None:
            msg = (f"{self.sampling.source} draws fixed-size batches, which are accounted per epoch, and has no "
                   "epoch clock; use dpacct.torch.with_epoch_clock(loader) or a dpacct batch sampler")
            raise ValueError(msg)
        self.delta = _check.delta(delta)
        self.max_epsilon = None if max_epsilon is None else _check.positive("max_epsilon", max_epsilon)
        k = _check.count("accumulation_steps", accumulation_steps)
        if k < 1:
            msg = f"accumulation_steps must be an integer >= 1, got {k}"
            raise ValueError(msg)
        self.accumulation_steps = k
        if jl_dim is not None:
            r = _check.count("jl_dim", jl_dim)
            if r < 1:
                msg = f"jl_dim must be an integer >= 1, got {r}"
                raise ValueError(msg)
            if self.sampling.sampler != "poisson" or k != 1:
                msg = "jl_dim (DP-SGD-JL accounting) needs Poisson sampling and accumulation_steps=1"
                raise ValueError(msg)
            jl_dim = r
            accountant = "fdp"
        elif accountant not in available_accountants():
            _check.one_of("accountant", accountant, available_accountants())
        if k > 1 and self.sampling.sampler in ("fixed_size", "fixed_size_replacement", "truncated_poisson"):
            msg = (f"accumulation_steps={k} with fixed-size batches (a record may be in several of the summed "
                   "batches) is not accounted; use accumulation_steps=1 or Poisson sampling")
            raise ValueError(msg)
        if self.sampling.sampler in ("fixed_size_replacement", "truncated_poisson") and accountant != "pld":
            msg = f"{self.sampling.sampler} batches are accounted only by accountant='pld', got {accountant!r}"
            raise ValueError(msg)
        if k > 1 and self.sampling.sampler == "poisson" and accountant != "pld":
            msg = (f"accumulation_steps={k} with Poisson sampling is a mixture-of-Gaussians mechanism, "
                   f"which only accountant='pld' accounts; got accountant={accountant!r}")
            raise ValueError(msg)
        self.jl_dim = jl_dim
        self.accountant = accountant
        self.accountant_options = dict(accountant_options)
        self.noise_multiplier = noise_multiplier
        self._steps: list[list[Any]] = []  # runs [sigma, epoch, span, count]
        self._last_epoch: int | None = None
        self._epoch_offset = 0
        self._epsilon_cache: dict[tuple[Run, ...], float] = {}
        self._allowance: dict[tuple[tuple[Run, ...], Hashable], int] = {}
        self._handles: list[Any] = []
        self._pending: tuple[float, int, int] | None = None
        self._optimizer: Any = None
        self._accountant()  # fail early on bad accountant options (or a missing dpacct.fdp)

    # -- the clock and the noise ------------------------------------------------------------

    @property
    def epoch(self) -> int:
        """The epoch the next step belongs to (counted from 1 once the sampler has started)."""
        return self._epoch_offset + (self._clock.epoch if self._clock is not None else 0)

    def current_noise_multiplier(self) -> float:
        """The noise multiplier of this epoch from the ``noise_multiplier`` parameter."""
        spec = self.noise_multiplier
        if spec is None:
            msg = "noise_multiplier is not set: pass it to PrivacyAccountant(...) or to step(noise_multiplier=...)"
            raise ValueError(msg)
        index = max(self.epoch - 1, 0)
        if (isinstance(spec, Schedule) or callable(spec)) and self._clock is None:
            msg = ("a per-epoch noise schedule needs the epoch clock of a dpacct batch sampler "
                   f"({self.sampling.source} has none); pass a PoissonBatchSampler or a DataLoader using one")
            raise ValueError(msg)
        if isinstance(spec, Schedule):
            return spec.noise_multiplier(index)
        if callable(spec):
            return _check.noise_multiplier(spec(index))
        return _check.noise_multiplier(spec)

    # -- steps ------------------------------------------------------------------------------

    def _record(self, sigma: float) -> tuple[float, int, int]:
        if self.sampling.sampler in _INDEPENDENT:  # epochs play no part: one run per sigma
            return sigma, 0, 1
        epoch = self.epoch
        span = 1
        if self.accumulation_steps > 1 and self._last_epoch is not None and epoch > self._last_epoch:
            span = min(epoch - self._last_epoch + 1, self.accumulation_steps)
        return sigma, epoch, span

    def _with(self, record: tuple[float, int, int]) -> list[list[Any]]:
        steps = [list(s) for s in self._steps]
        if steps and steps[-1][:3] == list(record):
            steps[-1][3] += 1
        else:
            steps.append([*record, 1])
        return steps

    def _runs(self, steps: list[list[Any]] | None = None) -> tuple[Run, ...]:
        saved = self._steps
        if steps is not None:
            self._steps = steps
        try:
            return tuple(SAMPLER_RULES[self.sampling.sampler](self))
        finally:
            self._steps = saved

    def _resolve(self, noise_multiplier: float | None, optimizer: Any = None) -> float:
        if noise_multiplier is not None:
            return _check.noise_multiplier(noise_multiplier)
        from_optimizer = getattr(self._optimizer if optimizer is None else optimizer, "noise_multiplier", None)
        if from_optimizer is not None:
            return _check.noise_multiplier(from_optimizer)
        return self.current_noise_multiplier()

    def would_exceed(self, noise_multiplier: float | None = None) -> bool:
        """Whether the next step (with this noise multiplier) would take epsilon over ``max_epsilon``."""
        if self.max_epsilon is None:
            return False
        record = self._record(self._resolve(noise_multiplier))
        return not self._fits(self._runs(self._with(record)))

    @property
    def exhausted(self) -> bool:
        """True when the next step would exceed the budget: stop the loop here."""
        return self.would_exceed()

    def check_step(self, noise_multiplier: float | None = None) -> None:
        """Raise :class:`BudgetExhaustedError` if the next step would exceed the budget."""
        if self.would_exceed(noise_multiplier):
            msg = (f"the next step would take epsilon over max_epsilon = {self.max_epsilon:g} at delta = "
                   f"{self.delta:g} after {len(self)} steps (epsilon so far {self.get_epsilon():.6g}); "
                   "it was not taken")
            raise BudgetExhaustedError(msg)

    def step(self, noise_multiplier: float | None = None) -> None:
        """Account one noised step (checks the budget first; use this without an optimizer hook)."""
        sigma = self._resolve(noise_multiplier)
        self.check_step(sigma)
        self._commit(self._record(sigma))

    def _commit(self, record: tuple[float, int, int]) -> None:
        self._steps = self._with(record)
        self._last_epoch = record[1]

    # -- the optimizer hook -------------------------------------------------------------------

    def attach(self, optimizer: Any) -> PrivacyAccountant:
        """Account every ``optimizer.step()`` from now on (budget checked before each one).

        Works with any ``torch.optim.Optimizer`` through its step pre- and post-hooks. Call
        ``optimizer.step()`` once per noised step (after accumulating ``accumulation_steps``
        loader batches). Returns ``self``.
        """
        def pre(opt: Any, args: Any, kwargs: Any) -> None:
            sigma = self._resolve(None, opt)
            self.check_step(sigma)
            self._pending = self._record(sigma)

        def post(opt: Any, args: Any, kwargs: Any) -> None:
            if self._pending is not None:
                self._commit(self._pending)
                self._pending = None

        self._optimizer = optimizer
        self._handles += [optimizer.register_step_pre_hook(pre), optimizer.register_step_post_hook(post)]
        return self

    def detach(self) -> None:
        """Remove the optimizer hooks."""
        for handle in self._handles:
            handle.remove()
        self._handles = []

    # -- queries ----------------------------------------------------------------------------

    def __len__(self) -> int:
        """Number of noised optimizer steps accounted (not runs, not epochs)."""
        return sum(int(s[3]) for s in self._steps)

    @property
    def history(self) -> tuple[tuple[float, float, int], ...]:
        """Run-length ``(noise_multiplier, sampling_probability, steps)``, opacus' layout."""
        q = self.sampling.sampling_probability
        out: list[tuple[float, float, int]] = []
        for sigma, group in itertools.groupby(self._steps, key=lambda s: s[0]):
            out.append((float(sigma), q, sum(int(s[3]) for s in group)))
        return tuple(out)

    def mechanisms(self) -> tuple[tuple[Mechanism, int], ...]:
        """The dpacct mechanisms (with counts) the steps so far are accounted as.

        Poisson: one mechanism per step. Shuffled or deterministic batches: one zero-out
        Gaussian per epoch whose noise multiplier is ``min sigma_s / sqrt(m_s)`` over the
        steps ``s`` touching the epoch, ``m_s`` being the number of epochs a step's
        accumulated batches can come from. The bound: a run's Gaussian mechanisms compose to
        one Gaussian with ``mu^2 = sum_s c_s^2 / sigma_s^2`` (Dong, Roth, Su 2019,
        arXiv:1905.02383, Cor. 3.3) where ``c_s <= m_s`` is the number of copies of a record in
        step ``s``, one per epoch; ``c_s^2 <= c_s m_s`` gives at most ``m_s / sigma_s^2`` per
        epoch, the per-epoch Gaussians above.
        """
        return self._runs()  # type: ignore[return-value]

    def _accountant(self) -> Accountant:
        if self.sampling.sampler == "balls_in_bins" and any(
                isinstance(m, BallsInBinsGaussianMechanism) for m, _ in self._runs()):
            # The smallest of the pair's PLD, its Renyi DP and the deterministic curve, whatever
            # the accountant named (dpacct.samplers.allocation), as dpacct.epsilon does.
            from dpacct.samplers.allocation import BallsInBinsAccountant

            return BallsInBinsAccountant()
        if self.accountant == "fdp":
            try:
                from dpacct.fdp import FDPAccountant  # type: ignore[import-not-found,unused-ignore]
            except ImportError as error:
                msg = "jl_dim needs the f-DP accountant of dpacct.fdp (DP-SGD-JL accounting), which is not available"
                raise ImportError(msg) from error

            acct: Accountant = FDPAccountant(**self.accountant_options)
            return acct
        return make_accountant(self.accountant, **self.accountant_options)

    def _epsilon(self, runs: tuple[Run, ...]) -> float:
        if runs not in self._epsilon_cache:
            acct = self._accountant()
            for mechanism, count in runs:
                acct.compose(mechanism, count=count)  # type: ignore[arg-type]
            self._epsilon_cache[runs] = float(acct.get_epsilon(self.delta)) if runs else 0.0
        return self._epsilon_cache[runs]

    def get_epsilon(self, delta: float | None = None) -> float:
        """An upper bound on epsilon of the steps so far at ``delta`` (default: the accountant's)."""
        if delta is None or _check.delta(delta) == self.delta:
            return self._epsilon(self._runs())
        acct = self._accountant()
        for mechanism, count in self._runs():
            acct.compose(mechanism, count=count)  # type: ignore[arg-type]
        return float(acct.get_epsilon(delta))

    def epsilon_interval(self, delta: float | None = None) -> Interval:
        """The honest interval ``lower <= epsilon <= upper`` of the steps so far.

        ``upper`` is :meth:`get_epsilon`. ``lower`` is certified too: for shuffled batches the
        shuffle lower bound of the first epoch (Chua et al., ICML 2024, arXiv:2403.17673,
        Section 3; :func:`dpacct.ablq.epsilon_shuffle_lower`), which later epochs can only
        raise, at the largest noise multiplier of that epoch (more noise leaks less); for
        deterministic batches the exact Gaussian epsilon of the composed epochs; for Poisson
        batches with ``accountant="pld"`` the PLD lower bound. Where none applies
        (accumulation across epochs, unequal batches, RDP, JL) it is 0 and ``method`` says so.
        """
        from dpacct import ablq, gaussian
        from dpacct.pld import PLDAccountant

        d = self.delta if delta is None else _check.delta(delta)
        upper = self.get_epsilon(d)
        kind, lower, method = self.sampling.sampler, 0.0, "no certified lower bound for this configuration"
        spans = {int(s[2]) for s in self._steps}
        if not self._steps:
            method = "no steps"
        elif kind in _INDEPENDENT and self.accountant == "pld":
            acct = PLDAccountant(**self.accountant_options)
            for mechanism, count in self._runs():
                acct.compose(mechanism, count=count)  # type: ignore[arg-type]
            lower, method = float(acct.epsilon_bounds(d).lower), "PLD lower bound (optimistic discretisation)"
        elif kind == "deterministic" and spans == {1}:
            sigmas = [m.noise_multiplier for m, c in self._runs() for _ in range(c)]  # type: ignore[attr-defined]
            composed = gaussian.composed_noise_multiplier(sigmas)
            lower = float(gaussian.epsilon_for_delta(noise_multiplier=composed, delta=d))
            method = "exact Gaussian epsilon of the composed epochs"
        elif kind == "shuffle" and spans == {1} and self.sampling.dataset_size % self.sampling.batch_size == 0:
            first = min(int(s[1]) for s in self._steps)
            in_first = [s for s in self._steps if int(s[1]) == first]
            batches = self.sampling.batches_per_epoch
            if sum(int(s[3]) for s in in_first) == batches:
                sigma = max(float(s[0]) for s in in_first)
                lower = float(ablq.epsilon_shuffle_lower(noise_multiplier=sigma, steps=batches, delta=d))
                method = f"shuffle lower bound of the first epoch (T={batches} batches, noise multiplier {sigma:g})"
            else:
                method = "shuffle lower bound needs one complete first epoch"
        return Interval(lower=lower, upper=upper, quantity="epsilon", method=method,
                        details={"sampler": kind, "accountant": self.accountant, "delta": d})

    def _fits(self, runs: tuple[Run, ...]) -> bool:
        """Whether ``runs`` meet the budget, with a cached allowance for repeats of the last mechanism.

        Appending one more copy of the last mechanism is the common case (every Poisson
        step, every new epoch at the same noise). The first time, the largest count of it
        that still fits is searched (doubling, then bisection on the accountant's upper
        bound); later steps compare with that count. A count found to fit certifies every
        smaller one: the true epsilon of a prefix of a run is at most that of the run.
        """
        assert self.max_epsilon is not None
        target = self.max_epsilon
        if not runs:
            return True
        if runs == self._runs():  # the step changes no mechanism (e.g. inside an epoch of fixed-size batches)
            return self._epsilon(runs) <= target
        base, (mechanism, count) = runs[:-1], runs[-1]
        key = (base, mechanism)
        allowed = self._allowance.get(key)
        if allowed is not None and count <= allowed:
            return True

        def fits(c: int) -> bool:
            return self._epsilon((*base, (mechanism, c))) <= target

        if not fits(count):
            return False
        # Look ahead at most ``count + _LOOKAHEAD`` copies: one search of about
        # 2 log2(count) evaluations then serves about ``count`` steps.
        limit = 2 * count + _LOOKAHEAD
        low, high = count, min(2 * count, limit)
        while high < limit and fits(high):
            low, high = high, min(2 * high, limit)
        if high == limit and fits(high):
            low = high
        else:
            while high - low > 1:
                mid = (low + high) // 2
                if fits(mid):
                    low = mid
                else:
                    high = mid
        self._allowance[key] = low
        return True

    # -- checkpoints ----------------------------------------------------------------------------

    def state_dict(self) -> dict[str, Any]:
        """The full accounting state (plain data: ``torch.save`` it with the model)."""
        return {
            "format": _FORMAT,
            "sampling": self.sampling.as_dict(),
            "accountant": self.accountant,
            "accountant_options": dict(self.accountant_options),
            "accumulation_steps": self.accumulation_steps,
            "jl_dim": self.jl_dim,
            "delta": self.delta,
            "steps": [list(s) for s in self._steps],
            "last_epoch": self._last_epoch,
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore :meth:`state_dict` output; the next epoch the sampler starts is a new epoch.

        Raises
        ------
        ValueError
            If the state is not a dpacct torch accountant state, or was recorded for another
            sampling scheme, accountant or accumulation.
        """
        if not isinstance(state, dict) or state.get("format") != _FORMAT:
            msg = f"state must be a PrivacyAccountant.state_dict() (format {_FORMAT!r})"
            raise ValueError(msg)
        saved = SamplingInfo.from_dict(state["sampling"])
        for name in ("sampler", "sampling_probability", "dataset_size"):
            if getattr(saved, name) != getattr(self.sampling, name):
                msg = (f"state was recorded with {name} = {getattr(saved, name)!r}, this accountant has "
                       f"{getattr(self.sampling, name)!r}")
                raise ValueError(msg)
        for name in ("accountant", "accumulation_steps", "jl_dim"):
            if state[name] != getattr(self, name):
                msg = f"state was recorded with {name} = {state[name]!r}, this accountant has {getattr(self, name)!r}"
                raise ValueError(msg)
        self._steps = [[float(s[0]), int(s[1]), int(s[2]), int(s[3])] for s in state["steps"]]
        self._last_epoch = state["last_epoch"]
        clock = self._clock.epoch if self._clock is not None else 0
        self._epoch_offset = (self._last_epoch or 0) - clock if self._last_epoch is not None else 0
        self._epsilon_cache.clear()
        self._allowance.clear()


def _clock_of(sampler: Any) -> Any:
    """The object counting epochs: a dpacct batch sampler, or the one inside a DataLoader."""
    if hasattr(sampler, "epoch") and hasattr(sampler, "sampling_info"):
        return sampler
    inner = getattr(sampler, "batch_sampler", None)
    if inner is not None and hasattr(inner, "epoch") and hasattr(inner, "sampling_info"):
        return inner
    return None

r"""Noise schedules: the noise multiplier of each epoch (Yu et al. 2019, arXiv:1904.02200, Section IV-A)."""

from __future__ import annotations

import abc
import itertools
import math
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

from dpacct import _check

__all__ = [
    "SCHEDULES",
    "Exponential",
    "Polynomial",
    "Schedule",
    "Step",
    "TimeBased",
    "Uniform",
    "ValidationBased",
    "make_schedule",
]

#: Names accepted by :func:`make_schedule` and :func:`solve_decay` (``"uniform"`` has no decay).
SCHEDULES = ("uniform", "time", "exponential", "step", "polynomial")

_DEFAULT_MAX_EPOCHS = 100_000


def _epochs_array(epochs: ArrayLike) -> NDArray[np.float64]:
    array = np.asarray(epochs)
    if array.dtype == np.bool_ or not (np.issubdtype(array.dtype, np.integer) or np.issubdtype(array.dtype, np.floating)):
        msg = f"epoch must be an integer or an array of them, got {type(epochs).__name__}"
        raise TypeError(msg)
    t = np.asarray(array, dtype=np.float64)
    ok = (t >= 0.0) & np.isfinite(t) & (t == np.floor(t))
    if not ok.all():
        bad = float(t.ravel()[int(np.flatnonzero(~ok.ravel())[0])])
        msg = f"epoch must be an integer >= 0, got {bad!r}"
        raise ValueError(msg)
    return t


def _elementwise(function: Callable[[float], float], t: NDArray[np.float64]) -> NDArray[np.float64]:
    """Apply a scalar libm formula to each epoch.

    NumPy's vectorised ``exp``/``power`` may take SIMD paths whose last bit depends on
    the array length and alignment; the scalar ``math`` functions make ``sigma_t`` the
    same float however the epochs are batched (the budget decision is exact, so
    reproducible inputs matter).
    """
    return np.fromiter((function(x) for x in t.ravel().tolist()), dtype=np.float64, count=t.size).reshape(t.shape)


class Schedule(abc.ABC):
    """Base class of the closed-form schedules: sigma per epoch, scalar or vectorised, and iteration."""

    __slots__ = ()

    @abc.abstractmethod
    def _sigmas(self, t: NDArray[np.float64]) -> NDArray[np.float64]:
        """Noise multipliers of the (validated, integral, >= 0) epochs ``t``."""

    def noise_multipliers(self, epochs: ArrayLike) -> NDArray[np.float64]:
        """Noise multipliers of the given epochs (integers ``>= 0``), as an array."""
        t = _epochs_array(epochs)
        return np.asarray(self._sigmas(t), dtype=np.float64)  # e^(-kt), k^n may underflow to 0: rho = inf

    def noise_multiplier(self, epoch: int) -> float:
        """Noise multiplier of one epoch (``epoch`` counts from 0)."""
        return float(self.noise_multipliers(_check.count("epoch", epoch)))

    def __iter__(self) -> Iterator[float]:
        """Noise multipliers of epochs 0, 1, 2, ... (an endless iterator)."""
        for start in itertools.count(0, 1024):
            yield from self.noise_multipliers(np.arange(start, start + 1024)).tolist()


def _nonnegative(name: str, value: Any) -> float:
    x = _check.real(name, value)
    if not (x >= 0.0 and math.isfinite(x)):
        msg = f"{name} must be finite and >= 0, got {x!r}"
        raise ValueError(msg)
    return x


def _period(value: Any) -> int:
    n = _check.count("period", value, minimum=1)
    return n


@dataclass(frozen=True, slots=True, kw_only=True)
class Uniform(Schedule):
    r"""Constant noise, :math:`\sigma_t = \sigma_c` = ``initial_noise_multiplier`` (finite, ``> 0``).

    The field has the same name as in the decaying schedules, so that
    :func:`make_schedule` and the command line treat all of them alike.

    Examples
    --------
    >>> Uniform(initial_noise_multiplier=8.0).noise_multiplier(99)
    8.0
    """

    initial_noise_multiplier: float

    def __post_init__(self) -> None:
        object.__setattr__(self, "initial_noise_multiplier", _check.positive("initial_noise_multiplier",
                                                                           self.initial_noise_multiplier))

    def _sigmas(self, t: NDArray[np.float64]) -> NDArray[np.float64]:
        return np.full_like(t, self.initial_noise_multiplier)


@dataclass(frozen=True, slots=True, kw_only=True)
class TimeBased(Schedule):
    r"""Time-based decay, :math:`\sigma_t = \sigma_0/(1 + k t)`.

    Parameters
    ----------
    initial_noise_multiplier : float
        :math:`\sigma_0`, finite and ``> 0``.
    decay : float
        :math:`k`, finite and ``>= 0`` (0 is the uniform schedule).

    Examples
    --------
    >>> TimeBased(initial_noise_multiplier=10.0, decay=0.05).noise_multiplier(20)
    5.0
    """

    initial_noise_multiplier: float
    decay: float

    def __post_init__(self) -> None:
        object.__setattr__(self, "initial_noise_multiplier", _check.positive("initial_noise_multiplier",
                                                                           self.initial_noise_multiplier))
        object.__setattr__(self, "decay", _nonnegative("decay", self.decay))

    def _sigmas(self, t: NDArray[np.float64]) -> NDArray[np.float64]:
        result: NDArray[np.float64] = self.initial_noise_multiplier / (1.0 + self.decay * t)
        return result


@dataclass(frozen=True, slots=True, kw_only=True)
class Exponential(Schedule):
    r"""Exponential decay, :math:`\sigma_t = \sigma_0 e^{-k t}` (``decay`` :math:`k \ge 0`).

    Examples
    --------
    >>> round(Exponential(initial_noise_multiplier=10.0, decay=0.01).noise_multiplier(100), 6)
    3.678794
    """

    initial_noise_multiplier: float
    decay: float

    def __post_init__(self) -> None:
        object.__setattr__(self, "initial_noise_multiplier", _check.positive("initial_noise_multiplier",
                                                                           self.initial_noise_multiplier))
        object.__setattr__(self, "decay", _nonnegative("decay", self.decay))

    def _sigmas(self, t: NDArray[np.float64]) -> NDArray[np.float64]:
        s0, k = self.initial_noise_multiplier, self.decay
        return _elementwise(lambda x: s0 * math.exp(-k * x), t)


@dataclass(frozen=True, slots=True, kw_only=True)
class Step(Schedule):
    r"""Step decay, :math:`\sigma_t = \sigma_0 k^{\lfloor t/P \rfloor}`.

    Parameters
    ----------
    initial_noise_multiplier : float
        :math:`\sigma_0`, finite and ``> 0``.
    decay : float
        :math:`k \in (0, 1]`: the factor applied every ``period`` epochs.
    period : int
        :math:`P \ge 1` epochs between decays.

    Examples
    --------
    >>> round(Step(initial_noise_multiplier=10.0, decay=0.6, period=10).noise_multiplier(25), 12)
    3.6
    """

    initial_noise_multiplier: float
    decay: float
    period: int

    def __post_init__(self) -> None:
        object.__setattr__(self, "initial_noise_multiplier", _check.positive("initial_noise_multiplier",
                                                                           self.initial_noise_multiplier))
        k = _check.real("decay", self.decay)
        if not 0.0 < k <= 1.0:
            msg = f"decay must be in (0, 1] for the step schedule, got {k!r}"
            raise ValueError(msg)
        object.__setattr__(self, "decay", k)
        object.__setattr__(self, "period", _period(self.period))

    def _sigmas(self, t: NDArray[np.float64]) -> NDArray[np.float64]:
        s0, k, period = self.initial_noise_multiplier, self.decay, self.period
        return _elementwise(lambda x: s0 * math.pow(k, x // period), t)


@dataclass(frozen=True, slots=True, kw_only=True)
class Polynomial(Schedule):
    r"""Polynomial decay from :math:`\sigma_0` to :math:`\sigma_{end}` over ``period`` epochs.

    :math:`\sigma_t = (\sigma_0 - \sigma_{end})(1 - t/P)^k + \sigma_{end}` for
    :math:`t < P`, then :math:`\sigma_{end}`.

    Parameters
    ----------
    initial_noise_multiplier : float
        :math:`\sigma_0`, finite and ``> 0``.
    final_noise_multiplier : float
        :math:`\sigma_{end}`, finite, ``> 0`` and ``<= initial_noise_multiplier``.
    decay : float
        The power :math:`k`, finite and ``>= 0``.
    period : int
        :math:`P \ge 1`.

    Examples
    --------
    >>> Polynomial(initial_noise_multiplier=10.0, final_noise_multiplier=2.0, decay=3.0, period=100).noise_multiplier(50)
    3.0
    """

    initial_noise_multiplier: float
    final_noise_multiplier: float
    decay: float
    period: int

    def __post_init__(self) -> None:
        s0 = _check.positive("initial_noise_multiplier", self.initial_noise_multiplier)
        s_end = _check.positive("final_noise_multiplier", self.final_noise_multiplier)
        if s_end > s0:
            msg = f"final_noise_multiplier must be <= initial_noise_multiplier = {s0!r}, got {s_end!r}"
            raise ValueError(msg)
        object.__setattr__(self, "initial_noise_multiplier", s0)
        object.__setattr__(self, "final_noise_multiplier", s_end)
        object.__setattr__(self, "decay", _nonnegative("decay", self.decay))
        object.__setattr__(self, "period", _period(self.period))

    def _sigmas(self, t: NDArray[np.float64]) -> NDArray[np.float64]:
        span = self.initial_noise_multiplier - self.final_noise_multiplier
        s_end, k, period = self.final_noise_multiplier, self.decay, self.period
        return _elementwise(lambda x: span * math.pow(1.0 - x / period, k) + s_end if x < period else s_end, t)


@dataclass(frozen=True, slots=True, kw_only=True)
class ValidationBased:
    r"""Validation-based decay: :math:`\sigma \leftarrow k\sigma` when validation accuracy stalls.

    A pure function of the accuracies the user measured (no hidden state): call
    :meth:`noise_multipliers` with all accuracies so far to get the noise of every
    epoch including the next one. The validation set is public, so reading it costs
    no privacy (Yu et al. 2019, Section IV-A).

    Parameters
    ----------
    initial_noise_multiplier : float
        :math:`\sigma_0`, finite and ``> 0``.
    decay : float
        :math:`k \in (0, 1)`.
    period : int
        Compare every ``period`` validation checks (``>= 1``).
    window : int
        Average the last ``window`` checks (``>= 1``, the paper's m).
    threshold : float
        Decay when the averaged accuracy improved by at most this much since the
        previous comparison (finite, ``>= 0``).

    Notes
    -----
    One validation check per epoch, after the epoch. After check number ``c``
    (counting from 1), if ``c`` is a multiple of ``period`` and ``c >= window``, the
    mean of checks ``c - window + 1 .. c`` is compared with the mean recorded at the
    previous comparison (the first comparison only records). The decayed noise
    applies from epoch ``c`` on (epochs count from 0).

    Examples
    --------
    >>> vb = ValidationBased(initial_noise_multiplier=8.0, decay=0.5, period=1, window=1, threshold=0.0)
    >>> vb.noise_multipliers([0.5, 0.6, 0.6, 0.7]).tolist()
    [8.0, 8.0, 8.0, 4.0, 4.0]
    """

    initial_noise_multiplier: float
    decay: float
    period: int = 1
    window: int = 1
    threshold: float = 0.0

    def __post_init__(self) -> None:
        object.__setattr__(self, "initial_noise_multiplier", _check.positive("initial_noise_multiplier",
                                                                           self.initial_noise_multiplier))
        k = _check.real("decay", self.decay)
        if not 0.0 < k < 1.0:
            msg = f"decay must be in (0, 1) for the validation-based schedule, got {k!r}"
            raise ValueError(msg)
        object.__setattr__(self, "decay", k)
        object.__setattr__(self, "period", _period(self.period))
        window = _check.count("window", self.window, minimum=1)
        object.__setattr__(self, "window", window)
        object.__setattr__(self, "threshold", _nonnegative("threshold", self.threshold))

    def noise_multipliers(self, accuracies: ArrayLike) -> NDArray[np.float64]:
        """Noise of epochs ``0 .. len(accuracies)``: one more than the checks given (the next epoch's)."""
        acc = np.asarray(accuracies, dtype=np.float64).ravel() if np.size(accuracies) else np.zeros(0)
        if not np.isfinite(acc).all():
            bad = float(acc[int(np.flatnonzero(~np.isfinite(acc))[0])])
            msg = f"accuracies must all be finite, got {bad!r}"
            raise ValueError(msg)
        sigma = self.initial_noise_multiplier
        out = [sigma]
        previous: float | None = None
        for c in range(1, acc.size + 1):
            if c % self.period == 0 and c >= self.window:
                mean = float(np.mean(acc[c - self.window : c]))
                if previous is not None and mean - previous <= self.threshold:
                    sigma *= self.decay
                previous = mean
            out.append(sigma)
        return np.array(out, dtype=np.float64)


def make_schedule(
    kind: str,
    *,
    initial_noise_multiplier: float,
    decay: float | None = None,
    period: int | None = None,
    final_noise_multiplier: float | None = None,
) -> Schedule:
    """Build a closed-form schedule by name (one of :data:`SCHEDULES`), checking which options apply.

    Examples
    --------
    >>> make_schedule("time", initial_noise_multiplier=10.0, decay=0.05)
    TimeBased(initial_noise_multiplier=10.0, decay=0.05)
    """
    name = _check.one_of("schedule", kind, SCHEDULES)
    needs = {"uniform": (), "time": ("decay",), "exponential": ("decay",), "step": ("decay", "period"),
             "polynomial": ("decay", "period", "final_noise_multiplier")}[name]
    given = {"decay": decay, "period": period, "final_noise_multiplier": final_noise_multiplier}
    for option, value in given.items():
        if option in needs and value is None:
            msg = f"{option} is required for the {name} schedule"
            raise ValueError(msg)
        if option not in needs and value is not None:
            msg = f"{option} does not apply to the {name} schedule, got {value!r}"
            raise ValueError(msg)
    if name == "uniform":
        return Uniform(initial_noise_multiplier=initial_noise_multiplier)
    if name == "time":
        return TimeBased(initial_noise_multiplier=initial_noise_multiplier, decay=decay)  # type: ignore[arg-type]
    if name == "exponential":
        return Exponential(initial_noise_multiplier=initial_noise_multiplier, decay=decay)  # type: ignore[arg-type]
    if name == "step":
        return Step(initial_noise_multiplier=initial_noise_multiplier, decay=decay, period=period)  # type: ignore[arg-type]
    return Polynomial(initial_noise_multiplier=initial_noise_multiplier, decay=decay,  # type: ignore[arg-type]
                      period=period, final_noise_multiplier=final_noise_multiplier)  # type: ignore[arg-type]

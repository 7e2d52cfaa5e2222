"""Every sampler side by side in Chua et al.'s parametrisation (``steps`` = batches per epoch), sweeps, figures.

For the user's own run (``steps`` = total steps, or epochs/batch size/dataset size) use
:func:`dpacct.samplers.compare_run`.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray

from dpacct import _check
from dpacct.samplers.bounds import (
    _ADJACENCY,
    Bound,
    PoissonBounds,
    Quantity,
    ShuffleInterval,
    _setting,
    delta_deterministic,
    delta_poisson_bounds,
    epsilon_deterministic,
    epsilon_poisson_bounds,
)
from dpacct.samplers.shuffle import _one_target, shuffle_interval

__all__ = ["SamplerComparison", "SamplerSweep", "compare_samplers", "plot_samplers", "sweep_samplers"]


# -- all samplers side by side ----------------------------------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class SamplerComparison:
    """Every sampler's guarantee for one training configuration, side by side.

    Attributes
    ----------
    noise_multiplier, steps, epochs : float, int, int
        The configuration (``steps`` = batches per epoch ``T``).
    quantity : {"epsilon", "delta"}
        What the bounds are: epsilons at ``delta`` or deltas at ``epsilon``.
    at : float
        The fixed delta (for epsilons) or epsilon (for deltas).
    deterministic : Bound
        Exact.
    poisson : PoissonBounds
        PLD lower/upper and RDP upper.
    shuffle : ShuffleInterval
        Lower bound (events ``E_C``) and certified upper bound (deterministic).
    """

    noise_multiplier: float
    steps: int
    epochs: int
    quantity: Quantity
    at: float
    deterministic: Bound
    poisson: PoissonBounds
    shuffle: ShuffleInterval

    def bounds(self) -> tuple[Bound, ...]:
        """All numbers, in table order."""
        return (self.deterministic, self.poisson.lower, self.poisson.upper, self.poisson.rdp_upper,
                self.shuffle.lower, self.shuffle.upper)

    def rows(self) -> list[dict[str, Any]]:
        """One plain dict per number: sampler, kind, method, value."""
        return [
            {"sampler": b.sampler, "kind": b.kind, "method": b.method.split(",")[0], self.quantity: float(b)}
            for b in self.bounds()
        ]

    def as_dict(self) -> dict[str, Any]:
        """A JSON-ready dict: the configuration and :meth:`rows`."""
        fixed = "delta" if self.quantity == "epsilon" else "epsilon"
        return {
            "noise_multiplier": self.noise_multiplier,
            "steps": self.steps,
            "epochs": self.epochs,
            "adjacency": _ADJACENCY,
            fixed: self.at,
            "quantity": self.quantity,
            "rows": self.rows(),
        }


def compare_samplers(
    *,
    noise_multiplier: float,
    steps: int,
    epochs: int = 1,
    delta: float | None = None,
    epsilon: float | None = None,
    permutation: str = "fresh",
) -> SamplerComparison:
    """Every sampler's guarantee for one configuration: epsilons at ``delta`` or deltas at ``epsilon``.

    Parameters
    ----------
    noise_multiplier : float
        Noise standard deviation over L2 sensitivity, finite and ``> 0``.
    steps : int
        Batches per epoch ``T >= 1`` (Poisson rate ``1/T``).
    epochs : int
        Epochs ``E >= 1``.
    delta, epsilon : float, optional
        Exactly one: the fixed delta (compare epsilons) or epsilon (compare deltas).
    permutation : {"fresh", "same"}
        For several epochs of shuffled batches: a new permutation each epoch (default)
        or one reused; see :func:`delta_shuffle_lower`.

    Returns
    -------
    SamplerComparison
        Deterministic (exact), Poisson (PLD lower/upper, RDP upper), shuffle (lower
        bound, certified upper bound), zero-out adjacency.

    Examples
    --------
    >>> c = compare_samplers(noise_multiplier=2.0, steps=100, delta=1e-5)
    >>> [(r["sampler"], r["kind"]) for r in c.rows()][:2]
    [('deterministic', 'exact'), ('poisson', 'lower bound')]
    """
    sigma, t, e = _setting(noise_multiplier, steps, epochs)
    quantity = _one_target(delta, epsilon)
    if quantity == "epsilon":
        at = _check.delta(delta)
        det = epsilon_deterministic(noise_multiplier=sigma, delta=at, epochs=e)
        poisson = epsilon_poisson_bounds(noise_multiplier=sigma, steps=t, delta=at, epochs=e)
        shuffle = shuffle_interval(noise_multiplier=sigma, steps=t, delta=at, epochs=e, permutation=permutation)
    else:
        at = _check.epsilon(epsilon)
        det = delta_deterministic(noise_multiplier=sigma, epsilon=at, epochs=e)
        poisson = delta_poisson_bounds(noise_multiplier=sigma, steps=t, epsilon=at, epochs=e)
        shuffle = shuffle_interval(noise_multiplier=sigma, steps=t, epsilon=at, epochs=e, permutation=permutation)
    return SamplerComparison(noise_multiplier=sigma, steps=t, epochs=e, quantity=quantity, at=at,
                             deterministic=det, poisson=poisson, shuffle=shuffle)


# -- sweeps and figures -------------------------------------------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class SamplerSweep:
    """:func:`compare_samplers` over a grid of noise multipliers or epsilons, as arrays.

    ``x`` is the swept variable (``x_name``: ``"noise_multiplier"`` or ``"epsilon"``);
    ``quantity`` is what the columns hold (epsilons or deltas). Columns: ``deterministic``
    (exact), ``poisson_lower``/``poisson_upper`` (PLD), ``poisson_rdp`` (RDP upper),
    ``shuffle_lower`` (lower bound), ``shuffle_upper`` (certified upper bound).
    ``seconds`` is the wall time of the sweep. ``extra`` holds further samplers' series
    as ``(label, kind, values)`` (e.g. fixed-size batches in ``dpacct compare --plot``).
    """

    x_name: str
    x: NDArray[np.float64]
    quantity: Quantity
    at: float
    steps: int
    epochs: int
    deterministic: NDArray[np.float64]
    poisson_lower: NDArray[np.float64]
    poisson_upper: NDArray[np.float64]
    poisson_rdp: NDArray[np.float64]
    shuffle_lower: NDArray[np.float64]
    shuffle_upper: NDArray[np.float64]
    seconds: float
    extra: tuple[tuple[str, str, NDArray[np.float64]], ...] = ()


def sweep_samplers(
    *,
    noise_multipliers: Sequence[float],
    steps: int,
    epochs: int = 1,
    delta: float | None = None,
    epsilons: Sequence[float] | None = None,
    progress: Callable[[], None] | None = None,
) -> SamplerSweep:
    """Every sampler's numbers over a sweep, for figures like Figures 1 and 3 of Chua et al. 2024.

    Parameters
    ----------
    noise_multipliers : sequence of float
        With ``delta``: the sigmas to sweep (epsilon vs sigma, their Figure 1). With
        ``epsilons``: exactly one sigma.
    steps, epochs : int
        Batches per epoch ``T`` and epochs ``E``.
    delta : float, optional
        Fixed delta: the sweep gives epsilons.
    epsilons : sequence of float, optional
        Epsilons to sweep: the sweep gives deltas (delta vs epsilon, their Figure 3).
    progress : callable, optional
        Called with no argument after each point (a progress bar hook).

    Returns
    -------
    SamplerSweep
        One array per bound, same kinds as :func:`compare_samplers`.
    """
    start = time.perf_counter()
    _one_target(delta, epsilons)
    sigmas = [_check.noise_multiplier(s) for s in noise_multipliers]
    if not sigmas:
        msg = "noise_multipliers must be non-empty, got 0 values"
        raise ValueError(msg)
    if delta is not None:
        xs = sigmas
        compared = []
        for sigma in sigmas:
            compared.append(compare_samplers(noise_multiplier=sigma, steps=steps, epochs=epochs, delta=delta))
            if progress is not None:
                progress()
        x_name, at = "noise_multiplier", _check.delta(delta)
        quantity: Quantity = "epsilon"
    else:
        assert epsilons is not None  # narrowed by _one_target
        if len(sigmas) != 1:
            msg = f"noise_multipliers must hold exactly one value when sweeping epsilons, got {len(sigmas)}"
            raise ValueError(msg)
        xs = [_check.epsilon(e) for e in epsilons]
        compared = []
        for eps in xs:
            compared.append(compare_samplers(noise_multiplier=sigmas[0], steps=steps, epochs=epochs, epsilon=eps))
            if progress is not None:
                progress()
        x_name, at, quantity = "epsilon", sigmas[0], "delta"

    def column(pick: Callable[[SamplerComparison], Bound]) -> NDArray[np.float64]:
        return np.array([float(pick(c)) for c in compared], dtype=np.float64)

    return SamplerSweep(
        x_name=x_name, x=np.array(xs, dtype=np.float64), quantity=quantity, at=at,
        steps=compared[0].steps, epochs=compared[0].epochs,
        deterministic=column(lambda c: c.deterministic),
        poisson_lower=column(lambda c: c.poisson.lower),
        poisson_upper=column(lambda c: c.poisson.upper),
        poisson_rdp=column(lambda c: c.poisson.rdp_upper),
        shuffle_lower=column(lambda c: c.shuffle.lower),
        shuffle_upper=column(lambda c: c.shuffle.upper),
        seconds=time.perf_counter() - start,
    )


def plot_samplers(sweep: SamplerSweep, path: str) -> None:
    """Draw a :class:`SamplerSweep` to an image file (PNG by extension), like Figures 1/3 of Chua et al.

    Needs matplotlib (``pip install 'dpacct[plot]'``); raises ``ImportError`` with that
    hint when it is missing.
    """
    try:
        import matplotlib

        matplotlib.use("Agg")  # files only: no display needed
        import matplotlib.pyplot as plt
    except ImportError as error:
        msg = "plotting needs matplotlib: pip install 'dpacct[plot]'"
        raise ImportError(msg) from error
    fig, ax = plt.subplots(figsize=(6.4, 4.4))
    x = sweep.x
    ax.fill_between(x, sweep.shuffle_lower, sweep.shuffle_upper, color="tab:red", alpha=0.15,
                    label="shuffle: true value lies here")
    ax.plot(x, sweep.shuffle_lower, color="tab:red", marker="o", ms=3, label="shuffle lower bound")
    ax.plot(x, sweep.deterministic, color="black", ls="--", label="deterministic (exact) = shuffle upper bound")
    ax.plot(x, sweep.poisson_upper, color="tab:blue", marker="s", ms=3, label="Poisson, PLD upper bound")
    ax.plot(x, sweep.poisson_lower, color="tab:blue", ls=":", label="Poisson, PLD lower bound")
    ax.plot(x, sweep.poisson_rdp, color="tab:cyan", ls="-.", label="Poisson, RDP upper bound")
    colours = ("tab:green", "tab:purple", "tab:orange", "tab:brown", "tab:olive", "tab:pink")
    for i, (label, kind, values) in enumerate(sweep.extra):
        ax.plot(x, values, color=colours[(i // 2) % len(colours)], ls="-" if kind == "upper bound" else ":",
                marker="^" if kind == "upper bound" else None, ms=3, label=label)
    epochs = f", E = {sweep.epochs}" if sweep.epochs > 1 else ""
    if sweep.x_name == "noise_multiplier":
        ax.set_xlabel("noise multiplier sigma")
        ax.set_ylabel("epsilon")
        ax.set_yscale("log")
        ax.set_title(f"epsilon at delta = {sweep.at:g}, T = {sweep.steps}{epochs}")
    else:
        ax.set_xlabel("epsilon")
        ax.set_ylabel("delta")
        ax.set_yscale("log")
        ax.set_title(f"delta vs epsilon, sigma = {sweep.at:g}, T = {sweep.steps}{epochs}")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)

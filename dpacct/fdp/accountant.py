"""The f-DP accountant: trade-off curves, epsilon and delta of any PLD-supported history, DP-SGD-JL included.

Composition runs on dpacct's PLD engine (:class:`dpacct.pld.PLDAccountant`,
certified connect-the-dots upper bounds and data-processing lower bounds); the
trade-off curve is read off the composed privacy curve by duality (Dong, Roth,
Su, arXiv:1905.02383, Proposition 2.12), see :mod:`dpacct.fdp.tradeoff`.
DP-SGD-JL steps (:class:`~dpacct.fdp.jl.DPSGDJLMechanism`) enter the same
engine as discretised mixtures (:mod:`dpacct.fdp.jl`).
"""

from __future__ import annotations

import math
from typing import Any, NamedTuple

import numpy as np
from numpy.typing import ArrayLike, NDArray

from dpacct import _check, _core
from dpacct.accountant import Accountant
from dpacct.fdp import jl
from dpacct.fdp.jl import DPSGDJLMechanism
from dpacct.fdp.tradeoff import TradeoffCurve
from dpacct.mechanisms import Mechanism, PoissonSampledGaussianMechanism
from dpacct.pld import PLDAccountant
from dpacct.pld.accountant import _NO_QUERY, _WINDOW_TAIL
from dpacct.pld.accountant import _spec as _pld_spec
from dpacct.results import Interval, Value

__all__ = ["FDPAccountant"]

_DEFAULT_BUDGET = 1e-10  # revealed JL tail mass over the run when no delta is known (delta queries)
_TRADEOFF_POINTS = 1024

_HEAVY_TAIL_NOTE = (
    "no finite upper bound could be certified: with jl_dim = {r} the clipped norm C sqrt(r/W) has tail "
    "P(mu_W > m) ~ m^-{r}, so epsilon at this delta is astronomically large (finite, but beyond what the "
    "grid can hold); the lower bound is {lower:.6g}"
)
_HUGE_NOTE = (
    "astronomically large but finite: with jl_dim = {r} the clipped norm C sqrt(r/W) has tail P(mu_W > m) ~ m^-{r}, "
    "so a single step whose estimate W is tiny reveals the record; half of delta ({revealed:.3g}) is spent on "
    "revealing the smallest W outright, and the rest of the tail (shifts up to {mu:.3g} noise units, losses up to "
    "~{loss:.3g}) is composed on a correspondingly coarse grid"
)
_FALLBACK = 0.5  # share of delta the revealed JL tail may take where the 1e-3 share needs shifts beyond 40


_REALISED_NOTE = ("the largest over the pairs real datasets realise: the record k times against k - 1 times, "
                  "k = 1 (the paper's pair) .. copies")


class _JLSpec(NamedTuple):
    """A DP-SGD-JL step as the engine sees it (hashable; ``symmetric`` as PLD specs have it)."""

    model: str
    noise_multiplier: float
    jl_dim: int
    sampling_probability: float
    w_cap: float
    quantiles: int
    copies: int = 1  # the "copies" model: the record is present this many times (k)
    symmetric: bool = False


class _Guarded:
    """A composed PLD whose answers are checked: a NaN or crossed pair becomes the trivial bounds.

    With the very wide JL steps (losses up to ~800 per step) and a strong tilt the
    composer can overflow and answer ``(1, nan)``; the trivial bounds ``(0, 1)``
    (``(0, inf)`` for epsilon) are always valid, and the accountant keeps the best
    bounds over its attempts.
    """

    def __init__(self, composed: Any) -> None:
        self._composed = composed

    def delta_bounds(self, epsilon: NDArray[np.float64]) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
        lo, up = self._composed.delta_bounds(epsilon)
        lo, up = np.asarray(lo, dtype=np.float64), np.asarray(up, dtype=np.float64)
        bad = ~(np.isfinite(lo) & np.isfinite(up) & (lo <= up))
        return np.where(bad, 0.0, lo), np.where(bad, 1.0, up)

    def epsilon_bounds(self, delta: float) -> tuple[float, float, bool]:
        lo, up, below = self._composed.epsilon_bounds(delta)
        if math.isnan(lo) or math.isnan(up) or lo > up:
            return 0.0, math.inf, bool(below)
        return float(lo), float(up), bool(below)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._composed, name)


class _Engine(PLDAccountant):
    """The PLD accountant with DP-SGD-JL steps added.

    ``realised = 0`` accounts every step as declared (the upper bounds).
    ``realised = 1`` accounts shared-projection JL steps by the paper's pair (a
    pair that real datasets realise: the record alone): its *lower* bounds are
    lower bounds for the shared model too. ``realised = k >= 2`` accounts them by
    the pair "the record ``k`` times against ``k - 1`` times"
    (:func:`dpacct.fdp.jl.copies_cells`); only its lower bounds are read, and
    every other step of the history is forgotten (post-processing: the same
    datasets realise the rest of the run, whose output is dropped). Reuses the
    PLD accountant's grid choice, tilting and refinement; only how a step is
    discretised differs.
    """

    def __init__(self, *, realised: int, quantiles: int, relative_accuracy: float, max_size: int) -> None:
        super().__init__(relative_accuracy=relative_accuracy, max_size=max_size)
        self._realised = realised
        self._cells: dict[Any, Any] = {}
        self._quantiles = quantiles
        self._budget = _DEFAULT_BUDGET
        self._fallback = 0.0
        self._gaussians: dict[Any, Any] = {}

    _coarsest = math.inf  # heavy JL tails (r = 1, 2) put single losses near 1e12 on the grid

    def set_budget(self, budget: float, fallback: float = 0.0) -> None:
        """Revealed tail mass allowed over the run (changes the JL steps, so the caches go).

        ``budget`` is the mass aimed at; ``fallback`` (default: none) the mass
        accepted where the budget would need shifts beyond ``mu = 40`` and the cap
        there reveals more than it (the heavy tails of ``r = 1, 2``).
        """
        budget = float(min(max(budget, 1e-300), 1e-2))
        fallback = float(min(max(fallback, 0.0), 0.5))
        if (budget, fallback) != (self._budget, self._fallback):
            self._budget, self._fallback = budget, fallback
            self._composed_cache.clear()

    def supports(self, mechanism: Any) -> bool:
        return isinstance(mechanism, DPSGDJLMechanism) or super().supports(mechanism)

    def _groups(self) -> list[tuple[Any, int]]:
        counts: dict[Any, int] = {}
        jl_runs: dict[tuple[Any, float, int, float], int] = {}
        history: list[tuple[Any, int]] = list(self._history)
        for mechanism, count in history:
            if self._realised >= 2 and not (isinstance(mechanism, DPSGDJLMechanism)
                                             and mechanism.projections == "shared"):
                continue  # forgotten: post-processing of the realised run
            if isinstance(mechanism, DPSGDJLMechanism):
                if mechanism.sampling_probability == 0.0:
                    continue
                model: str = mechanism.projections
                if self._realised == 1:
                    model = "per_example"
                elif self._realised >= 2:
                    model = "copies"
                key = (model, mechanism.noise_multiplier, mechanism.jl_dim, mechanism.sampling_probability)
                jl_runs[key] = jl_runs.get(key, 0) + count
                continue
            spec = _pld_spec(mechanism)
            assert spec is not None  # compose() checked supports()
            if spec.sampling_probability > 0.0:
                counts[spec] = counts.get(spec, 0) + count
        groups: list[tuple[Any, int]] = list(counts.items())
        for (model, sigma, r, q), count in jl_runs.items():
            # Revealed mass q P(W < w_cap) per step; the run's total stays within the budget.
            share = len(jl_runs) * q * count
            # The fallback (huge shifts) only for the revealed mixture: the per-example mixture step
            # at shifts near 1e6 is far too slow, so there r = 1, 2 stay uncertified (inf).
            w_cap = jl.cap_for_budget(r=r, noise_multiplier=sigma, budget=self._budget / share,
                                      fallback=self._fallback / share if model == "shared" else 0.0)
            groups.append((_JLSpec(model, sigma, r, q, w_cap, self._quantiles, max(self._realised, 1)), count))
        return groups

    def _build(self, spec: _JLSpec, direction: str, discretization: float) -> Any:
        if spec.model == "copies":
            # Lower half: the copies pair; upper half: the projection-revealed bound (valid for
            # every pair of datasets, it only guides the grid and the tilt; never reported).
            upper = self._build(spec._replace(model="shared", copies=1), direction, discretization)
            if spec not in self._cells:
                if len(self._cells) > 8:
                    self._cells.clear()
                self._cells[spec] = jl.copies_cells(
                    noise_multiplier=spec.noise_multiplier, sampling_probability=spec.sampling_probability,
                    r=spec.jl_dim, copies=spec.copies, w_cap=spec.w_cap, quantiles=spec.quantiles,
                    spread=16 * spec.quantiles)
            lower = jl.copies_step(self._cells[spec], direction=direction, discretization=discretization)
            return _core.fdp.mix_steps([upper], [1.0], 0.0, 0, 0.0, 0.0, [lower], [1.0])
        if spec.model == "shared":
            if len(self._gaussians) > 4096:
                self._gaussians.clear()
            return jl.shared_step(noise_multiplier=spec.noise_multiplier,
                                  sampling_probability=spec.sampling_probability, r=spec.jl_dim, w_cap=spec.w_cap,
                                  quantiles=spec.quantiles, direction=direction, discretization=discretization,
                                  cache=self._gaussians)
        return jl.per_example_step(noise_multiplier=spec.noise_multiplier,
                                   sampling_probability=spec.sampling_probability, r=spec.jl_dim, w_cap=spec.w_cap,
                                   quantiles=spec.quantiles, direction=direction, discretization=discretization)

    def _composed(self, groups: list[tuple[Any, int]], direction: str, discretization: float, tilt: float,
                  log_tail: float = _NO_QUERY, max_size: int | None = None, window_tail: float = _WINDOW_TAIL,
                  thorough: bool = False, lower: bool = True, answer: float = math.inf) -> Any:
        built = super()._composed(
            groups, direction, discretization, tilt, log_tail, max_size, window_tail, thorough, lower, answer
        )
        return built if isinstance(built, _Guarded) else _Guarded(built)

    def _step(
        self, spec: Any, direction: str, discretization: float, log_tail: float = _NO_QUERY, shared: bool = False
    ) -> Any:
        if not isinstance(spec, _JLSpec):
            return super()._step(spec, direction, discretization, log_tail, shared)
        key = (spec, direction, discretization)  # JL steps keep their own tail (e^-80)
        if key not in self._steps:
            if len(self._steps) > 64:
                self._steps.clear()
            self._steps[key] = self._build(spec, direction, discretization)
        return self._steps[key]

    def _coarse(self, spec: Any, direction: str) -> Any:
        if not isinstance(spec, _JLSpec):
            return super()._coarse(spec, direction)
        key = (spec, direction, "coarse")
        if key not in self._steps:
            # The widest loss range: the largest shift's mu^2 / 2 + 14 mu (huge for r = 1, 2).
            mu = math.sqrt(spec.jl_dim / spec.w_cap) / spec.noise_multiplier
            step = self._build(spec, direction, max(1e-2, (mu * mu / 2.0 + 14.0 * mu) * spec.copies**2 / 2**20))
            width = max(step.log_upper.size, 2) * step.discretization
            self._steps[key] = self._build(spec, direction, max(width / 4096, 1e-12))
        return self._steps[key]

    def largest_shift(self) -> float:
        """The largest finite shift ``mu`` of any JL bucket (above ``jl.MU_HARD`` only for heavy tails)."""
        shifts = [math.sqrt(spec.jl_dim / spec.w_cap) / spec.noise_multiplier
                  for spec, _ in self._groups() if isinstance(spec, _JLSpec)]
        return max(shifts, default=0.0)

    def revealed_mass(self) -> float:
        """Upper bound on the total probability that some step's W fell in the revealed bucket."""
        total = 0.0
        for spec, count in self._groups():
            if isinstance(spec, _JLSpec):
                p0 = jl.make_buckets(spec.jl_dim, spec.w_cap, 8).bottom
                total += spec.sampling_probability * p0 * count
        return min(total, 1.0)


class FDPAccountant(Accountant):
    r"""f-DP accountant: certified trade-off curves, epsilon and delta, and attack risk.

    Same protocol as the other accountants (``step``, ``compose``,
    ``get_epsilon``, ``get_delta``) plus :meth:`tradeoff`. Supports every
    mechanism of :class:`dpacct.pld.PLDAccountant` and
    :class:`~dpacct.fdp.jl.DPSGDJLMechanism` (DP-SGD with JL-projected norms,
    both projection models), in any heterogeneous history.

    Parameters
    ----------
    relative_accuracy : float
        Target relative gap between the certified bounds (default 0.005).
    quantiles : int
        Equal-probability buckets of ``W ~ chi^2_r`` for DP-SGD-JL steps (plus
        log-spaced and tail buckets); more buckets narrow the JL gap (default 128).
    max_size : int
        Largest FFT the PLD engine may use (a power of two, default ``2**22``).
    copies : int
        For shared-projection DP-SGD-JL: the lower bound is the largest over the
        realised pairs "the record ``k`` times against ``k - 1`` times",
        ``k = 1 .. copies`` (``k = 1`` is the paper's pair; default 2, each
        further ``k`` costs about one more composition per query).

    Notes
    -----
    ``get_epsilon`` / ``get_delta`` return certified upper bounds;
    :meth:`epsilon_bounds` / :meth:`delta_bounds` add a certified lower bound.
    For shared-projection DP-SGD-JL the upper bound is the projection-revealed
    mixture and the lower bound the worst of the pairs real datasets realise
    (the paper's pair, and the record with ``k - 1`` identical copies); see
    :mod:`dpacct.fdp.jl` for why they differ.

    Examples
    --------
    >>> acct = FDPAccountant().step(noise_multiplier=1.0, sampling_probability=1.0, count=1)
    >>> round(acct.get_epsilon(1e-5), 2)       # the Gaussian mechanism, exact value 4.377
    4.38
    >>> round(float(acct.tradeoff().tpr(0.01)), 3)   # G_1 at FPR 0.01: TPR <= 0.0924
    0.092
    """

    name = "fdp"

    def __init__(self, *, relative_accuracy: float = 0.005, quantiles: int = 128, max_size: int = 2**22,
                 copies: int = 2) -> None:
        super().__init__()
        self._relative_accuracy = _check.positive("relative_accuracy", relative_accuracy)
        if self._relative_accuracy > 0.5:
            msg = f"relative_accuracy must be in (0, 0.5], got {relative_accuracy!r}"
            raise ValueError(msg)
        quantiles = _check.count("quantiles", quantiles)
        if quantiles < 2:
            msg = f"quantiles must be an integer >= 2, got {quantiles}"
            raise ValueError(msg)
        self._quantiles = quantiles
        self._max_size = max_size
        PLDAccountant(max_size=max_size)  # validates max_size
        copies = _check.count("copies", copies)
        if copies < 1:
            msg = f"copies must be an integer >= 1, got {copies}"
            raise ValueError(msg)
        self._copies = copies
        self._engines: dict[int, _Engine] = {}

    def supports(self, mechanism: Any) -> bool:
        """PLD-supported mechanisms and :class:`~dpacct.fdp.jl.DPSGDJLMechanism`."""
        return isinstance(mechanism, DPSGDJLMechanism) or _pld_spec(mechanism) is not None

    def _compose(self, mechanism: Mechanism, count: int) -> None:
        self._engines.clear()

    def step(self, *, noise_multiplier: float, sampling_probability: float, count: int = 1) -> FDPAccountant:
        """Compose ``count`` plain DP-SGD steps (Poisson rate ``sampling_probability``, add/remove)."""
        mechanism = PoissonSampledGaussianMechanism(noise_multiplier=noise_multiplier,
                                                    sampling_probability=sampling_probability)
        return self.compose(mechanism, count)

    # -- engines ----------------------------------------------------------------------------

    def _engine(self, realised: int) -> _Engine:
        if realised not in self._engines:
            engine = _Engine(realised=realised, quantiles=self._quantiles,
                             relative_accuracy=self._relative_accuracy, max_size=self._max_size)
            for mechanism, count in self._runs():
                engine.compose(mechanism, count)
            self._engines[realised] = engine
        return self._engines[realised]

    def _shared_jl(self) -> list[DPSGDJLMechanism]:
        return [m for m, _ in self._runs() if isinstance(m, DPSGDJLMechanism) and m.projections == "shared"]

    def _runs(self) -> list[tuple[Any, int]]:
        """The history (typed loosely: it holds DP-SGD-JL steps, which dpacct.mechanisms does not list)."""
        return list(self._history)

    def compose(self, mechanism: Mechanism | DPSGDJLMechanism, count: int = 1) -> FDPAccountant:
        """Compose ``count`` repetitions of ``mechanism`` (any PLD mechanism or a DP-SGD-JL step).

        Raises
        ------
        UnsupportedMechanismError
            If the mechanism is not supported (state unchanged).
        """
        return super().compose(mechanism, count)  # type: ignore[arg-type]

    def _method(self) -> str:
        return "f-DP via PLD (connect-the-dots upper, data-processing lower)"

    # -- epsilon and delta ------------------------------------------------------------------

    def epsilon_bounds(self, delta: ArrayLike) -> Interval:
        """Certified ``lower <= epsilon(delta) <= upper`` (``upper = inf`` where none is certified).

        For shared-projection JL steps the lower bound is the largest over the
        realised pairs (``details["lower_by_copies"]``: ``k`` -> its lower bound;
        ``k = 1`` is the paper's pair) and ``details["revealed_lower"]`` the lower
        end of the revealed mixture's own discretisation (its numerical gap).
        """
        d = _check.delta_array(delta)
        budget = 1e-3 * float(np.min(d)) if d.size else _DEFAULT_BUDGET
        fallback = _FALLBACK * float(np.min(d)) if d.size else 0.0
        engine = self._engine(0)
        engine.set_budget(budget, fallback)
        lower, upper = engine.epsilon_bounds(d)
        details: dict[str, Any] = {}
        if self._shared_jl():
            details["revealed_lower"] = lower
            by_copies: dict[int, Any] = {}
            for k in range(1, self._copies + 1):
                realised = self._engine(k)
                realised.set_budget(budget)  # no fallback: a lower bound holds for any cap, and huge shifts are slow
                by_copies[k] = realised.epsilon_bounds(d).lower
            lower = np.max(np.array([np.asarray(v, dtype=np.float64) for v in by_copies.values()]), axis=0)
            lower = float(lower) if np.ndim(lower) == 0 else lower
            details["lower_by_copies"] = by_copies
            details["lower_bound_from"] = _REALISED_NOTE
        if any(isinstance(m, DPSGDJLMechanism) for m, _ in self._runs()):
            details["revealed_tail_mass"] = engine.revealed_mass()
            r = min(m.jl_dim for m, _ in self._runs() if isinstance(m, DPSGDJLMechanism))
            if not np.all(np.isfinite(np.asarray(upper))):
                details["note"] = _HEAVY_TAIL_NOTE.format(r=r, lower=float(np.max(np.asarray(lower))))
            elif engine.largest_shift() > jl.MU_HARD:
                mu = engine.largest_shift()
                details["note"] = _HUGE_NOTE.format(r=r, revealed=details["revealed_tail_mass"], mu=mu,
                                                    loss=mu * mu / 2.0)
        return Interval(lower=lower, upper=upper, quantity="epsilon", method=self._method(), details=details)

    def get_epsilon(self, delta: ArrayLike) -> float | NDArray[np.float64]:
        """A certified upper bound on epsilon(delta) (``inf`` where none can be certified)."""
        d = _check.delta_array(delta)
        engine = self._engine(0)
        engine.set_budget(1e-3 * float(np.min(d)) if d.size else _DEFAULT_BUDGET,
                          _FALLBACK * float(np.min(d)) if d.size else 0.0)
        return engine.get_epsilon(d)

    def get_epsilon_details(self, delta: float) -> dict[str, Any]:
        """Epsilon for one delta with its certified lower bound, for reports and the CLI."""
        bounds = self.epsilon_bounds(delta)
        out: dict[str, Any] = {"epsilon": float(bounds.upper), "kind": "upper bound",
                               "epsilon_lower_bound": float(bounds.lower)}
        for key, value in bounds.details.items():
            if isinstance(value, dict):
                value = {k: float(v) for k, v in value.items()}
            out[key] = float(value) if isinstance(value, (float, np.floating, np.ndarray)) else value
        return out

    def delta_bounds(self, epsilon: ArrayLike) -> Interval:
        """Certified ``lower <= delta(epsilon) <= upper``."""
        e = _check.epsilon_array(epsilon)
        engine = self._engine(0)
        lower, upper = engine.delta_bounds(e)
        details: dict[str, Any] = {}
        if self._shared_jl():
            details["revealed_lower"] = lower
            by_copies = {k: self._engine(k).delta_bounds(e).lower for k in range(1, self._copies + 1)}
            lower = np.max(np.array([np.asarray(v, dtype=np.float64) for v in by_copies.values()]), axis=0)
            lower = float(lower) if np.ndim(lower) == 0 else lower
            details["lower_by_copies"] = by_copies
            details["lower_bound_from"] = _REALISED_NOTE
        return Interval(lower=lower, upper=upper, quantity="delta", method=self._method(), details=details)

    def get_delta(self, epsilon: ArrayLike) -> float | NDArray[np.float64]:
        """A certified upper bound on delta(epsilon)."""
        return self._engine(0).get_delta(_check.epsilon_array(epsilon))

    # -- trade-off curve --------------------------------------------------------------------

    def _epsilon_grid(self, engine: _Engine, points: int) -> tuple[NDArray[np.float64], float]:
        """Epsilons from 0 to past the Chernoff guide's epsilon(1e-13), and the epsilon error allowed."""
        engine.set_budget(1e-14)
        groups = engine._groups()
        top = 0.0
        middle = 0.0
        for direction in engine._directions(groups):
            top = max(top, engine._guide_epsilon(groups, direction, 1e-13).value)
            middle = max(middle, engine._guide_epsilon(groups, direction, 1e-5).value)
        if not math.isfinite(top) or top <= 0.0:
            top = max(middle, 1.0) * 4.0 if math.isfinite(middle) else 100.0
        allowed = self._relative_accuracy * max(middle if math.isfinite(middle) else 1.0, 0.05)
        return np.linspace(0.0, top * 1.25, points), allowed

    @staticmethod
    def _privacy_curve(engine: _Engine, grid: NDArray[np.float64], allowed: float
                       ) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
        """delta bounds (max over directions) on ``grid``, from one untilted composition per direction."""
        engine.set_budget(1e-14)
        groups = engine._groups()
        lower = np.zeros_like(grid)
        upper = np.zeros_like(grid)
        for direction in engine._directions(groups):
            width = engine._grid(groups, direction, allowed)
            composed = engine._composed(groups, direction, width, 0.0)
            lo, up = composed.delta_bounds(grid)
            lower = np.maximum(lower, np.asarray(lo))
            upper = np.maximum(upper, np.asarray(up))
        return np.clip(lower, 0.0, 1.0), np.clip(upper, 0.0, 1.0)

    def tradeoff(self, *, points: int = _TRADEOFF_POINTS) -> TradeoffCurve:
        """The composed trade-off curve: certified lower curve, optimistic upper curve.

        The certified curve comes from the pessimistic (upper) privacy curve and
        lies below the true trade-off function; the optimistic curve comes from
        the lower privacy curve (for shared-projection JL, the paper's realised
        pair). ``curve.gap()`` is the numerical gap between them.

        Parameters
        ----------
        points : int
            Epsilons on the grid of the privacy curve (default 1024).
        """
        n = _check.count("points", points)
        if n < 8:
            msg = f"points must be an integer >= 8, got {n}"
            raise ValueError(msg)
        engine = self._engine(0)
        if not engine._groups():
            return TradeoffCurve.gaussian(0.0, method="nothing composed: perfect privacy")
        grid, allowed = self._epsilon_grid(engine, n)
        low, up = self._privacy_curve(engine, grid, allowed)
        if self._shared_jl():
            low = np.zeros_like(grid)
            for k in range(1, self._copies + 1):
                low = np.maximum(low, self._privacy_curve(self._engine(k), grid, allowed)[0])
        curve = TradeoffCurve.from_privacy_curve(grid, up, low, method=self._method())
        curve.details["epsilon_grid_max"] = float(grid[-1])
        curve.details["gap"] = curve.gap()
        return curve

    def tpr(self, fpr: ArrayLike) -> Value:
        """Upper bound on the true-positive rate of any membership-inference attack at ``fpr``."""
        return self.tradeoff().tpr(fpr)



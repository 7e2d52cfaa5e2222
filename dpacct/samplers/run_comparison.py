"""Every batch sampler's guarantee for the user's own run, side by side.

:func:`compare_run` takes a run as :func:`dpacct.epsilon` does (``sampling_probability``
and ``steps``, or ``epochs``, ``batch_size`` and ``dataset_size``) and reports, under
zero-out adjacency (Chua et al., ICML 2024, arXiv:2403.17673):

* deterministic batches: the exact Gaussian curve of the record's participations;
* Poisson sampling at the run's rate for the run's steps: PLD certified lower and upper
  bounds and an RDP upper bound;
* shuffled batches: the shuffle lower bound over the run's complete epochs
  (:func:`dpacct.api.shuffle_lower_bound`) and the deterministic curve as certified
  upper bound;
* balls-in-bins (each record in one uniformly random step of each epoch; Chua et al.,
  AISTATS 2025, arXiv:2412.16802): certified upper bound (the smaller of the deterministic
  curve and the Renyi DP of the dominating pair) and lower bound, and an opt-in Monte-Carlo
  estimate;
* fixed-size batches (exactly ``b`` records a step, without and, for a run given in
  epochs, with replacement; :mod:`dpacct.samplers.fixed_size`): certified lower and
  upper bounds. A zeroed record still takes a slot in the batch, so the sum moves by up
  to ``2C``: fixed-size batches are never more private than Poisson batches of the same
  rate, and can be far less.

The same counts are used by ``dpacct epsilon``/``delta --sampler ...``: a run means the
same thing in every subcommand. Every number is a :class:`dpacct.results.Value`.
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass
from typing import Any

from dpacct import _check
from dpacct.api import accountant_for_run, resolve_run, shuffle_lower_bound
from dpacct.results import Value, to_json
from dpacct.run import Run

__all__ = ["RunComparison", "compare_run"]


@dataclass(frozen=True, slots=True, kw_only=True)
class RunComparison:
    """The numbers of :func:`compare_run`: one :class:`~dpacct.results.Value` per row.

    Attributes
    ----------
    run : Run
        The run compared.
    noise_multiplier : float
        Its noise multiplier.
    quantity : {"epsilon", "delta"}
        What the rows hold: epsilons at ``at`` = delta, or deltas at ``at`` = epsilon.
    at : float
        The fixed delta or epsilon.
    rows : tuple of (str, Value)
        ``(sampler, value)`` in table order.
    """

    run: Run
    noise_multiplier: float
    quantity: str
    at: float
    rows: tuple[tuple[str, Value], ...]

    def value(self, sampler: str, kind: str) -> Value:
        """The first row of ``sampler`` with ``kind``."""
        for name, v in self.rows:
            if name == sampler and v.kind == kind:
                return v
        msg = f"no row for sampler {sampler!r} of kind {kind!r}"
        raise KeyError(msg)

    def best(self) -> tuple[str, Value]:
        """The sampler with the smallest certified upper bound (an exact value counts as one), and that bound.

        Certified numbers only: a sampler's lower bound or an estimate never wins.
        """
        certified = [(float(v), name, v) for name, v in self.rows if v.kind in ("exact", "upper bound")]
        _, name, value = min(certified, key=lambda item: item[0])
        return name, value

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready: the run, the fixed value and one :func:`~dpacct.results.to_json` object per row."""
        fixed = "delta" if self.quantity == "epsilon" else "epsilon"
        return {
            "noise_multiplier": self.noise_multiplier,
            **self.run.describe(),
            "adjacency": "zero_out",
            fixed: self.at,
            "quantity": self.quantity,
            "steps_by_sampler": {s: self.run.steps(s) for s in ("poisson", "shuffle")},
            "participations": self.run.participations("deterministic"),
            "rows": [{"sampler": sampler, **to_json(v)} for sampler, v in self.rows],
            "best_certified": {"sampler": self.best()[0], **to_json(self.best()[1])},
        }


def compare_run(
    *,
    noise_multiplier: float,
    delta: float | None = None,
    epsilon: float | None = None,
    sampling_probability: float | None = None,
    steps: int | None = None,
    epochs: float | None = None,
    batch_size: int | None = None,
    dataset_size: int | None = None,
    drop_last: bool = False,
    permutation: str = "fresh",
    max_batch_size: int | None = None,
    estimates: bool = False,
) -> RunComparison:
    """Every batch sampler for one run, side by side: epsilons at ``delta`` or deltas at ``epsilon``.

    Parameters
    ----------
    noise_multiplier : float
        Noise standard deviation over the clipping norm, finite and ``> 0``.
    delta, epsilon : float
        Exactly one: the fixed delta (compare epsilons) or epsilon (compare deltas).
    sampling_probability, steps, epochs, batch_size, dataset_size, drop_last
        The run, as in :func:`dpacct.epsilon` (``steps`` is the total number of steps).
    permutation : {"fresh", "same"}
        Shuffled batches over several epochs: a new permutation each epoch (default) or
        one reused (see :func:`dpacct.samplers.delta_shuffle_lower`).
    max_batch_size : int, optional
        Adds truncated Poisson rows: Poisson batches cut to at most this many records
        (:mod:`dpacct.samplers.truncated_poisson`); needs the run in epochs (the dataset
        size matters).
    estimates : bool
        Also the Monte-Carlo estimates of balls-in-bins and random allocation (kind
        ``"estimate"``: not a bound; seconds to minutes).

    Returns
    -------
    RunComparison
        Rows: deterministic (exact), Poisson (PLD lower and upper bound, RDP upper bound),
        shuffle (lower bound, certified upper bound), fixed-size batches without replacement
        (lower and upper bounds; :mod:`dpacct.samplers.fixed_size`) and, for a run given in
        epochs, with replacement; truncated Poisson with ``max_batch_size``; balls-in-bins
        (each record in one uniformly random step per epoch: certified upper and lower
        bounds, :mod:`dpacct.samplers.allocation`); for a run of ``k >= 2`` whole epochs,
        random allocation of the ``k`` participations among all its steps (certified
        deterministic upper bound and lower bound).

    Examples
    --------
    >>> c = compare_run(noise_multiplier=2.0, sampling_probability=0.01, steps=100, delta=1e-5)
    >>> [(s, v.kind) for s, v in c.rows][:2]
    [('deterministic', 'exact'), ('poisson', 'lower bound')]
    """
    from dpacct.samplers.bounds import PERMUTATIONS
    from dpacct.samplers.shuffle import delta_shuffle_lower, epsilon_shuffle_lower
    from dpacct.mechanisms import PoissonSampledGaussianMechanism
    from dpacct.pld import PLDAccountant
    from dpacct.rdp import OrderGridWarning, RDPAccountant

    sigma = _check.noise_multiplier(noise_multiplier)
    if (delta is None) == (epsilon is None):
        msg = "give exactly one of delta (to compare epsilons) or epsilon (to compare deltas)"
        raise ValueError(msg)
    _check.one_of("permutation", permutation, PERMUTATIONS)
    run = resolve_run(sampling_probability=sampling_probability, steps=steps, epochs=epochs,
                      batch_size=batch_size, dataset_size=dataset_size, drop_last=drop_last)
    quantity = "epsilon" if delta is not None else "delta"
    at = _check.delta(delta) if delta is not None else _check.epsilon(epsilon)

    det = accountant_for_run(run, noise_multiplier=sigma, sampler="deterministic")
    k = run.participations("deterministic")
    det_method = f"Gaussian curve, sigma/sqrt({k}) ({k} participations)"
    q, t = run.sampling_probability, run.steps("poisson")
    mechanism = PoissonSampledGaussianMechanism(noise_multiplier=sigma, sampling_probability=q,
                                                neighboring_relation="zero_out")
    rdp = RDPAccountant().compose(mechanism, t if q > 0 else 0)
    # Delta queries set the PLD grid from the delta target; 0.02 gives the same bounds as the
    # default there several times faster (as dpacct.samplers.delta_poisson_bounds does).
    pld = PLDAccountant(relative_accuracy=0.005 if quantity == "epsilon" else 0.02).compose(mechanism, t if q > 0 else 0)
    p_method = f"{t} steps at q={q:.6g}"
    batches, full = run.lower_bound_batches_per_epoch(), run.full_epochs()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", OrderGridWarning)  # an edge order still gives a valid upper bound
        if quantity == "epsilon":
            exact = float(det.get_epsilon(at))
            lower, upper = (float(x) for x in pld.epsilon_bounds(at))
            rdp_value = float(rdp.get_epsilon(at))
        else:
            exact = float(det.get_delta(at))
            lower, upper = (float(x) for x in pld.delta_bounds(at))
            rdp_value = float(rdp.get_delta(at))
    if batches == 0 or full == 0:
        shuffle_lower, s_method = 0.0, "none: the run is shorter than one epoch"
    elif permutation == "fresh":
        shuffle_lower, s_method = shuffle_lower_bound(run, noise_multiplier=sigma, delta=delta, epsilon=epsilon)
    else:
        if quantity == "epsilon":
            bound = epsilon_shuffle_lower(noise_multiplier=sigma, steps=batches, epochs=full, delta=at,
                                          permutation="same")
        else:
            bound = delta_shuffle_lower(noise_multiplier=sigma, steps=batches, epochs=full, epsilon=at,
                                        permutation="same")
        shuffle_lower = float(bound)
        s_method = f"shuffle lower bound, {full} full epoch(s) of T={batches} batches, same permutation"
    shuffle_lower = min(shuffle_lower, exact) if math.isfinite(exact) else shuffle_lower

    def v(value: float, kind: str, method: str) -> Value:
        return Value(value=value, quantity=quantity, kind=kind, method=method)  # type: ignore[arg-type]

    if not isinstance(estimates, bool):
        msg = f"estimates must be True or False, got {estimates!r}"
        raise ValueError(msg)
    if max_batch_size is not None:
        cap = _check.count("max_batch_size", max_batch_size, minimum=1)
        if not run.by_epochs:
            msg = "max_batch_size (truncated Poisson) needs the run as epochs, batch_size and dataset_size"
            raise ValueError(msg)
    extra: list[tuple[str, Value]] = []
    if batches > 0:
        from dpacct.samplers.allocation import allocation_rows

        extra.extend(allocation_rows(noise_multiplier=sigma, quantity=quantity,  # type: ignore[arg-type]
                                     at=at, steps_per_epoch_upper=run.batches_per_epoch(),
                                     steps_per_epoch_lower=batches, epochs_upper=k, epochs_lower=full,
                                     estimate=estimates))
        if k >= 2 and full == k:
            # Random allocation of the run's k participations among all its steps (Feldman and
            # Shenfeld 2025): the same batch sizes and participations as k epochs of balls-in-bins.
            total = run.steps("balls_in_bins")
            extra.extend(allocation_rows(noise_multiplier=sigma, quantity=quantity,  # type: ignore[arg-type]
                                         at=at, steps_per_epoch_upper=total, steps_per_epoch_lower=total,
                                         epochs_upper=1, epochs_lower=1, participations=k, estimate=estimates))
    if q > 0.0 and t > 0:
        extra.extend(_fixed_size(run, sigma, quantity, at, replacement=False))
        if run.by_epochs:
            extra.extend(_fixed_size(run, sigma, quantity, at, replacement=True))
        if max_batch_size is not None:
            from dpacct.samplers.truncated_poisson import truncated_poisson_rows

            assert run.dataset_size is not None
            extra.extend(truncated_poisson_rows(noise_multiplier=sigma, sampling_probability=q, steps=t,
                                                dataset_size=run.dataset_size, max_batch_size=cap,
                                                quantity=quantity,  # type: ignore[arg-type]
                                                at=at, neighboring_relation="zero_out"))
    rows = (
        ("deterministic", v(exact, "exact", det_method)),
        ("poisson", v(lower, "lower bound", f"PLD, {p_method}")),
        ("poisson", v(upper, "upper bound", f"PLD, {p_method}")),
        ("poisson", v(rdp_value, "upper bound", f"RDP, {p_method}")),
        ("shuffle", v(shuffle_lower, "lower bound", s_method)),
        ("shuffle", v(exact, "upper bound", f"deterministic batches dominate shuffling: {det_method}")),
        *extra,
    )
    return RunComparison(run=run, noise_multiplier=sigma, quantity=quantity, at=at, rows=rows)


def _fixed_size(run: Run, sigma: float, quantity: str, at: float, *, replacement: bool) -> list[tuple[str, Value]]:
    """Fixed-size batches at the run's batch fraction, as many steps as Poisson sampling (zero-out)."""
    from dpacct.samplers.fixed_size import fixed_size_rows

    b, n = run.fixed_size_counts(replacement)
    sampler = "fixed_size_replacement" if replacement else "fixed_size"
    return list(fixed_size_rows(noise_multiplier=sigma, batch_size=b, dataset_size=n, steps=run.steps(sampler),
                                quantity=quantity,  # type: ignore[arg-type]
                                at=at, replacement=replacement, neighboring_relation="zero_out"))

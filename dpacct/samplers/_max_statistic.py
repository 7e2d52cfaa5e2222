"""Optimistic PLDs on the line of a maximum statistic: shared by the shuffle and allocation lower bounds.

Both lower bounds post-process a run into the maximum ``M`` of ``T`` independent
Gaussian coordinates ``N(shift, sigma^2)`` (data processing: any function of the
output gives a lower bound). The two hypotheses differ only in how many
coordinates carry which shift, written as ``coords = ((shift, count), ...)``:

* shuffled ABLQ (:mod:`dpacct.samplers.shuffle_fresh`): ``((2, 1), (0, T - 1))``
  against ``((1, 1), (0, T - 1))``;
* random allocation of ``k`` of ``t`` steps (:mod:`dpacct.samplers.allocation`):
  ``((1, k), (0, t - k))`` against ``((0, t),)``.

``M`` has ``log F(c) = sum count log Phi((c - shift) / sigma)``; its PLD is discretised
optimistically (:class:`dpacct.pld.discrete.DiscretePLD`, a certified lower bound)
on cell edges placed by the arc length of the log-likelihood ratio, and composed
over epochs.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np
from numpy.typing import NDArray
from scipy import optimize, special

from dpacct.pld.discrete import DiscretePLD

F64 = NDArray[np.float64]
Coords = tuple[tuple[float, int], ...]

LOG_TAIL = -60.0  # the line is cut where log F (left) or log(1 - F) (right) < -60 for both hypotheses
PROBE_POINTS = 20001  # resolution of the probe grid that places the cell edges
MAX_CELLS = 2_000_000
MAX_SIZE = 2**23
MIN_DISCRETIZATION = 1e-4
COMPOSED_BUDGET = 2**21  # target number of composed loss entries when choosing the grid


def log_cdf(c: F64, sigma: float, coords: Coords) -> F64:
    """``log F(c)`` of the maximum (``scipy.special.log_ndtr``: accurate in both tails)."""
    out = np.zeros_like(np.asarray(c, dtype=np.float64))
    for shift, count in coords:
        if count:
            out = out + count * special.log_ndtr((c - shift) / sigma)
    return np.asarray(out)


def log_pdf(c: F64, sigma: float, coords: Coords) -> F64:
    """log density of the maximum, ``log F + log (log F)'``, each inverse Mills ratio formed in logs.

    ``(log F)' = sum count phi(z) / (sigma Phi(z))``, ``z = (c - shift) / sigma``; each term is
    ``log phi - log Phi`` so that neither factor underflows far in the left tail.
    """
    log_phi = -0.5 * math.log(2.0 * math.pi)
    terms = []
    for shift, count in coords:
        if count:
            z = (c - shift) / sigma
            terms.append(math.log(count) + log_phi - 0.5 * z**2 - special.log_ndtr(z))
    mills = terms[0] if len(terms) == 1 else np.logaddexp.reduce(terms, axis=0)
    return np.asarray(log_cdf(c, sigma, coords) + mills - math.log(sigma))


def log_sf(c: float, sigma: float, coords: Coords) -> float:
    """``log(1 - F(c))``."""
    log_f = float(log_cdf(np.array([c]), sigma, coords)[0])
    return math.log(-math.expm1(log_f)) if log_f < 0.0 else -math.inf


def edges(sigma: float, p: Coords, q: Coords, discretization: float) -> F64:
    """Cell edges on the line of M: the loss changes by about one grid step per cell.

    Placement only affects tightness, never validity.
    """
    shifts = [shift for shift, _ in (*p, *q)]
    lo0, hi0 = min(shifts) - 40.0 * sigma - 2.0, max(shifts) + 40.0 * sigma + 2.0
    left = min(_brentq(lambda x: float(log_cdf(np.array([x]), sigma, c)[0]) - LOG_TAIL, lo0, hi0) for c in (p, q))
    right = max(_brentq(lambda x: log_sf(x, sigma, c) - LOG_TAIL, lo0, hi0) for c in (p, q))
    probe = np.linspace(left, right, PROBE_POINTS)
    loss = log_pdf(probe, sigma, p) - log_pdf(probe, sigma, q)
    # Arc length of the loss (plus a uniform floor so flat stretches still get cells),
    # then one edge per `discretization` of arc length.
    arc = np.concatenate([[0.0], np.cumsum(np.abs(np.diff(loss)) + discretization * 20.0 / PROBE_POINTS)])
    cells = int(min(max(arc[-1] / discretization, 2.0), MAX_CELLS))
    return np.asarray(np.interp(np.linspace(0.0, arc[-1], cells + 1), arc, probe))


def _brentq(f: Callable[[float], float], a: float, b: float) -> float:
    """``scipy.optimize.brentq`` typed as returning a float."""
    return float(optimize.brentq(f, a, b, xtol=1e-12))


def one_epoch(sigma: float, p: Coords, q: Coords, discretization: float) -> tuple[DiscretePLD, DiscretePLD]:
    """Optimistic one-epoch PLDs of (P, Q) ("remove") and (Q, P) ("add").

    The grid is coarsened (x4 at a time) while one epoch's PMF does not fit in ``MAX_SIZE``.
    """
    d = discretization
    while True:
        x = edges(sigma, p, q, d)
        try:
            remove, add = (
                DiscretePLD.from_log_cdfs(
                    log_cdf_p=lambda c: log_cdf(c, sigma, p),
                    log_cdf_q=lambda c: log_cdf(c, sigma, q),
                    grid=x, discretization=d, pessimistic=False, reverse=reverse, max_size=MAX_SIZE,
                )
                for reverse in (False, True)
            )
        except ValueError as error:
            if "increase discretization" not in str(error) or d >= 1.0:
                raise
            d *= 4.0
            continue
        return remove, add


def composed(sigma: float, p: Coords, q: Coords, epochs: int) -> tuple[DiscretePLD, DiscretePLD]:
    """The E-fold optimistic PLDs of both directions.

    The grid starts at ``MIN_DISCRETIZATION`` and is coarsened so that the composed support
    stays within ``COMPOSED_BUDGET`` entries (a coarser grid only loosens the lower bound).
    """
    first, second = one_epoch(sigma, p, q, MIN_DISCRETIZATION)
    width = max(first.pmf().mass.size, second.pmf().mass.size) * first.discretization
    coarse = epochs * width / COMPOSED_BUDGET
    if coarse > first.discretization:
        first, second = one_epoch(sigma, p, q, coarse)
    return first.self_compose(epochs), second.self_compose(epochs)

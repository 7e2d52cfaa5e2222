"""Calibration guide for the PLD accountant: an RDP solution, narrowed by coarse PLD probes.

Kept apart from the PLD engine: :func:`dpacct.calibrate` asks for it through the
accountant protocol (:func:`dpacct.accountant.accountant_guide`) and works without it.
"""

from __future__ import annotations

import math

from dpacct._search import SIGMA_RANGE
from dpacct.accountant import NoiseGuide

__all__ = ["noise_multiplier_guide", "pld_bracket"]


def noise_multiplier_guide(*, sampling_probability: float, steps: int, delta: float, epsilon: float) -> NoiseGuide:
    """Bracket the PLD noise multiplier meeting ``epsilon`` for ``steps`` Poisson-sampled Gaussian steps.

    The RDP solution on integer orders (an RDP upper bound, usually above the PLD
    epsilon) starts the bracket; coarse PLD probes then prove a smaller noise
    multiplier safe and, by their certified lower bounds, a smaller one unsafe
    (:func:`pld_bracket`). Calibration checks ``safe`` with the default grid and falls
    back to the RDP solution if the default grid is looser there.
    """
    from dpacct.rdp import integer_order_guide

    start = integer_order_guide(sampling_probability=sampling_probability, steps=steps, delta=delta,
                                epsilon=epsilon, windowed=False).safe
    unsafe, safe = pld_bracket(sampling_probability, steps, delta, epsilon, start)
    return NoiseGuide(safe=safe, unsafe=None if unsafe is None else unsafe[0],
                      unsafe_epsilon=None if unsafe is None else unsafe[1], fallback=start, min_rtol=PLD_MIN_RTOL)


# Accuracies of the cheap PLD probes that narrow the bracket before the default grid is used.
_PLD_PROBE_ACCURACIES = (0.03, 0.01)
# The PLD bracket is not narrowed below this relative width: the default grid's own error
# (about 0.5% of epsilon) dominates there, and every probe is a full PLD evaluation.
PLD_MIN_RTOL = 1e-3


def pld_bracket(
    q: float, t: int, delta: float, target: float, safe: float
) -> tuple[tuple[float, float] | None, float]:
    """Narrow ``[unsafe, safe]`` for the PLD noise multiplier with cheap, coarse-grid probes.

    A coarse PLD still gives certified bounds, only wider: a probe whose upper bound
    meets the target proves its noise multiplier safe, and one whose lower bound
    exceeds the target proves it unsafe for every accountant (the true epsilon is
    above the target). Undecided probes split the bracket where it is proven. Each
    accuracy level costs a fraction of a default-grid evaluation (the FFT size scales
    like 1/accuracy), so only the last few probes of the search pay the full price.
    Returns ``((unsafe, its coarse upper bound) or None, safe)``; ``safe`` is certified by
    a coarse upper bound.
    """
    from dpacct.pld import PLDAccountant

    def bounds(sigma: float, accuracy: float) -> tuple[float, float]:
        acct = PLDAccountant(relative_accuracy=accuracy).step(
            noise_multiplier=sigma, sampling_probability=q, count=t
        )
        lower, upper = acct.epsilon_bounds(delta)
        return float(lower), float(upper)

    unsafe: tuple[float, float] | None = None
    for accuracy in _PLD_PROBE_ACCURACIES:
        if unsafe is None:  # find a proven-unsafe lower end below the safe one
            x = safe
            while x > SIGMA_RANGE[0]:
                x *= 1.0 - 4.0 * accuracy
                lower, upper = bounds(x, accuracy)
                if lower > target:
                    unsafe = (x, upper)
                    break
                if upper <= target:
                    safe = x
            if unsafe is None:
                return None, safe
        # Bisect in log sigma while the probes can still decide (about 8 halvings of a bracket
        # a few accuracies wide); an undecided probe ends this level.
        for _ in range(8):
            mid = math.sqrt(unsafe[0] * safe)
            lower, upper = bounds(mid, accuracy)
            if upper <= target:
                safe = mid
            elif lower > target:
                unsafe = (mid, upper)
            else:
                break
    return unsafe, safe

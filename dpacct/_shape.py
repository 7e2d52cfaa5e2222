"""Scalar in, scalar out: the NumPy convention for vectorised functions."""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray


def unwrap(out: NDArray[np.float64]) -> float | NDArray[np.float64]:
    """Return a Python float for a 0-d result and the array otherwise."""
    return float(out) if out.ndim == 0 else out

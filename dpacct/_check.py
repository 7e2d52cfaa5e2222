"""Shared validators for the public API.

Each one returns the coerced value or raises with dpacct's message format: the
parameter's name, the constraint, and the value received, e.g.
``noise_multiplier must be finite and > 0, got -1.0``. The C++ kernels enforce the
same numeric constraints with the same wording; these run first so that types are
checked too and so that errors name the argument the user actually passed.
"""

from __future__ import annotations

import math
import numbers
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

__all__ = [
    "count",
    "delta",
    "delta_array",
    "epsilon",
    "epsilon_array",
    "noise_multiplier",
    "one_of",
    "orders",
    "positive",
    "probability",
    "real",
]


def real(name: str, value: Any) -> float:
    """Coerce a real scalar to float; ``TypeError`` for anything else (bool included)."""
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (numbers.Real, np.floating, np.integer)):
        msg = f"{name} must be a real number, got {type(value).__name__}"
        raise TypeError(msg)
    return float(value)


def positive(name: str, value: Any) -> float:
    """A finite real number ``> 0``."""
    x = real(name, value)
    if not (x > 0.0 and math.isfinite(x)):
        msg = f"{name} must be finite and > 0, got {x!r}"
        raise ValueError(msg)
    return x


def noise_multiplier(value: Any) -> float:
    """The noise multiplier: finite and ``> 0``."""
    return positive("noise_multiplier", value)


def probability(name: str, value: Any) -> float:
    """A probability in ``[0, 1]``."""
    x = real(name, value)
    if not (0.0 <= x <= 1.0):
        msg = f"{name} must be in [0, 1], got {x!r}"
        raise ValueError(msg)
    return x


def delta(value: Any) -> float:
    """A target delta in the open interval ``(0, 1)``."""
    x = real("delta", value)
    if not (0.0 < x < 1.0):
        msg = f"delta must be in (0, 1), got {x!r}"
        raise ValueError(msg)
    return x


def epsilon(value: Any) -> float:
    """A target epsilon: finite and ``>= 0``."""
    x = real("epsilon", value)
    if not (x >= 0.0 and math.isfinite(x)):
        msg = f"epsilon must be finite and >= 0, got {x!r}"
        raise ValueError(msg)
    return x


def _float_array(name: str, value: ArrayLike) -> NDArray[np.float64]:
    if isinstance(value, (str, bytes)):
        msg = f"{name} must be a real number or an array of them, got {type(value).__name__}"
        raise TypeError(msg)
    array = np.asarray(value)
    if array.dtype == np.bool_ or not (
        np.issubdtype(array.dtype, np.floating) or np.issubdtype(array.dtype, np.integer)
    ):
        msg = f"{name} must be a real number or an array of them, got {type(value).__name__}"
        raise TypeError(msg)
    return np.asarray(array, dtype=np.float64)


def _first_bad(array: NDArray[np.float64], ok: NDArray[np.bool_]) -> tuple[float, str]:
    index = int(np.flatnonzero(~ok.ravel())[0])
    where = "" if array.ndim == 0 else f" at index {index}"
    return float(array.ravel()[index]), where


def delta_array(value: ArrayLike) -> NDArray[np.float64]:
    """One or more deltas, each in ``(0, 1)``."""
    array = _float_array("delta", value)
    ok = (array > 0.0) & (array < 1.0)
    if not ok.all():
        bad, where = _first_bad(array, ok)
        msg = f"delta must be in (0, 1), got {bad!r}{where}"
        raise ValueError(msg)
    return array


def epsilon_array(value: ArrayLike) -> NDArray[np.float64]:
    """One or more epsilons, each finite and ``>= 0``."""
    array = _float_array("epsilon", value)
    ok = (array >= 0.0) & np.isfinite(array)
    if not ok.all():
        bad, where = _first_bad(array, ok)
        msg = f"epsilon must be finite and >= 0, got {bad!r}{where}"
        raise ValueError(msg)
    return array


def orders(value: ArrayLike, *, scalar_ok: bool = False) -> NDArray[np.float64]:
    """A non-empty 1-d array of Renyi orders (or one order if ``scalar_ok``), each ``> 1``."""
    array = _float_array("orders", value)
    if not (scalar_ok and array.ndim == 0) and (array.ndim != 1 or array.size == 0):
        msg = f"orders must be a non-empty 1-d array, got shape {array.shape}"
        raise ValueError(msg)
    ok = array > 1.0
    if not ok.all():
        bad, where = _first_bad(array, ok)
        msg = f"orders must all be > 1, got {bad!r}{where}"
        raise ValueError(msg)
    return array


def count(name: str, value: Any, *, minimum: int = 0) -> int:
    """An integer ``>= minimum`` (default 0; an integral float such as ``1e4`` is accepted)."""
    if isinstance(value, (bool, np.bool_)):
        msg = f"{name} must be an integer, got bool"
        raise TypeError(msg)
    if isinstance(value, (numbers.Integral, np.integer)):
        n = int(value)
    elif isinstance(value, (numbers.Real, np.floating)):
        x = float(value)
        if not (math.isfinite(x) and x == math.floor(x)):
            msg = f"{name} must be an integer >= {minimum}, got {x!r}"
            raise ValueError(msg)
        n = int(x)
    else:
        msg = f"{name} must be an integer, got {type(value).__name__}"
        raise TypeError(msg)
    if n < minimum:
        msg = f"{name} must be an integer >= {minimum}, got {n}"
        raise ValueError(msg)
    return n


def one_of(name: str, value: Any, allowed: tuple[str, ...]) -> str:
    """A string from a fixed set of choices."""
    if not isinstance(value, str):
        msg = f"{name} must be a string, got {type(value).__name__}"
        raise TypeError(msg)
    if value not in allowed:
        choices = ", ".join(repr(a) for a in allowed)
        msg = f"{name} must be one of {choices}, got {value!r}"
        raise ValueError(msg)
    return value


# Step and epoch counts from real ratios (T = E n / b, E = T q, ...): a ratio that is an
# integer up to round-off must not gain one, and any real fraction is far above 1e-12
# (with q = b/n, T q - k is 0 or at least 1/n).
_COUNT_ROUND = 1e-12


def ceil_count(x: float) -> int:
    """``ceil(x)`` for x >= 0, ignoring relative round-off below 1e-12 (rounding toward more steps otherwise).

    >>> ceil_count(60 * 60000 / 256), ceil_count(0.1 * 3 / 0.1), ceil_count(2.5)
    (14063, 3, 3)
    """
    return max(0, math.ceil(x * (1.0 - _COUNT_ROUND)))


def floor_count(x: float) -> int:
    """``floor(x)`` for x >= 0, ignoring relative round-off below 1e-12.

    >>> floor_count(1 / (1 / 3)), floor_count(2.5)
    (3, 2)
    """
    return math.floor(x * (1.0 + _COUNT_ROUND))


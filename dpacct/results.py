"""The result vocabulary shared by every accounting family, the CLI and ``--json``.

Every number dpacct reports says what kind of number it is:

``"upper bound"``
    certified: the run is (epsilon, delta)-DP with this value (never below the truth,
    after discretisation, truncation and floating point);
``"lower bound"``
    certified: the run is *not* DP with any smaller value;
``"exact"``
    the value itself, up to rounding toward safety;
``"estimate"``
    a numerical estimate with a stated confidence (Monte Carlo), not a guarantee;
``"heuristic"``
    an unproven analysis (e.g. Yu et al.'s random-sampling zCDP bound), not a guarantee;
``"conjectured"``
    exact under a conjecture that is not proven (e.g. Chua et al. 2024, Conjecture 3.2).

A :class:`Value` is one such number; an :class:`Interval` is a certified
``lower <= truth <= upper`` pair. Both carry the ``method`` that produced them and
free-form ``details``; :func:`to_json` turns either into plain JSON data.

Names follow one scheme across the package:

* conversions between privacy notions are ``<target>_from_<source>``:
  ``epsilon_from_rdp``, ``delta_from_rdp``, ``epsilon_from_rho``, ``delta_from_rho``,
  ``rho_from_pure_dp`` (the former ``rho_to_epsilon``-style names remain as deprecated aliases);
* a point on one mechanism's own curve is ``<quantity>_for_<quantity>``:
  ``dpacct.gaussian.epsilon_for_delta``; an accountant's are ``get_epsilon(delta)`` and
  ``get_delta(epsilon)``; a certified pair is ``*_bounds`` (an :class:`Interval`);
* the add/remove relation's directions are ``"remove"`` and ``"add"``;
* counts: ``count`` in ``compose``, ``steps`` for the total number of noisy steps,
  ``epochs`` for passes over the data, ``participations`` for the steps one record is in
  (:mod:`dpacct.run`).
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np
from numpy.typing import NDArray

__all__ = ["GUARANTEES", "KINDS", "Interval", "Kind", "Quantity", "Value", "json_safe", "to_json"]

Kind = Literal["upper bound", "lower bound", "exact", "estimate", "heuristic", "conjectured"]
Quantity = Literal["epsilon", "delta", "rho", "mu", "tpr", "advantage", "tradeoff", "noise_multiplier"]

#: Every kind, in the order above.
KINDS: tuple[Kind, ...] = ("upper bound", "lower bound", "exact", "estimate", "heuristic", "conjectured")
#: The kinds a user may rely on as a privacy guarantee (an upper bound on the leakage).
GUARANTEES: frozenset[str] = frozenset({"upper bound", "exact"})


def _number(value: float | NDArray[np.float64]) -> float | NDArray[np.float64]:
    array = np.asarray(value, dtype=np.float64)
    return float(array) if array.ndim == 0 else array


@dataclass(frozen=True, slots=True, kw_only=True)
class Value:
    """One reported number and what kind of number it is.

    Attributes
    ----------
    value : float or ndarray
        The number(s).
    quantity : str
        What ``value`` measures (``"epsilon"``, ``"delta"``, ``"mu"``, ...).
    kind : str
        One of :data:`KINDS`; see the module docstring.
    method : str
        How the number was computed (accountant and conversion, in words).
    details : mapping
        Anything else worth reporting (optimal order, grid, confidence, ...).

    Examples
    --------
    >>> v = Value(value=1.5, quantity="epsilon", kind="upper bound", method="RDP")
    >>> float(v), v.is_guarantee
    (1.5, True)
    """

    value: float | NDArray[np.float64]
    quantity: Quantity
    kind: Kind
    method: str
    details: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            msg = f"kind must be one of {KINDS}; got {self.kind!r}"
            raise ValueError(msg)
        object.__setattr__(self, "value", _number(self.value))

    def __float__(self) -> float:
        """The value as a float (only for a scalar value)."""
        return float(np.asarray(self.value))

    @property
    def is_guarantee(self) -> bool:
        """True for certified upper bounds and exact values: numbers a user may rely on."""
        return self.kind in GUARANTEES


@dataclass(frozen=True, slots=True, kw_only=True)
class Interval:
    """A certified interval ``lower <= truth <= upper``.

    Unpacks as ``lower, upper = interval`` (as the former ``Bounds`` tuple did).

    Examples
    --------
    >>> lower, upper = Interval(lower=0.9, upper=1.0, quantity="epsilon", method="PLD")
    >>> upper
    1.0
    >>> round(Interval(lower=0.9, upper=1.0, quantity="epsilon", method="PLD").relative_width, 6)
    0.1
    """

    lower: float | NDArray[np.float64]
    upper: float | NDArray[np.float64]
    quantity: Quantity
    method: str
    details: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        object.__setattr__(self, "lower", _number(self.lower))
        object.__setattr__(self, "upper", _number(self.upper))

    def __iter__(self) -> Iterator[float | NDArray[np.float64]]:
        yield self.lower
        yield self.upper

    def __len__(self) -> int:
        return 2

    def __getitem__(self, index: int) -> float | NDArray[np.float64]:
        return (self.lower, self.upper)[index]

    @property
    def width(self) -> float | NDArray[np.float64]:
        """``upper - lower``."""
        return _number(np.asarray(self.upper) - np.asarray(self.lower))

    @property
    def relative_width(self) -> float | NDArray[np.float64]:
        """``(upper - lower) / upper`` (0 where both are 0)."""
        upper = np.asarray(self.upper, dtype=np.float64)
        with np.errstate(invalid="ignore", divide="ignore"):
            rel = np.where(upper > 0, (upper - np.asarray(self.lower)) / np.where(upper > 0, upper, 1.0), 0.0)
        return _number(rel)

    @property
    def upper_value(self) -> Value:
        """The upper end as a :class:`Value` of kind ``"upper bound"``."""
        return Value(value=self.upper, quantity=self.quantity, kind="upper bound", method=self.method, details=self.details)

    @property
    def lower_value(self) -> Value:
        """The lower end as a :class:`Value` of kind ``"lower bound"``."""
        return Value(value=self.lower, quantity=self.quantity, kind="lower bound", method=self.method, details=self.details)


def json_safe(x: Any) -> Any:
    """Plain JSON data for ``x`` (arrays as lists, non-finite floats as the strings "inf", "-inf", "nan").

    >>> json_safe({"epsilon": float("inf"), "orders": (1.5, 2)})
    {'epsilon': 'inf', 'orders': [1.5, 2]}
    """
    if isinstance(x, np.ndarray):
        return [json_safe(v) for v in x.tolist()]
    if isinstance(x, (float, np.floating)):
        f = float(x)
        return f if math.isfinite(f) else ("inf" if f > 0 else "-inf" if f < 0 else "nan")
    if isinstance(x, (np.integer,)):
        return int(x)
    if isinstance(x, Mapping):
        return {str(k): json_safe(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [json_safe(v) for v in x]
    return x


def to_json(result: Value | Interval) -> dict[str, Any]:
    """Plain JSON data (non-finite floats as strings) for a :class:`Value` or :class:`Interval`.

    Examples
    --------
    >>> to_json(Value(value=2.0, quantity="epsilon", kind="upper bound", method="PLD"))
    {'quantity': 'epsilon', 'kind': 'upper bound', 'method': 'PLD', 'value': 2.0}
    """
    if isinstance(result, Value):
        out: dict[str, Any] = {"quantity": result.quantity, "kind": result.kind, "method": result.method,
                               "value": json_safe(result.value)}
    else:
        out = {"quantity": result.quantity, "kind": "interval", "method": result.method,
               "lower": json_safe(result.lower), "upper": json_safe(result.upper)}
    if result.details:
        out["details"] = json_safe(result.details)
    return out

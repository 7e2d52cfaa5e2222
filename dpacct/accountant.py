"""The common accountant interface and the registry behind ``accountant="..."``."""

from __future__ import annotations

import abc
from collections.abc import Callable
from typing import Any, TypeVar

import numpy as np
from numpy.typing import ArrayLike, NDArray

from dpacct import _check
from dpacct.mechanisms import Mechanism

__all__ = [
    "Accountant",
    "UnsupportedMechanismError",
    "available_accountants",
    "make_accountant",
    "register_accountant",
]

Self = TypeVar("Self", bound="Accountant")


class UnsupportedMechanismError(ValueError):
    """An accountant was asked to compose a mechanism it cannot account for."""


class Accountant(abc.ABC):
    """Tracks the privacy cost of a sequence of mechanisms.

    Subclasses implement :meth:`supports`, :meth:`_compose` (add ``count``
    repetitions of a supported mechanism to the internal state) and the
    getters. Composition is all-or-nothing: the mechanism and count are checked
    before any state changes.

    ``history`` is run-length compressed: a tuple of ``(mechanism, count)`` runs in
    the order they were composed, consecutive identical mechanisms merged.
    ``len(accountant)`` is the total number of composed mechanisms (the sum of the
    counts), not the number of runs.
    """

    name: str = ""

    def __init__(self) -> None:
        self._history: list[tuple[Mechanism, int]] = []

    @abc.abstractmethod
    def supports(self, mechanism: Mechanism) -> bool:
        """Whether this accountant can compose ``mechanism``."""

    @abc.abstractmethod
    def _compose(self, mechanism: Mechanism, count: int) -> None:
        """Add ``count`` repetitions of a supported mechanism to the state."""

    @abc.abstractmethod
    def get_epsilon(self, delta: ArrayLike) -> float | NDArray[np.float64]:
        """An upper bound on epsilon such that the composition is (epsilon, delta)-DP."""

    @abc.abstractmethod
    def get_delta(self, epsilon: ArrayLike) -> float | NDArray[np.float64]:
        """An upper bound on delta such that the composition is (epsilon, delta)-DP."""

    def get_epsilon_details(self, delta: float) -> dict[str, Any]:
        """Epsilon for one delta with what produced it (for reports and the CLI).

        Always has ``"epsilon"`` and ``"kind"``; accountants add their own keys
        (e.g. the optimal order for RDP).
        """
        return {"epsilon": float(self.get_epsilon(delta)), "kind": "upper bound"}

    def compose(self: Self, mechanism: Mechanism, count: int = 1) -> Self:
        """Compose ``count`` repetitions of ``mechanism``; returns ``self`` for chaining.

        Raises
        ------
        UnsupportedMechanismError
            If this accountant cannot handle the mechanism (state unchanged).
        ValueError
            If ``count`` is negative or not an integer (state unchanged).
        """
        n = _check.count("count", count)
        if not self.supports(mechanism):
            msg = f"{type(self).__name__} does not support {mechanism!r}"
            raise UnsupportedMechanismError(msg)
        if n == 0:
            return self
        self._compose(mechanism, n)
        if self._history and self._history[-1][0] == mechanism:
            self._history[-1] = (mechanism, self._history[-1][1] + n)
        else:
            self._history.append((mechanism, n))
        return self

    @property
    def history(self) -> tuple[tuple[Mechanism, int], ...]:
        """Run-length compressed ``(mechanism, count)`` runs, oldest first."""
        return tuple(self._history)

    def __len__(self) -> int:
        """Total number of composed mechanisms (sum of the run counts)."""
        return sum(count for _, count in self._history)


_REGISTRY: dict[str, Callable[..., Accountant]] = {}


def register_accountant(name: str, factory: Callable[..., Accountant]) -> None:
    """Make ``factory`` available as ``accountant=name`` in the one-call API."""
    _REGISTRY[name] = factory


def available_accountants() -> tuple[str, ...]:
    """Names accepted by ``accountant=`` in :func:`dpacct.epsilon` and friends."""
    return tuple(_REGISTRY)


def make_accountant(name: str, **options: Any) -> Accountant:
    """Build a fresh accountant by registry name, passing ``options`` to it."""
    _check.one_of("accountant", name, available_accountants())
    return _REGISTRY[name](**options)

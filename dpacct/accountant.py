"""The common accountant interface and the registry behind ``accountant="..."``."""

from __future__ import annotations

import abc
import difflib
import importlib
import inspect
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

import numpy as np
from numpy.typing import ArrayLike, NDArray

from dpacct import _check
from dpacct.mechanisms import Mechanism

__all__ = [
    "DEFAULT_ACCOUNTANT",
    "Accountant",
    "NoiseGuide",
    "accountant_guide",
    "UnsupportedMechanismError",
    "accountant_factory",
    "accountant_options",
    "available_accountants",
    "check_options",
    "make_accountant",
    "register_accountant",
    "unregister_accountant",
]

Self = TypeVar("Self", bound="Accountant")


class UnsupportedMechanismError(ValueError):
    """An accountant was asked to compose a mechanism it cannot account for."""


@dataclass(frozen=True, slots=True, kw_only=True)
class NoiseGuide:
    """What a fast guide knows about the smallest noise multiplier meeting a budget.

    An accountant may offer one (:meth:`Accountant.noise_multiplier_guide`) to speed up
    :func:`dpacct.calibrate` for Poisson-sampled runs; calibration works without it.

    Attributes
    ----------
    safe : float
        A noise multiplier whose epsilon under this accountant (default options) is
        expected to meet the target; calibration checks it and searches below it.
    unsafe : float or None
        A noise multiplier proven *not* to meet the target (by a certified lower bound), if known.
    unsafe_epsilon : float or None
        A value standing in for the epsilon at ``unsafe`` (it only steers the root finder).
    search_epsilon : callable or None
        A cheaper function of the noise multiplier that is an upper bound on this
        accountant's epsilon, used for the search; the answer is re-accounted exactly.
    fallback : float or None
        Where to restart the search if ``safe`` turns out not to meet the target.
    min_rtol : float
        The finest relative resolution worth searching to (the accountant's own error).
    safe_epsilon : float or None
        This accountant's epsilon (default options) at ``safe``, if the guide computed it
        (calibration then does not evaluate ``safe`` again); ``unsafe_epsilon`` is then
        also the accountant's own value.
    evaluations : int
        Evaluations of this accountant the guide spent (reported by calibration).
    """

    safe: float
    unsafe: float | None = None
    unsafe_epsilon: float | None = None
    search_epsilon: Callable[[float], float] | None = None
    fallback: float | None = None
    min_rtol: float = 0.0
    safe_epsilon: float | None = None
    evaluations: int = 0


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

    @classmethod
    def noise_multiplier_guide(
        cls, *, sampling_probability: float, steps: int, delta: float, epsilon: float
    ) -> NoiseGuide | None:
        """Optional fast guide for calibrating the noise of ``steps`` Poisson-sampled Gaussian steps.

        Accountants that can bracket the answer cheaply override this; the default says
        nothing (``None``) and calibration then searches with :meth:`get_epsilon` alone.
        Only used for the accountant's default options.
        """
        return None

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


# The built-in accountants, listed here (not registered by import side effects) and
# imported on first use. A new family adds one line: "name": "module:Class".
_BUILTIN: dict[str, str] = {
    "rdp": "dpacct.rdp.accountant:RDPAccountant",
    "pld": "dpacct.pld.accountant:PLDAccountant",
    "zcdp": "dpacct.zcdp.accountant:ZCDPAccountant",
    "gaussian": "dpacct.gaussian:GaussianAccountant",
    "fdp": "dpacct.fdp.accountant:FDPAccountant",
}
_REGISTRY: dict[str, Callable[..., Accountant]] = {}


def _builtin(name: str) -> Callable[..., Accountant]:
    module, _, attribute = _BUILTIN[name].partition(":")
    factory: Callable[..., Accountant] = getattr(importlib.import_module(module), attribute)
    return factory


def register_accountant(name: str, factory: Callable[..., Accountant], *, replace: bool = False) -> None:
    """Make ``factory`` available as ``accountant=name`` in the one-call API, calibration and the CLI.

    Parameters
    ----------
    name : str
        A new name (letters, digits, ``_`` or ``-``).
    factory : callable
        Builds a fresh :class:`Accountant`; its keyword arguments are the options that
        :func:`make_accountant` accepts.
    replace : bool
        Allow replacing an accountant registered under ``name`` (never a built-in one).

    Raises
    ------
    ValueError
        If ``name`` is taken (unless ``replace``, or it is the same factory again) or malformed.
    """
    if not isinstance(name, str) or not name or not all(c.isalnum() or c in "_-" for c in name):
        msg = f"name must be a non-empty string of letters, digits, '_' or '-', got {name!r}"
        raise ValueError(msg)
    if not callable(factory):
        msg = f"factory must be callable, got {type(factory).__name__}"
        raise TypeError(msg)
    if name in _BUILTIN:
        if factory is _builtin(name):
            return  # the built-in registering itself: nothing to do
        msg = f"accountant name {name!r} is taken by the built-in {_BUILTIN[name]}; choose another name"
        raise ValueError(msg)
    if name in _REGISTRY and _REGISTRY[name] is not factory and not replace:
        msg = f"accountant name {name!r} is already registered ({_REGISTRY[name]!r}); pass replace=True to replace it"
        raise ValueError(msg)
    _REGISTRY[name] = factory


def unregister_accountant(name: str) -> None:
    """Remove an accountant added with :func:`register_accountant` (built-ins cannot be removed)."""
    if name in _BUILTIN:
        msg = f"accountant {name!r} is built in and cannot be unregistered"
        raise ValueError(msg)
    if name not in _REGISTRY:
        msg = f"no accountant {name!r} is registered; registered: {', '.join(available_accountants())}"
        raise ValueError(msg)
    del _REGISTRY[name]


#: The accountant of :func:`dpacct.epsilon`, :func:`dpacct.delta` and :func:`dpacct.calibrate` when none is
#: named, as on the command line: PLD, whose certified upper bound is the tightest of the built-ins (its
#: certified lower bound says how tight). ``accountant="rdp"`` gives the Renyi DP bound: faster, looser.
DEFAULT_ACCOUNTANT = "pld"


def available_accountants() -> tuple[str, ...]:
    """Names accepted by ``accountant=`` in :func:`dpacct.epsilon` and friends (built-ins first)."""
    return tuple(_BUILTIN) + tuple(n for n in _REGISTRY if n not in _BUILTIN)


def accountant_factory(name: str) -> Callable[..., Accountant]:
    """The factory registered as ``name`` (``ValueError`` naming the choices otherwise)."""
    _check.one_of("accountant", name, available_accountants())
    return _builtin(name) if name in _BUILTIN else _REGISTRY[name]


# Guides offered for an accountant from outside its class (the PLD engine is kept apart
# from its calibration guide). A new family with a guide defines it on its class instead.
_BUILTIN_GUIDES: dict[str, str] = {"pld": "dpacct.pld.guide:noise_multiplier_guide"}
_GUIDES: dict[str, Callable[..., NoiseGuide | None]] = {}


def accountant_guide(name: str) -> Callable[..., NoiseGuide | None]:
    """The noise-multiplier guide of accountant ``name`` (see :meth:`Accountant.noise_multiplier_guide`)."""
    if name in _BUILTIN_GUIDES:
        module, _, attribute = _BUILTIN_GUIDES[name].partition(":")
        guide: Callable[..., NoiseGuide | None] = getattr(importlib.import_module(module), attribute)
        return guide
    if name in _GUIDES:
        return _GUIDES[name]
    factory = accountant_factory(name)
    method = getattr(factory, "noise_multiplier_guide", None)
    if callable(method):
        return method  # type: ignore[no-any-return]
    return Accountant.noise_multiplier_guide


def accountant_options(name: str) -> tuple[str, ...]:
    """The keyword options the accountant ``name`` accepts (from its factory's signature)."""
    factory = accountant_factory(name)
    try:
        parameters = inspect.signature(factory).parameters.values()
    except (TypeError, ValueError):  # pragma: no cover - builtins without a signature
        return ()
    return tuple(p.name for p in parameters if p.kind in (p.KEYWORD_ONLY, p.POSITIONAL_OR_KEYWORD))


def _options_or_none(name: str) -> tuple[str, ...]:
    """``accountant_options(name)``, or none where the accountant cannot be loaded (a hint only)."""
    try:
        return accountant_options(name)
    except Exception:  # noqa: BLE001 - a broken third-party registration must not hide the real error
        return ()


def check_options(name: str, options: Mapping[str, Any], *, also_valid: Sequence[str] = ()) -> None:
    """Raise a clear ``ValueError`` for an option the accountant ``name`` does not take.

    ``also_valid`` lists the caller's own keywords, used only to suggest a spelling.
    """
    factory = accountant_factory(name)
    try:
        parameters = inspect.signature(factory).parameters.values()
    except (TypeError, ValueError):  # pragma: no cover
        return
    if any(p.kind is p.VAR_KEYWORD for p in parameters):
        return
    accepted = accountant_options(name)
    for key in options:
        if key not in accepted:
            close = difflib.get_close_matches(key, list(accepted) + list(also_valid), n=1, cutoff=0.5)
            if key in _SYNONYMS:
                close = [_SYNONYMS[key]]
            hint = f"; did you mean {close[0]}=?" if close else ""
            if key not in _SYNONYMS:
                # An option of another accountant given without naming it (most often RDP's orders= or
                # conversion= since PLD became the default), or a misspelling of one.
                others = {other: _options_or_none(other) for other in available_accountants() if other != name}
                owner = next((other for other, taken in others.items() if key in taken), None)
                if owner is not None:
                    hint = f"; it is an option of accountant {owner!r}: pass accountant={owner!r}"
                elif not close:
                    for other, taken in others.items():
                        near = difflib.get_close_matches(key, list(taken), n=1, cutoff=0.8)
                        if near:
                            hint = (f"; did you mean {near[0]}= (an option of accountant {other!r}: "
                                    f"pass accountant={other!r})?")
                            break
            takes = f"it takes {', '.join(accepted)}" if accepted else "it takes no options"
            msg = f"unknown keyword argument {key}= for accountant {name!r} ({takes}){hint}"
            raise ValueError(msg)


# Names other libraries use for dpacct's parameters (opacus, dp-accounting, prv-accountant).
_SYNONYMS = {
    "sample_rate": "sampling_probability",
    "q": "sampling_probability",
    "sigma": "noise_multiplier",
    "noise": "noise_multiplier",
    "eps": "epsilon",
    "target_epsilon": "epsilon",
    "target_delta": "delta",
    "num_steps": "steps",
    "niter": "steps",
    "iterations": "steps",
    "alphas": "orders",
    "num_epochs": "epochs",
}


def make_accountant(name: str, **options: Any) -> Accountant:
    """Build a fresh accountant by registry name, passing ``options`` to it (checked first)."""
    check_options(name, options)
    return accountant_factory(name)(**options)

"""opacus drop-in: dpacct's accountants behind opacus' accountant interface.

Importing :mod:`dpacct.torch` with opacus installed registers two accountants in
opacus' registry, so that ``PrivacyEngine(accountant="dpacct-pld")`` (or
``"dpacct-rdp"``) works unchanged:

* ``"dpacct-pld"``: :class:`DPACCTPLDAccountant`, dpacct's PLD accountant (certified
  upper bound, pessimistic discretisation);
* ``"dpacct-rdp"``: :class:`DPACCTRDPAccountant`, dpacct's RDP accountant.

Both keep opacus' ``history`` layout, run-length ``(noise_multiplier, sample_rate,
steps)``; ``len()`` is the number of steps. ``PrivacyEngine.make_private_with_epsilon``
calibrates the noise with :func:`dpacct.calibrate` for these two names (the returned
noise multiplier meets the budget by dpacct's certified epsilon, and the number of steps
``epochs / sample_rate`` is rounded up, never down); every other accountant name keeps
opacus' own calibration.

What opacus accounts is Poisson sampling at ``sample_rate``: with these two accountants,
``make_private(..., poisson_sampling=False)`` (shuffled batches, which opacus would still
account as Poisson: not a guarantee) is refused with an error that says what to use. A step that accumulated several batches
(``accumulated_iterations > 1``) is refused: opacus would account it at rate
``sample_rate * k``, which is not a bound; :class:`dpacct.torch.PrivacyAccountant`
accounts accumulation and shuffled batches honestly.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable
from typing import Any

import opacus.accountants.utils
import opacus.privacy_engine
from opacus.accountants import IAccountant
from opacus.accountants.registry import register_accountant

from dpacct import _check
from dpacct.accountant import make_accountant
from dpacct.calibration import calibrate
from dpacct.mechanisms import PoissonSampledGaussianMechanism

__all__ = ["OPACUS_NAMES", "DPACCTPLDAccountant", "DPACCTRDPAccountant", "register"]


class _DPACCTOpacusAccountant(IAccountant):  # type: ignore[misc]
    """opacus' accountant interface over a dpacct accountant (see the module docstring)."""

    _dpacct_accountant = ""

    def __init__(self) -> None:
        self.history: list[tuple[float, float, int]] = []

    @classmethod
    def mechanism(cls) -> str:
        """The registry name, ``"dpacct-" + accountant``."""
        return "dpacct-" + cls._dpacct_accountant

    def step(self, *, noise_multiplier: float, sample_rate: float) -> None:
        """Record one step of Poisson sampling at ``sample_rate`` with ``noise_multiplier``."""
        sigma = _check.noise_multiplier(noise_multiplier)
        q = _check.probability("sample_rate", sample_rate)
        if self.history and self.history[-1][:2] == (sigma, q):
            self.history[-1] = (sigma, q, self.history[-1][2] + 1)
        else:
            self.history.append((sigma, q, 1))

    def __len__(self) -> int:
        """Number of steps (the sum over the history, not the number of runs)."""
        return sum(int(steps) for _, _, steps in self.history)

    def get_epsilon(self, delta: float, *args: Any, **kwargs: Any) -> float:
        """An upper bound on epsilon of the history at ``delta`` (dpacct's accountant)."""
        acct = make_accountant(self._dpacct_accountant)
        for sigma, q, steps in self.history:
            acct.compose(PoissonSampledGaussianMechanism(noise_multiplier=sigma, sampling_probability=q),
                         _check.count("steps", steps))
        if len(acct) == 0:
            _check.delta(delta)
            return 0.0
        return float(acct.get_epsilon(delta))

    def get_optimizer_hook_fn(self, sample_rate: float) -> Callable[[Any], None]:
        """The hook opacus' ``DPOptimizer`` calls after each noised step."""
        q = _check.probability("sample_rate", sample_rate)

        def hook_fn(optim: Any) -> None:
            k = int(optim.accumulated_iterations)
            if k != 1:
                msg = (f"this step accumulated {k} batches: opacus would account it at sample_rate * {k}, which is "
                       "not a privacy bound; take one optimizer step per Poisson batch (opacus' BatchMemoryManager "
                       "splits a batch without this problem) or use dpacct.torch.PrivacyAccountant")
                raise ValueError(msg)
            self.step(noise_multiplier=optim.noise_multiplier, sample_rate=q)

        return hook_fn


class DPACCTPLDAccountant(_DPACCTOpacusAccountant):
    """opacus accountant ``"dpacct-pld"``: dpacct's PLD accountant (certified upper bound)."""

    _dpacct_accountant = "pld"


class DPACCTRDPAccountant(_DPACCTOpacusAccountant):
    """opacus accountant ``"dpacct-rdp"``: dpacct's RDP accountant."""

    _dpacct_accountant = "rdp"


#: opacus registry name -> class.
OPACUS_NAMES: dict[str, type[_DPACCTOpacusAccountant]] = {
    DPACCTPLDAccountant.mechanism(): DPACCTPLDAccountant,
    DPACCTRDPAccountant.mechanism(): DPACCTRDPAccountant,
}


def _wrap(original: Callable[..., float]) -> Callable[..., float]:
    if getattr(original, "_dpacct_wrapped", False):
        return original

    @functools.wraps(original)
    def get_noise_multiplier(
        *,
        target_epsilon: float,
        target_delta: float,
        sample_rate: float,
        epochs: float | None = None,
        steps: int | None = None,
        accountant: str = "rdp",
        epsilon_tolerance: float = 0.01,
        **kwargs: Any,
    ) -> float:
        if accountant not in OPACUS_NAMES:
            return original(target_epsilon=target_epsilon, target_delta=target_delta, sample_rate=sample_rate,
                            epochs=epochs, steps=steps, accountant=accountant, epsilon_tolerance=epsilon_tolerance,
                            **kwargs)
        if (steps is None) == (epochs is None):
            msg = "give exactly one of epochs and steps"
            raise ValueError(msg)
        q = _check.probability("sample_rate", sample_rate)
        if steps is None:
            assert epochs is not None
            e = _check.positive("epochs", epochs)
            # Round up: fewer steps than will run would calibrate too little noise.
            steps = max(1, _check.ceil_count(e / q))  # round-off in e / q is absorbed
        result = calibrate(epsilon=target_epsilon, delta=target_delta, sampling_probability=q, steps=steps,
                           accountant=OPACUS_NAMES[accountant]._dpacct_accountant)
        return result.noise_multiplier

    get_noise_multiplier._dpacct_wrapped = True  # type: ignore[attr-defined]
    return get_noise_multiplier


def _guard_sampling(original: Callable[..., Any]) -> Callable[..., Any]:
    """Refuse shuffled batches (``poisson_sampling=False``) when a dpacct accountant is in use."""
    if getattr(original, "_dpacct_wrapped", False):
        return original

    @functools.wraps(original)
    def _prepare_data_loader(self: Any, data_loader: Any, *args: Any, **kwargs: Any) -> Any:
        if isinstance(self.accountant, _DPACCTOpacusAccountant) and kwargs.get("poisson_sampling", True) is False:
            msg = (f"accountant={self.accountant.mechanism()!r} accounts Poisson sampling, but poisson_sampling=False "
                   "draws shuffled batches, for which the Poisson number is not a guarantee; keep "
                   "poisson_sampling=True, or account shuffled batches with dpacct.torch.PrivacyAccountant "
                   "and a dpacct.torch.ShuffleBatchSampler")
            raise ValueError(msg)
        return original(self, data_loader, *args, **kwargs)

    _prepare_data_loader._dpacct_wrapped = True  # type: ignore[attr-defined]
    return _prepare_data_loader


def register() -> None:
    """Register ``"dpacct-pld"``/``"dpacct-rdp"`` with opacus and route their calibration to dpacct (idempotent)."""
    for name, cls in OPACUS_NAMES.items():
        register_accountant(name, cls, force=True)
    opacus.accountants.utils.get_noise_multiplier = _wrap(opacus.accountants.utils.get_noise_multiplier)
    opacus.privacy_engine.get_noise_multiplier = _wrap(opacus.privacy_engine.get_noise_multiplier)  # type: ignore[attr-defined]
    engine = opacus.privacy_engine.PrivacyEngine
    engine._prepare_data_loader = _guard_sampling(engine._prepare_data_loader)

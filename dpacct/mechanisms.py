"""Frozen descriptions of mechanisms.

A mechanism is data: it says what was released and under which neighbouring
relation, and knows nothing about how to account for it. Accountants decide
whether they support a mechanism (:meth:`dpacct.accountant.Accountant.supports`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, Union

from dpacct import _check

__all__ = [
    "NEIGHBORING_RELATIONS",
    "GaussianMechanism",
    "Mechanism",
    "NeighboringRelation",
    "PoissonSampledGaussianMechanism",
]

NeighboringRelation = Literal["add_remove", "replace_one", "zero_out"]
NEIGHBORING_RELATIONS: tuple[NeighboringRelation, ...] = ("add_remove", "replace_one", "zero_out")


@dataclass(frozen=True, slots=True, kw_only=True)
class GaussianMechanism:
    """The Gaussian mechanism: a query of L2 sensitivity C plus N(0, (noise_multiplier * C)^2 I).

    Parameters
    ----------
    noise_multiplier : float
        Noise standard deviation divided by the clipping norm C; finite and ``> 0``.
    neighboring_relation : {"add_remove", "zero_out", "replace_one"}
        Neighbouring datasets differ by adding/removing one record (sensitivity C),
        zeroing one record out (sensitivity C), or replacing one record
        (sensitivity 2C, so the effective noise multiplier is halved).
    """

    noise_multiplier: float
    neighboring_relation: NeighboringRelation = "add_remove"

    def __post_init__(self) -> None:
        object.__setattr__(self, "noise_multiplier", _check.noise_multiplier(self.noise_multiplier))
        _check.one_of("neighboring_relation", self.neighboring_relation, NEIGHBORING_RELATIONS)

    @property
    def effective_noise_multiplier(self) -> float:
        """Noise standard deviation divided by the L2 sensitivity under the relation."""
        if self.neighboring_relation == "replace_one":
            return self.noise_multiplier / 2.0
        return self.noise_multiplier


@dataclass(frozen=True, slots=True, kw_only=True)
class PoissonSampledGaussianMechanism:
    """One DP-SGD step: Poisson subsampling at rate q, then the Gaussian mechanism.

    Each record is included independently with probability ``sampling_probability``;
    the clipped per-example gradients of the batch are summed and Gaussian noise of
    standard deviation ``noise_multiplier * C`` is added.

    Parameters
    ----------
    noise_multiplier : float
        Noise standard deviation divided by the clipping norm; finite and ``> 0``.
    sampling_probability : float
        Poisson inclusion probability q of each record, in ``[0, 1]``.
    neighboring_relation : {"add_remove", "zero_out"}
        Add/remove adjacency is the standard DP-SGD setting. Zero-out adjacency
        (Chua et al., ICML 2024) has the same dominating pairs for this mechanism.
        Replace-one adjacency is not defined for Poisson sampling and is rejected.
    """

    noise_multiplier: float
    sampling_probability: float
    neighboring_relation: NeighboringRelation = "add_remove"

    def __post_init__(self) -> None:
        object.__setattr__(self, "noise_multiplier", _check.noise_multiplier(self.noise_multiplier))
        object.__setattr__(
            self,
            "sampling_probability",
            _check.probability("sampling_probability", self.sampling_probability),
        )
        _check.one_of("neighboring_relation", self.neighboring_relation, ("add_remove", "zero_out"))


Mechanism = Union[GaussianMechanism, PoissonSampledGaussianMechanism]

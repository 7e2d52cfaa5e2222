"""The shared grid of DP-SGD cases every library is timed on."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Case:
    """One DP-SGD configuration: Poisson rate q, noise multiplier sigma, T steps, target delta."""

    noise_multiplier: float
    sampling_probability: float
    steps: int
    delta: float

    @property
    def label(self) -> str:
        return f"s={self.noise_multiplier:g} q={self.sampling_probability:.3g} T={self.steps:g} d={self.delta:g}"


MNIST_Q = 256 / 60000

#: Default grid: small enough for a 2-core machine (the whole run takes a few minutes).
DEFAULT = [
    Case(1.1, MNIST_Q, 1_000, 1e-5),
    Case(1.1, MNIST_Q, 10_000, 1e-5),
    Case(1.1, MNIST_Q, 100_000, 1e-5),
    Case(4.0, 0.01, 10_000, 1e-5),  # Abadi et al. 2016
    Case(0.8, 0.001, 10_000, 1e-5),
    Case(2.0, 0.1, 1_000, 1e-5),
]

#: Heavier grid behind --large.
LARGE = DEFAULT + [
    Case(1.1, MNIST_Q, 1_000_000, 1e-5),
    Case(1.1, MNIST_Q, 10_000, 1e-10),
    Case(0.6, 0.02, 10_000, 1e-8),
]

#: Target epsilons for the noise-calibration timing.
CALIBRATION = [(Case(1.0, MNIST_Q, 10_000, 1e-5), 1.0), (Case(1.0, MNIST_Q, 10_000, 1e-5), 3.0)]

"""Fresh-permutation multi-epoch shuffle lower bound: threshold tests, deterministic bound, published values."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.special import log_ndtr

from dpacct import gaussian
from dpacct.samplers.shuffle_fresh import delta_shuffle_lower_fresh, epsilon_shuffle_lower_fresh

# The bound rounds each bucket's loss down by < D = 1e-4 (the default grid for E = 1),
# so it dominates every test on the max statistic at epsilon + D rather than at epsilon.
GRID = 1e-4
# The cells beyond log F < -60 (left) and log(1 - F) < -60 (right) are lumped into
# two tail cells, so deltas below ~e^-60 (~1e-26) are not resolved: absolute slack 1e-20.
TAIL_ATOL = 1e-20


def _threshold_bound(sigma: float, steps: int, epsilon: np.ndarray) -> np.ndarray:
    """max over C in 0..100 (step 0.01, the paper's scan) of P_S(E_C) - e^eps Q_S(E_C) (Chua et al. 2024)."""
    c = np.arange(0.0, 100.0 + 1e-9, 0.01)
    p = -np.expm1(log_ndtr((c - 2) / sigma) + (steps - 1) * log_ndtr(c / sigma))
    q = -np.expm1(log_ndtr((c - 1) / sigma) + (steps - 1) * log_ndtr(c / sigma))
    return np.max(p[:, None] - np.exp(epsilon)[None, :] * q[:, None], axis=0)


@pytest.mark.parametrize("sigma", [0.4, 0.8, 2.0])
@pytest.mark.parametrize("steps", [1, 10, 10_000, 1_000_000])
def test_one_epoch_is_between_threshold_test_and_deterministic(sigma: float, steps: int) -> None:
    """E = 1: threshold-test lower bound (at eps + D) <= ours <= the deterministic Gaussian curve delta_D."""
    eps = np.array([0.5, 1.0, 2.0, 4.0, 8.0, 12.0])
    ours = delta_shuffle_lower_fresh(noise_multiplier=sigma, steps=steps, epochs=1, epsilon=eps)
    assert np.all(ours >= _threshold_bound(sigma, steps, eps + GRID) - TAIL_ATOL)
    assert np.all(ours <= gaussian.delta_for_epsilon(noise_multiplier=sigma, epsilon=eps))


def test_published_values() -> None:
    """Chua et al., ICML 2024, arXiv:2403.17673, sigma 0.4, T 1e4: delta_S(4) >= 0.226, (12) >= 7.47e-5."""
    d4, d12 = delta_shuffle_lower_fresh(noise_multiplier=0.4, steps=10_000, epochs=1, epsilon=[4.0, 12.0])
    # Published numbers are rounded to 3 significant digits: tolerance half a unit in the last place.
    assert 0.226 - 5e-4 <= d4 <= 0.244
    assert d12 >= 7.47e-5 - 5e-8
    assert d4 <= gaussian.delta_for_epsilon(noise_multiplier=0.4, epsilon=4.0)
    # Chua et al. 2024: delta = 1e-6, T = 1e5, sigma = 0.4 gives eps_S >= 14.45 (4 significant digits).
    eps = epsilon_shuffle_lower_fresh(noise_multiplier=0.4, steps=100_000, epochs=1, delta=1e-6)
    assert 14.45 - 5e-3 <= eps <= gaussian.epsilon_for_delta(noise_multiplier=0.4, delta=1e-6)


def test_single_batch_is_the_gaussian_mechanism() -> None:
    """T = 1 makes the pair N(2, s^2) vs N(1, s^2): ours is below the exact curve and above it at eps + 2D."""
    eps = np.array([0.0, 0.5, 2.0, 5.0])
    ours = delta_shuffle_lower_fresh(noise_multiplier=0.7, steps=1, epochs=3, epsilon=eps)
    exact = gaussian.delta_for_epsilon(noise_multiplier=0.7 / math.sqrt(3), epsilon=eps)
    assert np.all(ours <= exact)
    # Three epochs, each rounded down by <= D plus the loss's change across a cell (~D).
    assert np.all(ours >= gaussian.delta_for_epsilon(noise_multiplier=0.7 / math.sqrt(3), epsilon=eps + 6 * GRID))


@pytest.mark.parametrize("epochs", [2, 5])
def test_multi_epoch_is_below_deterministic(epochs: int) -> None:
    """E > 1: ours <= delta_D with sigma/sqrt(E) (shuffling never beats deterministic batches, Chua et al. 2024)."""
    eps = np.array([1.0, 4.0, 8.0])
    ours = delta_shuffle_lower_fresh(noise_multiplier=0.5, steps=1000, epochs=epochs, epsilon=eps)
    assert np.all(ours <= gaussian.delta_for_epsilon(noise_multiplier=0.5 / math.sqrt(epochs), epsilon=eps))
    assert np.all(ours > 0.0)


@settings(max_examples=10)
@given(
    sigma=st.sampled_from([0.5, 1.0]),
    steps=st.sampled_from([10, 100]),
    epochs=st.integers(1, 3),
    eps=st.floats(0.0, 8.0),
)
def test_monotone_in_epochs_and_epsilon(sigma: float, steps: int, epochs: int, eps: float) -> None:
    """delta grows with the number of epochs and does not grow with epsilon."""
    d = delta_shuffle_lower_fresh(noise_multiplier=sigma, steps=steps, epochs=epochs, epsilon=[eps, eps + 0.5])
    more = delta_shuffle_lower_fresh(noise_multiplier=sigma, steps=steps, epochs=epochs + 1, epsilon=eps)
    assert d[1] <= d[0]
    assert more >= d[0]


@pytest.mark.parametrize("delta", [0.1, 1e-3, 1e-6])
def test_epsilon_inverts_delta(delta: float) -> None:
    """epsilon(delta) is the certified crossing: delta(eps) > delta just below it and <= delta just above it."""
    kwargs = {"noise_multiplier": 0.6, "steps": 1000, "epochs": 2}
    eps = epsilon_shuffle_lower_fresh(delta=delta, **kwargs)
    assert delta_shuffle_lower_fresh(epsilon=eps, **kwargs) > delta
    assert delta_shuffle_lower_fresh(epsilon=eps + 1e-6, **kwargs) <= delta
    assert eps <= gaussian.epsilon_for_delta(noise_multiplier=0.6 / math.sqrt(2), delta=delta)


def test_bad_input_raises() -> None:
    """Bad parameters raise ValueError/TypeError naming the parameter, range and value."""
    with pytest.raises(ValueError, match=r"^noise_multiplier must be finite and > 0, got -1.0"):
        delta_shuffle_lower_fresh(noise_multiplier=-1.0, steps=10, epochs=1, epsilon=1.0)
    with pytest.raises(ValueError, match=r"^steps must be an integer >= 1, got 0"):
        delta_shuffle_lower_fresh(noise_multiplier=1.0, steps=0, epochs=1, epsilon=1.0)
    with pytest.raises(ValueError, match=r"^epochs must be an integer >= 1, got 0"):
        epsilon_shuffle_lower_fresh(noise_multiplier=1.0, steps=10, epochs=0, delta=1e-5)
    with pytest.raises(TypeError, match=r"^steps must be an integer, got str"):
        delta_shuffle_lower_fresh(noise_multiplier=1.0, steps="10", epochs=1, epsilon=1.0)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=r"^epsilon must be finite and >= 0, got -1.0"):
        delta_shuffle_lower_fresh(noise_multiplier=1.0, steps=10, epochs=1, epsilon=-1.0)
    with pytest.raises(ValueError, match=r"^delta must be in \(0, 1\), got 1.0"):
        epsilon_shuffle_lower_fresh(noise_multiplier=1.0, steps=10, epochs=1, delta=1.0)

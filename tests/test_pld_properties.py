"""PLD accountant: hypothesis properties that any pair of certified bounds must satisfy.

The grid is chosen per query, so two queries use different grids and their upper
bounds need not be ordered like the true values. What must hold is the
cross-consistency of certified bounds: for a more private run B than A (larger
sigma, fewer steps or a smaller sampling rate), lower(B) <= true(B) <= true(A) <=
upper(A). A violation proves that one of the two bounds is wrong. No tolerance
is used: the bounds are certified, so any violation is a bug.
"""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from dpacct import PLDAccountant, RDPAccountant

SIGMA = st.floats(min_value=0.6, max_value=5.0)
RATE = st.floats(min_value=1e-3, max_value=0.5)
STEPS = st.integers(min_value=1, max_value=2000)
DELTA = st.sampled_from([1e-3, 1e-5, 1e-8])
FACTOR = st.floats(min_value=1.0, max_value=1.5)


def _bounds(sigma: float, q: float, steps: int, delta: float) -> tuple[float, float]:
    acct = PLDAccountant().step(noise_multiplier=sigma, sampling_probability=q, count=steps)
    lower, upper = acct.epsilon_bounds(delta)
    return float(lower), float(upper)


@settings(max_examples=25, deadline=None)
@given(sigma=SIGMA, q=RATE, steps=STEPS, delta=DELTA, factor=FACTOR)
def test_more_noise_is_not_less_private(sigma: float, q: float, steps: int, delta: float, factor: float) -> None:
    """lower(sigma * factor) <= upper(sigma): epsilon is non-increasing in sigma."""
    lower_b, upper_b = _bounds(sigma * factor, q, steps, delta)
    lower_a, upper_a = _bounds(sigma, q, steps, delta)
    assert 0.0 <= lower_a <= upper_a
    assert lower_b <= upper_a


@settings(max_examples=25, deadline=None)
@given(sigma=SIGMA, q=RATE, steps=STEPS, delta=DELTA, factor=FACTOR)
def test_more_steps_and_larger_rate_are_not_more_private(
    sigma: float, q: float, steps: int, delta: float, factor: float
) -> None:
    """lower(T) <= upper(T') for T <= T', and lower(q) <= upper(q') for q <= q'."""
    more_steps = max(steps + 1, int(steps * factor))
    assert _bounds(sigma, q, steps, delta)[0] <= _bounds(sigma, q, more_steps, delta)[1]
    larger_rate = min(q * factor, 1.0)
    assert _bounds(sigma, q, steps, delta)[0] <= _bounds(sigma, larger_rate, steps, delta)[1]


@settings(max_examples=25, deadline=None)
@given(sigma=SIGMA, q=RATE, steps=STEPS, delta=DELTA)
def test_pld_lower_bound_is_below_rdp_and_upper_never_above(sigma: float, q: float, steps: int, delta: float) -> None:
    """RDP's epsilon is a certified upper bound too: PLD's lower bound is below it, PLD's upper never above it."""
    lower, upper = _bounds(sigma, q, steps, delta)
    rdp = float(RDPAccountant().step(noise_multiplier=sigma, sampling_probability=q, count=steps).get_epsilon(delta))
    assert lower <= rdp
    assert upper <= rdp


@settings(max_examples=25, deadline=None)
@given(sigma=SIGMA, q=RATE, steps=STEPS, epsilon=st.floats(min_value=0.05, max_value=4.0),
       factor=st.floats(min_value=1.0, max_value=2.0))
def test_delta_bounds_are_consistent_in_epsilon(sigma: float, q: float, steps: int, epsilon: float,
                                                factor: float) -> None:
    """0 <= lower <= upper <= 1 and lower delta(eps * factor) <= upper delta(eps): delta is non-increasing."""
    acct = PLDAccountant().step(noise_multiplier=sigma, sampling_probability=q, count=steps)
    lower_a, upper_a = acct.delta_bounds(epsilon)
    lower_b, upper_b = acct.delta_bounds(epsilon * factor)
    assert 0.0 <= lower_a <= upper_a <= 1.0
    assert 0.0 <= lower_b <= upper_b <= 1.0
    assert lower_b <= upper_a


@settings(max_examples=25, deadline=None)
@given(sigma=SIGMA, q=st.floats(min_value=1e-5, max_value=1.0), steps=st.integers(min_value=1, max_value=100_000),
       delta=st.sampled_from([1e-2, 1e-5, 1e-8, 1e-12]))
def test_epsilon_bounds_agree_with_delta_bounds(sigma: float, q: float, steps: int, delta: float) -> None:
    """The epsilon and delta queries build their own grids; their certified bounds must still agree.

    lower <= eps(delta) means delta(lower) >= delta, so delta's certified upper bound there is >= delta;
    eps(delta) <= upper means delta(upper) <= delta, so delta's certified lower bound there is <= delta.
    """
    acct = PLDAccountant().step(noise_multiplier=sigma, sampling_probability=q, count=steps)
    lower, upper = (float(v) for v in acct.epsilon_bounds(delta))
    if lower > 0.0:
        assert float(acct.delta_bounds(lower).upper) >= delta
    assert float(acct.delta_bounds(upper).lower) <= delta

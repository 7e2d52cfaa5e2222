"""The accountant contract and hypothesis properties of RDP accounting."""

from __future__ import annotations

import numpy as np
import pytest

import dpacct
from dpacct import GaussianMechanism, PoissonSampledGaussianMechanism, RDPAccountant, UnsupportedMechanismError

hypothesis = pytest.importorskip("hypothesis")
from hypothesis import given  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

STEP = PoissonSampledGaussianMechanism(noise_multiplier=1.0, sampling_probability=0.01)
GAUSSIAN_STEP = GaussianMechanism(noise_multiplier=10.0)
ACCOUNTANTS = [pytest.param(name, id=name) for name in dpacct.available_accountants()]


def supported_step(name: str) -> PoissonSampledGaussianMechanism | GaussianMechanism:
    """A DP-SGD step for accountants that support one, else a plain Gaussian (asked, not by name)."""
    return STEP if dpacct.make_accountant(name).supports(STEP) else GAUSSIAN_STEP


def test_zcdp_refuses_subsampled_steps() -> None:
    """zCDP has no certified bound for Poisson subsampling with 0 < q < 1: it refuses the step."""
    with pytest.raises(UnsupportedMechanismError):
        dpacct.make_accountant("zcdp").compose(STEP)


@pytest.mark.parametrize("name", ACCOUNTANTS)
def test_empty_accountant_is_free(name: str) -> None:
    """Nothing composed: epsilon is 0 and delta is 0."""
    acct = dpacct.make_accountant(name)
    assert acct.get_epsilon(1e-5) == 0.0
    assert acct.get_delta(0.5) == 0.0
    assert len(acct) == 0


@pytest.mark.parametrize("name", ACCOUNTANTS)
def test_unsupported_mechanism_leaves_state_unchanged(name: str) -> None:
    """Composing something that is not a mechanism raises UnsupportedMechanismError and changes nothing."""
    step = supported_step(name)
    acct = dpacct.make_accountant(name).compose(step, 10)
    before = acct.get_epsilon(1e-5)
    with pytest.raises(UnsupportedMechanismError, match="does not support 'not a mechanism'"):
        acct.compose("not a mechanism", 3)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="^count must be an integer >= 0, got -1$"):
        acct.compose(step, -1)
    assert acct.get_epsilon(1e-5) == before
    assert acct.history == ((step, 10),)


@pytest.mark.parametrize("name", ACCOUNTANTS)
def test_compose_count_equals_repeated_compose(name: str) -> None:
    """compose(m, count=k) gives the same epsilon as k single compositions; history is run-length."""
    step = supported_step(name)
    bulk = dpacct.make_accountant(name).compose(step, 50)
    single = dpacct.make_accountant(name)
    for _ in range(50):
        single.compose(step)
    assert single.history == ((step, 50),)
    assert len(single) == 50
    assert single.get_epsilon(1e-5) == bulk.get_epsilon(1e-5)


def test_heterogeneous_history_sums_rdp() -> None:
    """RDP of a mixed history is the sum of the runs' RDP (composition is additive)."""
    a = PoissonSampledGaussianMechanism(noise_multiplier=1.0, sampling_probability=0.01)
    b = GaussianMechanism(noise_multiplier=5.0)
    acct = RDPAccountant().compose(a, 100).compose(b, 2).compose(a, 100)
    assert [count for _, count in acct.history] == [100, 2, 100]
    expected = 200 * RDPAccountant().compose(a).rdp + 2 * RDPAccountant().compose(b).rdp
    np.testing.assert_allclose(acct.rdp, expected, rtol=1e-13)
    assert np.all(acct.rdp >= expected * (1 - 1e-15))


def test_replace_one_gaussian_doubles_the_sensitivity() -> None:
    """Replace-one adjacency doubles the L2 sensitivity: same as add/remove with half the noise."""
    replace = RDPAccountant().compose(GaussianMechanism(noise_multiplier=2.0, neighboring_relation="replace_one"))
    add_remove = RDPAccountant().compose(GaussianMechanism(noise_multiplier=1.0))
    np.testing.assert_array_equal(replace.rdp, add_remove.rdp)


sigmas = st.floats(min_value=0.3, max_value=20.0)
rates = st.floats(min_value=1e-5, max_value=1.0)
step_counts = st.integers(min_value=1, max_value=100_000)
deltas = st.floats(min_value=1e-12, max_value=0.1)


@pytest.mark.filterwarnings("ignore::dpacct.rdp.OrderGridWarning")
@given(sigma=sigmas, q=rates, steps=step_counts, delta=deltas, factor=st.floats(min_value=1.01, max_value=3.0))
def test_epsilon_monotone(sigma: float, q: float, steps: int, delta: float, factor: float) -> None:
    """RDP's epsilon grows with steps and q and shrinks with sigma and delta (PLD's certified intervals:
    tests/test_pld_properties.py)."""
    def eps(s: float = sigma, p: float = q, t: int = steps, d: float = delta) -> float:
        return float(dpacct.epsilon(noise_multiplier=s, sampling_probability=p, steps=t, delta=d, accountant="rdp"))

    base = eps()
    assert eps(s=sigma * factor) <= base
    assert eps(p=min(1.0, q * factor)) >= base
    assert eps(t=int(steps * factor) + 1) >= base
    assert eps(d=delta / factor) >= base


@pytest.mark.filterwarnings("ignore::dpacct.rdp.OrderGridWarning")
@given(sigma=sigmas, q=rates, steps=step_counts, delta=deltas)
def test_delta_epsilon_round_trip(sigma: float, q: float, steps: int, delta: float) -> None:
    """get_delta(get_epsilon(delta)) <= delta: the two getters are consistent inverses."""
    acct = RDPAccountant().step(noise_multiplier=sigma, sampling_probability=q, count=steps)
    with np.errstate(all="ignore"):
        eps = float(acct.get_epsilon(delta))
    if eps > 0.0:
        assert acct.get_delta(eps) <= delta * (1 + 1e-9)


@pytest.mark.filterwarnings("ignore::dpacct.rdp.OrderGridWarning")
@given(sigma=sigmas, q=rates, steps=step_counts)
def test_vectorised_equals_scalar_loop(sigma: float, q: float, steps: int) -> None:
    """An array of deltas gives exactly the scalar answers."""
    acct = RDPAccountant().step(noise_multiplier=sigma, sampling_probability=q, count=steps)
    ds = np.array([1e-3, 1e-6, 1e-10])
    np.testing.assert_array_equal(acct.get_epsilon(ds), [acct.get_epsilon(d) for d in ds])


@given(sigma=sigmas, q=rates, k=st.integers(min_value=1, max_value=1000))
def test_rdp_additive(sigma: float, q: float, k: int) -> None:
    """k steps have k times the RDP of one step (rounded up, so never below)."""
    one = RDPAccountant().step(noise_multiplier=sigma, sampling_probability=q).rdp
    many = RDPAccountant().step(noise_multiplier=sigma, sampling_probability=q, count=k).rdp
    assert np.all(many >= k * one * (1 - 1e-15))
    np.testing.assert_allclose(many, k * one, rtol=1e-14)


@given(sigma=sigmas, q=st.floats(min_value=1e-8, max_value=1.0))
def test_rdp_monotone_in_order(sigma: float, q: float) -> None:
    """Renyi divergence is non-decreasing in the order (van Erven & Harremoes 2014, Thm 3)."""
    values = dpacct.rdp.subsampled_gaussian_rdp(
        noise_multiplier=sigma, sampling_probability=q, orders=dpacct.rdp.DEFAULT_ORDERS
    )
    assert np.all(np.diff(values) >= -1e-12 * values[1:])

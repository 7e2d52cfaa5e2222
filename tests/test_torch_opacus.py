"""The opacus drop-in: dpacct's accountants registered in opacus and used by a real PrivacyEngine (CPU)."""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest

torch = pytest.importorskip("torch")
opacus = pytest.importorskip("opacus")

from opacus.accountants import create_accountant  # noqa: E402
import opacus.accountants.utils  # noqa: E402
from torch.utils.data import DataLoader, TensorDataset  # noqa: E402

import dpacct  # noqa: E402
import dpacct.torch  # noqa: E402,F401  # registers the accountants
from dpacct.torch.opacus_accountants import DPACCTPLDAccountant, DPACCTRDPAccountant  # noqa: E402

RTOL_SAME = 1e-12  # same mechanisms, same accountant


def test_registered_names() -> None:
    """Importing dpacct.torch registers 'dpacct-pld' and 'dpacct-rdp' in opacus' registry."""
    assert isinstance(create_accountant("dpacct-pld"), DPACCTPLDAccountant)
    assert isinstance(create_accountant("dpacct-rdp"), DPACCTRDPAccountant)
    assert DPACCTPLDAccountant.mechanism() == "dpacct-pld"


def test_history_len_and_epsilon() -> None:
    """History is opacus' run-length layout, len() counts steps, epsilon is dpacct's for that history."""
    acct = DPACCTRDPAccountant()
    assert acct.get_epsilon(1e-5) == 0.0
    for _ in range(300):
        acct.step(noise_multiplier=1.1, sample_rate=0.01)
    for _ in range(200):
        acct.step(noise_multiplier=0.9, sample_rate=0.01)
    assert acct.history == [(1.1, 0.01, 300), (0.9, 0.01, 200)] and len(acct) == 500
    expected = (dpacct.RDPAccountant().step(noise_multiplier=1.1, sampling_probability=0.01, count=300)
                .step(noise_multiplier=0.9, sampling_probability=0.01, count=200).get_epsilon(1e-5))
    np.testing.assert_allclose(acct.get_epsilon(1e-5), expected, rtol=RTOL_SAME)


def test_state_dict_round_trip_and_mechanism_check() -> None:
    """opacus' state_dict carries history and mechanism; loading into another mechanism is refused."""
    acct = DPACCTPLDAccountant()
    for _ in range(10):
        acct.step(noise_multiplier=1.0, sample_rate=0.1)
    other = DPACCTPLDAccountant()
    other.load_state_dict(acct.state_dict())
    assert other.get_epsilon(1e-5) == acct.get_epsilon(1e-5) and len(other) == 10
    with pytest.raises(ValueError, match="dpacct-pld"):
        DPACCTRDPAccountant().load_state_dict(acct.state_dict())


def test_accumulated_step_is_refused() -> None:
    """opacus would account k accumulated batches at rate k q, not a bound: the hook refuses the step."""
    class FakeOptimizer:
        noise_multiplier = 1.0
        accumulated_iterations = 2

    hook = DPACCTPLDAccountant().get_optimizer_hook_fn(sample_rate=0.1)
    with pytest.raises(ValueError, match="not a privacy bound"):
        hook(FakeOptimizer())


def test_calibration_is_dpacct_and_rounds_steps_up() -> None:
    """get_noise_multiplier for dpacct names is dpacct.calibrate (never over budget); other names are opacus' own."""
    get_noise_multiplier = opacus.accountants.utils.get_noise_multiplier  # as PrivacyEngine looks it up
    sigma = get_noise_multiplier(target_epsilon=2.0, target_delta=1e-5, sample_rate=1 / 3, epochs=3,
                                 accountant="dpacct-rdp")
    expected = dpacct.calibrate(epsilon=2.0, delta=1e-5, sampling_probability=1 / 3, steps=9, accountant="rdp")
    assert sigma == expected.noise_multiplier
    assert dpacct.epsilon(noise_multiplier=sigma, sampling_probability=1 / 3, steps=9, delta=1e-5) <= 2.0
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # opacus' RDP warns about its order grid here
        theirs = get_noise_multiplier(target_epsilon=2.0, target_delta=1e-5, sample_rate=1 / 3, epochs=3,
                                      accountant="rdp")
    assert theirs != sigma and theirs > 0


def test_privacy_engine_run_on_cpu() -> None:
    """PrivacyEngine(accountant='dpacct-pld') with make_private_with_epsilon trains and reports dpacct's epsilon."""
    torch.manual_seed(0)
    data = TensorDataset(torch.randn(64, 4), torch.randint(0, 2, (64,)))
    model = torch.nn.Sequential(torch.nn.Linear(4, 2))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    loader = DataLoader(data, batch_size=16)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # opacus' own warnings (secure RNG, full backward hooks) are not ours
        engine = opacus.PrivacyEngine(accountant="dpacct-pld")
        model, optimizer, loader = engine.make_private_with_epsilon(
            module=model, optimizer=optimizer, data_loader=loader, target_epsilon=3.0, target_delta=1e-5,
            epochs=2, max_grad_norm=1.0)
        q, steps = 1 / 4, 8
        expected = dpacct.calibrate(epsilon=3.0, delta=1e-5, sampling_probability=q, steps=steps, accountant="pld")
        assert optimizer.noise_multiplier == expected.noise_multiplier
        taken = 0
        for _ in range(2):
            for x, y in loader:
                optimizer.zero_grad()
                torch.nn.functional.cross_entropy(model(x), y).backward()
                optimizer.step()
                taken += 1
        epsilon = engine.get_epsilon(1e-5)
    assert len(engine.accountant) == taken == steps
    reference = dpacct.PLDAccountant().step(noise_multiplier=expected.noise_multiplier, sampling_probability=q,
                                            count=steps).get_epsilon(1e-5)
    np.testing.assert_allclose(epsilon, reference, rtol=RTOL_SAME)
    assert epsilon <= 3.0
    assert math.isfinite(epsilon)


def test_shuffled_batches_are_refused_by_the_poisson_accountant() -> None:
    """make_private(poisson_sampling=False) with a dpacct accountant raises (opacus #80: shuffled batches as Poisson)."""
    data = TensorDataset(torch.randn(32, 4), torch.randint(0, 2, (32,)))
    model = torch.nn.Linear(4, 2)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # opacus' own warnings
        engine = opacus.PrivacyEngine(accountant="dpacct-rdp")
        with pytest.raises(ValueError, match="poisson_sampling=False.*ShuffleBatchSampler"):
            engine.make_private(module=model, optimizer=torch.optim.SGD(model.parameters(), lr=0.1),
                                data_loader=DataLoader(data, batch_size=8, shuffle=True), noise_multiplier=1.0,
                                max_grad_norm=1.0, poisson_sampling=False)
        other = opacus.PrivacyEngine(accountant="rdp")  # opacus' own accountants are left alone
        model2 = torch.nn.Linear(4, 2)
        other.make_private(module=model2, optimizer=torch.optim.SGD(model2.parameters(), lr=0.1),
                           data_loader=DataLoader(data, batch_size=8), noise_multiplier=1.0, max_grad_norm=1.0,
                           poisson_sampling=False)

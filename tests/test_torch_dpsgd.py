"""The DP-SGD and DP-SGD-JL steps: per-sample gradients, clipping, noise, and the JL norm estimate's law."""

from __future__ import annotations

import math

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from scipy import stats  # noqa: E402

from dpacct.torch.dpsgd import CLIP_MARGIN  # noqa: E402
from dpacct.torch import (  # noqa: E402
    PoissonBatchSampler,
    PrivacyAccountant,
    dp_sgd_jl_step,
    dp_sgd_step,
    jl_norm_estimates,
    per_sample_gradients,
)

# float64 models: per-sample gradients by vmap and by a Python loop agree to round-off.
ATOL_F64 = 1e-12
# False-alarm rate of the statistical test below: with a fresh seed it would reject a correct
# implementation with this probability (the seed is fixed, so the test is deterministic).
ALPHA = 1e-3


def _mlp() -> torch.nn.Module:
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(5, 4), torch.nn.Tanh(), torch.nn.Linear(4, 3)).double()


def _loss(out: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    return torch.nn.functional.cross_entropy(out, y, reduction="none")


def _batch(n: int = 7) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(1)
    return torch.randn(n, 5, generator=g, dtype=torch.float64), torch.randint(0, 3, (n,), generator=g)


def _loop_grads(model: torch.nn.Module, x: torch.Tensor, y: torch.Tensor) -> list[dict[str, torch.Tensor]]:
    out = []
    for i in range(len(x)):
        model.zero_grad()
        _loss(model(x[i : i + 1]), y[i : i + 1]).sum().backward()
        out.append({name: p.grad.detach().clone() for name, p in model.named_parameters()})
    return out


def test_per_sample_gradients_equal_a_loop_over_samples() -> None:
    """vmap(grad) per-sample gradients equal one backward pass per sample."""
    model = _mlp()
    x, y = _batch()
    grads = per_sample_gradients(model, _loss, x, y)
    for i, expected in enumerate(_loop_grads(model, x, y)):
        for name, g in expected.items():
            torch.testing.assert_close(grads[name][i], g, atol=ATOL_F64, rtol=0)


def test_dp_sgd_step_is_clipped_sum_plus_noise_over_the_public_batch_size() -> None:
    """grad = (sum_i clip_C(g_i) + N(0, sigma^2 C^2)) / expected_batch_size, with the noise from the generator."""
    model = _mlp()
    x, y = _batch()
    c, sigma, scale = 0.5, 1.3, 10.0
    norms = dp_sgd_step(model, _loss, x, y, max_grad_norm=c, noise_multiplier=sigma, expected_batch_size=scale,
                        generator=torch.Generator().manual_seed(7))
    result = {name: p.grad.clone() for name, p in model.named_parameters()}
    loop = _loop_grads(model, x, y)
    g = torch.Generator().manual_seed(7)
    for name, p in model.named_parameters():
        total = torch.zeros_like(p)
        for i, grads in enumerate(loop):
            norm = math.sqrt(sum(float(v.pow(2).sum()) for v in grads.values()))
            assert norms[i] == pytest.approx(norm, rel=1e-12)
            total += grads[name] * min(1.0, c / (1 + CLIP_MARGIN) / norm)
        noise = torch.normal(0.0, sigma * c, size=p.shape, generator=g, dtype=p.dtype)
        torch.testing.assert_close(result[name], (total + noise) / scale, atol=ATOL_F64, rtol=0)


def test_clipped_norms_never_exceed_the_clipping_norm() -> None:
    """Each sample's clipped gradient, as dp_sgd_step writes it (float32, negligible noise), has norm <= C."""
    model = _mlp().float()
    x, y = _batch(16)
    for c in (1e-3, 0.1, 0.37):
        for i in range(len(x)):
            norms = dp_sgd_step(model, _loss, x[i : i + 1].float(), y[i : i + 1], max_grad_norm=c,
                                noise_multiplier=1e-30, expected_batch_size=1.0)
            written = math.sqrt(sum(float(p.grad.double().pow(2).sum()) for p in model.parameters()))
            assert written <= c
            if float(norms[0]) > c:  # clipped: the norm is C up to the documented margin
                assert written >= c / (1 + 2 * CLIP_MARGIN)


def test_chunks_and_empty_batches() -> None:
    """Physical chunks give the same step; an empty (Poisson) batch gives pure noise and no error."""
    model = _mlp()
    x, y = _batch(9)
    dp_sgd_step(model, _loss, x, y, max_grad_norm=1.0, noise_multiplier=1.0, expected_batch_size=9.0,
                generator=torch.Generator().manual_seed(3))
    whole = [p.grad.clone() for p in model.parameters()]
    dp_sgd_step(model, _loss, x, y, max_grad_norm=1.0, noise_multiplier=1.0, expected_batch_size=9.0,
                max_physical_batch_size=4, generator=torch.Generator().manual_seed(3))
    for a, p in zip(whole, model.parameters()):
        torch.testing.assert_close(p.grad, a, atol=1e-12, rtol=0)
    norms = dp_sgd_step(model, _loss, x[:0], y[:0], max_grad_norm=1.0, noise_multiplier=1.0, expected_batch_size=9.0,
                        generator=torch.Generator().manual_seed(3))
    assert norms.numel() == 0
    g = torch.Generator().manual_seed(3)
    for p in model.parameters():
        torch.testing.assert_close(p.grad, torch.normal(0.0, 1.0, size=p.shape, generator=g, dtype=p.dtype) / 9.0)


def test_jl_norm_estimate_has_the_chi2_law() -> None:
    """r M^2 / |g|^2 ~ chi^2_r for a fixed gradient (Kolmogorov-Smirnov test at ALPHA); chi^2_(r+2) is rejected."""
    r, draws = 4, 3000
    model = torch.nn.Linear(6, 1, bias=False).double()
    x = torch.tensor([[1.0, -2.0, 0.5, 3.0, 0.0, 1.5]], dtype=torch.float64)
    y = torch.zeros(1, dtype=torch.long)

    def loss(out: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
        return out.sum(1)  # gradient of w . x is x, whatever w is

    g = torch.Generator().manual_seed(11)
    estimates = torch.cat([jl_norm_estimates(model, loss, x, y, jl_dim=r, generator=g) for _ in range(draws)])
    w = (r * estimates.pow(2) / x.pow(2).sum()).numpy()
    assert stats.kstest(w, stats.chi2(r).cdf).pvalue > ALPHA
    assert stats.kstest(w, stats.chi2(r + 2).cdf).pvalue < ALPHA  # the test has power against a wrong r


def test_jl_step_is_one_backward_of_the_weighted_loss() -> None:
    """grad = (sum_i min(1, C/M_i) g_i + noise) / scale, with M_i the estimates from the same directions."""
    model = _mlp()
    x, y = _batch()
    c, sigma, r = 0.4, 0.8, 3
    est = dp_sgd_jl_step(model, _loss, x, y, max_grad_norm=c, noise_multiplier=sigma, jl_dim=r,
                         expected_batch_size=7.0, generator=torch.Generator().manual_seed(5))
    result = {name: p.grad.clone() for name, p in model.named_parameters()}
    g = torch.Generator().manual_seed(5)
    again = jl_norm_estimates(model, _loss, x, y, jl_dim=r, generator=g)
    torch.testing.assert_close(est, again, atol=0, rtol=0)
    weights = torch.clamp(c / (1 + CLIP_MARGIN) / again, max=1.0)
    loop = _loop_grads(model, x, y)
    for name, p in model.named_parameters():
        total = sum(float(weights[i]) * loop[i][name] for i in range(len(x)))
        noise = torch.normal(0.0, sigma * c, size=p.shape, generator=g, dtype=p.dtype)
        torch.testing.assert_close(result[name], (total + noise) / 7.0, atol=1e-12, rtol=0)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device")
def test_steps_run_on_cuda() -> None:
    """Both steps are device-agnostic: the gradients land on the model's device."""
    model = _mlp().cuda()
    x, y = _batch()
    gen = torch.Generator(device="cuda").manual_seed(0)
    dp_sgd_step(model, _loss, x.cuda(), y.cuda(), max_grad_norm=1.0, noise_multiplier=1.0, expected_batch_size=7.0,
                generator=gen)
    dp_sgd_jl_step(model, _loss, x.cuda(), y.cuda(), max_grad_norm=1.0, noise_multiplier=1.0, jl_dim=2,
                   expected_batch_size=7.0, generator=gen)
    assert all(p.grad.is_cuda for p in model.parameters())


def test_jl_accounting_uses_the_fdp_jl_accountant_with_shared_projections() -> None:
    """PrivacyAccountant(jl_dim=r) composes DPSGDJLMechanism(projections='shared') in the f-DP accountant."""
    fdp = pytest.importorskip("dpacct.fdp")
    sampler = PoissonBatchSampler(dataset_size=1000, sampling_probability=0.01)
    acct = PrivacyAccountant(sampler, delta=1e-5, noise_multiplier=1.5, jl_dim=5)
    for _ in range(20):
        acct.step()
    mechanism = fdp.DPSGDJLMechanism(noise_multiplier=1.5, sampling_probability=0.01, jl_dim=5, projections="shared")
    expected = fdp.FDPAccountant().compose(mechanism, count=20).get_epsilon(1e-5)
    np.testing.assert_allclose(acct.get_epsilon(), expected, rtol=1e-12)
    assert len(acct) == 20


def test_jl_accounting_needs_poisson() -> None:
    """DP-SGD-JL accounting is only defined here for Poisson batches without accumulation."""
    from dpacct.torch import ShuffleBatchSampler

    with pytest.raises(ValueError, match="Poisson"):
        PrivacyAccountant(ShuffleBatchSampler(dataset_size=10, batch_size=2), delta=1e-5, jl_dim=3)


@pytest.mark.parametrize(("kwargs", "match"), [
    ({"max_grad_norm": 0.0}, r"^max_grad_norm must be finite and > 0, got 0.0"),
    ({"noise_multiplier": -1.0}, r"^noise_multiplier must be finite and > 0, got -1.0"),
    ({"expected_batch_size": float("inf")}, r"^expected_batch_size must be finite and > 0"),
])
def test_step_bad_input(kwargs: dict[str, float], match: str) -> None:
    """Bad step parameters raise ValueError naming the parameter."""
    model = _mlp()
    x, y = _batch()
    args = {"max_grad_norm": 1.0, "noise_multiplier": 1.0, "expected_batch_size": 7.0, **kwargs}
    with pytest.raises(ValueError, match=match):
        dp_sgd_step(model, _loss, x, y, **args)
    with pytest.raises(ValueError, match=match):
        dp_sgd_jl_step(model, _loss, x, y, jl_dim=2, **args)


def test_mismatched_batch_is_refused() -> None:
    """Inputs and targets of different batch sizes raise ValueError."""
    model = _mlp()
    x, y = _batch()
    with pytest.raises(ValueError, match="same batch size"):
        dp_sgd_step(model, _loss, x, y[:3], max_grad_norm=1.0, noise_multiplier=1.0, expected_batch_size=7.0)

r"""A minimal DP-SGD step and the DP-SGD-JL step, for users without opacus (any device).

Both functions compute a noisy gradient and write it into ``param.grad``; the caller then
calls ``optimizer.step()`` (which :class:`dpacct.torch.PrivacyAccountant` accounts).
``loss_fn(outputs, targets)`` must return the **per-sample** losses (shape ``[B]``, e.g.
``torch.nn.functional.cross_entropy(..., reduction="none")``), and the model must treat
samples independently (no batch norm).

The noisy sum is divided by ``expected_batch_size``, a public constant (``q n`` for
Poisson batches, the batch size for fixed-size ones). Dividing by the realised size of a
Poisson batch would make the step depend on it, which the analysis does not cover.

* :func:`dp_sgd_step`: per-sample gradients with ``torch.func`` (``vmap`` of ``grad``),
  each clipped to L2 norm ``max_grad_norm``, summed, plus
  :math:`N(0, \sigma^2 C^2 I)` (Abadi et al., CCS 2016, arXiv:1607.00133, Algorithm 1).
* :func:`dp_sgd_jl_step`: DP-SGD-JL (Bu, Gopi, Kulkarni, Lee, Shen, Tantipongpipat,
  NeurIPS 2021, arXiv:2102.03013, Algorithm 2): ``r`` Gaussian directions :math:`v_j`
  shared by the batch, per-sample projections :math:`\langle g_i, v_j\rangle` by
  forward-mode ``jvp``, norm estimates :math:`M_i = (\frac1r\sum_j \langle g_i,
  v_j\rangle^2)^{1/2} = \lVert g_i\rVert \sqrt{W_i/r}` with :math:`W_i \sim \chi^2_r`,
  weights :math:`\min(1, C/M_i)`, one backward pass of the weighted loss, noise. The clipped
  norm is not bounded by C, so the step is accounted by the JL accountant
  (``PrivacyAccountant(..., jl_dim=r)``), not as plain DP-SGD.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable

import torch
from torch import Tensor
from torch.func import functional_call, grad, jvp, vmap

from dpacct import _check

__all__ = ["dp_sgd_jl_step", "dp_sgd_step", "jl_norm_estimates", "per_sample_gradients"]

LossFn = Callable[[Tensor, Tensor], Tensor]

# Clip to C / (1 + 1e-5): per-sample norms are reduced in the gradients' precision (at
# least float32; no float64 copy of the per-sample gradients, which would double the
# memory), with relative error ~1e-6 at most for millions of entries, and the rescaling
# rounds by ~1e-7; the margin keeps every clipped norm <= C as the accounting assumes.
CLIP_MARGIN = 1e-5


def _params(model: torch.nn.Module) -> dict[str, Tensor]:
    return {name: p for name, p in model.named_parameters() if p.requires_grad}


def _check_batch(inputs: Tensor, targets: Tensor) -> int:
    if inputs.shape[0] != targets.shape[0]:
        msg = f"inputs and targets must have the same batch size, got {inputs.shape[0]} and {targets.shape[0]}"
        raise ValueError(msg)
    return int(inputs.shape[0])


def per_sample_gradients(model: torch.nn.Module, loss_fn: LossFn, inputs: Tensor, targets: Tensor) -> dict[str, Tensor]:
    """Gradient of each sample's loss, ``{name: tensor of shape [B, *param.shape]}`` (``vmap`` of ``grad``).

    An empty batch gives tensors with a leading dimension 0.
    """
    n = _check_batch(inputs, targets)
    params = {name: p.detach() for name, p in _params(model).items()}
    if n == 0:
        return {name: p.new_zeros((0, *p.shape)) for name, p in params.items()}
    buffers = dict(model.named_buffers())

    def sample_loss(p: dict[str, Tensor], x: Tensor, y: Tensor) -> Tensor:
        out = functional_call(model, (p, buffers), (x.unsqueeze(0),))
        return loss_fn(out, y.unsqueeze(0)).sum()

    result: dict[str, Tensor] = vmap(grad(sample_loss), in_dims=(None, 0, 0))(params, inputs, targets)
    return result


def _per_sample_norms(grads: dict[str, Tensor]) -> Tensor:
    """L2 norm of each sample's whole gradient, in float64 (each parameter's part reduced in place)."""
    parts = []
    for g in grads.values():
        dtype = None if g.dtype in (torch.float32, torch.float64) else torch.float32
        parts.append(torch.linalg.vector_norm(g.flatten(1), dim=1, dtype=dtype).double())
    return torch.stack(parts).pow(2).sum(0).sqrt()


def _clip_factors(norms: Tensor, max_grad_norm: float) -> Tensor:
    limit = max_grad_norm / (1.0 + CLIP_MARGIN)
    return torch.clamp(limit / norms.clamp_min(torch.finfo(norms.dtype).tiny), max=1.0)


def _noise_and_set(params: dict[str, Tensor], sums: dict[str, Tensor], *, std: float, scale: float,
                   generator: torch.Generator | None) -> None:
    for name, p in params.items():
        noise = torch.normal(0.0, std, size=p.shape, generator=generator, device=p.device, dtype=p.dtype)
        p.grad = (sums[name] + noise) / scale


def _step_checks(max_grad_norm: float, noise_multiplier: float, expected_batch_size: float) -> tuple[float, float, float]:
    return (_check.positive("max_grad_norm", max_grad_norm), _check.noise_multiplier(noise_multiplier),
            _check.positive("expected_batch_size", expected_batch_size))


def dp_sgd_step(
    model: torch.nn.Module,
    loss_fn: LossFn,
    inputs: Tensor,
    targets: Tensor,
    *,
    max_grad_norm: float,
    noise_multiplier: float,
    expected_batch_size: float,
    max_physical_batch_size: int | None = None,
    generator: torch.Generator | None = None,
) -> Tensor:
    """Write the DP-SGD gradient of one batch into ``param.grad``; returns the per-sample norms.

    Parameters
    ----------
    model, loss_fn, inputs, targets
        The model, per-sample loss and one batch (possibly empty).
    max_grad_norm : float
        Clipping norm C, ``> 0``.
    noise_multiplier : float
        Noise standard deviation over C, ``> 0``.
    expected_batch_size : float
        Public normaliser of the noisy sum, ``> 0``.
    max_physical_batch_size : int, optional
        Compute per-sample gradients in chunks of at most this many samples (memory);
        the result is the same and it is still one step.
    generator : torch.Generator, optional
        Source of the noise (on the parameters' device).
    """
    c, sigma, scale = _step_checks(max_grad_norm, noise_multiplier, expected_batch_size)
    n = _check_batch(inputs, targets)
    chunk = n if max_physical_batch_size is None else _check.count("max_physical_batch_size", max_physical_batch_size)
    if chunk < 1 and n > 0:
        msg = f"max_physical_batch_size must be an integer >= 1, got {chunk}"
        raise ValueError(msg)
    params = _params(model)
    sums = {name: torch.zeros_like(p) for name, p in params.items()}
    all_norms = []
    for start in range(0, n, max(chunk, 1)):
        grads = per_sample_gradients(model, loss_fn, inputs[start : start + chunk], targets[start : start + chunk])
        norms = _per_sample_norms(grads)
        factors = _clip_factors(norms, c)
        for name, g in grads.items():
            sums[name] += torch.einsum("b,b...->...", factors.to(g.dtype), g)
        all_norms.append(norms)
    _noise_and_set(params, sums, std=sigma * c, scale=scale, generator=generator)
    return torch.cat(all_norms) if all_norms else inputs.new_zeros(0, dtype=torch.float64)


def jl_norm_estimates(
    model: torch.nn.Module, loss_fn: LossFn, inputs: Tensor, targets: Tensor, *, jl_dim: int,
    generator: torch.Generator | None = None,
) -> Tensor:
    r"""Per-sample gradient norm estimates from ``jl_dim`` Gaussian directions shared by the batch.

    Returns :math:`M_i = (\frac1r \sum_j \langle g_i, v_j\rangle^2)^{1/2}`, computed with one
    forward-mode ``jvp`` per direction (vectorised with ``vmap``). For a fixed gradient,
    :math:`r M_i^2 / \lVert g_i\rVert^2 \sim \chi^2_r`.
    """
    r = _check.count("jl_dim", jl_dim)
    if r < 1:
        msg = f"jl_dim must be an integer >= 1, got {r}"
        raise ValueError(msg)
    n = _check_batch(inputs, targets)
    params = {name: p.detach() for name, p in _params(model).items()}
    if n == 0:
        return inputs.new_zeros(0)
    buffers = dict(model.named_buffers())
    directions = {name: torch.randn((r, *p.shape), generator=generator, device=p.device, dtype=p.dtype)
                  for name, p in params.items()}

    def losses(p: dict[str, Tensor]) -> Tensor:
        out: Tensor = loss_fn(functional_call(model, (p, buffers), (inputs,)), targets)
        return out

    def project(v: dict[str, Tensor]) -> Tensor:
        tangent: Tensor = jvp(losses, (params,), (v,))[1]
        return tangent

    with warnings.catch_warnings():
        # torch's first forward-mode call loads its jvp decompositions through the deprecated
        # torch.jit.script (torch 2.13); that is torch's own business, not the user's.
        warnings.filterwarnings("ignore", message=r".*torch\.jit\.script.* is deprecated", category=DeprecationWarning)
        projections: Tensor = vmap(project)(directions)  # [r, B]
    estimates: Tensor = projections.pow(2).mean(0).sqrt()
    return estimates


def dp_sgd_jl_step(
    model: torch.nn.Module,
    loss_fn: LossFn,
    inputs: Tensor,
    targets: Tensor,
    *,
    max_grad_norm: float,
    noise_multiplier: float,
    jl_dim: int,
    expected_batch_size: float,
    generator: torch.Generator | None = None,
) -> Tensor:
    """Write the DP-SGD-JL gradient of one batch into ``param.grad``; returns the norm estimates.

    Parameters are as in :func:`dp_sgd_step`, plus ``jl_dim`` (``r >= 1``, the number of
    shared Gaussian directions). Account the steps with
    ``PrivacyAccountant(..., jl_dim=r)``.
    """
    c, sigma, scale = _step_checks(max_grad_norm, noise_multiplier, expected_batch_size)
    estimates = jl_norm_estimates(model, loss_fn, inputs, targets, jl_dim=jl_dim, generator=generator)
    params = _params(model)
    if estimates.numel() == 0:
        sums = {name: torch.zeros_like(p) for name, p in params.items()}
    else:
        weights = _clip_factors(estimates.detach(), c)
        out = functional_call(model, (params, dict(model.named_buffers())), (inputs,))
        weighted = (weights * loss_fn(out, targets)).sum()
        grads = torch.autograd.grad(weighted, list(params.values()))
        sums = {name: g.detach() for name, g in zip(params, grads)}
    _noise_and_set(params, sums, std=sigma * c, scale=scale, generator=generator)
    return estimates

"""f-DP benchmark: trade-off curves and DP-SGD-JL epsilon, beside autodp and dp-accounting where they apply.

Run from the repository root (after ``python setup.py build_ext --inplace``)::

    PYTHONPATH=$PWD python bench/fdp.py            # writes a markdown table to stdout

Peers (optional, bench only): ``pip install autodp dp-accounting``.

* Gaussian curve G_mu: dpacct's closed form against autodp's ``fdp_bank.fDP_gaussian``.
* Poisson DP-SGD (q = 256/60000, sigma = 1.1): dpacct's certified curve (PLD, duality)
  against autodp's f-DP of the composed subsampled Gaussian (RDP-based conversion)
  and dp-accounting's PLD privacy curve turned into a curve by the same duality
  (dp-accounting 0.6 has no trade-off / TPR function of its own).
* DP-SGD-JL epsilon (sigma = 1, q = 0.01, T = 1000, r = 30, delta = 1e-5): dpacct's
  shared (certified) and per-example (the paper's pair) bounds; dp-accounting's
  ``MixtureOfGaussiansDpEvent`` on the same dominating bucket sensitivities (the
  revealed bottom bucket moved to the largest finite shift, so it is *not* a
  certified number, only a cross-check of the per-example mixture).
"""

from __future__ import annotations

import importlib.metadata

import platform
import statistics
import time
from collections.abc import Callable
from typing import Any

import numpy as np

from dpacct.fdp import DPSGDJLMechanism, FDPAccountant, TradeoffCurve, gaussian_tradeoff
from dpacct.fdp import jl

FPRS = (1e-3, 1e-2, 1e-1)


def timed(fn: Callable[[], Any], repeats: int = 3) -> tuple[Any, float]:
    times = []
    out = None
    for _ in range(repeats):
        start = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - start)
    return out, statistics.median(times)


def version(name: str) -> str:
    try:
        return importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
        return "not installed"


def gaussian_rows() -> list[str]:
    alphas = np.linspace(1e-6, 1 - 1e-6, 10_000)
    ours, t_ours = timed(lambda: np.asarray(gaussian_tradeoff(mu=1.0, alpha=alphas)), 5)
    rows = [f"| G_1 on 1e4 alphas | dpacct (closed form) | exact | - | {t_ours * 1e3:.2f} ms |"]
    try:
        from autodp import fdp_bank

        theirs, t_theirs = timed(lambda: np.array([fdp_bank.fDP_gaussian({"sigma": 1.0}, a) for a in alphas]), 1)
        diff = float(np.max(np.abs(theirs - ours)))
        rows.append(f"| G_1 on 1e4 alphas | autodp fdp_bank | exact | max abs diff {diff:.1e} | "
                    f"{t_theirs * 1e3:.2f} ms |")
    except ImportError:
        rows.append("| G_1 on 1e4 alphas | autodp | not installed | | |")
    return rows


def dpsgd_rows(steps: int) -> list[str]:
    q, sigma = 256 / 60000, 1.1
    rows = []

    def ours() -> TradeoffCurve:
        return FDPAccountant().step(noise_multiplier=sigma, sampling_probability=q, count=steps).tradeoff()

    curve, t = timed(ours)
    tpr = curve.tpr_bounds(np.array(FPRS))
    cells = ", ".join(f"{lo:.5f}..{up:.5f}" for lo, up in zip(np.asarray(tpr.lower), np.asarray(tpr.upper)))
    rows.append(f"| DP-SGD T={steps} curve | dpacct FDPAccountant | TPR lower..upper at FPR {FPRS}: {cells} | "
                f"gap {curve.gap():.1e} | {t:.2f} s |")
    try:
        from autodp.mechanism_zoo import GaussianMechanism
        from autodp.transformer_zoo import AmplificationBySampling, Composition

        def autodp_curve() -> list[float]:
            gm = GaussianMechanism(sigma, name="GM", RDP_off=False, approxDP_off=True)
            sm = AmplificationBySampling(PoissonSampling=True)(gm, q, improved_bound_flag=True)
            mech = Composition()([sm], [steps])
            return [1.0 - float(mech.get_fDP(a)) for a in FPRS]

        import warnings

        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            theirs, t2 = timed(autodp_curve, 1)
        rows.append(f"| DP-SGD T={steps} curve | autodp (RDP -> f-DP) | TPR upper at FPR {FPRS}: "
                    f"{', '.join(f'{v:.5f}' for v in theirs)} | looser (RDP) | {t2:.2f} s |")
    except ImportError:
        rows.append(f"| DP-SGD T={steps} curve | autodp | not installed | | |")
    try:
        import dp_accounting
        from dp_accounting.pld import pld_privacy_accountant

        def dpacc_curve() -> TradeoffCurve:
            acct = pld_privacy_accountant.PLDAccountant(value_discretization_interval=1e-3)
            event = dp_accounting.PoissonSampledDpEvent(q, dp_accounting.GaussianDpEvent(sigma))
            acct.compose(event, steps)
            grid = curve.details["epsilon_grid_max"]
            eps = np.linspace(0.0, grid, 1024)
            deltas = np.array([acct.get_delta(float(e)) for e in eps])
            return TradeoffCurve.from_privacy_curve(eps, np.clip(deltas, 0, 1), method="dp-accounting PLD")

        theirs_curve, t3 = timed(dpacc_curve, 1)
        vals = 1.0 - np.asarray(theirs_curve(np.array(FPRS)))
        rows.append(f"| DP-SGD T={steps} curve | dp-accounting PLD + duality | TPR upper at FPR {FPRS}: "
                    f"{', '.join(f'{v:.5f}' for v in vals)} | 1024 delta queries | {t3:.2f} s |")
    except ImportError:
        rows.append(f"| DP-SGD T={steps} curve | dp-accounting | not installed | | |")
    return rows


def jl_rows() -> list[str]:
    sigma, q, steps, r, delta = 1.0, 0.01, 1000, 30, 1e-5
    rows = []
    for projections in ("shared", "per_example"):
        def ours(p: str = projections) -> Any:
            acct = FDPAccountant()
            acct.compose(DPSGDJLMechanism(noise_multiplier=sigma, sampling_probability=q, jl_dim=r,
                                          projections=p), steps)  # type: ignore[arg-type]
            return acct.epsilon_bounds(delta)

        bounds, t = timed(ours, 1)
        rows.append(f"| JL r={r} eps | dpacct {projections} | {float(bounds.lower):.4f}..{float(bounds.upper):.4f} | "
                    f"certified interval | {t:.2f} s |")
    plain, t = timed(lambda: FDPAccountant().step(noise_multiplier=sigma, sampling_probability=q,
                                                  count=steps).epsilon_bounds(delta), 1)
    rows.append(f"| JL r -> inf (plain DP-SGD) eps | dpacct | {float(plain.lower):.4f}..{float(plain.upper):.4f} | "
                f"certified interval | {t:.2f} s |")
    try:
        import dp_accounting
        from dp_accounting.pld import pld_privacy_accountant

        w_cap = jl.cap_for_budget(r=r, noise_multiplier=sigma, budget=1e-3 * delta / (q * steps))
        b = jl.make_buckets(r, w_cap, 128)
        shifts = np.sqrt(r / b.edges)  # in units of the clip norm; noise std = sigma
        probs = np.concatenate([b.masses, [b.top]])
        probs[0] += b.bottom  # the revealed bucket at the largest finite shift: an estimate, not a bound
        probs = probs / probs.sum()
        sens = np.concatenate([[0.0], shifts])
        weights = np.concatenate([[1.0 - q], q * probs])

        def theirs() -> float:
            acct = pld_privacy_accountant.PLDAccountant(value_discretization_interval=1e-3)
            acct.compose(dp_accounting.dp_event.MixtureOfGaussiansDpEvent(sigma, sens.tolist(), weights.tolist()), steps)
            return float(acct.get_epsilon(delta))

        eps, t2 = timed(theirs, 1)
        rows.append(f"| JL r={r} eps | dp-accounting MixtureOfGaussians (per-example pair, same buckets) | "
                    f"{eps:.4f} | estimate (bottom bucket not revealed) | {t2:.2f} s |")
    except ImportError:
        rows.append("| JL eps | dp-accounting | not installed | | |")
    return rows


def main() -> None:
    print(f"machine: {platform.machine()} {platform.processor() or ''}, python {platform.python_version()}; "
          f"dpacct {version('dpacct')}, autodp {version('autodp')}, dp-accounting {version('dp-accounting')}")
    print()
    print("| case | library | result | note | median time |")
    print("| --- | --- | --- | --- | --- |")
    for row in gaussian_rows() + dpsgd_rows(1000) + dpsgd_rows(10_000) + jl_rows():
        print(row)



if __name__ == "__main__":
    main()

"""One adapter per library, all with the same signatures.

``rdp_epsilon(case)`` / ``pld_epsilon(case)`` return an epsilon for the case (an
upper bound for every library here); ``calibrate_sigma(case, epsilon)`` returns a
noise multiplier. A library that is not installed is reported as missing.
"""

from __future__ import annotations

import importlib
import importlib.metadata
import math
from collections.abc import Callable
from dataclasses import dataclass, field

from cases import Case


@dataclass
class Library:
    name: str
    module: str
    rdp_epsilon: Callable[[Case], float] | None = None
    pld_epsilon: Callable[[Case], float] | None = None
    calibrate_sigma: Callable[[Case, float], float] | None = None
    calibrate_sigma_pld: Callable[[Case, float], tuple[float, float]] | None = None
    notes: list[str] = field(default_factory=list)

    def available(self) -> bool:
        try:
            importlib.import_module(self.module)
        except ImportError:
            return False
        return True

    def version(self) -> str:
        try:
            return importlib.metadata.version(self.name)
        except importlib.metadata.PackageNotFoundError:
            return "not installed"


# -- dpacct ---------------------------------------------------------------------------------

def _dpacct_rdp(case: Case) -> float:
    import dpacct

    dpacct.rdp.clear_cache()  # time a cold computation, not a cache hit
    return float(dpacct.epsilon(noise_multiplier=case.noise_multiplier, sampling_probability=case.sampling_probability,
                                steps=case.steps, delta=case.delta, accountant="rdp"))


def _dpacct_pld(case: Case) -> float:
    import dpacct

    dpacct.pld.clear_cache()  # time a cold computation, not a cache hit
    return float(dpacct.epsilon(noise_multiplier=case.noise_multiplier, sampling_probability=case.sampling_probability,
                                steps=case.steps, delta=case.delta, accountant="pld"))


def _dpacct_calibrate(case: Case, epsilon: float) -> float:
    import dpacct

    dpacct.rdp.clear_cache()  # time a cold computation, not a cache hit
    result = dpacct.calibrate(epsilon=epsilon, delta=case.delta, sampling_probability=case.sampling_probability,
                              steps=case.steps, accountant="rdp")
    return result.noise_multiplier


def _dpacct_calibrate_pld(case: Case, epsilon: float) -> tuple[float, float]:
    import dpacct

    dpacct.pld.clear_cache()  # time a cold computation, not a cache hit
    result = dpacct.calibrate(epsilon=epsilon, delta=case.delta, sampling_probability=case.sampling_probability,
                              steps=case.steps, accountant="pld")
    return result.noise_multiplier, result.epsilon


# -- opacus ---------------------------------------------------------------------------------

def _opacus_rdp(case: Case) -> float:
    from opacus.accountants.analysis import rdp as opacus_rdp
    from opacus.accountants.rdp import RDPAccountant

    orders = RDPAccountant.DEFAULT_ALPHAS
    rdp = opacus_rdp.compute_rdp(q=case.sampling_probability, noise_multiplier=case.noise_multiplier,
                                 steps=case.steps, orders=orders)
    eps, _ = opacus_rdp.get_privacy_spent(orders=orders, rdp=rdp, delta=case.delta)
    return float(eps)


def _opacus_calibrate(case: Case, epsilon: float) -> float:
    from opacus.accountants.utils import get_noise_multiplier

    return float(get_noise_multiplier(target_epsilon=epsilon, target_delta=case.delta,
                                      sample_rate=case.sampling_probability, steps=case.steps, accountant="rdp"))


# -- dp-accounting --------------------------------------------------------------------------

def _event(case: Case):  # type: ignore[no-untyped-def]
    import dp_accounting

    return dp_accounting.PoissonSampledDpEvent(case.sampling_probability,
                                               dp_accounting.GaussianDpEvent(case.noise_multiplier))


def _dpa_rdp(case: Case) -> float:
    from dp_accounting.rdp import rdp_privacy_accountant

    acct = rdp_privacy_accountant.RdpAccountant()
    acct.compose(_event(case), case.steps)
    return float(acct.get_epsilon(case.delta))


def _dpa_pld(case: Case) -> float:
    from dp_accounting.pld import pld_privacy_accountant

    acct = pld_privacy_accountant.PLDAccountant()  # default value_discretization_interval=1e-4
    acct.compose(_event(case), case.steps)
    return float(acct.get_epsilon(case.delta))


def _dpa_calibrate(case: Case, epsilon: float) -> float:
    import dp_accounting
    from dp_accounting.rdp import rdp_privacy_accountant

    def make_event(sigma: float):  # type: ignore[no-untyped-def]
        return dp_accounting.SelfComposedDpEvent(
            dp_accounting.PoissonSampledDpEvent(case.sampling_probability, dp_accounting.GaussianDpEvent(sigma)),
            case.steps)

    return float(dp_accounting.calibrate_dp_mechanism(rdp_privacy_accountant.RdpAccountant, make_event,
                                                      epsilon, case.delta))


def _dpa_calibrate_pld(case: Case, epsilon: float) -> tuple[float, float]:
    import dp_accounting
    from dp_accounting.pld import pld_privacy_accountant

    def make_event(sigma: float):  # type: ignore[no-untyped-def]
        return dp_accounting.SelfComposedDpEvent(
            dp_accounting.PoissonSampledDpEvent(case.sampling_probability, dp_accounting.GaussianDpEvent(sigma)),
            case.steps)

    sigma = float(dp_accounting.calibrate_dp_mechanism(pld_privacy_accountant.PLDAccountant, make_event,
                                                       epsilon, case.delta))
    acct = pld_privacy_accountant.PLDAccountant()
    acct.compose(make_event(sigma))
    return sigma, float(acct.get_epsilon(case.delta))


# -- prv-accountant -------------------------------------------------------------------------

def _prv_pld(case: Case) -> float:
    from prv_accountant import PRVAccountant
    from prv_accountant.privacy_random_variables import PoissonSubsampledGaussianMechanism

    # Note the keyword arguments: the positional order of this class is (sampling_probability, noise_multiplier).
    prv = PoissonSubsampledGaussianMechanism(noise_multiplier=case.noise_multiplier,
                                             sampling_probability=case.sampling_probability)
    acct = PRVAccountant(prvs=prv, max_self_compositions=case.steps, eps_error=0.01, delta_error=case.delta / 1000)
    _, _, upper = acct.compute_epsilon(delta=case.delta, num_self_compositions=case.steps)
    return float(upper)


LIBRARIES = [
    Library("dpacct", "dpacct", rdp_epsilon=_dpacct_rdp, pld_epsilon=_dpacct_pld, calibrate_sigma=_dpacct_calibrate,
            calibrate_sigma_pld=_dpacct_calibrate_pld),
    Library("opacus", "opacus", rdp_epsilon=_opacus_rdp, calibrate_sigma=_opacus_calibrate),
    Library("dp-accounting", "dp_accounting", rdp_epsilon=_dpa_rdp, pld_epsilon=_dpa_pld,
            calibrate_sigma=_dpa_calibrate, calibrate_sigma_pld=_dpa_calibrate_pld),
    Library("prv-accountant", "prv_accountant", pld_epsilon=_prv_pld,
            notes=["upper bound of its (lower, estimate, upper) with eps_error=0.01"]),
]


def finite(x: float) -> bool:
    return isinstance(x, float) and math.isfinite(x)

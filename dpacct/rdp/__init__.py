"""Renyi differential privacy: the moments accountant of Abadi et al. and its refinements.

The Poisson-subsampled Gaussian's RDP is computed in C++ (``dpacct._core.rdp``)
for integer and fractional orders, composed additively, and converted to
(epsilon, delta)-DP by the classic or the improved conversion.
"""

from dpacct.rdp.accountant import RDPAccountant, integer_order_guide
from dpacct.rdp.curves import (
    CONVERSIONS,
    DEFAULT_ORDERS,
    OptimalOrder,
    OrderGridWarning,
    clear_cache,
    delta_from_rdp,
    epsilon_from_rdp,
    mechanism_rdp,
    subsampled_gaussian_rdp,
)

__all__ = [
    "CONVERSIONS",
    "DEFAULT_ORDERS",
    "OptimalOrder",
    "OrderGridWarning",
    "RDPAccountant",
    "clear_cache",
    "delta_from_rdp",
    "epsilon_from_rdp",
    "integer_order_guide",
    "mechanism_rdp",
    "subsampled_gaussian_rdp",
]

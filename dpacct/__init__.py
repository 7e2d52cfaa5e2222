"""dpacct: privacy accounting for differentially private machine learning.

Getters return certified upper bounds unless their name says otherwise
(``*_estimate``, ``*_approx``, ``lower``).
"""

from __future__ import annotations

from importlib.metadata import PackageNotFoundError, version

try:
    from dpacct import _core
except ImportError as error:  # pragma: no cover - exercised only on a broken install
    msg = "dpacct._core is not built; run `pip install -e .` in the source tree (needs a C++17 compiler)"
    raise ImportError(msg) from error

from dpacct import gaussian, pld, rdp
from dpacct import ablq, samplers
from dpacct.samplers import compare_run, compare_samplers
from dpacct import composition, dropout, schedules, zcdp
from dpacct.accountant import (
    Accountant,
    UnsupportedMechanismError,
    available_accountants,
    make_accountant,
    register_accountant,
)
from dpacct.api import SAMPLERS, PoissonAssumptionWarning, build_accountant, delta, epsilon
from dpacct.calibration import CalibrationResult, calibrate
from dpacct.mechanisms import GaussianMechanism, PoissonSampledGaussianMechanism
from dpacct.pld import PLDAccountant
from dpacct.rdp import OrderGridWarning, RDPAccountant
from dpacct.zcdp import ZCDPAccountant

try:
    __version__ = version("dpacct")
except PackageNotFoundError:  # pragma: no cover - running from a source tree without metadata
    __version__ = "0+unknown"

__all__ = [
    "SAMPLERS",
    "Accountant",
    "CalibrationResult",
    "GaussianMechanism",
    "OrderGridWarning",
    "PLDAccountant",
    "PoissonAssumptionWarning",
    "PoissonSampledGaussianMechanism",
    "RDPAccountant",
    "UnsupportedMechanismError",
    "ZCDPAccountant",
    "__version__",
    "_core",
    "ablq",
    "available_accountants",
    "build_accountant",
    "calibrate",
    "compare_run",
    "compare_samplers",
    "composition",
    "delta",
    "dropout",
    "epsilon",
    "gaussian",
    "make_accountant",
    "pld",
    "rdp",
    "register_accountant",
    "samplers",
    "schedules",
    "zcdp",
]

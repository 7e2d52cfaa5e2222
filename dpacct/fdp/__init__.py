"""f-DP and Gaussian DP: trade-off curves, membership-inference risk, and DP-SGD with JL-projected norms.

* :class:`TradeoffCurve`: a trade-off function with a certified (lower) and an
  optimistic (upper) curve, duality with privacy curves, attack risk;
* :mod:`dpacct.fdp.gdp`: mu-GDP, exact conversions, the CLT for Poisson DP-SGD
  (``*_approx``: heuristic, not a bound);
* :class:`FDPAccountant`: composition of any PLD-supported history through the PLD
  engine, with :meth:`FDPAccountant.tradeoff`;
* :class:`DPSGDJLMechanism`: DP-SGD-JL (Bu, Gopi, Kulkarni, Lee, Shen,
  Tantipongpipat, NeurIPS 2021, arXiv:2102.03013), shared or per-example projections;
* :mod:`dpacct.fdp.risk`: largest attack success and calibration of the noise to it.
"""

from __future__ import annotations

from dpacct.fdp import gdp
from dpacct.fdp.accountant import FDPAccountant
from dpacct.fdp.jl import DPSGDJLMechanism
from dpacct.fdp.tradeoff import TradeoffCurve, gaussian_tradeoff

__all__ = ["DPSGDJLMechanism", "FDPAccountant", "TradeoffCurve", "gaussian_tradeoff", "gdp"]

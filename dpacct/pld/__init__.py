"""Privacy loss distributions (PLD): the accountant and its certified bounds (see :mod:`dpacct.pld.accountant`)."""

from dpacct.pld.accountant import Bounds, PLDAccountant

__all__ = ["Bounds", "PLDAccountant"]

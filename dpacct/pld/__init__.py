"""Privacy loss distributions (PLD): the accountant and its certified bounds (see :mod:`dpacct.pld.accountant`)."""

from dpacct.pld.accountant import Bounds, PLDAccountant, clear_cache, kept_memory, release_memory
from dpacct.pld.discrete import ComposedPMF, DiscretePLD

__all__ = ["Bounds", "ComposedPMF", "DiscretePLD", "PLDAccountant", "clear_cache", "kept_memory", "release_memory"]

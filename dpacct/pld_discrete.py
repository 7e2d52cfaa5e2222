"""Former name of :mod:`dpacct.pld.discrete` (the PLD of any pair of 1-d distributions from cell masses).

Every public name of ``dpacct.pld_discrete`` is still importable from here; new code should use
``dpacct.pld.discrete`` (or ``dpacct.pld.DiscretePLD``).
"""

from dpacct.pld.discrete import ComposedPMF, DiscretePLD

__all__ = ["ComposedPMF", "DiscretePLD"]

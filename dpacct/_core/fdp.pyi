from collections.abc import Sequence

from .pld import Step

def mix_steps(
    upper_steps: Sequence[Step], upper_weights: Sequence[float], extra_infinity: float, extra_index: int,
    extra_mass: float, upper_shift: float, lower_steps: Sequence[Step], lower_weights: Sequence[float],
) -> Step: ...

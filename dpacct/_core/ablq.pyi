import numpy as np
from numpy.typing import NDArray

def log_event(
    noise_multiplier: float, steps: float, threshold: NDArray[np.float64]
) -> tuple[NDArray[np.float64], NDArray[np.float64]]: ...
def log_delta_lower(
    noise_multiplier: float, steps: float, epsilon: NDArray[np.float64]
) -> tuple[NDArray[np.float64], NDArray[np.float64]]: ...
def epsilon_lower(
    noise_multiplier: float, steps: float, delta: NDArray[np.float64]
) -> tuple[NDArray[np.float64], NDArray[np.float64]]: ...

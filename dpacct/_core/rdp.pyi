import numpy as np
from numpy.typing import NDArray

def subsampled_gaussian(
    sampling_probability: float, noise_multiplier: float, orders: NDArray[np.float64]
) -> NDArray[np.float64]: ...
def epsilon_from_rdp(
    orders: NDArray[np.float64], rdp: NDArray[np.float64], delta: NDArray[np.float64], conversion: str
) -> tuple[NDArray[np.float64], NDArray[np.int64]]: ...
def delta_from_rdp(
    orders: NDArray[np.float64], rdp: NDArray[np.float64], epsilon: NDArray[np.float64], conversion: str
) -> tuple[NDArray[np.float64], NDArray[np.int64]]: ...

"""Regenerate tests/reference/fixed_size_dp_accounting.json: dp-accounting's RDP for fixed-size batches.

dp-accounting's ``SampledWithoutReplacementDpEvent`` (replace-one adjacency) applies the
Wang, Balle, Kasiviswanathan (AISTATS 2019) bound to a Gaussian of sensitivity 1, where a
replaced record moves the batch sum by up to 2 (dp-accounting issue #378). This stores its
values at sigma (what it reports) and at sigma/2 (the right sensitivity) for the tests.
Run with dp-accounting installed (``pip install -e ".[bench]"``)::

    python bench/make_fixed_size_reference.py
"""

from __future__ import annotations

import importlib.metadata
import json
import pathlib

import dp_accounting
import numpy as np
from dp_accounting.rdp import rdp_privacy_accountant

OUT = pathlib.Path(__file__).resolve().parents[1] / "tests" / "reference" / "fixed_size_dp_accounting.json"
ORDERS = [2.0, 4.0, 8.0, 16.0, 32.0]
CASES = [(2.0, 1_000, 100_000), (1.0, 100, 100_000), (4.0, 256, 60_000), (8.0, 10_000, 100_000)]


def rdp(sigma: float, batch_size: int, dataset_size: int) -> list[float]:
    accountant = rdp_privacy_accountant.RdpAccountant(ORDERS, dp_accounting.NeighboringRelation.REPLACE_ONE)
    event = dp_accounting.SampledWithoutReplacementDpEvent(dataset_size, batch_size,
                                                            dp_accounting.GaussianDpEvent(sigma))
    accountant.compose(event)
    return [float(v) for v in np.asarray(accountant._rdp)]  # noqa: SLF001 (the per-order RDP it composes)


def main() -> None:
    cases = [{"sigma": sigma, "batch_size": b, "dataset_size": n, "orders": ORDERS,
              "rdp_at_sigma": rdp(sigma, b, n), "rdp_at_half_sigma": rdp(sigma / 2.0, b, n)}
             for sigma, b, n in CASES]
    data = {"generator": "bench/make_fixed_size_reference.py",
            "dp_accounting": importlib.metadata.version("dp-accounting"), "cases": cases}
    OUT.write_text(json.dumps(data, indent=1) + "\n")
    print(f"wrote {OUT}")


if __name__ == "__main__":
    main()

"""Regenerate tests/reference/pld_mechanisms_dp_accounting.json: dp-accounting's PLD for Laplace and mixtures.

For each case dp-accounting's privacy loss distribution is built twice at its default grid
(1e-4), pessimistic and optimistic, self-composed T times, and epsilon(delta) stored from
both: if dp-accounting is right, the truth lies between them. The tests check dpacct's
certified interval against them without needing dp-accounting installed. Run with
dp-accounting installed (``pip install -e ".[bench]"``)::

    python bench/make_pld_mechanism_reference.py
"""

from __future__ import annotations

import importlib.metadata
import json
import pathlib

from dp_accounting.pld import privacy_loss_distribution as pld

OUT = pathlib.Path(__file__).resolve().parents[1] / "tests" / "reference" / "pld_mechanisms_dp_accounting.json"
DELTA = 1e-5

# (kind, parameters, sampling probability, steps)
CASES = [
    ("laplace", {"noise_multiplier": 1.0}, 1.0, 1),
    ("laplace", {"noise_multiplier": 2.0}, 1.0, 10),
    ("laplace", {"noise_multiplier": 5.0}, 1.0, 100),
    ("laplace", {"noise_multiplier": 1.0}, 0.1, 100),
    ("laplace", {"noise_multiplier": 2.0}, 0.01, 1000),
    ("mixture", {"noise_multiplier": 1.0, "sensitivities": [0.0, 1.0, 2.0], "probabilities": [0.9, 0.08, 0.02]},
     1.0, 10),
    ("mixture", {"noise_multiplier": 2.0, "sensitivities": [0.0, 1.0, 2.0, 3.0],
                 "probabilities": [0.97, 0.025, 0.004, 0.001]}, 1.0, 1000),
    ("mixture", {"noise_multiplier": 0.8, "sensitivities": [0.0, 1.0], "probabilities": [0.99, 0.01]}, 1.0, 500),
]


def build(kind: str, params: dict[str, object], q: float, pessimistic: bool) -> pld.PrivacyLossDistribution:
    if kind == "laplace":
        return pld.from_laplace_mechanism(float(params["noise_multiplier"]), sensitivity=1.0,  # type: ignore[arg-type]
                                          pessimistic_estimate=pessimistic, value_discretization_interval=1e-4,
                                          sampling_prob=q)
    return pld.from_mixture_gaussian_mechanism(
        float(params["noise_multiplier"]), params["sensitivities"], params["probabilities"],  # type: ignore[arg-type]
        pessimistic_estimate=pessimistic, value_discretization_interval=1e-4)


def main() -> None:
    cases = []
    for kind, params, q, steps in CASES:
        out = {}
        for name, pessimistic in (("pessimistic", True), ("optimistic", False)):
            composed = build(kind, params, q, pessimistic).self_compose(steps)
            out[name] = float(composed.get_epsilon_for_delta(DELTA))
        cases.append({"kind": kind, **params, "sampling_probability": q, "steps": steps, "delta": DELTA,
                      "epsilon_pessimistic": out["pessimistic"], "epsilon_optimistic": out["optimistic"]})
        print(cases[-1])
    data = {"generator": "bench/make_pld_mechanism_reference.py",
            "dp_accounting": importlib.metadata.version("dp-accounting"), "cases": cases}
    OUT.write_text(json.dumps(data, indent=1) + "\n")
    print(f"wrote {OUT}")


if __name__ == "__main__":
    main()

"""The one-call API and the registry: clear errors for unknown keywords, exact edge cases, explicit names."""

from __future__ import annotations

import tomllib
import importlib.util
from pathlib import Path

import pytest

import dpacct
from dpacct.accountant import register_accountant, unregister_accountant


def test_unknown_keyword_is_a_clear_value_error() -> None:
    """A misspelt or foreign keyword names itself, the accountant's options and the likely intended name; an
    option of another accountant given without naming it (RDP's orders= to the default, PLD) says which."""
    with pytest.raises(ValueError, match=r"unknown keyword argument sample_rate= for accountant 'rdp' "
                                         r"\(it takes orders, conversion\); did you mean sampling_probability=\?"):
        dpacct.epsilon(noise_multiplier=1.0, sampling_probability=0.01, steps=10, delta=1e-5, sample_rate=0.01,
                       accountant="rdp")
    with pytest.raises(ValueError, match=r"for accountant 'pld' \(it takes discretization, relative_accuracy, "
                                         r"max_size\); did you mean sampling_probability=\?"):
        dpacct.epsilon(noise_multiplier=1.0, sampling_probability=0.01, steps=10, delta=1e-5, sample_rate=0.01)
    with pytest.raises(ValueError, match="did you mean orders="):
        dpacct.epsilon(noise_multiplier=1.0, sampling_probability=0.01, steps=10, delta=1e-5, order=[2.0],
                       accountant="rdp")
    with pytest.raises(ValueError, match=r"unknown keyword argument orders= for accountant 'pld' .*; it is an "
                                         r"option of accountant 'rdp': pass accountant='rdp'"):
        dpacct.epsilon(noise_multiplier=1.0, sampling_probability=0.01, steps=10, delta=1e-5, orders=[2.0])
    with pytest.raises(ValueError, match=r"did you mean orders= \(an option of accountant 'rdp': pass "
                                         r"accountant='rdp'\)\?"):
        dpacct.delta(noise_multiplier=1.0, sampling_probability=0.01, steps=10, epsilon=1.0, order=[2.0])
    with pytest.raises(ValueError, match="unknown keyword argument orders= for accountant 'zcdp'"):
        dpacct.calibrate(epsilon=1.0, delta=1e-5, sampling_probability=1.0, steps=10, accountant="zcdp",
                         orders=[2.0])


@pytest.mark.parametrize("accountant", ["rdp", "pld"])
def test_zero_sampling_probability_costs_nothing(accountant: str) -> None:
    """q = 0 releases nothing about anyone: epsilon and delta are exactly 0, with no warning."""
    kwargs = {"noise_multiplier": 1.0, "sampling_probability": 0.0, "steps": 1000, "accountant": accountant}
    assert dpacct.epsilon(**kwargs, delta=1e-5) == 0.0  # type: ignore[arg-type]
    assert dpacct.delta(**kwargs, epsilon=0.5) == 0.0  # type: ignore[arg-type]
    assert dpacct.epsilon(**kwargs, delta=1e-5, sampler="deterministic") == 0.0  # type: ignore[arg-type]


def test_registry_is_explicit_and_refuses_taken_names() -> None:
    """Built-ins are listed without import side effects; registering a taken name raises."""
    assert {"rdp", "pld", "zcdp", "gaussian"} <= set(dpacct.available_accountants())
    with pytest.raises(ValueError, match="taken by the built-in"):
        register_accountant("rdp", dpacct.ZCDPAccountant)
    register_accountant("rdp", dpacct.RDPAccountant)  # the built-in itself again: a no-op

    class Custom(dpacct.RDPAccountant):
        pass

    register_accountant("custom-test", Custom)
    try:
        assert "custom-test" in dpacct.available_accountants()
        with pytest.raises(ValueError, match="already registered"):
            register_accountant("custom-test", dpacct.RDPAccountant)
        eps = dpacct.epsilon(noise_multiplier=2.0, sampling_probability=0.01, steps=100, delta=1e-5,
                             accountant="custom-test")
        assert eps == dpacct.epsilon(noise_multiplier=2.0, sampling_probability=0.01, steps=100, delta=1e-5,
                                     accountant="rdp")
    finally:
        unregister_accountant("custom-test")
    assert "custom-test" not in dpacct.available_accountants()
    with pytest.raises(ValueError, match="name must be"):
        register_accountant("bad name", Custom)


def test_package_metadata_promises_only_what_exists() -> None:
    """Extras and the description name only families and adapters that exist in the package."""
    root = Path(__file__).resolve().parents[1]
    project = tomllib.loads((root / "pyproject.toml").read_text())["project"]
    for extra in project["optional-dependencies"]:
        if extra in ("torch", "fdp"):
            assert importlib.util.find_spec(f"dpacct.{extra}") is not None, f"extra {extra!r} without dpacct.{extra}"
    if "f-DP" in project["description"]:
        assert importlib.util.find_spec("dpacct.fdp") is not None


def test_internal_failures_read_as_advice() -> None:
    """A run the PLD grid cannot hold raises AccountingLimitError with advice, not the kernel's message."""
    with pytest.raises(dpacct.api.AccountingLimitError, match="try accountant='rdp'") as info:
        dpacct.epsilon(noise_multiplier=1e-6, sampling_probability=0.01, steps=1000, delta=1e-5, accountant="pld")
    assert "discretization" not in str(info.value) and "loss cells" not in str(info.value)
    assert isinstance(info.value, ValueError)


def test_internal_consistency_failures_ask_for_a_report() -> None:
    """The C++ core's own checks (a NaN mass reaching a composer, 9cd0e68) stop with an internal error, which the
    one-call API words as a bug to report, not as a numerical limit of the run."""
    error = RuntimeError("internal error in dpacct's PLD composer: a step's masses hold a NaN (please report)")
    assert "please report" in dpacct.api.explain_failure(error)
    assert "numerical limit" not in dpacct.api.explain_failure(error)
    assert "numerical limit" in dpacct.api.explain_failure(RuntimeError("something else"))


def test_truncated_poisson_sampler_in_the_one_call_api() -> None:
    """sampler='truncated_poisson': a cap no batch reaches is Poisson exactly; a binding cap costs epsilon."""
    run = {"epochs": 2, "batch_size": 50, "dataset_size": 2_000, "delta": 1e-5, "accountant": "pld"}
    poisson = dpacct.epsilon(noise_multiplier=1.5, **run)
    uncapped = dpacct.epsilon(noise_multiplier=1.5, sampler="truncated_poisson", max_batch_size=2_001, **run)
    capped = dpacct.epsilon(noise_multiplier=1.5, sampler="truncated_poisson", max_batch_size=55, **run)
    assert uncapped == poisson
    assert capped > poisson
    result = dpacct.calibrate(epsilon=2.0, sampler="truncated_poisson", max_batch_size=55, **run)
    assert result.epsilon <= 2.0 and result.sampler == "truncated_poisson"


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [({"sampler": "truncated_poisson"}, "needs max_batch_size"),
     ({"max_batch_size": 10}, "max_batch_size applies only to sampler='truncated_poisson'"),
     ({"sampler": "truncated_poisson", "max_batch_size": 10, "accountant": "rdp"}, "use accountant='pld'")],
)
def test_truncated_poisson_api_errors(kwargs: dict[str, object], match: str) -> None:
    base: dict[str, object] = {"noise_multiplier": 1.0, "epochs": 1, "batch_size": 10, "dataset_size": 100,
                               "delta": 1e-5, "accountant": "pld", **kwargs}
    with pytest.raises(ValueError, match=match):
        dpacct.epsilon(**base)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="needs the dataset size"):
        dpacct.epsilon(noise_multiplier=1.0, sampling_probability=0.1, steps=10, delta=1e-5, accountant="pld",
                       sampler="truncated_poisson", max_batch_size=10)

"""Public import paths survive the move to one subpackage per family."""

from __future__ import annotations

import importlib

import pytest

import dpacct

PATHS = [
    ("dpacct.pld", "PLDAccountant"),
    ("dpacct.pld", "Bounds"),
    ("dpacct.pld_discrete", "DiscretePLD"),
    ("dpacct.pld_discrete", "ComposedPMF"),
    ("dpacct.pld", "DiscretePLD"),
    ("dpacct.rdp", "RDPAccountant"),
    ("dpacct.rdp", "OrderGridWarning"),
    ("dpacct.rdp", "DEFAULT_ORDERS"),
    ("dpacct.rdp", "subsampled_gaussian_rdp"),
    ("dpacct.rdp", "epsilon_from_rdp"),
    ("dpacct.zcdp", "ZCDPAccountant"),
    ("dpacct.zcdp", "random_sampling_epsilon_heuristic"),
    ("dpacct.zcdp", "shuffled_epochs_epsilon"),
    ("dpacct.zcdp", "rho_to_epsilon"),
    ("dpacct.mechanisms", "GaussianMechanism"),
    ("dpacct.mechanisms", "PoissonSampledMechanism"),
    ("dpacct.cli", "main"),
    ("dpacct.cli", "default_accountant"),
    ("dpacct.api", "build_accountant"),
    ("dpacct.calibration", "calibrate"),
    ("dpacct.composition", "dpd_ac_noise_multiplier"),
    ("dpacct.composition", "dropout_rates"),
    ("dpacct.dropout", "dpd_paper_noise_multiplier"),
    ("dpacct.schedules", "allocate_budget"),
]


@pytest.mark.parametrize(("module", "name"), PATHS)
def test_former_import_paths_still_work(module: str, name: str) -> None:
    assert hasattr(importlib.import_module(module), name)


def test_ablq_is_an_alias_of_samplers() -> None:
    """Every name dpacct.ablq offered is the same object in dpacct.samplers."""
    from dpacct import ablq, samplers

    assert ablq.__all__ and set(ablq.__all__) <= set(samplers.__all__)
    for name in ablq.__all__:
        assert getattr(ablq, name) is getattr(samplers, name)


def test_top_level_names() -> None:
    for name in dpacct.__all__:
        assert hasattr(dpacct, name), name

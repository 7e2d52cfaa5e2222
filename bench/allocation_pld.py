"""Balls-in-bins epsilon beside Feldman and Shenfeld's packages ``pld-accounting`` and ``random-allocation``.

Usage: ``PYTHONPATH=. python bench/allocation_pld.py [--skip-peers] [--no-peer-lower] [--timeout S]``.
The peers are not dependencies of dpacct; to compare with them, install them into a
separate environment that sees dpacct's packages and run the script with its Python::

    python -m venv --system-site-packages /tmp/peerenv
    /tmp/peerenv/bin/pip install pld-accounting==2.0 numba
    /tmp/peerenv/bin/pip install --no-deps random-allocation==1.0.5   # its pins would downgrade numpy
    /tmp/peerenv/bin/pip install matplotlib pandas                     # imported by its __init__
    PYTHONPATH=. /tmp/peerenv/bin/python bench/allocation_pld.py

A peer that does not import is reported as "-" in its columns. Each run is ``(sigma, t
steps per epoch, E epochs, delta)``, one record in one uniformly random step of each
epoch (random allocation of 1 of t steps), Gaussian noise, add/remove (zero-out)
neighbours. Columns:

* dpacct [lower, upper]: ``BallsInBinsAccountant().compose(BallsInBinsGaussianMechanism(
  noise_multiplier=sigma, steps_per_epoch=t), E).epsilon_bounds(delta)``, certified
  bounds; CPU s: ``time.process_time`` of that query, cold (``dpacct.pld.clear_cache()``).
* RDP upper: ``epsilon_balls_in_bins_rdp`` (the pair's Renyi DP alone, certified).
* deterministic: the Gaussian curve of ``sigma / sqrt(E)`` (one participation per epoch,
  a certified upper bound for any schedule).
* Poisson PLD: Poisson batches at rate ``1/t`` over ``t E`` steps by dpacct's PLD,
  certified [lower, upper] (a different sampler, for scale only).
* pld-accounting upper / lower: ``PLD_accounting.gaussian_allocation_epsilon_configurable``
  at its default ``AllocationSchemeConfig()`` (geometric convolution, loss discretisation
  budget 1e-2, tail truncation 1e-12) with ``BoundType.DOMINATES`` (its upper bound) and
  ``BoundType.IS_DOMINATED`` (its lower bound); CPU s of each call, run in a child
  process (numba kernels already compiled by an untimed warm-up) and stopped after
  ``--timeout`` seconds ("timeout").
* random-allocation: ``allocation_epsilon_combined`` of ``random-allocation`` 1.0.5 (the
  least of its upper bounds: local, analytic, RDP "direct" at integer orders 2..60 as in
  its paper experiments, "recursive", and "decomposition" when E = 1); CPU s.
* check: where each peer value lies against dpacct's certified interval. "inside";
  "above +x%" (an upper bound above dpacct's upper bound: consistent, looser by x %);
  "below -x%" for a peer lower bound below ours (consistent). A peer upper bound below
  dpacct's certified lower bound, or a peer lower bound above dpacct's certified upper
  bound, is impossible unless one of the two libraries is wrong: it is printed as
  "**CONFLICT**" and listed again after the table.

Agreement is what the script checks; the CPU seconds are for scale (the machine, the
peers' numba and FFT threads and their defaults differ). Not part of the test run.
"""

from __future__ import annotations

import argparse
import importlib.metadata
import json
import math
import os
import subprocess
import sys
import time
from typing import Any

CASES = [  # sigma, t (steps per epoch), E (epochs), delta
    (1.0, 1_000, 1, 1e-5),
    (1.0, 1_000, 10, 1e-5),
    (0.8, 100, 5, 1e-5),
    (2.0, 10_000, 1, 1e-5),
    (1.0, 235, 5, 1e-5),
    (4.0, 100_000, 3, 1e-6),
    (1.0, 10, 1, 1e-5),
    (0.7, 1_000, 1, 1e-5),
    (1.0, 1_000, 1, 1e-8),
]
PEERS = ("pld_upper", "pld_lower", "random_allocation")


# -- the peers (imported only here, only when asked for) -------------------------------------

def peer_epsilon(peer: str, sigma: float, t: int, epochs: int, delta: float) -> tuple[float, float]:
    """The peer's epsilon and the CPU seconds of the call (imports excluded)."""
    if peer in ("pld_upper", "pld_lower"):
        from PLD_accounting import (AllocationSchemeConfig, BoundType, PrivacyParams,
                                    gaussian_allocation_epsilon_configurable)

        params = PrivacyParams(sigma=sigma, num_steps=t, num_selected=1, num_epochs=epochs, delta=delta)
        bound = BoundType.DOMINATES if peer == "pld_upper" else BoundType.IS_DOMINATED
        start = time.process_time()
        value = gaussian_allocation_epsilon_configurable(params=params, config=AllocationSchemeConfig(),
                                                         bound_type=bound)
        return float(value), time.process_time() - start
    if peer == "random_allocation":
        from random_allocation.comparisons.structs import PrivacyParams, SchemeConfig, Verbosity
        from random_allocation.random_allocation_scheme.combined import allocation_epsilon_combined

        params = PrivacyParams(sigma=sigma, num_steps=t, num_selected=1, num_epochs=epochs, delta=delta)
        config = SchemeConfig(allocation_direct_alpha_orders=list(range(2, 61)), verbosity=Verbosity.NONE)
        start = time.process_time()
        value = allocation_epsilon_combined(params=params, config=config)
        return float(value), time.process_time() - start
    raise ValueError(f"unknown peer {peer!r}")


def peer_available(peer: str) -> bool:
    module = "random_allocation" if peer == "random_allocation" else "PLD_accounting"
    probe = subprocess.run([sys.executable, "-c", f"import {module}"], capture_output=True)
    return probe.returncode == 0


def run_peer(peer: str, case: tuple[float, int, int, float], timeout: float) -> tuple[float, float, str]:
    """Run one peer query in a child process: (epsilon, CPU s, note); NaN and a note when it fails."""
    sigma, t, epochs, delta = case
    command = [sys.executable, os.path.abspath(__file__), "--peer-case", peer, repr(sigma), str(t), str(epochs),
               repr(delta)]
    try:
        child = subprocess.run(command, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return math.nan, math.nan, f"timeout > {timeout:g} s"
    lines = [line for line in child.stdout.splitlines() if line.startswith("{")]
    if child.returncode != 0 or not lines:
        tail = (child.stderr.strip().splitlines() or ["no output"])[-1]
        return math.nan, math.nan, f"failed: {tail}"
    result = json.loads(lines[-1])
    return float(result["epsilon"]), float(result["cpu"]), ""


# -- dpacct ----------------------------------------------------------------------------------

def dpacct_row(sigma: float, t: int, epochs: int, delta: float) -> dict[str, Any]:
    import dpacct
    from dpacct import gaussian
    from dpacct.mechanisms import BallsInBinsGaussianMechanism
    from dpacct.pld import PLDAccountant
    from dpacct.samplers.allocation import BallsInBinsAccountant
    from dpacct.samplers.allocation_rdp import epsilon_balls_in_bins_rdp

    dpacct.pld.clear_cache()  # a cold query
    start = time.process_time()
    acct = BallsInBinsAccountant().compose(BallsInBinsGaussianMechanism(noise_multiplier=sigma, steps_per_epoch=t),
                                           epochs)
    lower, upper = acct.epsilon_bounds(delta)
    cpu = time.process_time() - start
    rdp = float(epsilon_balls_in_bins_rdp(noise_multiplier=sigma, steps=t, epochs=epochs, delta=delta)[0])
    det = float(gaussian.epsilon_for_delta(noise_multiplier=sigma / epochs**0.5, delta=delta))
    poisson = PLDAccountant().step(noise_multiplier=sigma, sampling_probability=1.0 / t, count=t * epochs)
    p_lo, p_up = poisson.epsilon_bounds(delta)
    return {"lower": float(lower), "upper": float(upper), "cpu": cpu, "rdp": rdp, "det": det,
            "poisson": (float(p_lo), float(p_up))}


def check(value: float, lower: float, upper: float, *, peer_is_upper: bool) -> tuple[str, bool]:
    """Where ``value`` lies against [lower, upper], and whether that contradicts the certified interval."""
    if not math.isfinite(value):
        return "-", False
    if lower <= value <= upper:
        return "inside", False
    if value > upper:
        text = f"above +{100 * (value / upper - 1):.3g}%"
        return (text, False) if peer_is_upper else (f"**CONFLICT** {text}", True)
    text = f"below -{100 * (1 - value / lower):.3g}%"
    return (f"**CONFLICT** {text}", True) if peer_is_upper else (text, False)


def fmt(value: float, digits: int = 5) -> str:
    return "-" if not math.isfinite(value) else f"{value:.{digits}g}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--skip-peers", action="store_true", help="dpacct's columns only")
    parser.add_argument("--no-peer-lower", action="store_true", help="skip pld-accounting's lower bound")
    parser.add_argument("--timeout", type=float, default=600.0, help="seconds per peer query (default 600)")
    parser.add_argument("--peer-case", nargs=5, metavar=("PEER", "SIGMA", "T", "E", "DELTA"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.peer_case:  # the child process of run_peer
        peer, sigma, t, epochs, delta = args.peer_case
        value, cpu = peer_epsilon(peer, float(sigma), int(t), int(epochs), float(delta))
        print(json.dumps({"epsilon": value, "cpu": cpu}))
        return

    peers = [] if args.skip_peers else [p for p in PEERS if not (args.no_peer_lower and p == "pld_lower")]
    peers = [p for p in peers if peer_available(p)]
    versions = {}
    for name in ("pld-accounting", "random-allocation", "dp-accounting", "numba"):
        try:
            versions[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            versions[name] = "not installed"
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                            cwd=os.path.dirname(os.path.abspath(__file__))).stdout.strip() or "unknown"
    print(f"<!-- dpacct at commit {commit}; python {sys.executable}; "
          + ", ".join(f"{k} {v}" for k, v in versions.items()) + f"; peers run: {', '.join(peers) or 'none'}; "
          f"peer timeout {args.timeout:g} s -->")
    if "pld_upper" in peers or "pld_lower" in peers:
        run_peer("pld_upper", (1.0, 10, 1, 1e-5), args.timeout)  # untimed: compiles and caches numba kernels

    print("| sigma | t | E | delta | dpacct [lower, upper] | CPU s | RDP upper | deterministic | "
          "Poisson PLD (1/t) | pld-accounting upper | CPU s | check | pld-accounting lower | CPU s | check | "
          "random-allocation | CPU s | check |")
    print("|" + " --- |" * 18)
    conflicts, notes = [], []
    for case in CASES:
        sigma, t, epochs, delta = case
        ours = dpacct_row(*case)
        lo, up = ours["lower"], ours["upper"]
        cells = []
        for peer in PEERS:
            if peer not in peers:
                cells.append("- | - | -")
                continue
            value, cpu, note = run_peer(peer, case, args.timeout)
            if note:
                notes.append(f"{peer} on {case}: {note}")
                cells.append(f"{note.split(':')[0]} | - | -")
                continue
            text, conflict = check(value, lo, up, peer_is_upper=peer != "pld_lower")
            if conflict:
                conflicts.append(f"{peer} on {case}: {value!r} against dpacct [{lo!r}, {up!r}]")
            cells.append(f"{value:.5g} | {cpu:.2f} | {text}")
        p_lo, p_up = ours["poisson"]
        print(f"| {sigma} | {t} | {epochs} | {delta:g} | [{lo:.5g}, {up:.5g}] | {ours['cpu']:.2f} | "
              f"{fmt(ours['rdp'], 4)} | {fmt(ours['det'], 4)} | [{p_lo:.4g}, {p_up:.4g}] | " + " | ".join(cells) + " |",
              flush=True)
    for note in notes:
        print(f"\nnote: {note}")
    if conflicts:
        print("\n**CONFLICT: a peer bound lies on the wrong side of dpacct's certified interval "
              "(a bug in one of the two):**")
        for line in conflicts:
            print(f"- {line}")
    elif peers:
        print("\nNo conflict: every peer upper bound is >= dpacct's certified lower bound and every peer "
              "lower bound is <= dpacct's certified upper bound.")


if __name__ == "__main__":
    main()

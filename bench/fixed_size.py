"""Fixed-size batches: dpacct beside dp-accounting (agreement first, then CPU time).

Run (dp-accounting from the ``bench`` extra)::

    PYTHONPATH=$PWD python bench/fixed_size.py

dp-accounting has no PLD for fixed-size batches (its ``SampledWithoutReplacementDpEvent``
is RDP only, with sensitivity 1: its issue #378). Under add/remove adjacency without
replacement the dominating pair is the Poisson pair at sigma/2 and rate b/n
(dpacct.samplers.fixed_size), which dp-accounting's PLD accounts when given sigma/2: that
is the agreement check. Then the CPU seconds (``time.process_time``) of dpacct's
``fixed_size_bounds`` for each adjacency and replacement, beside dp-accounting's PLD of
the sigma/2 pair and its (underestimating) RDP.
"""

from __future__ import annotations

import importlib.metadata
import platform
import time

from dpacct.samplers import fixed_size_bounds

# (dataset_size, batch_size, noise_multiplier, steps, delta)
CASES = [
    (60_000, 256, 1.1, 10_000, 1e-5),
    (60_000, 256, 4.0, 2_344, 1e-5),
    (1_000_000, 1_000, 2.0, 10_000, 1e-6),
]


def _timed(fn):  # type: ignore[no-untyped-def]
    start = time.process_time()
    out = fn()
    return out, time.process_time() - start


def main() -> None:
    import dp_accounting
    from dp_accounting.pld import pld_privacy_accountant
    from dp_accounting.rdp import rdp_privacy_accountant

    print(f"dpacct vs dp-accounting {importlib.metadata.version('dp-accounting')}; "
          f"{platform.machine()}, Python {platform.python_version()}\n")
    print("| n | b | sigma | T | delta | dpacct add/remove WOR [lo, up] | dp-acc. PLD at sigma/2 | CPU s dpacct | "
          "CPU s dp-acc. | ratio | dp-acc. RDP (sens. 1) | replace-one WOR | zero-out WOR | add/remove WR | "
          "CPU s (r-o, z-o, WR) |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for n, b, sigma, steps, delta in CASES:
        kw = {"noise_multiplier": sigma, "batch_size": b, "dataset_size": n, "steps": steps, "delta": delta}
        ours, t_ours = _timed(lambda: fixed_size_bounds(**kw))  # noqa: B023

        def peer_pld() -> float:
            acct = pld_privacy_accountant.PLDAccountant()
            acct.compose(dp_accounting.PoissonSampledDpEvent(b / n, dp_accounting.GaussianDpEvent(sigma / 2)), steps)
            return float(acct.get_epsilon(delta))

        def peer_rdp() -> float:
            acct = rdp_privacy_accountant.RdpAccountant(neighboring_relation=dp_accounting.NeighboringRelation.REPLACE_ONE)
            acct.compose(dp_accounting.SampledWithoutReplacementDpEvent(n, b, dp_accounting.GaussianDpEvent(sigma)),
                         steps)
            return float(acct.get_epsilon(delta))

        peer, t_peer = _timed(peer_pld)
        rdp = peer_rdp()
        assert ours.lower.value <= peer * (1 + 1e-6) and peer <= ours.upper.value * 1.01, (ours, peer)
        extra, seconds = [], []
        for relation, replacement in (("replace_one", False), ("zero_out", False), ("add_remove", True)):
            res, t = _timed(lambda: fixed_size_bounds(neighboring_relation=relation, replacement=replacement, **kw))  # noqa: B023
            extra.append(f"[{res.lower.value:.4g}, {res.upper.value:.4g}]")
            seconds.append(f"{t:.2f}")
        print(f"| {n} | {b} | {sigma} | {steps} | {delta:g} | [{ours.lower.value:.4f}, {ours.upper.value:.4f}] | "
              f"{peer:.4f} | {t_ours:.3f} | {t_peer:.3f} | {t_peer / t_ours:.1f} | {rdp:.4f} | "
              f"{' | '.join(extra)} | {', '.join(seconds)} |")


if __name__ == "__main__":
    main()

"""Time dpacct beside its peers on the shared grid: check agreement first, then time.

Usage::

    python bench/run.py [--large] [--family rdp|pld|fft|all] [--output bench/RESULTS.md]

Run it with an interpreter that has dpacct and the peers installed
(``pip install -e ".[bench]"``). Prints one markdown report.
"""

from __future__ import annotations

import argparse
import datetime
import importlib.metadata
import platform
import statistics
import sys
import time
import warnings
from collections.abc import Callable

sys.path.insert(0, str(__import__("pathlib").Path(__file__).parent))

from cases import CALIBRATION, DEFAULT, LARGE, Case  # noqa: E402
from peers import LIBRARIES, Library  # noqa: E402

# Agreement tolerances, checked before anything is timed.
# RDP: all libraries use valid conversions; dpacct uses a denser order grid and the improved
# conversion, so its epsilon must be <= each peer's (plus rounding) and within 15% of it.
RDP_REL = 0.15
# PLD: dpacct's certified upper bound is within ~0.5% above the truth; dp_accounting's default
# grid (1e-4) and prv-accountant's upper estimate are within ~1%.
PLD_REL = 0.02


def time_call(f: Callable[[], object], budget: float = 1.0, max_repeats: int = 20) -> tuple[float, int]:
    """Median wall time of f() after one warm-up call, with ~budget seconds of repeats."""
    start = time.perf_counter()
    f()
    first = time.perf_counter() - start
    repeats = max(1, min(max_repeats, int(budget / max(first, 1e-6))))
    samples = []
    for _ in range(repeats):
        start = time.perf_counter()
        f()
        samples.append(time.perf_counter() - start)
    return statistics.median(samples), repeats


def cpu_model() -> str:
    try:
        for line in open("/proc/cpuinfo"):
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def header(libraries: list[Library]) -> list[str]:
    lines = [
        "# dpacct benchmark",
        "",
        f"- date: {datetime.datetime.now(datetime.timezone.utc):%Y-%m-%d %H:%M UTC}",
        f"- machine: {cpu_model()}, {__import__('os').cpu_count()} cores; Python {platform.python_version()}",
        f"- numpy {importlib.metadata.version('numpy')}, scipy {importlib.metadata.version('scipy')}",
    ]
    for lib in libraries:
        lines.append(f"- {lib.name}: {lib.version() if lib.available() else 'not installed (skipped)'}")
    return lines


def family_table(family: str, cases: list[Case], libraries: list[Library], rel: float) -> list[str]:
    lines = [f"## {family.upper()}: epsilon for T steps", "",
             "| case | library | epsilon | rel. diff vs dpacct | median time | peer / dpacct | repeats |",
             "| --- | --- | --- | --- | --- | --- | --- |"]
    for case in cases:
        rows = []
        base_eps = base_time = None
        for lib in libraries:
            f = getattr(lib, f"{family}_epsilon")
            if f is None or not lib.available():
                continue
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                eps = f(case)
                if lib.name == "dpacct":
                    base_eps = eps
                else:
                    assert base_eps is not None
                    diff = (eps - base_eps) / base_eps
                    # Agreement first: a disagreement aborts the benchmark.
                    if family == "rdp" and not (base_eps <= eps * (1 + 1e-9) and diff <= rel):
                        raise SystemExit(f"RDP disagreement on {case.label}: dpacct {base_eps} vs {lib.name} {eps}")
                    if family == "pld" and abs(diff) > rel:
                        raise SystemExit(f"PLD disagreement on {case.label}: dpacct {base_eps} vs {lib.name} {eps}")
                median, repeats = time_call(lambda: f(case))
            if lib.name == "dpacct":
                base_time = median
            rows.append((lib.name, eps, median, repeats))
        for name, eps, median, repeats in rows:
            diff = "" if name == "dpacct" else f"{(eps - base_eps) / base_eps:+.2%}"
            ratio = "1" if name == "dpacct" else f"{median / base_time:.1f}x"
            lines.append(f"| {case.label} | {name} | {eps:.5f} | {diff} | {median * 1e3:.2f} ms | {ratio} | {repeats} |")
    return lines


def calibration_table(libraries: list[Library]) -> list[str]:
    lines = ["## Noise calibration (RDP): smallest sigma for a target epsilon", "",
             "| case | target eps | library | sigma | median time | peer / dpacct |", "| --- | --- | --- | --- | --- | --- |"]
    for case, target in CALIBRATION:
        base = None
        for lib in libraries:
            if lib.calibrate_sigma is None or not lib.available():
                continue
            f = lib.calibrate_sigma
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                sigma = f(case, target)
                median, _ = time_call(lambda: f(case, target), budget=2.0, max_repeats=10)
            base = median if lib.name == "dpacct" else base
            ratio = "1" if lib.name == "dpacct" else f"{median / base:.1f}x"
            lines.append(f"| {case.label} | {target:g} | {lib.name} | {sigma:.5f} | {median * 1e3:.2f} ms | {ratio} |")
    return lines


def pld_calibration_table(libraries: list[Library]) -> list[str]:
    """Noise calibration with the PLD accountants (dp-accounting timed once: it takes seconds)."""
    lines = ["## Noise calibration (PLD): smallest sigma for a target epsilon", "",
             "| case | target eps | library | sigma | achieved eps | median time | peer / dpacct |",
             "| --- | --- | --- | --- | --- | --- | --- |"]
    for case, target in CALIBRATION:
        base = None
        for lib in libraries:
            if lib.calibrate_sigma_pld is None or not lib.available():
                continue
            f = lib.calibrate_sigma_pld
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                start = time.perf_counter()
                sigma, achieved = f(case, target)
                first = time.perf_counter() - start
                if first < 5.0:
                    median, _ = time_call(lambda: f(case, target), budget=3.0, max_repeats=5)
                else:
                    median = first
            base = median if lib.name == "dpacct" else base
            ratio = "1" if lib.name == "dpacct" else f"{median / base:.1f}x"
            lines.append(f"| {case.label} | {target:g} | {lib.name} | {sigma:.5f} | {achieved:.5f} "
                         f"| {median * 1e3:.0f} ms | {ratio} |")
    return lines


def fft_table(sizes: list[int]) -> list[str]:
    """dpacct's own complex FFT beside scipy.fft and numpy.fft (agreement checked first)."""
    import numpy as np
    import scipy.fft

    from dpacct import _core

    lines = ["## FFT: dpacct's radix-2 transform beside scipy.fft and numpy.fft (complex input, size n)", "",
             "| n | dpacct | scipy.fft | numpy.fft | dpacct / scipy | max abs diff vs numpy |",
             "| --- | --- | --- | --- | --- | --- |"]
    rng = np.random.default_rng(0)
    for n in sizes:
        x = rng.random(n) + 1j * rng.random(n)
        ours = _core.pld.fft(x)
        reference = np.fft.fft(x)
        error = float(np.max(np.abs(ours - reference)))
        bound = _core.pld.fft_error_bound(n) * float(np.sum(np.abs(x)))
        if error > bound:
            raise SystemExit(f"FFT disagreement at n={n}: {error} > bound {bound}")
        # The hook builds dpacct's plan once per call (the composer keeps its plans): the time of r
        # more transforms in one call takes that out. scipy and numpy keep their plans themselves.
        repeats = max(2, (1 << 20) // n)
        t_one, _ = time_call(lambda: _core.pld.fft(x, repeats=repeats), budget=0.5)
        t_two, _ = time_call(lambda: _core.pld.fft(x, repeats=2 * repeats), budget=0.5)
        t_ours = max(t_two - t_one, 0.0) / repeats
        t_scipy, _ = time_call(lambda: scipy.fft.fft(x), budget=0.5)
        t_numpy, _ = time_call(lambda: np.fft.fft(x), budget=0.5)
        lines.append(f"| 2^{n.bit_length() - 1} | {t_ours * 1e3:.2f} ms | {t_scipy * 1e3:.2f} ms "
                     f"| {t_numpy * 1e3:.2f} ms | {t_ours / t_scipy:.1f}x | {error:.1e} |")
    return lines


def pld_floor_table(cases: list[Case]) -> list[str]:
    """dpacct's PLD epsilon query beside one scipy.fft real round trip of each final grid."""
    import numpy as np
    import scipy.fft

    import dpacct

    lines = ["## PLD: dpacct beside the FFT floor (one scipy.fft rfft + irfft of each final grid)", "",
             "Each dpacct grid composes three sequences (the connect-the-dots upper PMF and the P- and "
             "Q-distributions of the cell labels), i.e. three forward and three inverse transforms, plus "
             "the per-step cells and the Chernoff window; a query may build more than one grid (tilt "
             "retries, grid refinement).", "",
             "| case | [lower, upper] | gap / eps | final grids (remove, add) | grids built | dpacct query | "
             "scipy round trips | dpacct / scipy |", "| --- | --- | --- | --- | --- | --- | --- | --- |"]
    for case in cases:
        def query() -> tuple[float, float, list[int], int]:
            dpacct.pld.clear_cache()  # a cold query, as in the table above
            acct = dpacct.PLDAccountant().step(noise_multiplier=case.noise_multiplier,
                                               sampling_probability=case.sampling_probability, count=case.steps)
            lower, upper = acct.epsilon_bounds(case.delta)
            # The composed grids are private state; read here only to size the comparison.
            # The final grid of a direction is its finest (smallest discretization).
            final: dict[str, tuple[float, int]] = {}
            for key, c in acct._composed_cache.items():
                direction, width = key[0], key[1]  # (direction, discretization, tilt, tail, size, ...)
                if direction not in final or width < final[direction][0]:
                    final[direction] = (float(width), int(c.size))
            sizes = [final[d][1] for d in ("remove", "add") if d in final]
            return float(lower), float(upper), sizes, len(acct._composed_cache)

        lower, upper, sizes, built = query()
        t_query, _ = time_call(query, budget=2.0, max_repeats=5)
        buffers = [np.random.default_rng(0).random(n) for n in sizes]
        t_fft, _ = time_call(lambda: [scipy.fft.irfft(scipy.fft.rfft(b), n=b.size) for b in buffers],
                             budget=1.0, max_repeats=20)
        lines.append(f"| {case.label} | [{lower:.5f}, {upper:.5f}] | {(upper - lower) / upper:.2%} | "
                     f"{', '.join(f'2^{n.bit_length() - 1}' for n in sizes)} | {built} | {t_query * 1e3:.1f} ms | "
                     f"{t_fft * 1e3:.2f} ms | {t_query / t_fft:.1f}x |")
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--large", action="store_true", help="heavier grid (T up to 1e6)")
    parser.add_argument("--family", choices=["rdp", "pld", "fft", "all"], default="all")
    parser.add_argument("--output", help="also write the report to this file")
    args = parser.parse_args()
    cases = LARGE if args.large else DEFAULT
    libraries = LIBRARIES
    if not libraries[0].available():
        raise SystemExit("dpacct is not importable: pip install -e . first")
    lines = header(libraries) + ["", f"Command: `python bench/run.py {' '.join(sys.argv[1:])}`".rstrip(), ""]
    if args.family in ("rdp", "all"):
        lines += family_table("rdp", cases, libraries, RDP_REL) + [""]
        lines += calibration_table(libraries) + [""]
    if args.family in ("pld", "all"):
        lines += family_table("pld", cases, libraries, PLD_REL) + [""]
        lines += pld_floor_table(cases) + [""]
        lines += pld_calibration_table(libraries) + [""]
    if args.family in ("fft", "all"):
        lines += fft_table([2**k for k in range(12, 23, 2)]) + [""]
    report = "\n".join(lines)
    print(report)
    if args.output:
        with open(args.output, "w") as out:
            out.write(report + "\n")


if __name__ == "__main__":
    main()

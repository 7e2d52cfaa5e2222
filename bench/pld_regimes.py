"""Time dpacct's PLD accountant on the hard corners listed in issue 10 (one process per case).

Usage: python bench/pld_regimes.py [--timeout SECONDS]

Prints one markdown row per case: the query, the certified interval, its
relative width, CPU seconds and peak memory (ru_maxrss) of the case's process.
The peers' figures for the same queries are in bench/RESULTS.md (issue 10's
measurements); bench/run.py times the peers side by side on the bench grid.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys

CASES = [
    # (label, sigma, q, steps, query, value)
    ("sigma=0.4 q=1e-6 T=1e5", 0.4, 1e-6, 100_000, "epsilon", 1e-6),
    ("sigma=0.4 q=1e-5 T=1e5", 0.4, 1e-5, 100_000, "epsilon", 1e-6),
    ("sigma=0.3 q=1e-5 T=1e5", 0.3, 1e-5, 100_000, "epsilon", 1e-6),
    ("sigma=0.4 q=1e-6 T=1e6", 0.4, 1e-6, 1_000_000, "epsilon", 1e-6),
    ("sigma=0.05 q=1e-4 T=1e4", 0.05, 1e-4, 10_000, "epsilon", 1e-6),
    ("sigma=0.5 q=1e-7 T=1e7", 0.5, 1e-7, 10_000_000, "epsilon", 1e-6),
    ("sigma=0.8 q=1e-3 T=1e6", 0.8, 1e-3, 1_000_000, "epsilon", 1e-6),
    ("sigma=1 q=0.01 T=1e5 delta=1e-10", 1.0, 0.01, 100_000, "epsilon", 1e-10),
    ("sigma=1.1 q=0.0042667 T=1e8", 1.1, 0.0042667, 100_000_000, "epsilon", 1e-5),
    ("delta(0.5) sigma=1 q=1e-3 T=1000", 1.0, 1e-3, 1000, "delta", 0.5),
    ("sigma=3.04 q=3.3e-5 T=2 delta=5.4e-12", 3.04, 3.3e-5, 2, "epsilon", 5.4e-12),
    ("sigma=1 q=1e-3 T=1 delta=1e-12", 1.0, 1e-3, 1, "epsilon", 1e-12),
    ("sigma=1 q=1 T=1e6 delta=0.3", 1.0, 1.0, 1_000_000, "epsilon", 0.3),
    ("sigma=1 q=1e-3 T=1e4 delta=1e-10", 1.0, 1e-3, 10_000, "epsilon", 1e-10),
    ("sigma=1 q=1e-3 T=1e4 delta=1e-14", 1.0, 1e-3, 10_000, "epsilon", 1e-14),
    ("sigma=1 q=1e-3 T=1e2", 1.0, 1e-3, 100, "epsilon", 1e-5),
    ("sigma=1 q=1e-3 T=1e7", 1.0, 1e-3, 10_000_000, "epsilon", 1e-5),
    ("delta(2) sigma=0.8 q=1e-4 T=1e4", 0.8, 1e-4, 10_000, "delta", 2.0),
    ("delta(0.5) sigma=0.8 q=1e-4 T=1e4", 0.8, 1e-4, 10_000, "delta", 0.5),
    ("sigma=0.8 q=1e-4 T=1e4 delta=1e-12", 0.8, 1e-4, 10_000, "epsilon", 1e-12),
    # Many hits at small rates and tiny deltas; a huge epsilon of a long run (found by bench/pld_sweep.py).
    ("sigma=0.7 q=1e-5 T=2e7 delta=1e-13", 0.7, 1e-5, 20_000_000, "epsilon", 1e-13),
    ("delta(1.13) sigma=0.7 q=1e-5 T=2e7", 0.7, 1e-5, 20_000_000, "delta", 1.13),
    ("sigma=0.7 q=2e-5 T=5e7 delta=1e-13", 0.7, 2e-5, 50_000_000, "epsilon", 1e-13),
    ("delta(4.65e5) sigma=4.41 q=0.5 T=7.1e7", 4.41, 0.5, 71_000_000, "delta", 465000.0),
    # The largest sigma of the range, where every loss is ~ q / sigma (bench/pld_sweep.py --min-sigma 10).
    ("sigma=1e4 q=0.01 T=1e8 delta=1e-15", 1e4, 0.01, 100_000_000, "epsilon", 1e-15),
    ("sigma=516 q=3.7e-8 T=6628 delta=7.5e-13", 516.416790886204, 3.6778410798497065e-08, 6628, "epsilon",
     7.523660212837648e-13),
]

CHILD = """
import json, resource, sys, time
import dpacct
sigma, q, steps, query, value = json.loads(sys.argv[1])
acct = dpacct.PLDAccountant().step(noise_multiplier=sigma, sampling_probability=q, count=steps)
t = time.process_time()
lower, upper = acct.epsilon_bounds(value) if query == "epsilon" else acct.delta_bounds(value)
cpu = time.process_time() - t
print(json.dumps([float(lower), float(upper), cpu, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024]))
"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--timeout", type=float, default=120.0, help="seconds per case (default 120)")
    args = parser.parse_args()
    print("| case | query | lower | upper | width | CPU s | peak MB |")
    print("| --- | --- | --- | --- | --- | --- | --- |")
    for label, sigma, q, steps, query, value in CASES:
        what = f"eps(delta={value:g})" if query == "epsilon" else f"delta(eps={value:g})"
        try:
            out = subprocess.run(
                [sys.executable, "-c", CHILD, json.dumps([sigma, q, steps, query, value])],
                capture_output=True, text=True, timeout=args.timeout, check=True,
            ).stdout
        except subprocess.TimeoutExpired:
            print(f"| {label} | {what} | | | | > {args.timeout:g} | |")
            continue
        except subprocess.CalledProcessError as error:
            print(f"| {label} | {what} | error: {error.stderr.strip().splitlines()[-1]} | | | | |")
            continue
        lower, upper, cpu, mb = json.loads(out)
        width = (upper - lower) / upper if upper > 0 else 0.0
        print(f"| {label} | {what} | {lower:.6g} | {upper:.6g} | {100 * width:.2f} % | {cpu:.2f} | {mb:.0f} |", flush=True)


if __name__ == "__main__":
    main()

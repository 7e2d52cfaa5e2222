"""Run the same random PLD queries through two dpacct checkouts and compare their certified intervals.

Usage: python bench/pld_compare_trees.py OLD_TREE NEW_TREE [--queries N] [--seed S] [--min-sigma S] [--max-sigma S]

Each tree must have its extension built in place (``python setup.py build_ext --inplace``;
``git worktree add /tmp/old REV`` gives an older revision). Every query runs in a child
process per tree, cold. Both answers are certified, so disjoint intervals mean a bug; the
script also lists queries whose new upper bound is looser or new lower bound lower than
the old one by more than 0.1 %, those that became much slower, and counts the intervals that stayed the
same to the bit. sigma is drawn log-uniform in [min-sigma, max-sigma] (default 0.3 .. 20).
"""

from __future__ import annotations

import argparse
import json
import math
import subprocess
import sys

CHILD = r"""
import json, math, random, sys, time
sys.path.insert(0, sys.argv[1])
import dpacct
from dpacct.pld import PLDAccountant, clear_cache
assert dpacct.__file__.startswith(sys.argv[1]), dpacct.__file__
rng = random.Random(int(sys.argv[2]))
def lu(a, b):
    return math.exp(rng.uniform(math.log(a), math.log(b)))
for i in range(int(sys.argv[3])):
    sigma = lu(float(sys.argv[4]), float(sys.argv[5]))
    q = 1.0 if rng.random() < 0.15 else lu(1e-8, 1.0)
    steps = 1 if rng.random() < 0.2 else max(1, int(lu(1, 1e7)))
    kind = "delta" if rng.random() < 0.3 else "epsilon"
    value = lu(1e-14, 0.1) if kind == "epsilon" else lu(1e-4, 20.0)
    clear_cache()
    acct = PLDAccountant().step(noise_multiplier=sigma, sampling_probability=q, count=steps)
    start = time.process_time()
    try:
        lower, upper = acct.epsilon_bounds(value) if kind == "epsilon" else acct.delta_bounds(value)
        row = dict(lower=float(lower), upper=float(upper), error=None)
    except Exception as error:
        row = dict(lower=math.nan, upper=math.nan, error=repr(error)[:200])
    row.update(i=i, sigma=sigma, q=q, steps=steps, kind=kind, value=value, cpu=time.process_time() - start)
    print(json.dumps(row), flush=True)
"""


def run(tree: str, seed: int, queries: int, sigmas: tuple[float, float]) -> list[dict[str, object]]:
    command = [sys.executable, "-c", CHILD, tree, str(seed), str(queries), str(sigmas[0]), str(sigmas[1])]
    out = subprocess.run(command, capture_output=True, text=True, check=True).stdout
    return [json.loads(line) for line in out.splitlines() if line.startswith("{")]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("old")
    parser.add_argument("new")
    parser.add_argument("--queries", type=int, default=120)
    parser.add_argument("--seed", type=int, default=5)
    parser.add_argument("--min-sigma", type=float, default=0.3)
    parser.add_argument("--max-sigma", type=float, default=20.0)
    args = parser.parse_args()
    sigmas = (args.min_sigma, args.max_sigma)
    old, new = run(args.old, args.seed, args.queries, sigmas), run(args.new, args.seed, args.queries, sigmas)
    disjoint = looser = lower = slower = narrower = identical = 0
    for a, b in zip(old, new):
        label = f"{a['kind']} T={a['steps']} q={a['q']:.3g} sigma={a['sigma']:.3g} at {a['value']:.3g}"
        if a["error"] or b["error"]:
            print(f"error: {label}: old {a['error']}, new {b['error']}")
            continue
        lo_a, up_a, lo_b, up_b = (float(x) for x in (a["lower"], a["upper"], b["lower"], b["upper"]))  # type: ignore[arg-type]
        span = f"old [{lo_a:.6g}, {up_a:.6g}] {a['cpu']:.2f} s, new [{lo_b:.6g}, {up_b:.6g}] {b['cpu']:.2f} s"
        identical += lo_a == lo_b and up_a == up_b  # (json keeps every bit of a float)
        if lo_b > up_a * (1 + 1e-9) or lo_a > up_b * (1 + 1e-9):
            disjoint += 1
            print(f"DISJOINT (a bug): {label}: {span}")
        if up_b > up_a * (1 + 1e-3):
            looser += 1
            print(f"upper looser: {label}: {span}")
        if lo_b < lo_a * (1 - 1e-3):
            lower += 1
            print(f"lower lower: {label}: {span}")
        if float(b["cpu"]) > 2 * float(a["cpu"]) + 0.3:  # type: ignore[arg-type]
            slower += 1
            print(f"slower: {label}: {span}")
        if math.isfinite(up_a) and up_b - lo_b < (2 / 3) * (up_a - lo_a):
            narrower += 1
    cpu_old = sum(float(a["cpu"]) for a in old)  # type: ignore[arg-type, misc]
    cpu_new = sum(float(b["cpu"]) for b in new)  # type: ignore[arg-type, misc]
    print(f"{len(new)} queries: {disjoint} disjoint, {looser} with a looser upper bound, {lower} with a lower lower "
          f"bound, {narrower} narrower by a third, {slower} much slower, {identical} the same to the bit; "
          f"CPU {cpu_old:.1f} s -> {cpu_new:.1f} s")


if __name__ == "__main__":
    main()

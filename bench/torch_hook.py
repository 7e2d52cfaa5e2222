"""dpacct.torch costs: the accountant hook per step beside opacus' hook, and DP-SGD-JL beside exact DP-SGD.

Usage::

    python bench/torch_hook.py [--device cpu] [--output FILE.md]   # recorded in bench/RESULTS.md

Part 1 times one accounted optimizer step on a tiny model (so the accounting shows):
a bare ``optimizer.step()``, the same with :class:`dpacct.torch.PrivacyAccountant`
attached (RDP and PLD, without and with a budget check), and with opacus' own accountant
hook (``IAccountant.get_optimizer_hook_fn``, RDP and PRV; the step of opacus' accountant,
which only records the history, called from the same optimizer hook). The per-step
overhead is the difference from the bare step.

Part 2 times one step of :func:`dpacct.torch.dp_sgd_step` (exact per-sample gradients)
and :func:`dpacct.torch.dp_sgd_jl_step` (r shared Gaussian directions) on an MLP where
per-sample gradients are large, and measures the step's peak extra memory (CPU: peak RSS
above the level before the step, each configuration in a fresh process; CUDA:
``torch.cuda.max_memory_allocated``).
"""

from __future__ import annotations

import argparse
import datetime
import json
import platform
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from typing import Any
from pathlib import Path

import torch

import dpacct
from dpacct.torch import PoissonBatchSampler, PrivacyAccountant, dp_sgd_jl_step, dp_sgd_step

ROOT = Path(__file__).resolve().parents[1]


def _interleaved_us(configs: list[tuple[str, Callable[[], object]]], rounds: int = 15,
                    repeats: int = 500) -> list[tuple[str, float, float, float]]:
    """Fastest, median and mean round of the microseconds per call of each function, in interleaved rounds.

    The machine is shared, so the configurations take turns within each round: a slow
    period then affects all of them alike instead of whichever ran during it.
    """
    for _, f in configs:
        for _ in range(50):
            f()
    samples: dict[str, list[float]] = {label: [] for label, _ in configs}
    for _ in range(rounds):
        for label, f in configs:
            start = time.perf_counter()
            for _ in range(repeats):
                f()
            samples[label].append((time.perf_counter() - start) / repeats * 1e6)
    return [(label, min(samples[label]), statistics.median(samples[label]), statistics.fmean(samples[label]))
            for label, _ in configs]


def hook_overhead() -> list[tuple[str, float, float, float]]:
    """Median microseconds per ``optimizer.step()`` with each accounting hook attached."""
    configs: list[tuple[str, Callable[[], object]]] = []
    sampler = PoissonBatchSampler(dataset_size=60_000, sampling_probability=256 / 60_000)

    def setup() -> torch.optim.Optimizer:
        model = torch.nn.Linear(4, 1)
        opt = torch.optim.SGD(model.parameters(), lr=0.0)
        for p in model.parameters():
            p.grad = torch.zeros_like(p)
        return opt

    configs.append(("bare optimizer.step()", setup().step))
    # A budget of 8 at delta = 1e-5 affords about 100,000 steps: the check runs on every timed step.
    for accountant, budget in (("rdp", None), ("rdp", 8.0), ("pld", None), ("pld", 8.0)):
        opt = setup()
        PrivacyAccountant(sampler, delta=1e-5, accountant=accountant, noise_multiplier=1.1,
                          max_epsilon=budget).attach(opt)
        configs.append((f"dpacct PrivacyAccountant ({accountant}{', budget checked' if budget else ''})", opt.step))
    try:
        from opacus.accountants import create_accountant
    except ImportError:
        print("opacus not installed: its hook is skipped", file=sys.stderr)
    else:
        for name in ("rdp", "prv"):
            opt = setup()
            opt.noise_multiplier = 1.1  # type: ignore[attr-defined]
            opt.accumulated_iterations = 1  # type: ignore[attr-defined]
            hook = create_accountant(name).get_optimizer_hook_fn(sample_rate=256 / 60_000)

            def post(o: Any, args: Any, kwargs: Any, hook: Callable[[Any], None] = hook) -> None:
                hook(o)

            opt.register_step_post_hook(post)
            configs.append((f"opacus {name} accountant hook", opt.step))
    # The accounting work alone, without the optimizer: what each hook adds to a step.
    direct = PrivacyAccountant(sampler, delta=1e-5, accountant="rdp", noise_multiplier=1.1)
    configs.append(("dpacct PrivacyAccountant.step() alone", direct.step))
    try:
        from opacus.accountants import create_accountant as _create
    except ImportError:
        pass
    else:
        class _Optim:
            noise_multiplier = 1.1
            accumulated_iterations = 1

        opacus_hook = _create("rdp").get_optimizer_hook_fn(sample_rate=256 / 60_000)
        configs.append(("opacus rdp hook_fn(optimizer) alone", lambda: opacus_hook(_Optim())))
    return _interleaved_us(configs)


def _mlp(width: int) -> torch.nn.Module:
    return torch.nn.Sequential(torch.nn.Linear(784, width), torch.nn.ReLU(), torch.nn.Linear(width, width),
                               torch.nn.ReLU(), torch.nn.Linear(width, 10))


def _rss_kib(field: str) -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    return 0


def one_config(method: str, r: int, width: int, batch: int, device: str) -> dict[str, float]:
    """Time and peak memory of one step configuration (run in a fresh process)."""
    torch.manual_seed(0)
    model = _mlp(width).to(device)
    x = torch.randn(batch, 784, device=device)
    y = torch.randint(0, 10, (batch,), device=device)

    def loss(out: torch.Tensor, t: torch.Tensor) -> torch.Tensor:
        return torch.nn.functional.cross_entropy(out, t, reduction="none")

    def step() -> None:
        if method == "exact":
            dp_sgd_step(model, loss, x, y, max_grad_norm=1.0, noise_multiplier=1.0, expected_batch_size=batch)
        else:
            dp_sgd_jl_step(model, loss, x, y, max_grad_norm=1.0, noise_multiplier=1.0, jl_dim=r,
                           expected_batch_size=batch)
        if device == "cuda":
            torch.cuda.synchronize()

    step()  # warm-up
    if device == "cuda":
        torch.cuda.reset_peak_memory_stats()
        base = torch.cuda.memory_allocated()
    else:
        Path("/proc/self/clear_refs").write_text("5")  # reset the peak RSS (Linux)
        base = _rss_kib("VmRSS") * 1024
    times = []
    for _ in range(7):
        start = time.perf_counter()
        step()
        times.append(time.perf_counter() - start)
    peak = torch.cuda.max_memory_allocated() if device == "cuda" else _rss_kib("VmHWM") * 1024
    params = sum(p.numel() for p in model.parameters())
    return {"seconds": statistics.median(times), "min_seconds": min(times), "peak_extra_mib": (peak - base) / 2**20,
            "params": params}


def jl_vs_exact(device: str, width: int, batch: int) -> list[dict[str, float | str | int]]:
    """Each configuration in a fresh interpreter so that peak memory is its own."""
    rows: list[dict[str, float | str | int]] = []
    for method, r in (("exact", 0), ("jl", 1), ("jl", 4), ("jl", 16)):
        code = (f"import sys, json; sys.path.insert(0, {str(ROOT / 'bench')!r}); import torch_hook; "
                f"print(json.dumps(torch_hook.one_config({method!r}, {r}, {width}, {batch}, {device!r})))")
        out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
        result = json.loads(out.stdout.strip().splitlines()[-1])
        rows.append({"method": "exact per-sample (vmap)" if method == "exact" else f"JL, r={r}", **result})
    return rows


def main() -> None:
    """Run both parts and print (or write) a markdown report."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--width", type=int, default=512)
    parser.add_argument("--batch", type=int, default=128)
    parser.add_argument("--output")
    args = parser.parse_args()
    import opacus

    lines = [
        "# dpacct.torch benchmark",
        "",
        f"- date: {datetime.datetime.now(datetime.timezone.utc):%Y-%m-%d %H:%M} UTC",
        f"- machine: {platform.processor() or platform.machine()}, {torch.get_num_threads()} torch threads; "
        f"Python {platform.python_version()}",
        f"- torch {torch.__version__}, opacus {opacus.__version__}, dpacct {dpacct.__version__}",
        "",
        f"Command: `python bench/torch_hook.py --device {args.device}"
        + (f" --output {args.output}`" if args.output else "`"),
        "",
        "## Accountant hook: time per optimizer.step() (tiny model, Poisson q = 256/60000, sigma = 1.1)",
        "",
        "15 interleaved rounds of 500 steps each; per configuration the fastest round (the steadiest",
        "figure on a shared machine), the median round, and the mean (which includes the rare budget",
        "look-ahead searches: a few accountant evaluations each time the number of steps doubles).",
        "The last rows time the accounting call alone, without the optimizer.",
        "",
        "| hook | fastest round, per step | vs bare step | median round | mean |",
        "| --- | --- | --- | --- | --- |",
    ]
    rows = hook_overhead()
    bare = rows[0][1]
    for label, fastest, median, mean in rows:
        versus = "" if "alone" in label else f"{fastest - bare:+.1f} us"
        lines.append(f"| {label} | {fastest:.1f} us | {versus} | {median:.1f} us | {mean:.1f} us |")
    lines += [
        "",
        f"## DP-SGD step: exact per-sample gradients vs DP-SGD-JL ({args.device}, MLP 784-{args.width}-"
        f"{args.width}-10, batch {args.batch})",
        "",
        "Seven timed steps after a warm-up; on a shared machine the fastest is the steadier figure.",
        "",
        "| method | parameters | fastest step | median step | peak extra memory |",
        "| --- | --- | --- | --- | --- |",
    ]
    for row in jl_vs_exact(args.device, args.width, args.batch):
        lines.append(f"| {row['method']} | {row['params']:,} | {float(row['min_seconds']) * 1e3:.0f} ms | "
                     f"{float(row['seconds']) * 1e3:.0f} ms | {row['peak_extra_mib']:.0f} MiB |")
    report = "\n".join(lines) + "\n"
    print(report)
    if args.output:
        Path(args.output).write_text(report)


if __name__ == "__main__":
    main()

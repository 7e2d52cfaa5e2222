"""DP-SGD on scikit-learn's bundled digits data, with Poisson and with shuffled batches.

Trains the same small MLP twice with dpacct's DP-SGD step and accountant hook, and
prints the certified epsilon for the sampler each run actually used, with the test
accuracy. Offline (the digits data ships with scikit-learn) and a few seconds on a CPU:

    python examples/train_digits.py              # add --device cuda on a GPU

The Poisson run is accounted as Poisson-subsampled Gaussian steps; the shuffled run by the
certified bound for shuffled batches (deterministic batches dominate shuffling), next to the
shuffle lower bound: the Poisson number would not be a guarantee for it.
"""

from __future__ import annotations

import argparse
import time

import torch
from sklearn.datasets import load_digits
from sklearn.model_selection import train_test_split
from torch.utils.data import DataLoader, TensorDataset

import dpacct
from dpacct.torch import PoissonBatchSampler, PrivacyAccountant, ShuffleBatchSampler, dp_sgd_step, empty_safe_collate

DELTA = 1e-5


def load(device: str) -> tuple[TensorDataset, torch.Tensor, torch.Tensor]:
    """Digits scaled to [0, 1]: a training set and a held-out test set."""
    x, y = load_digits(return_X_y=True)
    # 1440 training records: batches of 60 cut them evenly (24 per epoch), which the shuffle lower bound needs.
    x_train, x_test, y_train, y_test = train_test_split(x / 16.0, y, test_size=357, random_state=0)
    as_x = lambda a: torch.tensor(a, dtype=torch.float32, device=device)  # noqa: E731
    as_y = lambda a: torch.tensor(a, dtype=torch.long, device=device)  # noqa: E731
    return TensorDataset(as_x(x_train), as_y(y_train)), as_x(x_test), as_y(y_test)


def train(sampler: str, *, epochs: int, batch_size: int, noise_multiplier: float, max_grad_norm: float,
          lr: float, device: str, seed: int) -> dict[str, float | int | str]:
    """Train with ``sampler`` ("poisson" or "shuffle"); returns epsilon, accuracy and the step count."""
    torch.manual_seed(seed)
    data, x_test, y_test = load(device)
    n = len(data)
    generator = torch.Generator().manual_seed(seed)
    if sampler == "poisson":
        batches = PoissonBatchSampler(dataset_size=n, sampling_probability=batch_size / n, generator=generator)
    else:
        batches = ShuffleBatchSampler(dataset_size=n, batch_size=batch_size, generator=generator)
    loader = DataLoader(data, batch_sampler=batches, collate_fn=empty_safe_collate(data))
    model = torch.nn.Sequential(torch.nn.Linear(64, 32), torch.nn.Tanh(), torch.nn.Linear(32, 10)).to(device)
    optimizer = torch.optim.SGD(model.parameters(), lr=lr, momentum=0.9)
    accountant = PrivacyAccountant(loader, delta=DELTA, accountant="pld", noise_multiplier=noise_multiplier)
    accountant.attach(optimizer)
    info = accountant.sampling

    def loss_fn(out: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        return torch.nn.functional.cross_entropy(out, y, reduction="none")

    noise = torch.Generator(device=device).manual_seed(seed + 1)
    for _ in range(epochs):
        for x, y in loader:
            dp_sgd_step(model, loss_fn, x, y, max_grad_norm=max_grad_norm, noise_multiplier=noise_multiplier,
                        expected_batch_size=info.batch_size, generator=noise)
            optimizer.step()
            optimizer.zero_grad()
    with torch.no_grad():
        accuracy = float((model(x_test).argmax(1) == y_test).float().mean())
    result: dict[str, float | int | str] = {"sampler": sampler, "epsilon": accountant.get_epsilon(),
                                            "accuracy": accuracy, "steps": len(accountant),
                                            "sampling_probability": info.sampling_probability}
    if sampler == "shuffle":
        result["epsilon_lower_bound"] = float(accountant.epsilon_interval().lower)
        result["poisson_number_not_a_guarantee"] = float(dpacct.epsilon(
            noise_multiplier=noise_multiplier, sampling_probability=info.sampling_probability,
            steps=len(accountant), delta=DELTA, accountant="pld"))
    return result


def main(argv: list[str] | None = None) -> list[dict[str, float | int | str]]:
    """Run both samplers and print one line each."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--epochs", type=int, default=10)
    parser.add_argument("--batch-size", type=int, default=60)
    parser.add_argument("--noise-multiplier", type=float, default=1.0)
    parser.add_argument("--max-grad-norm", type=float, default=1.0)
    parser.add_argument("--lr", type=float, default=0.5)
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    results = []
    for sampler in ("poisson", "shuffle"):
        start = time.perf_counter()
        r = train(sampler, epochs=args.epochs, batch_size=args.batch_size, noise_multiplier=args.noise_multiplier,
                  max_grad_norm=args.max_grad_norm, lr=args.lr, device=args.device, seed=args.seed)
        seconds = time.perf_counter() - start
        line = (f"{sampler:8s} q={r['sampling_probability']:.4f} steps={r['steps']}: epsilon <= {r['epsilon']:.3f} "
                f"(delta={DELTA:g}), test accuracy {r['accuracy']:.3f}, {seconds:.1f} s")
        if sampler == "shuffle":
            line += (f"; shuffle lower bound {r['epsilon_lower_bound']:.3f}; the Poisson number "
                     f"{r['poisson_number_not_a_guarantee']:.3f} is NOT a guarantee for shuffled batches")
        print(line)
        results.append(r)
    return results


if __name__ == "__main__":
    main()

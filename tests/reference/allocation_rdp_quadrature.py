"""Reference Renyi divergences of the balls-in-bins pair, by mpmath quadrature (makes the .json beside it).

The pair (Chua et al. 2025, arXiv:2412.16802): P = (1/t) sum_i N(e_i, s^2 I_t) against
Q = N(0, s^2 I_t). Under Q, Z = P/Q = (1/t) sum_i Y_i, Y_i = exp(w_i / s - 1 / (2 s^2)),
w_i standard normal. Rows:

* ``"direct"`` (t = 2): E[Z^alpha] (remove) and E[Z^-(alpha-1)] (add) as a two-dimensional
  integral over (w_1, w_2); independent of every identity used by dpacct.
* ``"laplace"`` (t = 100 .. 10000, add only): E[Z^-beta] = (1/Gamma(beta)) int s^(beta-1)
  phi(s/t)^t ds with phi(u) = E exp(-u Y), both integrals by mpmath.quad at 20 digits.
  It shares the identity with dpacct (checked by the t = 2 rows) but none of its
  discretisation, which is what it tests.

Values are the divergences (log of the moment over alpha - 1). mpmath's own error
estimates are below 1e-10 relative on every row. Run: ``python tests/reference/allocation_rdp_quadrature.py``.
"""

from __future__ import annotations

import json
import pathlib

import mpmath as mp

mp.mp.dps = 20


def _y(w: mp.mpf, s: mp.mpf) -> mp.mpf:
    return mp.e ** (w / s - 1 / (2 * s * s))


def direct(sigma: float, alpha: int, direction: str) -> float:
    s = mp.mpf(sigma)
    power = alpha if direction == "remove" else -(alpha - 1)
    cuts = [-12, -4, 0, 4, 12 + 1 / s]

    def f(w1: mp.mpf, w2: mp.mpf) -> mp.mpf:
        return mp.npdf(w1) * mp.npdf(w2) * ((_y(w1, s) + _y(w2, s)) / 2) ** power

    return float(mp.log(mp.quad(f, cuts, cuts)) / (alpha - 1))


def laplace(sigma: float, t: int, alpha: int) -> float:
    s = mp.mpf(sigma)
    beta = alpha - 1

    def phi(u: mp.mpf) -> mp.mpf:
        return mp.quad(lambda w: mp.exp(-u * _y(w, s)) * mp.npdf(w), [-30, -10, -5, -2, 0, 2, 5, 10, 30 + 1 / s])

    cuts = [0, beta / 4, beta, 3 * beta, 10 * beta + 20, 100 * beta + 100, mp.inf]
    moment = mp.quad(lambda x: x ** (beta - 1) * phi(x / t) ** t, cuts) / mp.gamma(beta)
    return float(mp.log(moment) / beta)


def main() -> None:
    rows = []
    for sigma in (0.8, 1.0, 2.0):
        for alpha in (2, 3):
            for direction in ("remove", "add"):
                rows.append({"kind": "direct", "sigma": sigma, "steps": 2, "order": alpha,
                             "direction": direction, "rdp": direct(sigma, alpha, direction)})
    for sigma, t, alpha in ((1.0, 1000, 2), (1.0, 1000, 8), (0.7, 100, 4), (2.0, 10000, 16)):
        rows.append({"kind": "laplace", "sigma": sigma, "steps": t, "order": alpha, "direction": "add",
                     "rdp": laplace(sigma, t, alpha)})
    out = pathlib.Path(__file__).with_suffix(".json")
    out.write_text(json.dumps({"script": pathlib.Path(__file__).name, "rows": rows}, indent=1) + "\n")


if __name__ == "__main__":
    main()

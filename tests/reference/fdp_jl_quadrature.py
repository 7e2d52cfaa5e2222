"""Independent mpmath references for one DP-SGD-JL step (q = 1, T = 1), written to fdp_jl_quadrature.toml.

Run: python tests/reference/fdp_jl_quadrature.py   (about three minutes; mpmath only)

Models (Bu, Gopi, Kulkarni, Lee, Shen, Tantipongpipat, NeurIPS 2021, arXiv:2102.03013),
in units of the noise: mu_W = sqrt(r / W) / sigma, W ~ chi^2_r.
- paper pair: P = E_W N(mu_W, 1) against Q = N(0, 1) (per-example projections). Its loss is
  increasing in x, so delta(eps) = max_t E_W Phi(mu_W - t) - e^eps Phi(-t) ("remove") and
  max_t Phi(t) - e^eps E_W Phi(t - mu_W) ("add"); the maximiser solves p(t) = e^eps q(t).
- {x} vs {x, x} with shared projections: P = E_W N(2 mu_W, 1), Q = E_W N(mu_W, 1); delta is
  the integral of (p - e^eps q)_+ over x (both orders), by nested quadrature.
- the projection-revealed bound: E_W[delta_Gauss(mu_W)(eps)] with the exact Gaussian curve.
"""

from __future__ import annotations

import mpmath as mp

mp.mp.dps = 15  # the references are used to 1e-3 relative; 15 digits leave a wide margin
CASES = [(5, 2.0, 2.0), (3, 1.5, 1.0), (30, 1.0, 1.0)]  # (r, sigma, epsilon)


def density(r: int, w: mp.mpf) -> mp.mpf:
    return w ** (mp.mpf(r) / 2 - 1) * mp.e ** (-w / 2) / (2 ** (mp.mpf(r) / 2) * mp.gamma(mp.mpf(r) / 2))


def breaks(r: int) -> list[mp.mpf]:
    return [mp.mpf(0), mp.mpf("1e-6"), mp.mpf("1e-3"), mp.mpf("0.1"), mp.mpf(r) / 4, mp.mpf(r), 3 * mp.mpf(r) + 10, mp.inf]


def expect(r: int, fn) -> mp.mpf:  # E_W fn(W)
    return mp.quad(lambda w: density(r, w) * fn(w), breaks(r))


def shift(r: int, sigma: float, w: mp.mpf) -> mp.mpf:
    return mp.sqrt(r / w) / sigma


def gauss_delta(mu: mp.mpf, eps: float) -> mp.mpf:
    return mp.ncdf(-eps / mu + mu / 2) - mp.e ** eps * mp.ncdf(-eps / mu - mu / 2)


def paper_pair(r: int, sigma: float, eps: float) -> mp.mpf:
    p = lambda t: expect(r, lambda w: mp.npdf(t - shift(r, sigma, w)))  # noqa: E731
    g = mp.e ** eps
    out = mp.mpf(0)
    # remove: P vs Q; add: Q vs P. Crossing p(t) = g q(t) (remove) and q(t) = g p(t) (add).
    for kind in ("remove", "add"):
        if kind == "remove":
            t = mp.findroot(lambda t: mp.log(p(t)) - mp.log(g * mp.npdf(t)), 2.0)
            d = expect(r, lambda w: mp.ncdf(shift(r, sigma, w) - t)) - g * mp.ncdf(-t)
        else:
            t = mp.findroot(lambda t: mp.log(mp.npdf(t)) - mp.log(g * p(t)), -1.0)
            d = mp.ncdf(t) - g * expect(r, lambda w: mp.ncdf(t - shift(r, sigma, w)))
        out = max(out, d)
    return out


def copies_pair(r: int, sigma: float, eps: float) -> mp.mpf:
    g = mp.e ** eps
    p = lambda x: expect(r, lambda w: mp.npdf(x - 2 * shift(r, sigma, w)))  # noqa: E731
    q = lambda x: expect(r, lambda w: mp.npdf(x - shift(r, sigma, w)))  # noqa: E731
    out = mp.mpf(0)
    for a, b in ((p, q), (q, p)):  # both orders
        # The integrand (a - g b)_+ has kinks where a = g b: locate the sign changes on a scan,
        # refine them by bisection, and integrate the smooth positive pieces between them.
        diff = lambda x: a(x) - g * b(x)  # noqa: E731
        scan = [mp.mpf(x) / 4 for x in range(-40, 161)]
        signs = [diff(x) > 0 for x in scan]
        edges = [-mp.inf]
        for i in range(len(scan) - 1):
            if signs[i] != signs[i + 1]:
                edges.append(mp.findroot(diff, (scan[i], scan[i + 1]), solver="bisect"))
        edges.append(mp.inf)
        total = mp.mpf(0)
        for lo, hi in zip(edges[:-1], edges[1:]):
            probe = (lo + hi) / 2 if (lo != -mp.inf and hi != mp.inf) else (hi - 1 if lo == -mp.inf else lo + 1)
            if diff(probe) > 0:
                total += mp.quad(diff, [lo, hi])
        out = max(out, total)
    return out


def revealed(r: int, sigma: float, eps: float) -> mp.mpf:
    return expect(r, lambda w: gauss_delta(shift(r, sigma, w), eps))


if __name__ == "__main__":
    from pathlib import Path

    lines = ["# Written by tests/reference/fdp_jl_quadrature.py (mpmath); q = 1, T = 1, delta at epsilon.", ""]
    for r, sigma, eps in CASES:
        values = {"paper_pair": paper_pair(r, sigma, eps), "revealed": revealed(r, sigma, eps)}
        if r == 5:
            values["copies_pair"] = copies_pair(r, sigma, eps)
        lines.append("[[case]]")
        lines.append(f"r = {r}\nsigma = {sigma}\nepsilon = {eps}")
        for k, v in values.items():
            lines.append(f"{k} = {mp.nstr(v, 12)}")
        lines.append("")
        print(r, sigma, eps, {k: mp.nstr(v, 6) for k, v in values.items()}, flush=True)
    Path(__file__).with_suffix(".toml").write_text("\n".join(lines))

// Renyi differential privacy of the Poisson-subsampled Gaussian mechanism and
// conversions from RDP to (epsilon, delta)-DP.
#pragma once

#include <cstddef>
#include <string>

namespace dpacct::rdp {

enum class Conversion { classic, improved };

// Parses "classic" / "improved"; throws std::invalid_argument otherwise.
Conversion parse_conversion(const std::string& name);

// RDP epsilon(order) of the Poisson-subsampled Gaussian mechanism (rate q,
// noise multiplier sigma, add/remove adjacency), an upper bound:
//   RDP(a) = log(A_a) / (a - 1),
//   A_a = E_{z ~ N(0, sigma^2)} [((1 - q) + q exp((2z - 1) / (2 sigma^2)))^a]
// (Mironov, Talwar, Zhang, "Renyi Differential Privacy of the Sampled Gaussian
// Mechanism", arXiv:1908.10530 (v1), Sections 3.1-3.3).
//  * integer orders: the exact binomial sum written for A - 1 so that every
//    term is positive (no cancellation even when A - 1 ~ 1e-30), with blocks of
//    negligible terms replaced by a rigorous upper bound;
//  * fractional orders: the trapezoid rule on A - 1 = E[(1 + x)^a - 1 - a x],
//    x = q (exp((2z - 1)/(2 sigma^2)) - 1), a non-negative analytic integrand
//    (spectral accuracy, ~1e-12 relative, rounded up by an a-posteriori error
//    estimate), capped by the convexity chord between the neighbouring integer
//    orders (MTZ's two-series expansion, Section 3.3, converges only polynomially
//    for q >~ 0.1 and loses all digits of A - 1 below 1e-16, so it is not used);
//  * q = 1 is the Gaussian mechanism, a / (2 sigma^2); q = 0 gives 0;
//    order = +inf gives +inf (for q > 0).
// Every value is rounded up by a bound on its floating-point error, so the
// result is never below the true RDP.
// Throws std::invalid_argument for q outside [0, 1], sigma <= 0 or an order <= 1.
void subsampled_gaussian(double sampling_probability, double noise_multiplier,
                         const double* orders, std::size_t n, double* out);

// The optimum of an RDP -> DP conversion and the index of the order attaining
// it (index == n when no order gives a finite bound).
struct Optimum {
  double value;
  std::size_t index;
};

// Smallest epsilon over the orders such that RDP curve `rdp` implies
// (epsilon, delta)-DP:
//  classic (Mironov, "Renyi Differential Privacy", CSF 2017, arXiv:1702.07476 (v3), Prop. 3):
//      eps = rdp(a) + log(1/delta) / (a - 1);
//  improved (Canonne, Kamath, Steinke, "The Discrete Gaussian for Differential
//  Privacy", arXiv:2004.00010 (v5), Prop. 12; Balle et al. 2020, Thm 21):
//      eps = rdp(a) + log((a - 1)/a) - (log delta + log a) / (a - 1).
// The result is clipped at 0. Throws std::invalid_argument on bad input.
Optimum epsilon_from_rdp(const double* orders, const double* rdp, std::size_t n, double delta,
                         Conversion conversion);

// Smallest delta over the orders with (epsilon, delta)-DP, the inverse of the
// above: classic log delta = (a - 1)(rdp - eps); improved
// log delta = (a - 1)(rdp - eps + log(1 - 1/a)) - log a, and also
// delta <= TV <= sqrt(1 - exp(-rdp(a))) (Bretagnolle-Huber, since KL <= rdp(a);
// see Canonne, arXiv:2202.07198). Clipped at 1.
Optimum delta_from_rdp(const double* orders, const double* rdp, std::size_t n, double epsilon,
                       Conversion conversion);

}  // namespace dpacct::rdp

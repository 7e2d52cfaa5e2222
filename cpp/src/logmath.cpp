#include "dpacct/logmath.hpp"

#include <algorithm>
#include <cmath>

namespace dpacct {

double log_ndtr(double x) {
  constexpr double kSqrtHalf = 0.70710678118654752440;
  if (x > 0.0) {
    // Phi(x) = 1 - erfc(x/sqrt2)/2 is close to 1: log1p keeps the small complement.
    return std::log1p(-0.5 * std::erfc(x * kSqrtHalf));
  }
  if (x > -30.0) {
    // erfc(26.5) ~ 1e-307 is still a normal double, so this is accurate down to -30.
    return std::log(0.5 * std::erfc(-x * kSqrtHalf));
  }
  // Far tail: Phi(x) = phi(x)/|x| * (1 - 1/x^2 + 3/x^4 - 15/x^6 + ...)
  // (Abramowitz & Stegun 26.2.12).  At |x| >= 30 the terms shrink by >= 900x
  // until k ~ 450, so the series is summed to full precision in a few terms.
  const double inv_x2 = 1.0 / (x * x);
  double term = 1.0;
  double sum = 1.0;
  for (int k = 1; k < 40; ++k) {
    term *= -(2.0 * k - 1.0) * inv_x2;
    sum += term;
    if (std::fabs(term) < 1e-17 * sum) break;
  }
  return -0.5 * x * x - std::log(-x) - 0.5 * kLogTwoPi + std::log(sum);
}

double logsumexp(const double* values, std::size_t n) {
  double max_value = kNegInf;
  for (std::size_t i = 0; i < n; ++i) max_value = std::max(max_value, values[i]);
  if (max_value == kNegInf || max_value == kInf) return max_value;
  double sum = 0.0;
  for (std::size_t i = 0; i < n; ++i) sum += std::exp(values[i] - max_value);
  return max_value + std::log(sum);
}

double logsumexp_bounded(const double* values, std::size_t n, double* error) {
  constexpr double kU = 2.220446049250313e-16;  // DBL_EPSILON, a generous unit round-off
  *error = 0.0;
  double max_value = kNegInf;
  for (std::size_t i = 0; i < n; ++i) {
    // (std::max skips a NaN: an all-NaN input would have come back as -inf, "no mass", with error 0.)
    if (std::isnan(values[i])) {
      *error = kInf;
      return values[i];
    }
    max_value = std::max(max_value, values[i]);
  }
  if (max_value == kNegInf || max_value == kInf) return max_value;
  const auto block = std::max<std::size_t>(1, static_cast<std::size_t>(std::sqrt(static_cast<double>(n))));
  double sum = 0.0, weighted = 0.0;  // the sum, and sum_i t_i (|x_i| + 2)
  for (std::size_t lo = 0; lo < n; lo += block) {
    const std::size_t hi = std::min(n, lo + block);
    double local = 0.0;
    for (std::size_t i = lo; i < hi; ++i) {
      if (values[i] == kNegInf) continue;
      const double x = values[i] - max_value;
      const double t = std::exp(x);
      if (!(t > 0.0)) continue;  // (underflowed, or x = -inf where values lie more than DBL_MAX apart: 0 * inf)
      local += t;
      weighted += t * (std::fabs(x) + 2.0);
    }
    sum += local;
  }
  // Blocks of B terms and n / B + 1 block sums: each partial sum of non-negative terms is
  // within (B + n / B + 2) u of exact, relative; the term errors u (|x| + 2) t, summed.
  const double b = static_cast<double>(block);
  const double relative = 2.0 * kU * (b + static_cast<double>(n) / b + 4.0) + 2.0 * kU * weighted / sum;
  const double log_sum = std::log(sum);
  const double value = max_value + log_sum;
  *error = relative * 1.01 + 4.0 * kU * (1.0 + std::fabs(log_sum) + std::fabs(value));
  return value;
}

double log_power_sum(const double* mass, std::size_t n, double slope_step) {
  if (n == 0) return kNegInf;
  const double rho = std::exp(-slope_step);
  // sum_j mass_j rho^(n-1-j) = sum over chains c of rho^c sum_i mass_{n-1-c-4i} rho^(4i)
  const double rho2 = rho * rho;
  const double rho4 = rho2 * rho2;
  double c0 = 0.0, c1 = 0.0, c2 = 0.0, c3 = 0.0;
  std::size_t j = 0;
  const std::size_t head = n % 4;  // the first entries, which have the largest powers
  // Entry j has power n - 1 - j, chain (n - 1 - j) % 4; head entries first, each to its chain.
  for (; j < head; ++j) {
    const std::size_t c = (n - 1 - j) % 4;
    double& acc = c == 0 ? c0 : (c == 1 ? c1 : (c == 2 ? c2 : c3));
    acc += mass[j];  // nothing before it: acc is 0 for a chain's first entry
  }
  for (; j < n; j += 4) {  // entries j .. j + 3 have powers n-1-j .. n-4-j: chains 3, 2, 1, 0
    c3 = c3 * rho4 + mass[j];
    c2 = c2 * rho4 + mass[j + 1];
    c1 = c1 * rho4 + mass[j + 2];
    c0 = c0 * rho4 + mass[j + 3];
  }
  const double sum = ((c0 + rho * c1) + rho2 * c2) + (rho2 * rho) * c3;
  return std::log(sum) + slope_step * static_cast<double>(n - 1);
}

}  // namespace dpacct

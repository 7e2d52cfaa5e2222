#include "dpacct/logmath.hpp"

#include <algorithm>

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

}  // namespace dpacct

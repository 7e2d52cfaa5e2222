#include "dpacct/gaussian.hpp"

#include <cmath>

#include "dpacct/check.hpp"
#include "dpacct/logmath.hpp"

namespace dpacct::gaussian {

namespace {

double log_delta_unchecked(double s, double epsilon) {
  // delta = Phi(a) - e^eps Phi(b) with a = -eps*s + 1/(2s) > b = -eps*s - 1/(2s).
  // Both terms underflow for large eps*s, so subtract them as logarithms:
  // log delta = log Phi(a) + log(1 - exp(eps + log Phi(b) - log Phi(a))).
  const double a = -epsilon * s + 0.5 / s;
  const double b = -epsilon * s - 0.5 / s;
  const double log_first = log_ndtr(a);
  const double log_second = epsilon + log_ndtr(b);
  if (!(log_second < log_first)) return kNegInf;  // only reachable through rounding
  return log_first + log1mexp(log_second - log_first);
}

}  // namespace

double log_delta(double noise_multiplier, double epsilon) {
  require_positive_finite("noise_multiplier", noise_multiplier);
  require_nonnegative_finite("epsilon", epsilon);
  return log_delta_unchecked(noise_multiplier, epsilon);
}

double epsilon(double noise_multiplier, double delta) {
  require_positive_finite("noise_multiplier", noise_multiplier);
  require_open_unit("delta", delta);
  // Aim 1e-9 (relative) below delta: the evaluated curve carries a relative
  // error up to ~1e-12 (cancellation in Phi(a) - e^eps Phi(b) for large sigma),
  // and the returned epsilon must satisfy the true curve, not just the evaluated one.
  const double log_target = std::log(delta) - 1e-9;
  if (log_delta_unchecked(noise_multiplier, 0.0) <= log_target) return 0.0;
  // Bracket [lo, hi] with delta(lo) > target >= delta(hi); the curve is strictly
  // decreasing in epsilon, so doubling hi terminates.
  double lo = 0.0;
  double hi = 1.0;
  while (log_delta_unchecked(noise_multiplier, hi) > log_target) {
    lo = hi;
    hi *= 2.0;
    if (!std::isfinite(hi)) return kInf;
  }
  // Bisection keeps the invariant, so `hi` is always a valid (rounded-up) answer.
  while (hi - lo > 1e-14 * hi) {
    const double mid = 0.5 * (lo + hi);
    if (mid <= lo || mid >= hi) break;
    if (log_delta_unchecked(noise_multiplier, mid) > log_target) {
      lo = mid;
    } else {
      hi = mid;
    }
  }
  return hi;
}

}  // namespace dpacct::gaussian

#include "dpacct/pld/step.hpp"

#include <algorithm>
#include <cmath>

#include "dpacct/logmath.hpp"

namespace dpacct::pld {

namespace {

// |v| for a finite log-value, 0 for -inf (an exact log of 0).
double magnitude(double v) { return std::isfinite(v) ? std::fabs(v) : 0.0; }

}  // namespace

Edge normal_edge(double z) {
  if (z == kNegInf) return {kNegInf, 0.0};
  if (z == kInf) return {0.0, kNegInf};
  if (z <= 0.0) {
    const double c = log_ndtr(z);
    return {c, log1mexp(c)};
  }
  const double s = log_ndtr(-z);
  return {log1mexp(s), s};
}

Mass log_difference(double x, double y) {
  if (x == kNegInf) return {kNegInf, kNegInf};
  const double err = kLogError * (2.0 + magnitude(x) + magnitude(y));
  const double w = y == kNegInf ? 1.0 : -std::expm1(std::min(y - x, 0.0));  // 1 - e^{y - x}
  // d/dz log(1 - e^z) = -e^z / (1 - e^z): an error err in z = y - x and in x
  // moves the result by <= err (1 + 1/w); 4 u for the final log/expm1.
  const double spread = err * (1.0 + 1.0 / std::max(w, 1e-300)) + 4.0 * kUnit;
  if (spread > 0.5) {  // the difference cancels: only an upper bound is known
    return {kNegInf, x + std::log(w + 2.0 * err * (1.0 + err))};
  }
  const double v = x + std::log(w);
  return {v - spread, v + spread};
}

Mass log_interval(const Edge& a, const Edge& b) {
  constexpr double kLogHalf = -kLn2;
  // The branch avoids cancellation: difference the CDFs where both are small,
  // the survival functions where both are small, else 1 - F(a) - S(b).
  if (b.log_cdf < kLogHalf) return log_difference(b.log_cdf, a.log_cdf);
  if (a.log_sf < kLogHalf) return log_difference(a.log_sf, b.log_sf);
  const double z = log_add(a.log_cdf, b.log_sf);
  const double err = kLogError * (2.0 + magnitude(a.log_cdf) + magnitude(b.log_sf));
  const double w = -std::expm1(std::min(z, 0.0));
  const double spread = err * (1.0 + 1.0 / std::max(w, 1e-300)) + 4.0 * kUnit;
  if (spread > 0.5) return {kNegInf, std::log(w + 2.0 * err)};
  const double v = std::log(w);
  return {v - spread, v + spread};
}

double exp_down(double v, double v_err) { return std::exp(v - v_err - 2.0 * kUnit * (1.0 + std::fabs(v))); }

void split_cell(const Mass& m, const Mass& w, long a, long b, double d, long upper_low,
                std::vector<double>& log_upper) {
  if (m.hi == kNegInf) return;
  const auto ia = static_cast<std::size_t>(a - upper_low);
  const auto ib = static_cast<std::size_t>(b - upper_low);
  if (b <= a) {
    log_upper[ia] = log_add(log_upper[ia], m.hi);
    return;
  }
  // Fraction at a: (w e^{aD} / m - e^{-span}) / (1 - e^{-span}), span = (b - a) D,
  // taken at its certified lower end (w low, m high); the rest of m (high) goes to b.
  const double span = static_cast<double>(b - a) * d;
  const double ad = static_cast<double>(a) * d;
  double fraction = 0.0;
  if (w.lo > kNegInf) {
    const double arg = w.lo + ad - m.hi;
    const double ratio = exp_down(arg, kUnit * (std::fabs(w.lo) + std::fabs(ad) + std::fabs(m.hi)));
    const double e_minus = std::exp(-span);
    const double one_minus = -std::expm1(-span);
    fraction = (ratio * (1.0 - 2.0 * kUnit) - e_minus * (1.0 + 2.0 * kUnit)) / (one_minus * (1.0 + 4.0 * kUnit));
    fraction = std::clamp(fraction * (1.0 - 4.0 * kUnit), 0.0, 1.0);
  }
  if (fraction > 0.0) log_upper[ia] = log_add(log_upper[ia], m.hi + std::log(fraction));
  if (fraction < 1.0) log_upper[ib] = log_add(log_upper[ib], m.hi + std::log1p(-fraction) + 4.0 * kUnit);
}

void summarise(StepPmf& step) {
  const double d = step.discretization;
  // The upper discretisation where there is one, else the labels' P-masses.
  const std::vector<double>& logs = step.has_upper ? step.log_upper : step.log_p;
  const long low = step.has_upper ? step.upper_low : step.label_low;
  double mass = 0.0, m1 = 0.0, m2 = 0.0, abs1 = 0.0, largest = 0.0;
  for (std::size_t j = 0; j < logs.size(); ++j) {
    const double loss = static_cast<double>(low + static_cast<long>(j)) * d;
    largest = std::max(largest, std::fabs(loss));
    if (logs[j] == kNegInf) continue;
    const double p = std::exp(logs[j]);
    mass += p;
    m1 += p * loss;
    m2 += p * loss * loss;
    abs1 += p * std::fabs(loss);
  }
  if (mass > 0.0) {
    m1 /= mass;
    step.mean_abs_loss = abs1 / mass;
    step.loss_sd = std::sqrt(std::max(m2 / mass - m1 * m1, 0.0));
  }
  step.max_abs_loss = std::max(largest, std::fabs(static_cast<double>(step.label_low) * d));
}

}  // namespace dpacct::pld

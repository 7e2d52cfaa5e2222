// The symmetrised step; see dpacct/pld/symmetric.hpp for why it is certified.
#include "dpacct/pld/symmetric.hpp"

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <stdexcept>
#include <vector>

#include "dpacct/check.hpp"
#include "dpacct/logmath.hpp"

namespace dpacct::pld {

namespace {

// log delta(i D) for i = 0 .. top (top = the largest grid index of the step, at
// least 0), from the recursion
//   delta_{i-1} = delta_i + (1 - e^-D) (p_i + A_i),  A_{i-1} = e^-D (A_i + p_i),
// with A_i = sum_{j > i} p_j e^{(i - j) D}, started from delta_top = the +inf mass.
// Every term is non-negative, so each value is exact to a relative (n + 4) u.
std::vector<double> log_profile(const StepPmf& s, long top) {
  const double d = s.discretization;
  const double log_gap = std::log(-std::expm1(-d));  // log(1 - e^-D)
  std::vector<double> out(static_cast<std::size_t>(top + 1), kNegInf);
  double log_delta = s.infinity_upper > 0.0 ? std::log(s.infinity_upper) : kNegInf;
  double log_a = kNegInf;
  auto mass = [&s](long i) {
    const long j = i - s.upper_low;
    if (j < 0 || j >= static_cast<long>(s.log_upper.size())) return kNegInf;
    return s.log_upper[static_cast<std::size_t>(j)];
  };
  out[static_cast<std::size_t>(top)] = log_delta;
  for (long i = top; i >= 1; --i) {
    const double p_plus_a = log_add(mass(i), log_a);
    log_delta = log_add(log_delta, log_gap + p_plus_a);
    log_a = p_plus_a - d;
    out[static_cast<std::size_t>(i - 1)] = log_delta;
  }
  return out;
}

long top_index(const StepPmf& s) {
  return std::max(0L, s.upper_low + static_cast<long>(s.log_upper.size()) - 1);
}

}  // namespace

StepPmf symmetrised_step(const StepPmf& a, const StepPmf& b, const StepPmf& lower) {
  const double d = a.discretization;
  if (b.discretization != d || lower.discretization != d) {
    throw std::invalid_argument("symmetrised_step: the steps must share one discretization");
  }
  if (!a.has_upper || !b.has_upper) throw std::invalid_argument("symmetrised_step: a and b need upper halves");
  const long top = std::max(top_index(a), top_index(b));
  const std::vector<double> pa = log_profile(a, top), pb = log_profile(b, top);
  const double n = static_cast<double>(a.log_upper.size() + b.log_upper.size()) + 4.0;
  const double margin = 8.0 * kUnit * (n + 2.0 * (static_cast<double>(top) * d + 1.0));
  double log_scale = 0.0;
  for (std::size_t i = 0; i < pa.size(); ++i) {
    if (pb[i] == kNegInf) continue;
    if (pa[i] == kNegInf) {
      throw std::invalid_argument("symmetrised_step: the second direction has delta > 0 where the first has 0");
    }
    log_scale = std::max(log_scale, pb[i] - pa[i] + margin);
  }

  StepPmf out;
  out.discretization = d;
  out.has_upper = true;
  // Positive side: s * a at indices >= 1; negative side its mirror; 0 the rest.
  const long hi = top_index(a);
  const long count = std::max(0L, hi);  // indices 1 .. hi
  out.upper_low = -count;
  out.log_upper.assign(static_cast<std::size_t>(2 * count + 1), kNegInf);
  double used = 0.0;  // sum of w(l) (1 + e^-l), rounded down (the mass at 0 then errs up)
  for (long i = 1; i <= hi; ++i) {
    const long j = i - a.upper_low;
    if (j < 0 || j >= static_cast<long>(a.log_upper.size())) continue;
    const double lw = a.log_upper[static_cast<std::size_t>(j)];
    if (lw == kNegInf) continue;
    const double up = lw + log_scale + 4.0 * kUnit;                            // w(iD), rounded up
    out.log_upper[static_cast<std::size_t>(count + i)] = up;
    out.log_upper[static_cast<std::size_t>(count - i)] = up - static_cast<double>(i) * d + 4.0 * kUnit;  // mirror
    used += std::exp(lw + log_scale - 4.0 * kUnit) * (1.0 + std::exp(-static_cast<double>(i) * d));
  }
  const double infinity = a.infinity_upper * std::exp(log_scale) * (1.0 + 4.0 * kUnit);
  used = (used + infinity) * (1.0 - 4.0 * kUnit * n);
  if (used > 1.0 + 1e-9) {
    throw std::invalid_argument("symmetrised_step: the scaled loss distribution has mass " + format_value(used) +
                                " > 1 on (0, inf]");
  }
  const double zero = std::max(0.0, 1.0 - used);
  if (zero > 0.0) out.log_upper[static_cast<std::size_t>(count)] = std::log(zero);
  out.infinity_upper = std::min(1.0, infinity);
  out.loss_slack = std::max({a.loss_slack, b.loss_slack, lower.loss_slack});

  out.label_low = lower.label_low;
  out.log_p = lower.log_p;
  out.log_q = lower.log_q;
  out.infinity_lower = lower.infinity_lower;
  summarise(out);
  return out;
}

}  // namespace dpacct::pld

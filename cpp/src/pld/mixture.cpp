// Weighted mixtures of discretised steps; see dpacct/pld/mixture.hpp for why the
// result is certified.
#include "dpacct/pld/mixture.hpp"

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <stdexcept>
#include <string>
#include <vector>

#include "dpacct/check.hpp"
#include "dpacct/logmath.hpp"

namespace dpacct::pld {

namespace {

// One half of a step: its log-masses and the grid index of entry 0.
struct Half {
  long low;
  const std::vector<double>* logs;
  double log_weight;
};

// log sum_b w_b exp(log_b[j - low_b]) on the union of the index ranges, with
// each entry moved by `direction` (+1 up, -1 down) by a bound on its relative
// rounding error. Returns the index of entry 0 in *low.
std::vector<double> mix(const std::vector<Half>& halves, int direction, long* low) {
  long lo = 0, hi = 0;
  bool first = true;
  for (const Half& h : halves) {
    if (h.logs->empty() || h.log_weight == kNegInf) continue;
    const long end = h.low + static_cast<long>(h.logs->size());
    lo = first ? h.low : std::min(lo, h.low);
    hi = first ? end : std::max(hi, end);
    first = false;
  }
  *low = lo;
  if (first) return {};
  const auto n = static_cast<std::size_t>(hi - lo);
  // Two passes: the largest term of each entry, then the sum of the terms scaled by it
  // (the scaled terms are <= 1, so nothing overflows and the largest term is exact to u).
  std::vector<double> top(n, kNegInf);
  double largest_log = 0.0;
  for (const Half& h : halves) {
    if (h.logs->empty() || h.log_weight == kNegInf) continue;
    const auto offset = static_cast<std::size_t>(h.low - lo);
    for (std::size_t j = 0; j < h.logs->size(); ++j) {
      const double v = (*h.logs)[j] + h.log_weight;
      if (v > top[offset + j]) top[offset + j] = v;
      if (v > kNegInf) largest_log = std::max(largest_log, std::fabs(v));
    }
  }
  std::vector<double> sum(n, 0.0);
  for (const Half& h : halves) {
    if (h.logs->empty() || h.log_weight == kNegInf) continue;
    const auto offset = static_cast<std::size_t>(h.low - lo);
    for (std::size_t j = 0; j < h.logs->size(); ++j) {
      const double t = top[offset + j];
      if (t == kNegInf) continue;
      sum[offset + j] += std::exp((*h.logs)[j] + h.log_weight - t);
    }
  }
  // Relative error of each entry: the n-term sum (<= (n + 2) u), the exponentials of
  // differences computed with absolute error <= 2 u max|log| (relative error of the same
  // size), and the final log; a generous factor 4 over all of it.
  const double count = static_cast<double>(halves.size());
  const double relative = 4.0 * kUnit * (count + 4.0 + 2.0 * largest_log);
  const double adjust = direction > 0 ? std::log1p(relative) : std::log1p(-std::min(relative, 0.5));
  std::vector<double> out(n, kNegInf);
  for (std::size_t j = 0; j < n; ++j) {
    if (top[j] == kNegInf || !(sum[j] > 0.0)) continue;
    out[j] = top[j] + std::log(sum[j]) + adjust;
  }
  return out;
}

void check_weights(const std::vector<const StepPmf*>& steps, const std::vector<double>& weights, const char* name) {
  if (steps.size() != weights.size()) {
    throw std::invalid_argument(std::string(name) + " must have one weight per step, got " +
                                std::to_string(weights.size()) + " weights for " + std::to_string(steps.size()) +
                                " steps");
  }
  for (std::size_t i = 0; i < weights.size(); ++i) {
    if (!(weights[i] >= 0.0 && std::isfinite(weights[i]))) {
      throw std::invalid_argument(std::string(name) + " must be finite and >= 0, got " + format_value(weights[i]) +
                                  " at index " + std::to_string(i));
    }
    if (steps[i] == nullptr) throw std::invalid_argument("steps must not be None");
  }
}

}  // namespace

StepPmf mix_steps(const std::vector<const StepPmf*>& upper_steps, const std::vector<double>& upper_weights,
                  double extra_infinity, long extra_index, double extra_mass, double upper_shift,
                  const std::vector<const StepPmf*>& lower_steps, const std::vector<double>& lower_weights) {
  check_weights(upper_steps, upper_weights, "upper_weights");
  check_weights(lower_steps, lower_weights, "lower_weights");
  if (lower_steps.empty()) throw std::invalid_argument("lower_steps must not be empty");
  require_nonnegative_finite("extra_infinity", extra_infinity);
  require_nonnegative_finite("extra_mass", extra_mass);
  require_nonnegative_finite("upper_shift", upper_shift);
  double total = extra_infinity + extra_mass;
  for (double w : upper_weights) total += w;
  if (!upper_steps.empty() && total > 1.0 + 1e-9) {
    throw std::invalid_argument("upper_weights + extra_infinity + extra_mass must sum to <= 1, got " +
                                format_value(total));
  }
  if (upper_steps.empty() && (extra_infinity > 0.0 || extra_mass > 0.0)) {
    throw std::invalid_argument("extra_infinity and extra_mass need upper_steps");
  }
  StepPmf out;
  out.discretization = lower_steps.front()->discretization;
  const double d = out.discretization;
  auto same_grid = [d](const StepPmf* s) {
    if (s->discretization != d) {
      throw std::invalid_argument("every step must have the same discretization, got " + format_value(d) + " and " +
                                  format_value(s->discretization));
    }
  };
  for (const StepPmf* s : upper_steps) same_grid(s);
  for (const StepPmf* s : lower_steps) same_grid(s);
  const double n_terms = static_cast<double>(upper_steps.size() + lower_steps.size() + 2);
  const double up_factor = 1.0 + 4.0 * kUnit * n_terms;
  const double down_factor = 1.0 - 4.0 * kUnit * n_terms;

  // Upper half.
  out.has_upper = !upper_steps.empty();
  for (const StepPmf* s : upper_steps) {
    if (!s->has_upper) throw std::invalid_argument("upper_steps must all have an upper half");
  }
  if (out.has_upper) {
    std::vector<Half> halves;
    double infinity = extra_infinity;
    for (std::size_t i = 0; i < upper_steps.size(); ++i) {
      const double lw = upper_weights[i] > 0.0 ? std::log(upper_weights[i]) : kNegInf;
      halves.push_back({upper_steps[i]->upper_low, &upper_steps[i]->log_upper, lw});
      infinity += upper_weights[i] * upper_steps[i]->infinity_upper;
      out.loss_slack = std::max(out.loss_slack, upper_steps[i]->loss_slack);
    }
    const std::vector<double> extra{extra_mass > 0.0 ? std::log(extra_mass) : kNegInf};
    if (extra_mass > 0.0) halves.push_back({extra_index, &extra, 0.0});
    long low = 0;
    std::vector<double> logs = mix(halves, +1, &low);
    // The shift s = k D + f: k whole grid points, then the fractional spread.
    const double whole = std::floor(upper_shift / d);
    if (whole > 1e15) throw std::invalid_argument("upper_shift is too large for the grid");
    const double frac = upper_shift - whole * d;
    low += static_cast<long>(whole);
    if (frac > 0.0 && !logs.empty()) {
      // Fraction moved one point up, rounded up (moving more mass up only raises delta).
      const double theta = std::min(1.0, std::expm1(-frac) / std::expm1(-d) * (1.0 + 8.0 * kUnit));
      const double log_stay = theta < 1.0 ? std::log1p(-theta) : kNegInf;
      const double log_move = std::log(theta);
      std::vector<double> shifted(logs.size() + 1, kNegInf);
      // (Each product and each sum rounded up, with their logs' ulps: a flat 4 u had missed half an ulp of
      // log-masses beyond e^-8.)
      for (std::size_t j = 0; j < logs.size(); ++j) {
        if (logs[j] == kNegInf) continue;
        shifted[j] = log_add_directed(shifted[j], add_log_directed(logs[j], log_stay, +1), +1);
        shifted[j + 1] = log_add_directed(shifted[j + 1], add_log_directed(logs[j], log_move, +1), +1);
      }
      logs.swap(shifted);
    }
    out.upper_low = low;
    out.log_upper = std::move(logs);
    out.infinity_upper = std::min(1.0, infinity * up_factor);
  }

  // Lower half: P-masses rounded down, Q-masses up.
  std::vector<Half> p_halves, q_halves;
  double infinity_lower = 0.0;
  for (std::size_t i = 0; i < lower_steps.size(); ++i) {
    const double lw = lower_weights[i] > 0.0 ? std::log(lower_weights[i]) : kNegInf;
    p_halves.push_back({lower_steps[i]->label_low, &lower_steps[i]->log_p, lw});
    q_halves.push_back({lower_steps[i]->label_low, &lower_steps[i]->log_q, lw});
    infinity_lower += lower_weights[i] * lower_steps[i]->infinity_lower;
    out.loss_slack = std::max(out.loss_slack, lower_steps[i]->loss_slack);
  }
  long low_p = 0, low_q = 0;
  out.log_p = mix(p_halves, -1, &low_p);
  out.log_q = mix(q_halves, +1, &low_q);
  // Both are indexed from the smallest label of any step (P and Q halves share ranges).
  if (out.log_p.size() != out.log_q.size() || low_p != low_q) {
    throw std::invalid_argument("lower_steps have inconsistent label arrays");
  }
  out.label_low = low_p;
  out.infinity_lower = std::max(0.0, infinity_lower * down_factor);
  summarise(out);
  return out;
}

}  // namespace dpacct::pld

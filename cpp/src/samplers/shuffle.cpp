#include "dpacct/samplers/shuffle.hpp"

#include <algorithm>
#include <cmath>
#include <queue>
#include <vector>

#include "dpacct/check.hpp"
#include "dpacct/logmath.hpp"

namespace dpacct::samplers {

namespace {

// log(-log Phi(x)), finite for every finite x.
//
// Why: P_S(E_C) = 1 - Phi(a) Phi(c)^(T-1) and for large C both Phi's are 1 to
// double precision (erfc underflows at x ~ 27), so the product rounds to 1 and
// log P_S to -inf although P_S ~ T * Phi(-c) is perfectly representable as a
// logarithm. Working with log(-log Phi(x)) keeps those digits:
// -log Phi(x) = -log1p(-u) with u = Phi(-x), so log(-log Phi(x)) = log u +
// log(-log1p(-u)/u), and -log1p(-u)/u = 1 + u/2 + u^2/3 + ..., whose log is
// u/2 to within u^2/24 < 1e-17 once u < 1e-8 (x > 5.6).
double log_neg_log_ndtr(double x) {
  if (x < 5.0) return std::log(-log_ndtr(x));
  const double log_u = log_ndtr(-x);  // log Phi(-x): no underflow in the far tail
  const double u = std::exp(log_u);
  if (u < 1e-8) return log_u + 0.5 * u;
  return std::log(-std::log1p(-u));
}

// log(1 - exp(A)) given m = log(-A), A < 0, i.e. log(1 - Phi(.) Phi(.)^(T-1)).
// For -A < 1.5e-8 (m < -18): (1 - e^A)/(-A) = 1 + A/2 + A^2/6 + ..., whose log is
// A/2 up to A^2/24 ~ 1e-17, so log(1 - e^A) = m - exp(m)/2; this never forms
// 1 - e^A, which would round to 0 once -A < 1e-16 (the far tail of E_C). Otherwise
// log1mexp is accurate on its own.
double log_one_minus_exp_neg(double m) {
  if (m < -18.0) return m - 0.5 * std::exp(m);
  return log1mexp(-std::exp(m));
}

// log P_S(E_C), log Q_S(E_C) with a = (C-2)/s, b = (C-1)/s, c = C/s:
// -log(Phi(a) Phi(c)^(T-1)) = exp(L(a)) + (T-1) exp(L(c)) with L = log(-log Phi),
// combined with log_add so neither the power Phi(c)^(T-1) (T up to 1e7 and more)
// nor the complement underflows.
LogEvent event_unchecked(double s, double steps, double threshold) {
  const double lc = steps > 1.0 ? std::log(steps - 1.0) + log_neg_log_ndtr(threshold / s) : kNegInf;
  const double la = log_neg_log_ndtr((threshold - 2.0) / s);
  const double lb = log_neg_log_ndtr((threshold - 1.0) / s);
  return {log_one_minus_exp_neg(log_add(la, lc)), log_one_minus_exp_neg(log_add(lb, lc))};
}

void require_steps(double steps) {
  if (!(steps >= 1.0 && std::isfinite(steps))) fail("steps", "finite and >= 1", steps);
}

// The searched range of C. It contains the paper's [0, 100]. Above `high`,
// P_S(E_C) <= T Phi(-(C-2)/s) < T Phi(-40 - sqrt(2 log T)) < 1e-340 for every T,
// so no C there can matter; below `low`, a, b, c are all < -40 so
// P_S, Q_S are 1 up to Phi(-40) ~ 1e-350 and P - e^eps Q <= ~0.
struct Range {
  double low;
  double high;
};

Range search_range(double s, double steps) {
  const double spread = s * (40.0 + std::sqrt(2.0 * std::log(steps) + 1.0));
  return {std::min(0.0, -2.0 - 40.0 * s), std::max(100.0, 2.0 + spread)};
}

// One interval of the branch and bound, with the event probabilities at its ends.
struct Node {
  double c1;
  double c2;
  LogEvent e1;
  LogEvent e2;
  double bound;  // an upper bound on the objective over [c1, c2]
  bool operator<(const Node& other) const { return bound < other.bound; }
};

// Global maximisation of objective(event(C)) over C in `range`.
//
// Stage 1, branch and bound: P_S(E_C) and Q_S(E_C) are both non-increasing in C
// (E_C shrinks as C grows), and both objectives below increase with P and
// decrease with Q, so on [c1, c2] the objective is at most
// objective({log P(c1), log Q(c2)}). Intervals are split best-bound-first until
// no interval can beat the best point by more than `tolerance`: this brackets
// the global maximum however many local maxima there are, with no assumption of
// unimodality and no fixed grid.
// Stage 2, golden-section search on the interval around the best point, down to
// a bracket of relative width 1e-13 (C itself is only determined to about
// sqrt(machine epsilon), since the objective is flat at its maximum, but the
// value is then accurate to machine precision). The value returned is the largest
// objective evaluated in either stage, so it is never below the best point of
// stage 1 nor of any grid those evaluations cover.
template <class Objective>
Maximum maximise(double s, double steps, Objective objective, double tolerance) {
  const Range range = search_range(s, steps);
  auto event = [&](double c) { return event_unchecked(s, steps, c); };
  Maximum best{kNegInf, std::nan("")};
  double best_width = range.high - range.low;
  auto consider = [&](double c, const LogEvent& e, double width) {
    const double value = objective(e);
    if (value > best.value) {
      best = {value, c};
      best_width = width;
    }
  };

  std::priority_queue<Node> queue;
  auto push = [&](double c1, const LogEvent& e1, double c2, const LogEvent& e2) {
    const double bound = objective(LogEvent{e1.log_p, e2.log_q});
    if (bound > kNegInf) queue.push(Node{c1, c2, e1, e2, bound});
  };
  constexpr int kInitial = 64;
  double previous_c = range.low;
  LogEvent previous = event(previous_c);
  consider(previous_c, previous, (range.high - range.low) / kInitial);
  for (int i = 1; i <= kInitial; ++i) {
    const double c = i == kInitial ? range.high : range.low + (range.high - range.low) * i / kInitial;
    const LogEvent e = event(c);
    consider(c, e, (range.high - range.low) / kInitial);
    push(previous_c, previous, c, e);
    previous_c = c;
    previous = e;
  }
  // The cap only guards against pathological inputs; stopping early still
  // returns an attained value, i.e. a valid (if weaker) lower bound.
  for (int iteration = 0; iteration < 200000 && !queue.empty(); ++iteration) {
    const Node node = queue.top();
    if (node.bound <= best.value + tolerance) break;
    queue.pop();
    const double mid = 0.5 * (node.c1 + node.c2);
    if (!(mid > node.c1 && mid < node.c2)) continue;  // interval at double resolution
    const LogEvent e = event(mid);
    consider(mid, e, node.c2 - node.c1);
    push(node.c1, node.e1, mid, e);
    push(mid, e, node.c2, node.e2);
  }
  if (!(best.value > kNegInf)) return {kNegInf, std::nan("")};

  // Golden-section refinement on [C* - w/2, C* + w/2], w the width of the
  // interval whose midpoint C* was.
  constexpr double kInvPhi = 0.61803398874989484820;
  double lo = best.threshold - 0.5 * best_width;
  double hi = best.threshold + 0.5 * best_width;
  double x1 = hi - kInvPhi * (hi - lo);
  double x2 = lo + kInvPhi * (hi - lo);
  LogEvent e1 = event(x1);
  LogEvent e2 = event(x2);
  double f1 = objective(e1);
  double f2 = objective(e2);
  consider(x1, e1, 0.0);
  consider(x2, e2, 0.0);
  for (int iteration = 0; iteration < 200 && hi - lo > 1e-13 * (1.0 + std::fabs(lo) + std::fabs(hi)); ++iteration) {
    if (f1 >= f2) {
      hi = x2;
      x2 = x1;
      f2 = f1;
      x1 = hi - kInvPhi * (hi - lo);
      e1 = event(x1);
      f1 = objective(e1);
      consider(x1, e1, 0.0);
    } else {
      lo = x1;
      x1 = x2;
      f1 = f2;
      x2 = lo + kInvPhi * (hi - lo);
      e2 = event(x2);
      f2 = objective(e2);
      consider(x2, e2, 0.0);
    }
  }
  return best;
}

// Floating-point safety margin on a logarithm: log P and log Q are computed to
// a few ulp of |log| plus a few 1e-16 absolute (each of log_ndtr, log_add,
// log1mexp contributes a few ulp), so moving them by 1e-13 (1 + |log|), some
// 500 ulp, in the unfavourable direction makes the reported value a lower bound
// on the exact one. Near the maximum P - e^eps Q can cancel (by a factor ~100 for
// a Gaussian at eps sigma^2 ~ 100), so the margin costs up to ~1e-8 relative in
// delta there, and ~1e-13 (1 + |log|) in epsilon.
double margin(double log_value) { return 1e-13 * (1.0 + std::fabs(log_value)); }

// Branch-and-bound stopping rule: stop when no interval can beat the best point
// by more than this (in log delta, i.e. relative 1e-4 in delta, or absolute in
// epsilon). The golden-section stage then refines the best point to ~1e-13 in C,
// so the tolerance only matters if two separate local maxima are within 1e-4 of
// each other; it keeps each query at a few hundred evaluations.
constexpr double kTolerance = 1e-4;

}  // namespace

LogEvent log_event(double noise_multiplier, double steps, double threshold) {
  require_positive_finite("noise_multiplier", noise_multiplier);
  require_steps(steps);
  if (!std::isfinite(threshold)) fail("threshold", "finite", threshold);
  return event_unchecked(noise_multiplier, steps, threshold);
}

Maximum log_delta_lower(double noise_multiplier, double steps, double epsilon) {
  require_positive_finite("noise_multiplier", noise_multiplier);
  require_steps(steps);
  require_nonnegative_finite("epsilon", epsilon);
  // log(P - e^eps Q) = log_sub(log P, eps + log Q): no cancellation until the
  // two terms agree to many digits, and no underflow for large eps.
  auto objective = [epsilon](const LogEvent& e) { return log_sub(e.log_p, epsilon + e.log_q); };
  Maximum found = maximise(noise_multiplier, steps, objective, kTolerance);
  if (!(found.value > kNegInf)) return found;
  const LogEvent e = event_unchecked(noise_multiplier, steps, found.threshold);
  found.value = log_sub(e.log_p - margin(e.log_p), epsilon + e.log_q + margin(e.log_q));
  return found;
}

Maximum epsilon_lower(double noise_multiplier, double steps, double delta) {
  require_positive_finite("noise_multiplier", noise_multiplier);
  require_steps(steps);
  require_open_unit("delta", delta);
  const double log_delta = std::log(delta);
  // eps(C) = log(P - delta) - log Q, with P - delta as log_sub(log P, log delta).
  auto objective = [log_delta](const LogEvent& e) { return log_sub(e.log_p, log_delta) - e.log_q; };
  Maximum found = maximise(noise_multiplier, steps, objective, kTolerance);
  if (!(found.value > kNegInf)) return {0.0, found.threshold};
  const LogEvent e = event_unchecked(noise_multiplier, steps, found.threshold);
  const double safe = log_sub(e.log_p - margin(e.log_p), log_delta) - (e.log_q + margin(e.log_q));
  found.value = std::max(safe, 0.0);
  return found;
}

}  // namespace dpacct::samplers

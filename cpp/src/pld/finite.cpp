#include "dpacct/pld/finite.hpp"

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>
#include <vector>

#include "dpacct/check.hpp"
#include "dpacct/logmath.hpp"

namespace dpacct::pld {

namespace {

// An input log-mass as a certified interval: exact up to a few ulps.
Mass exact(double v) {
  if (v == kNegInf) return {kNegInf, kNegInf};
  const double err = 4.0 * kUnit * (1.0 + std::fabs(v));
  return {v - err, v + err};
}

void check_log_masses(const char* name, const double* values, std::size_t n) {
  double total = kNegInf;
  for (std::size_t i = 0; i < n; ++i) {
    if (!(values[i] <= 0.0)) {  // also rejects NaN and +inf
      throw std::invalid_argument(std::string(name) + " must be <= 0 (log-masses), got " +
                                  format_value(values[i]) + " at index " + std::to_string(i));
    }
    total = log_add(total, values[i]);
  }
  if (total > 1e-9) {
    throw std::invalid_argument(std::string(name) + " must describe at most probability 1, got " +
                                format_value(std::exp(total)));
  }
}

void check_cells(std::size_t n_grid, std::size_t max_cells) {
  if (n_grid > max_cells) {
    throw std::invalid_argument("the losses span " + std::to_string(n_grid) + " grid points (more than " +
                                std::to_string(max_cells) + "); increase discretization");
  }
}

// Adds log-mass v to entry `index` of a sequence that starts at `low`, the sum rounded down (`side` -1: P-labels)
// or up (+1: Q-labels and upper masses) where atoms share an entry.
void add_at(std::vector<double>& logs, long low, long index, double v, int side) {
  auto& slot = logs[static_cast<std::size_t>(index - low)];
  slot = log_add_directed(slot, v, side);
}

}  // namespace

StepPmf finite_step(const double* log_p_in, const double* log_q_in, std::size_t n, double q, bool swap, double d,
                    std::size_t max_cells) {
  require_positive_finite("discretization", d);
  if (!(q > 0.0 && q <= 1.0)) fail("sampling_probability", "in (0, 1]", q);
  check_log_masses("log_p", log_p_in, n);
  check_log_masses("log_q", log_q_in, n);
  // Poisson subsampling atom by atom, then the direction.
  std::vector<double> lp(log_p_in, log_p_in + n), lq(log_q_in, log_q_in + n);
  if (q < 1.0) {
    const double log_q_rate = std::log(q), log_1mq = std::log1p(-q);
    for (std::size_t j = 0; j < n; ++j) lp[j] = log_add(log_1mq + lq[j], log_q_rate + lp[j]);
  }
  if (swap) std::swap(lp, lq);
  StepPmf out;
  out.discretization = d;
  long lowest = 0, highest = 0;
  bool any = false;
  double slack = 0.0;
  for (std::size_t j = 0; j < n; ++j) {
    if (lp[j] == kNegInf || lq[j] == kNegInf) continue;
    const double loss = lp[j] - lq[j];
    const auto a = static_cast<long>(std::floor(loss / d));  // the label round(loss / d) is a or a + 1
    lowest = any ? std::min(lowest, a) : a;
    highest = any ? std::max(highest, a + 1) : a + 1;
    any = true;
    // The computed loss errs by the input and subtraction rounding.
    slack = std::max(slack, 16.0 * kUnit * (2.0 + std::fabs(lp[j]) + std::fabs(lq[j])));
  }
  if (any) check_cells(static_cast<std::size_t>(highest - lowest + 1), max_cells);
  out.upper_low = lowest;
  out.label_low = lowest;
  out.log_upper.assign(any ? static_cast<std::size_t>(highest - lowest + 1) : 0, kNegInf);
  out.log_p.assign(out.log_upper.size(), kNegInf);
  out.log_q.assign(out.log_upper.size(), kNegInf);
  for (std::size_t j = 0; j < n; ++j) {
    if (lp[j] == kNegInf) continue;  // loss -inf: never contributes to delta
    const Mass m = exact(lp[j]);
    if (lq[j] == kNegInf) {  // loss +inf
      out.infinity_upper += std::exp(m.hi);
      out.infinity_lower += std::exp(m.lo);
      continue;
    }
    const Mass w = exact(lq[j]);
    const double loss = lp[j] - lq[j];
    const auto a = static_cast<long>(std::floor(loss / d));
    // An atom exactly on a grid point stays there; otherwise it is split between a and a + 1.
    const long b = static_cast<double>(a) * d == loss ? a : a + 1;
    split_cell(m, w, a, b, d, lowest, out.log_upper);
    const long label = std::lround(loss / d);
    add_at(out.log_p, lowest, label, m.lo, -1);
    add_at(out.log_q, lowest, label, w.hi, +1);
  }
  out.infinity_upper = std::min(out.infinity_upper * (1.0 + 4.0 * kUnit), 1.0);
  out.infinity_lower *= 1.0 - 4.0 * kUnit;
  summarise(out);
  out.loss_slack = slack;
  return out;
}

StepPmf cells_step(const double* log_p, const double* log_q, std::size_t n, const double* loss_at_edges, double d,
                   std::size_t max_cells) {
  require_positive_finite("discretization", d);
  if (n == 0) throw std::invalid_argument("log_p must have at least one cell");
  check_log_masses("log_p", log_p, n);
  check_log_masses("log_q", log_q, n);
  const bool upper = loss_at_edges != nullptr;
  if (upper) {
    for (std::size_t i = 0; i + 1 < n; ++i) {
      if (std::isnan(loss_at_edges[i]) || (i > 0 && loss_at_edges[i] < loss_at_edges[i - 1])) {
        throw std::invalid_argument("log_ratio_at_edges must be non-decreasing and not NaN, got " +
                                    format_value(loss_at_edges[i]) + " at index " + std::to_string(i));
      }
    }
  }
  // Labels (and, with edges, the upper grid points) and their range.
  std::vector<long> label(n, 0);
  long lowest = 0, highest = 0;
  bool any = false;
  auto extend = [&](long k) {
    lowest = any ? std::min(lowest, k) : k;
    highest = any ? std::max(highest, k) : k;
    any = true;
  };
  for (std::size_t i = 0; i < n; ++i) {
    if (log_p[i] == kNegInf || log_q[i] == kNegInf) continue;
    const double ratio = (log_p[i] - log_q[i]) / d;
    if (!(std::fabs(ratio) < 1e15)) throw std::invalid_argument("a cell's loss is too large for the grid");
    label[i] = std::lround(ratio);
    extend(label[i]);
  }
  auto lo_index = [&](std::size_t i) { return static_cast<long>(std::floor(loss_at_edges[i - 1] / d)); };
  auto hi_index = [&](std::size_t i) { return static_cast<long>(std::ceil(loss_at_edges[i] / d)); };
  if (upper) {
    for (std::size_t i = 0; i + 1 < n; ++i) {
      if (log_p[i] == kNegInf || !std::isfinite(loss_at_edges[i])) continue;
      extend(hi_index(i));
      if (i > 0 && std::isfinite(loss_at_edges[i - 1])) extend(lo_index(i));
    }
  }
  StepPmf out;
  out.discretization = d;
  out.has_upper = upper;
  if (any) check_cells(static_cast<std::size_t>(highest - lowest + 1), max_cells);
  const std::size_t size = any ? static_cast<std::size_t>(highest - lowest + 1) : 0;
  out.upper_low = out.label_low = lowest;
  out.log_p.assign(size, kNegInf);
  out.log_q.assign(size, kNegInf);
  for (std::size_t i = 0; i < n; ++i) {
    if (log_p[i] == kNegInf) continue;
    const Mass m = exact(log_p[i]);
    if (log_q[i] == kNegInf) {
      out.infinity_lower += std::exp(m.lo);
      continue;
    }
    add_at(out.log_p, lowest, label[i], m.lo, -1);
    add_at(out.log_q, lowest, label[i], exact(log_q[i]).hi, +1);
  }
  out.infinity_lower *= 1.0 - 4.0 * kUnit;
  if (upper) {
    out.log_upper.assign(size, kNegInf);
    // P-mass placed on the grid (its lower end), by Neumaier's compensated sum:
    // within 2 u of the exact sum of the terms (Higham, 2nd ed., section 4.3).
    double placed = 0.0, compensation = 0.0;
    for (std::size_t i = 0; i < n; ++i) {
      if (log_p[i] == kNegInf) continue;
      const Mass m = exact(log_p[i]);
      const double right = i + 1 < n ? loss_at_edges[i] : kInf;
      if (right == kInf) continue;          // goes to +inf with the missing mass below
      if (right == kNegInf) continue;       // loss -inf on the whole cell: no contribution
      const double left = i > 0 ? loss_at_edges[i - 1] : kNegInf;
      if (left == kNegInf || log_q[i] == kNegInf) {
        add_at(out.log_upper, lowest, hi_index(i), m.hi, +1);  // rounded up to the grid
      } else {
        split_cell(m, exact(log_q[i]), lo_index(i), hi_index(i), d, lowest, out.log_upper);
      }
      const double term = std::exp(m.lo);
      const double t = placed + term;
      compensation += std::fabs(placed) >= term ? (placed - t) + term : (term - t) + placed;
      placed = t;
    }
    placed += compensation;
    // P-mass not placed on the grid (the last cell, and what the cells miss) goes to +inf.
    out.infinity_upper = std::min(std::max(1.0 - placed * (1.0 - 4.0 * kUnit), 0.0), 1.0);
  }
  summarise(out);
  out.loss_slack = 16.0 * kUnit * (1.0 + out.max_abs_loss);
  return out;
}

}  // namespace dpacct::pld

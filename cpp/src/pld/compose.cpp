#include "dpacct/pld/compose.hpp"

#include <algorithm>
#include <cmath>
#include <complex>
#include <limits>
#include <memory>
#include <stdexcept>
#include <string>

#include "dpacct/check.hpp"
#include "dpacct/fft.hpp"
#include "dpacct/logmath.hpp"
#include "dpacct/pld/power.hpp"

namespace dpacct::pld {

namespace {

constexpr double kU = kUnit;

// Whether to compose the whole support (nothing wraps around, no tail is
// charged) rather than the Chernoff window: when it is shorter, or not much
// longer and small (few steps).
bool prefer_full(double full_span, double window_span) {
  return full_span <= std::max(4.0 * window_span, 4096.0);
}

// sqrt(sum_{j >= 0, j < n} e^{-2 slope j D}): with the 2-norm round-off bound e2 of
// the composed entries, Cauchy-Schwarz bounds the error of a suffix sum by e2 times this.
// (The finite sum (1 - r^n) / (1 - r), r = e^{-2 slope D}: where slope D is tiny, as at
// epsilon = 0, the infinite sum 1 / (1 - r) is far above n. At sigma=8.39, q=2.5e-8, T=25
// it was 2.2e6 against n = 2048, and the charged round-off alone made delta(0) [0, 9.4e-8].)
double weight_norm(double slope, double d, std::size_t n) {
  const double count = static_cast<double>(n);
  if (!(slope > 0.0)) return std::sqrt(count);
  const double sum = std::expm1(-2.0 * slope * d * count) / std::expm1(-2.0 * slope * d);
  return std::sqrt(std::min(std::isfinite(sum) ? sum : count, count) * (1.0 + 8.0 * kU));
}

// The largest value(i) found by climbing from `start` in both directions, stepping
// over runs of up to 64 entries that do not improve (labels left empty).
template <class F>
double climb(F value, long start, long n) {
  long at = start;
  double local = value(at);
  for (int dir : {-1, 1}) {
    for (long i = at + dir, steps = 0, flat = 0; i >= 0 && i < n && steps < 65536; i += dir, ++steps) {
      const double v = value(i);
      if (v > local) {
        local = v;
        at = i;
        flat = 0;
      } else if (++flat >= 64) {
        break;
      }
    }
  }
  return local;
}

// On long windows the label sums can sit far from the loss they track: each step's labels
// round its cells' own losses, and where one step's loss is a spike over one or two cells
// (tiny q) that rounding has a mean of up to D / 2, T D / 2 in all. At sigma=0.644, q=7e-6,
// T=5.6e7 the best test lay 2.3e7 entries from K = eps / D and off the crossing's search
// window, and the climbs found a test worth 1.600 where one worth 1.6215 existed. From
// 2^16 entries a scan of the whole window is a third start (about 4096 tests, well under a
// millisecond against the composition's tens of milliseconds).
constexpr long kScanFrom = 1L << 16;

// The label sequences of steps composed at least this many times carry their mean rounding
// (tilt_sequence's mean_count, ComposedPld::test_terms); below it the factor (1 + r)^T costs little.
constexpr double kMeanFrom = 2.0;
// ... and only where the factor could cost more than this share of a test: it charges 2 T r (r >= 4 u) of the
// masses P(A) and Q(A), whose difference delta is about P(A) / F, F = max(1 + tilt, 1 / s) with s the composed
// loss's spread: in a tail the tilt follows the slope lambda of log delta (an exponential tail beyond epsilon
// gives E[1 - e^{eps - L} | L > eps] = 1 / (1 + lambda)), and within the bulk (epsilon = 0, the total variation)
// delta is about s P(A). At sigma=0.5, q=1e-7, T=1e7 (tilt ~1700) that is 3e-5: the exact entries, 45 ns each
// on steps of 45,000 cells, had cost 6 % of the query for nothing; at sigma=7.9, q=1.2e-8, T=2.6e7 (tilt ~1e5)
// 5e-3, and at delta(0) for sigma=3.77, q=1.05e-7, T=8.5e7 (s = 2.6e-4) 6e-4.
constexpr double kMeanShare = 1e-4;

// The i among about 4096 evenly spaced ones in [from, to] with the largest value(i): a third
// start for climb(), where the tests between the other two are flat (0) over far more than its
// 64-entry stride. (At sigma=0.635, q=2.8e-6, T=3.4e5 the crossing lay at the end of the
// reliable entries, the certifying tests 15000 entries of zeros away on a grid of 5.5e-6.)
template <class F>
long scan(F value, long from, long to) {
  if (to < from) std::swap(from, to);
  const long stride = std::max(1L, (to - from) / 4096);
  long at = from;
  double best = value(from);
  for (long i = from + stride; i <= to; i += stride) {
    const double v = value(i);
    if (v > best) {
      best = v;
      at = i;
    }
  }
  return at;
}

}  // namespace

namespace detail {

// suffix[i] = sum_{j >= i} c_j e^{-slope (j - i) D} (all c_j >= 0), in two levels: within
// blocks of B ~ sqrt(n) entries by the recursion s_i = c_i + r s_{i+1}, and over the blocks
// by the same recursion with ratio R = e^{-slope B D}, each block's suffix then completed as
// s_i = t_i + r^(end - i) S. Sums of non-negative terms keep the largest relative error of
// their parts: a block's t_i errs by <= 3 u B (its B sums and products, and r^k with r from
// exp to an ulp), r^(end - i) by 2 u B, S by 3 u B + 3 u n / B (n / B levels, R from exp), so a
// suffix sum is within 6 u (B + n / B + 4) of exact, relative. (One recursion over all n
// entries gives 16 u n: at n = 2^16, 2.3e-10 of a suffix sum near 1/2, which delta(0) at
// sigma=8.39, q=2.5e-8, T=25, itself 6e-9, lost 2 % to.)
namespace {
std::size_t suffix_block(std::size_t n) {
  return std::max<std::size_t>(1, static_cast<std::size_t>(std::sqrt(static_cast<double>(n))));
}

}  // namespace

double suffix_relative_error(std::size_t n) {
  const double b = static_cast<double>(suffix_block(n));
  return 6.0 * kU * (b + static_cast<double>(n) / b + 4.0);
}

template <class Vector>
CachedVector<double> suffix_sums(const Vector& c, double slope, double d) {
  const std::size_t n = c.size();
  CachedVector<double> s(n, 0.0);
  if (n == 0) return s;
  const std::size_t block = suffix_block(n);
  const double r = std::exp(-slope * d);
  const double ratio = std::exp(-slope * d * static_cast<double>(block));  // R = r^B, from exp
  const std::size_t blocks = (n + block - 1) / block;
  // The same operations as one pass per block from the last (t_i = c_i + r t_{i+1}, w *= r,
  // s_i = t_i + w after, after = t_lo + R after), in three passes, to the bit: the blocks' own
  // recursions t_i first, four blocks interleaved (each is a chain of dependent products and sums:
  // one at a time they left the core waiting on every step); then r^(hi - i) from one table built by
  // the same repeated products; then the carries over the blocks.
  std::size_t b = 0;
  for (; b + 4 <= blocks && (b + 4) * block <= n; b += 4) {
    double t0 = 0.0, t1 = 0.0, t2 = 0.0, t3 = 0.0;
    const std::size_t h0 = (b + 1) * block, h1 = h0 + block, h2 = h1 + block, h3 = h2 + block;
    for (std::size_t j = 1; j <= block; ++j) {
      t0 = c[h0 - j] + r * t0;
      t1 = c[h1 - j] + r * t1;
      t2 = c[h2 - j] + r * t2;
      t3 = c[h3 - j] + r * t3;
      s[h0 - j] = t0;
      s[h1 - j] = t1;
      s[h2 - j] = t2;
      s[h3 - j] = t3;
    }
  }
  for (; b < blocks; ++b) {
    const std::size_t lo = b * block, hi = std::min(n, lo + block);
    double t = 0.0;
    for (std::size_t i = hi; i-- > lo;) {
      t = c[i] + r * t;
      s[i] = t;
    }
  }
  std::vector<double> power(block + 1);  // power[m] = r^m by m products from 1
  power[0] = 1.0;
  for (std::size_t m = 1; m <= block; ++m) power[m] = power[m - 1] * r;
  double after = 0.0;  // the suffix sum at the start of the next block
  for (std::size_t k = blocks; k-- > 0;) {
    const std::size_t lo = k * block, hi = std::min(n, lo + block);
    const double t_lo = s[lo];
    for (std::size_t i = lo; i < hi; ++i) s[i] = s[i] + power[hi - i] * after;
    // s_lo = t_lo + R after (a block followed by another is full: hi - lo = B).
    after = t_lo + ratio * after;
  }
  return s;
}
template CachedVector<double> suffix_sums(const std::vector<double>& c, double slope, double d);
template CachedVector<double> suffix_sums(const CachedVector<double>& c, double slope, double d);

CachedVector<double> excess_sums(const CachedVector<double>& s2, double slope, double d) {
  const std::size_t n = s2.size();
  CachedVector<double> s3(n, 0.0);
  const double r = std::exp(-slope * d);
  const double g = -std::expm1(-d);
  for (std::size_t i = n - 1; i-- > 0;) s3[i] = r * (s3[i + 1] + g * s2[i + 1]);
  return s3;
}

double excess_relative_error(std::size_t n, double s2_error) {
  return s2_error + 8.0 * kU * (static_cast<double>(n) + 4.0);
}

double excess_weight_norm(double slope, double d, std::size_t n) {
  const double plain = weight_norm(slope, d, n);
  if (!(slope > 0.0)) return plain;
  const double gap = -std::expm1(-2.0 * slope * d);  // 1 - x, x = e^{-2 slope d}
  const double x = 1.0 - gap;
  const double sum = d * d * (1.0 + x) / (gap * gap * gap);
  if (!(std::isfinite(sum) && gap > 0.0)) return plain;
  return std::min(plain, std::sqrt(sum * (1.0 + 16.0 * kU)));
}

}  // namespace detail

using detail::excess_relative_error;
using detail::excess_sums;
using detail::excess_weight_norm;
using detail::suffix_relative_error;
using detail::suffix_sums;

ComposedPld::ComposedPld(const std::vector<std::pair<const StepPmf*, double>>& groups, double tilt,
                         std::size_t max_size, double log_window_tail, bool thorough, bool lower, bool shared)
    : tilt_(tilt), log_tail_u_(log_window_tail), log_tail_c_(log_window_tail) {
  require_nonnegative_finite("tilt", tilt);
  if (!(log_window_tail <= -25.0 && log_window_tail >= -700.0)) fail("log_window_tail", "in [-700, -25]", log_window_tail);
  std::vector<Tilted> upper, cells_p, cells_q, mid_p, mid_q;
  std::vector<double> counts;
  double log_no_infinity = 0.0, log_no_infinity_upper = 0.0;
  double absolute_u = 0.0, absolute_p = 0.0, absolute_q = 0.0;  // see Tilted::absolute_rounding
  upper.reserve(groups.size());
  cells_p.reserve(groups.size());
  cells_q.reserve(groups.size());
  // Shared labels (step.hpp) where asked for and every step has them.
  shared_ = shared && lower;
  for (const auto& [step, count] : groups) {
    if (count > 0.0 && (step->log_q_mid.empty() || step->log_q_mid.size() != step->log_p.size() ||
                        step->mid_weights.size() != 4 || !(step->mid_error < 0.5) || !(step->own_error < 1.0))) {
      shared_ = false;
    }
  }
  double steps = 0.0, variance = 0.0;
  for (const auto& [step, count] : groups) {
    steps += std::max(count, 0.0);
    variance += std::max(count, 0.0) * step->loss_sd * step->loss_sd;
  }
  const double cancel = variance > 0.0 ? std::max(1.0 + tilt, 1.0 / std::sqrt(variance)) : kInf;
  const bool mean_worth = lower && 2.0 * steps * 4.0 * kU * cancel >= kMeanShare;
  double log_up_eta = 0.0, log_down_eta = 0.0, own_total = 0.0;  // sum count log(1 +- eta), sum count nu
  double absolute_p2 = 0.0, absolute_q2 = 0.0;
  double log_nu_weight = 0.0, own_largest = 0.0;                 // sum count log(1 + w_nu), max nu
  for (const auto& [step, count] : groups) {
    if (!(count >= 0.0 && count == std::floor(count) && count < 9.0e15)) fail("count", "an integer >= 0", count);
    if (count == 0.0) continue;
    require_no_nan(*step);
    if (discretization_ == 0.0) discretization_ = step->discretization;
    if (step->discretization != discretization_) {
      throw std::invalid_argument("every step of a composition must have the same discretization");
    }
    const double d = discretization_;
    has_upper_ = has_upper_ && step->has_upper;
    upper.push_back(tilt_sequence(step->log_upper, step->upper_low, tilt, d));
    // The label sequences' mean rounding where the steps repeat (ComposedPld::SumBounds).
    const double mean = mean_worth && count >= kMeanFrom ? count : 0.0;
    cells_p.push_back(tilt_sequence(step->log_p, step->label_low, tilt, d, nullptr, mean));
    cells_q.push_back(tilt_sequence(step->log_q, step->label_low, tilt + 1.0, d, nullptr, mean));
    if (shared_) {
      mid_p.push_back(tilt_sequence(step->log_q_mid, step->label_low, tilt, d, &step->own_mid, mean));
      mid_q.push_back(tilt_sequence(step->log_q_mid, step->label_low, tilt + 1.0, d, nullptr, mean));
      log_shift_p2_ += count * mid_p.back().log_norm;
      log_shift_q2_ += count * mid_q.back().log_norm;
      log_rounding2_ += count * std::max(mid_p.back().max_rounding, mid_q.back().max_rounding);
      absolute_p2 += count * mid_p.back().absolute_rounding;
      absolute_q2 += count * mid_q.back().absolute_rounding;
      log_up_eta += count * std::log1p(step->mid_error);
      log_down_eta += count * std::log1p(-step->mid_error);
      own_total += count * step->own_error;
      own_largest = std::max(own_largest, step->own_error);
      shared_w_p_ += count * step->mid_weights[0];
      shared_w_pq_ += count * step->mid_weights[1];
      shared_w_q_ += count * step->mid_weights[2];
      log_nu_weight += count * std::log1p(step->mid_weights[3]);
    }
    counts.push_back(count);
    log_no_infinity_upper += count * std::log1p(-std::min(step->infinity_upper, 1.0));
    log_no_infinity += count * std::log1p(-std::min(step->infinity_lower, 1.0));
    epsilon_slack_ += count * step->loss_slack;
    upper_finite_empty_ = upper_finite_empty_ || upper.back().empty;
    labels_empty_ = labels_empty_ || cells_p.back().empty || cells_q.back().empty;
    // Each step's total upper and Q-label masses, rounded up by logsumexp_bounded's certified error
    // (the only totals read: U's for the upper bound, Q's as a cap in tail_q_upper).
    auto log_total = [](const std::vector<double>& v, double side) {
      if (v.empty()) return kNegInf;
      double error = 0.0;
      const double value = logsumexp_bounded(v.data(), v.size(), &error);
      return value == kNegInf ? value : value + side * error;
    };
    log_mass_u_ += count * log_total(step->log_upper, 1.0);
    log_mass_q_ += count * log_total(step->log_q, 1.0);
    log_shift_u_ += count * upper.back().log_norm;
    log_shift_p_ += count * cells_p.back().log_norm;
    log_shift_q_ += count * cells_q.back().log_norm;
    log_rounding_ += count * std::max({upper.back().max_rounding, cells_p.back().max_rounding,
                                       cells_q.back().max_rounding});
    absolute_u += count * upper.back().absolute_rounding;
    absolute_p += count * cells_p.back().absolute_rounding;
    absolute_q += count * cells_q.back().absolute_rounding;
  }
  if (counts.empty()) {  // nothing composed: the loss is 0 with probability 1
    size_ = 1;
    discretization_ = groups.empty() ? 1.0 : groups.front().first->discretization;
    return;
  }
  empty_ = false;
  require_positive_finite("discretization", discretization_);
  const double d = discretization_;
  // P(some step has loss +inf): rounded up for the upper bound, down for the lower.
  tail_above_ = std::min(-std::expm1(log_no_infinity_upper) * (1.0 + 16.0 * kU), 1.0);
  any_infinity_lower_ = std::max(-std::expm1(log_no_infinity) * (1.0 - 16.0 * kU), 0.0);
  if (!has_upper_ || upper_finite_empty_) upper.clear();
  lower_ = lower;
  labels_empty_ = labels_empty_ || !lower;  // (not composed: the lower bounds below are the trivial ones)
  if (labels_empty_) {
    cells_p.clear();
    cells_q.clear();
    mid_p.clear();
    mid_q.clear();
    shared_ = false;
  }
  if (upper.empty() && cells_p.empty()) {
    size_ = 1;
    return;
  }

  std::vector<const Tilted*> pu, pp, pq, mp, mq;
  for (auto& t : mid_p) mp.push_back(&t);
  for (auto& t : mid_q) mq.push_back(&t);
  for (auto& t : upper) pu.push_back(&t);
  for (auto& t : cells_p) pp.push_back(&t);
  for (auto& t : cells_q) pq.push_back(&t);
  // Windows: one for the connect-the-dots losses, one for the label sums (they
  // sit ~T D / 2 below the loss, so the two are kept apart), one FFT size for both.
  // Where the whole composed support is not much longer than the Chernoff
  // window (few steps), it is used: nothing can wrap around, no tail is charged.
  double low_u = kInf, high_u = kNegInf, low_c = kInf, high_c = kNegInf;
  double span = 0.0;
  // A single step is not transformed at all: its own sequences are exact.
  single_ = counts.size() == 1 && counts[0] == 1.0;
  if (!pu.empty()) {
    double full_low = 0.0, full_high = 0.0;
    full_support(pu, counts, &full_low, &full_high);
    if (!single_ && !chernoff_window(pu, counts, d, log_window_tail, &low_u, &high_u)) low_u = kInf;  // no finite window
    if (single_ || !(low_u < kInf) || prefer_full(full_high - full_low, (high_u - low_u) / d)) {
      low_u = full_low * d;
      high_u = full_high * d;
      log_tail_u_ = kNegInf;
    }
    span = std::max(span, (high_u - low_u) / d);
  }
  if (!pp.empty()) {
    double full_low = 0.0, full_high = 0.0;
    full_support(pp, counts, &full_low, &full_high);
    // (The shared labels' sequences live on the same labels: one window holds all four.)
    const bool mids = mp.empty() || (chernoff_window(mp, counts, d, log_window_tail, &low_c, &high_c) &&
                                     chernoff_window(mq, counts, d, log_window_tail, &low_c, &high_c));
    if (!single_ && !(chernoff_window(pp, counts, d, log_window_tail, &low_c, &high_c) &&
                      chernoff_window(pq, counts, d, log_window_tail, &low_c, &high_c) && mids)) {
      low_c = kInf;
    }
    if (single_ || !(low_c < kInf) || prefer_full(full_high - full_low, (high_c - low_c) / d)) {
      low_c = full_low * d;
      high_c = full_high * d;
      log_tail_c_ = kNegInf;
    }
    span = std::max(span, (high_c - low_c) / d);
  }
  span += 2.0;
  std::size_t size = 2;
  if (single_) {  // no transform: the window is the step itself
    size = static_cast<std::size_t>(span);
  }
  while (!single_ && static_cast<double>(size) < span && size <= max_size) size <<= 1;
  if (size > max_size) {
    throw std::invalid_argument("the composed PLD needs an FFT larger than max_size " + std::to_string(max_size) +
                                " at discretization " + format_value(d) + " (its window spans " +
                                std::to_string(static_cast<long long>(std::ceil(span))) +
                                " points); increase discretization");
  }
  size_ = size;
  suffix_error_ = suffix_relative_error(size_);
  const std::size_t plan_size = single_ ? 2 : size_;
  const std::shared_ptr<const fft::RealPlan> held_plan = fft::real_plan(plan_size);
  const fft::RealPlan& plan = *held_plan;
  PooledWorkspace pooled;
  Workspace& ws = *pooled;
  ws.thorough = thorough;
  CachedVector<double>& cp = ws.labels_p;  // (the composed entries: only their sums are kept)
  CachedVector<double>& cq = ws.labels_q;
  if (!pu.empty()) {
    window_start_ = static_cast<long>(std::floor(low_u / d + (log_tail_u_ == kNegInf ? 0.5 : 0.0)));
    CachedVector<double>& c = cp;  // reused for the P-labels below
    power_window(pu, counts, plan, window_start_, single_ ? size_ : 0, ws, c, &entry_error_u_, &stats_);
    // The steps' small entries err by absolute amounts: composed with sequences of total mass
    // ~1, their sum bounds the 1-norm (so the 2-norm) of the composed entries' error.
    const double spread = std::exp(log_rounding_) * (1.0 + 1e-6);
    entry_error_u_ += absolute_u * spread;
    s1_ = suffix_sums(c, tilt, d);
    s2_ = suffix_sums(c, tilt + 1.0, d);
    s3_ = excess_sums(s2_, tilt, d);
    excess_error_ = excess_relative_error(size_, suffix_error_);
    // Round-off of the represented entries and the aliased tilted mass, for upper_finite (once). The
    // entries K >= k count in delta by e^{-tilt (K - k) D} (1 - e^{eps - K D}), which the excess weight
    // norm bounds: near epsilon their share is tiny where epsilon is (sigma=8575, q=7.9e-8, T=18,
    // delta=1.9e-15: every loss within 1e-10 of 0, and the plain weights had charged 13 % of delta).
    charge_u_ = entry_error_u_ * excess_weight_norm(tilt_, d, size_) + 2.0 * std::exp(log_tail_u_);
    log_charge_u_ = charge_u_ > 0.0 ? std::log(charge_u_) : kNegInf;
  }
  if (!pp.empty()) {
    cells_start_ = static_cast<long>(std::floor(low_c / d + (log_tail_c_ == kNegInf ? 0.5 : 0.0)));
    // One label set's P and Q sequences on the labels' window: composed entries (power.hpp's error
    // bounds, plus the steps' absolute rounding), then their tilted suffix sums.
    auto compose_labels = [&](const std::vector<const Tilted*>& seq_p, const std::vector<const Tilted*>& seq_q,
                              double abs_p, double abs_q, double log_rounding, CachedVector<double>& out_p,
                              CachedVector<double>& out_q, double* error_p, double* error_q,
                              CachedVector<double>* sum_p, CachedVector<double>* sum_q) {
      const std::size_t single = single_ ? size_ : 0;
      power_window(seq_p, counts, plan, cells_start_, single, ws, out_p, error_p, &stats_);
      *error_p += abs_p * std::exp(log_rounding) * (1.0 + 1e-6);
      *sum_p = suffix_sums(out_p, tilt, d);
      power_window(seq_q, counts, plan, cells_start_, single, ws, out_q, error_q, &stats_);
      *error_q += abs_q * std::exp(log_rounding) * (1.0 + 1e-6);
      *sum_q = suffix_sums(out_q, tilt + 1.0, d);
    };
    compose_labels(pp, pq, absolute_p, absolute_q, log_rounding_, cp, cq, &entry_error_p_, &entry_error_q_, &sp_,
                   &sq_);
    // The entries that stand well above round-off and aliasing, around the mode of P.
    const double floor_p = 4.0 * (entry_error_p_ + 2.0 * std::exp(log_tail_c_));
    const double floor_q = 4.0 * (entry_error_q_ + 2.0 * std::exp(log_tail_c_));
    const auto mode = static_cast<long>(std::max_element(cp.begin(), cp.end()) - cp.begin());
    auto reliable = [&](long i) {
      return cp[static_cast<std::size_t>(i)] > floor_p && cq[static_cast<std::size_t>(i)] > floor_q;
    };
    reliable_low_ = reliable_high_ = mode;
    while (reliable_low_ > 0 && reliable(reliable_low_ - 1)) --reliable_low_;
    while (reliable_high_ + 1 < static_cast<long>(size_) && reliable(reliable_high_ + 1)) ++reliable_high_;
    // The error and rounding terms every threshold test uses, once (the composers built on
    // this one query thousands of tests: the exponentials here had been half their cost).
    test_terms(entry_error_p_, entry_error_q_, log_rounding_, pp, pq, counts, &bounds_p_, &bounds_q_);
    total_q_ = std::exp(log_mass_q_) * (1.0 + 8.0 * kU);
    if (shared_) {
      // The shared labels on the same window (their entries reuse cp and cq: only the sums are kept).
      compose_labels(mp, mq, absolute_p2, absolute_q2, log_rounding2_, cp, cq, &entry_error_p2_, &entry_error_q2_,
                     &sp2_, &sq2_);
      test_terms(entry_error_p2_, entry_error_q2_, log_rounding2_, mp, mq, counts, &bounds_p2_, &bounds_q2_);
      // prod (1 + rho_t) lies in [(1 - eta)^T, (1 + eta)^T], e^N in [e^-nu_T, e^nu_T]
      // (each rounded outward), so P(A) <= P~(A) e^{nu_T} / (1 - eta)^T and Q(A) <= Q~(A) / (1 - eta)^T.
      const double round = 1.0 + 16.0 * kU;
      shared_gamma_ = std::expm1(log_up_eta) * round;
      shared_kappa_ = std::expm1(own_total) * round;
      shared_kappa_w_ = std::expm1(log_nu_weight + own_largest) * round;
      shared_kappa_n_ = std::expm1(log_nu_weight) * round;
      shared_w_p_ *= round;
      shared_w_pq_ *= round;
      shared_w_q_ *= round;
      shared_up_q_ = std::exp(-log_down_eta) * round;
      shared_up_p_ = std::exp(own_total - log_down_eta) * round;
    }
  }
  if (shared_) {
    // TV(P^T, Q^T) = delta(0) of the labelled pair, at most that of the mechanism: the upper bound.
    tv_upper_ = has_upper_ ? std::min(upper_bound(0.0), 1.0) : 1.0;
    concentration_ = concentrate(groups);
  }
}

// The steps' rounding in a long composition. Step t's computed entries are p~_j = p_j g_j, where
// p_j = e^{x_j} are the exact ones (the small entries, whose error is absolute and charged apart,
// taken with g_j = 1), |g_j - 1| <= r (Tilted::max_rounding). Charged as a factor, a test's sums
// are within (1 +- r)^T: at T = 2.6e7 (sigma=7.9, q=1.2e-8) that is 1.2e-8 of masses near 0.05 whose
// difference, delta, is 1.7e-7, and the lower bound lost 1.4 % of delta to it. But the errors do not
// add up along a path as the worst case would: with pi the normalised exact step law (Z its total,
// M the computed total, rho = M / Z = E_pi[g]), h = g / rho, H = prod_t h_{j_t} and f the suffix
// sum's weights (in [0, 1]), the computed composition's exact sum is
//   S~ = prod_t M_t E_pi[f H] = prod_t (rho_t Z_t) (E_pi[f] + E_pi[f (H - 1)]),
// and the true one is S = prod_t Z_t E_pi[f]. E_pi[H] = 1 and E_pi[(H - 1)^2] = prod_t (1 + V_t) - 1
// <= e^{sum V_t} - 1 = W (the steps are independent under pi; V_t = Var_pi(h) <= spread^2), so by
// Cauchy-Schwarz, with E_pi[f^2] <= E_pi[f] = S / prod Z_t,
//   |S~ - prod rho_t Z_t E_pi[f]| <= sqrt(prod_t M_t rho_t S W),
// and S = prod rho_t^{-1} (S~ -+ that). tilt_sequence computes log rho_t to within 1e-14 / T (the entries
// too small to take exactly counted at their worst) plus ~1e-23 (Tilted::log_mean_low) where asked: the
// factor then costs ~1e-14 and the deviation sqrt(T) spread of the scale, 5e-12 at T = 2.6e7, against the
// 1.2e-8 of the factor. S itself, under the root, is bounded by the factor form.
void ComposedPld::test_terms(double entry_p, double entry_q, double log_rounding,
                             const std::vector<const Tilted*>& seq_p, const std::vector<const Tilted*>& seq_q,
                             const std::vector<double>& counts, SumBounds* p, SumBounds* q) const {
  const double d = discretization_;
  p->err = entry_p * weight_norm(tilt_, d, size_) + 2.0 * std::exp(log_tail_c_);
  q->err = entry_q * weight_norm(tilt_ + 1.0, d, size_) + std::exp(log_tail_c_);
  const double round = 1.0 + 8.0 * kU;
  auto fill = [&](const std::vector<const Tilted*>& seqs, SumBounds* b) {
    b->low_old = std::exp(-log_rounding) * (1.0 - suffix_error_);
    b->high_old = std::exp(log_rounding) * (1.0 + suffix_error_);
    double a = 0.0, up = 0.0, v = 0.0, scale = 0.0;
    for (std::size_t g = 0; g < seqs.size(); ++g) {
      a += counts[g] * seqs[g]->log_mean_low;
      up += counts[g] * seqs[g]->log_mean_high;
      v += counts[g] * seqs[g]->spread * seqs[g]->spread;
      scale += counts[g] * (seqs[g]->log_total + seqs[g]->log_mean_high);
    }
    // (The sums of up to 9e15 terms: within 16 u of their moduli; taken outward.)
    a -= 16.0 * kU * std::fabs(a);
    up += 16.0 * kU * std::fabs(up);
    scale += 16.0 * kU * std::fabs(scale);
    const double w = std::expm1(v * round) * round;
    const double root = std::exp(scale) * w * round;
    const double dev = std::sqrt(root * b->high_old) * round;
    b->low_new = std::exp(-up) * (1.0 - suffix_error_) / round;
    b->high_new = std::exp(-a) * (1.0 + suffix_error_) * round;
    b->dev_low = std::exp(-up) * dev * round;
    b->dev_high = std::exp(-a) * dev * round;
    b->sharp = b->low_new > b->low_old || b->high_new < b->high_old;
  };
  fill(seq_p, p);
  fill(seq_q, q);
}

double ComposedPld::SumBounds::low(double s) const {
  const double old = (s - err) * low_old;
  if (!sharp) return old;
  const double root = std::sqrt(std::max(s + err, 0.0));
  const double sharp = (s - err) * low_new * (1.0 - 4.0 * kU) - dev_low * root * (1.0 + 4.0 * kU);
  return std::max(old, sharp);
}

double ComposedPld::SumBounds::high(double s) const {
  const double old = (s + err) * high_old;
  if (!sharp) return old;
  const double root = std::sqrt(std::max(s + err, 0.0));
  const double sharp = (s + err) * high_new * (1.0 + 4.0 * kU) + dev_high * root * (1.0 + 4.0 * kU);
  return std::min(old, sharp);
}

std::size_t ComposedPld::memory_bytes() const {
  // The composition held three real buffers, one half spectrum and one plan of this size at its peak;
  // three suffix sums are kept.
  return size_ * sizeof(double) * 9;
}

std::size_t ComposedPld::held_bytes() const {
  std::size_t held = 0;
  for (const auto* v : {&s1_, &s2_, &s3_, &sp_, &sq_, &sp2_, &sq2_}) held += v->capacity() * sizeof(double);
  return held;
}

double ComposedPld::window_low() const {
  if (s1_.empty()) return static_cast<double>(cells_start_) * discretization_;
  return static_cast<double>(window_start_) * discretization_;
}

double ComposedPld::window_high() const {
  const long start = s1_.empty() ? cells_start_ : window_start_;
  return static_cast<double>(start + static_cast<long>(size_) - 1) * discretization_;
}

// Upper bound: delta_u(eps) = sum_{K D > eps} p_K (1 - e^{eps - K D}) of the
// composed connect-the-dots PMF, plus round-off, window and tail terms.
double ComposedPld::upper_finite(double epsilon_in) const {
  if (s1_.empty()) return 0.0;  // no finite mass (or no upper discretisation: see upper_bound)
  const double d = discretization_;
  const double epsilon = epsilon_in - epsilon_slack_;
  if (epsilon < window_low()) {
    // Every represented loss exceeds epsilon: delta <= (total mass) - e^eps sum_window p_K e^{-K D}.
    const double total = std::exp(log_mass_u_) * (1.0 + 8.0 * kU);
    const double log_x = log_window_sum_lower();
    if (log_x == kNegInf) return total;
    return std::max(total - std::exp(epsilon + log_x) * (1.0 - 8.0 * kU), 0.0);
  }
  const long k = static_cast<long>(std::floor(epsilon / d)) + 1;  // first loss index above epsilon
  const long i = k - window_start_;
  const double kd = static_cast<double>(k) * d;
  double value = 0.0;
  if (i < static_cast<long>(size_)) {
    const double s1 = s1_[static_cast<std::size_t>(i)];
    const double s2 = s2_[static_cast<std::size_t>(i)];
    if (s1 > 0.0) {
      // s1 (1 - x s2 / s1) with both suffix sums within suffix_error_ (relative) of exact:
      // the difference errs by <= 2 suffix_error_ s1.
      const double fraction = -std::expm1(std::min(epsilon - kd + std::log(s2) - std::log(s1), 0.0));
      // ... or, without that difference, s1 - x s2 = (1 - e^{eps - kD}) s1 + e^{eps - kD} s3 with
      // s3 = sum_{j >= i} c_j e^{-tilt (j - i) D} (1 - e^{-(j - i) D}) (excess_sums): two non-negative terms,
      // each within its relative error. Where every loss above epsilon is within a few cells of it
      // the difference is ~1e-11 of s1, which 2 suffix_error_ (~4e-13 at 2^12 points) had swamped.
      const double s3 = s3_[static_cast<std::size_t>(i)];
      const double x = std::exp(epsilon - kd);
      const double sharp = -std::expm1(epsilon - kd) * (1.0 + 2.0 * kU) * (1.0 + suffix_error_) +
                           x * (1.0 + 2.0 * kU) * (s3 / s1) * (1.0 + excess_error_) * (1.0 + 4.0 * kU);
      const double log_delta = log_shift_u_ - tilt_ * kd + std::log(s1) +
                               std::log(std::min(fraction + 2.0 * suffix_error_, sharp));
      value = std::exp(log_delta + log_rounding_) * (1.0 + 8.0 * kU);
    }
  }
  // Round-off of the represented entries K >= k (weights e^{-tilt (K - k) D} <= 1),
  // the aliased tilted mass (<= 2 e^{log_tail} in total), and the mass above the window.
  // (In log space: a huge tilt makes the scale overflow where the charges are exactly 0.)
  const double top = window_high() + d;
  if (charge_u_ > 0.0) value += std::exp(log_charge_u_ + log_shift_u_ - tilt_ * kd + log_rounding_);
  if (log_tail_u_ > kNegInf) value += std::exp(log_shift_u_ + log_rounding_ - tilt_ * std::max(top, kd) + log_tail_u_);
  return value;
}

double ComposedPld::log_window_sum_lower() const {
  if (s1_.empty()) return kNegInf;
  // e^{log_shift - (tilt + 1) ws D} s2[0], s2[0] taken low: round-off and the aliased
  // mass (<= 2 e^{log_tail}, weights <= 1) removed.
  const double d = discretization_;
  const double ws = static_cast<double>(window_start_) * d;
  const double s2 = s2_[0] - entry_error_u_ * weight_norm(tilt_ + 1.0, d, size_) - 2.0 * std::exp(log_tail_u_);
  if (!(s2 > 0.0)) return kNegInf;
  const double shift = log_shift_u_ - (tilt_ + 1.0) * ws;
  return shift + std::log(s2) - log_rounding_ - 8.0 * kU * (2.0 + std::fabs(shift) + std::fabs(std::log(s2)));
}

double ComposedPld::upper_bound(double epsilon) const {
  if (!has_upper_) return 1.0;
  const double value = (s1_.empty() ? 0.0 : upper_finite(epsilon)) + tail_above_;
  // A positive delta below the double range is still positive: never claim 0.
  return std::max(std::min(value, 1.0), std::numeric_limits<double>::denorm_min());
}

// P(K D >= y) from below and Q(K D >= y) from above, for the composed labels.
double ComposedPld::tail_p_lower(double y) const {
  if (sp_.empty()) return 0.0;
  const double d = discretization_;
  const long n = static_cast<long>(size_);
  long i = static_cast<long>(std::ceil(y / d)) - cells_start_;
  if (i >= n) return 0.0;
  i = std::max(i, 0L);
  const double kd = static_cast<double>(cells_start_ + i) * d;
  const double part = bounds_p_.low(sp_[static_cast<std::size_t>(i)]);
  if (!(part > 0.0)) return 0.0;
  return std::exp(log_shift_p_ - tilt_ * kd + std::log(part)) * (1.0 - 8.0 * kU);
}

double ComposedPld::tail_q_upper(double y) const {
  if (!lower_) return 1.0;  // the labels were not composed: only the trivial bound
  if (sq_.empty()) return 0.0;
  const double d = discretization_;
  const long n = static_cast<long>(size_);
  const long i = static_cast<long>(std::ceil(y / d)) - cells_start_;
  const double total = total_q_;
  if (i <= 0) return total;  // below the window: everything may count
  const long at = std::min(i, n - 1);
  const double kd = static_cast<double>(cells_start_ + at) * d;
  // Above the window only the Chernoff tail remains (weights e^{-(tilt+1)(K - top)D} <= 1).
  const double part = bounds_q_.high(i < n ? sq_[static_cast<std::size_t>(at)] : 0.0);
  if (!(part > 0.0)) return 0.0;
  const double value = std::exp(log_shift_q_ - (tilt_ + 1.0) * kd + std::log(part)) * (1.0 + 8.0 * kU);
  return std::min(value, total);
}

// The first label sum i (searched where both entries stand above their round-off) whose
// per-entry likelihood ratio P_K / Q_K reaches e^eps: the best threshold test is near it.
long ComposedPld::crossing(double epsilon) const {
  const double d = discretization_;
  const long n = static_cast<long>(size_);
  const double rp = std::exp(-tilt_ * d), rq = std::exp(-(tilt_ + 1.0) * d);
  // P_K >= e^eps Q_K  <=>  log c^P_K - log c^Q_K >= eps + log_shift_q - log_shift_p - K D.
  const double offset = epsilon + log_shift_q_ - log_shift_p_;
  auto entry = [&](const CachedVector<double>& s, double r, long i) {
    return s[static_cast<std::size_t>(i)] - (i + 1 < n ? r * s[static_cast<std::size_t>(i + 1)] : 0.0);
  };
  auto p_wins = [&](long i) {
    const double cp = entry(sp_, rp, i), cq = entry(sq_, rq, i);
    if (!(cp > 0.0)) return false;
    if (!(cq > 0.0)) return true;
    const double kd = static_cast<double>(cells_start_ + i) * d;
    return std::log(cp) - std::log(cq) >= offset - kd;
  };
  // The per-entry likelihood ratio increases with K: bisect.
  long lo = reliable_low_, hi = reliable_high_;
  if (p_wins(lo)) {
    hi = lo;
  } else if (p_wins(hi)) {
    while (hi - lo > 1) {
      const long mid = lo + (hi - lo) / 2;
      if (p_wins(mid)) {
        hi = mid;
      } else {
        lo = mid;
      }
    }
  }
  return hi;
}

// Lower bound: max over thresholds j of P(K >= j) - e^eps Q(K >= j), with the
// P side taken low and the Q side high.
// The best value(i) over the threshold tests for epsilon e. The test is best at the crossing.
// Round-off can move the computed crossing by a few entries, and labels left empty (a coarse
// partition) break the monotonicity the search relies on; the label sum tracks the loss
// (P_K / Q_K ~ e^{K D}), so the crossing is also near K = e / D. Climb to the local maximum
// from both starting points (and from a scan of long windows); where none finds a positive
// test, from the best of a sparse scan over the reliable entries and the two, or (exhaustive:
// no finite upper answer to start from, e.g. an optimistic PLD alone) every test, once.
template <class F>
double ComposedPld::best_test(F value, double e, bool exhaustive) const {
  const long n = static_cast<long>(size_);
  const long hi = crossing(e);
  const long guess = std::clamp(static_cast<long>(std::ceil(e / discretization_)) - cells_start_, 0L, n - 1);
  double best = std::max(climb(value, hi, n), climb(value, guess, n));
  if (n >= kScanFrom) best = std::max(best, climb(value, scan(value, 0, n - 1), n));
  if (!(best > 0.0)) {
    if (exhaustive) {
      for (long i = 0; i < n; ++i) best = std::max(best, value(i));
    } else {
      const long from = std::min({guess, hi, reliable_low_}), to = std::max({guess, hi, reliable_high_});
      best = std::max(best, climb(value, scan(value, from, to), n));
    }
  }
  return best;
}

// The shared labels' threshold test at entry i (step.hpp). With Q~_j = Q_j (1 + rho_j),
// |rho_j| <= eta_j, and own_mid_j = l_j + N_j, |N_j| <= nu_j, the computed
// X = P~(A) - e^eps Q~(A) = E_Q[1_A prod_t (1 + rho_t) (e^{L+N} - e^eps)] (P~ low and Q~ high
// for the transforms' errors, as for any labels) differs from the true test
// Y = E_Q[1_A (e^L - e^eps)] by
//   E_Q[1_A (prod (1 + rho_t) - 1)(e^{L+N} - e^eps)] + E_Q[1_A e^L (e^N - 1)].
// Two bounds on that:
//  (0) gamma (e^{nu_T} P(A) + e^eps Q(A)) + kappa P(A): gamma = (1 + eta_max)^T - 1,
//      kappa = e^{nu_T} - 1 (the largest errors);
//  (1) telescoping prod - 1 = sum_t rho_t prod_{s<t} (1 + rho_s), and conditioning on step t's
//      label j: E_Q[|e^L - e^eps| | j] <= e^{l_j} E_Q|e^{L_rest} - 1| + |e^{l_j} - e^eps|
//      <= e^{l_j} 2 TV + |e^{l_j} - e^eps| (TV of the other steps at most the whole one's, at
//      most delta_u(0)), so the first part is at most
//        (1 + gamma) [(kappa_w + 2 TV) W_p + W_pq + (e^eps - 1) W_q]      (eps >= 0)
//      with W_p = sum_t sum_j eta_j P_j, W_pq = sum_t sum_j eta_j |P_j - Q_j|,
//      W_q = sum_t sum_j eta_j Q_j (the steps' mid_weights) and
//      kappa_w = e^{nu_max} prod_t (1 + sum_j P_j (e^{nu_j} - 1)) - 1 (E_Q[e^L |e^N - 1| | j] is at
//      most e^{l_j} kappa_w: step t's own error at most nu_max, the others' averaged under P); the
//      second part is at most E_P[e^{|N|}] - 1 <= prod_t (1 + sum_j P_j (e^{nu_j} - 1)) - 1 =
//      kappa_n (or kappa P(A)).
// (1) is the one that pays where eps is tiny: the test compares masses near 1/2 and the
// weighted errors meet only TV and eps. Each is A - e^eps B; *a and *b receive the pair of
// form `form`, false where it does not apply.
bool ComposedPld::shared_test(long i, double epsilon, int form, double* a, double* b, double* scale) const {
  const double d = discretization_;
  const double kd = static_cast<double>(cells_start_ + i) * d;
  const double sp = sp2_[static_cast<std::size_t>(i)], sq = sq2_[static_cast<std::size_t>(i)];
  const double log_p = log_shift_p2_ - tilt_ * kd, log_q = log_shift_q2_ - (tilt_ + 1.0) * kd;
  // In linear space, so only where nothing the test subtracts can underflow (a Q~ or P-charge
  // rounded to 0 would raise it) and e^eps is a double; elsewhere the interval labels' tests,
  // taken in log space, stand alone.
  const double log_p_up = log_p + std::log(bounds_p2_.high(sp) * shared_up_p_);
  const double log_q_tilde = log_q + std::log(bounds_q2_.high(sq));
  if (!(epsilon <= 700.0) || log_p_up > 700.0 || log_q_tilde > 700.0 || log_p_up < -700.0 || log_q_tilde < -700.0) {
    return false;
  }
  const double sp_low = bounds_p2_.low(sp);
  const double p_low = sp_low > 0.0 ? std::exp(log_p + std::log(sp_low)) : 0.0;
  const double p_up = std::exp(log_p_up);
  const double q_tilde = std::exp(log_q_tilde);
  const double q_up = q_tilde * shared_up_q_;
  const double gamma = shared_gamma_, kappa = shared_kappa_;
  double charges = gamma * (2.0 + tv_upper_) + (1.0 + gamma) * (shared_w_p_ * 3.0 + shared_w_pq_ + shared_w_q_);
  if (form == 2) {
    // The errors by their concentration (concentration.hpp): P(A) >= f_p (P~(A) - c_p),
    // Q(A) <= f_q Q~(A) + c_q, less the deviations' e^{-700} terms (charge_a).
    const Concentration& c = concentration_;
    if (!c.ok) return false;
    *a = c.factor_p * (p_low - c.charge_p) + any_infinity_lower_ - c.charge_a;
    *b = c.factor_q * q_tilde + c.charge_q;
    charges = c.charge_p + c.charge_q + c.charge_a;
  } else if (form == 0) {
    *a = p_low + any_infinity_lower_ - (gamma * (1.0 + kappa) + kappa) * p_up;
    *b = q_tilde + gamma * q_up;
  } else {
    if (epsilon < 0.0) return false;
    const double grow = 1.0 + gamma;
    const double second = std::min(shared_kappa_n_, kappa * p_up);
    *a = p_low + any_infinity_lower_ - second -
         grow * ((shared_kappa_w_ + 2.0 * tv_upper_) * shared_w_p_ + shared_w_pq_ - shared_w_q_);
    *b = q_tilde + grow * shared_w_q_;
  }
  // Rounding: each exponential above errs by ulps of its exponent's magnitude (relative), the
  // sums by a few u of their terms.
  const double magnitude = std::fabs(log_p) + std::fabs(log_q) +
                           std::fabs(std::log(std::max(sp + bounds_p2_.err, 1e-300))) +
                           std::fabs(std::log(std::max(sq + bounds_q2_.err, 1e-300))) + std::fabs(log_rounding2_) + 8.0;
  *scale = 16.0 * kU * magnitude * (p_low + p_up + any_infinity_lower_ + charges);
  *scale += 16.0 * kU * magnitude * std::exp(epsilon) * (q_tilde + q_up + charges);
  return true;
}

double ComposedPld::lower_bound(double epsilon) const {
  if (sp_.empty()) return any_infinity_lower_;
  const double shared = shared_ ? shared_lower_bound(epsilon) : 0.0;
  const double d = discretization_;
  const double log_infinity = any_infinity_lower_ > 0.0 ? std::log(any_infinity_lower_) : kNegInf;
  // P(K >= j) - e^eps Q(K >= j) at j = cells_start + i (0 if negative), in log space.
  auto value_at = [&](long i) {
    const double kd = static_cast<double>(cells_start_ + i) * d;
    const double p_part = bounds_p_.low(sp_[static_cast<std::size_t>(i)]);
    const double log_p_finite = p_part > 0.0 ? log_shift_p_ - tilt_ * kd + std::log(p_part) : kNegInf;
    const double log_p = log_add(log_p_finite, log_infinity);
    if (log_p == kNegInf) return 0.0;
    const double q_part = bounds_q_.high(sq_[static_cast<std::size_t>(i)]);
    const double log_q = epsilon + log_shift_q_ - (tilt_ + 1.0) * kd + std::log(q_part);
    // P (1 - e^x), x = log_q - log_p. x errs by at most 32 u times the magnitudes summed
    // into the two logs, and 1 - e^x then by that much over 1 - e^x (relative): taken off,
    // so a test whose P and e^eps Q agree to more digits than the logs carry gives 0. (At
    // tiny rates they agree to 8-10 digits where epsilon ~ 1e-7: those tests are still
    // resolved, and a flat six-digit cut-off had left such lower bounds at 0.)
    const double x = log_q - log_p;
    if (!(x < 0.0)) return 0.0;
    const double magnitude = std::fabs(log_shift_p_) + std::fabs(log_shift_q_) + (2.0 * tilt_ + 1.0) * std::fabs(kd) +
                             std::fabs(epsilon) + std::fabs(log_p) + std::fabs(log_q) + 8.0;
    const double shrink = 64.0 * kU * magnitude / -std::expm1(x);
    return std::exp(log_p + log1mexp(x)) * (1.0 - 8.0 * kU) * std::max(1.0 - shrink, 0.0);
  };
  const double best = std::max(best_test(value_at, epsilon, false), 0.0);
  return std::min(std::max({best, shared, any_infinity_lower_}), 1.0);
}

// The best shared-label test at epsilon (every form of shared_test at each entry).
double ComposedPld::shared_lower_bound(double epsilon) const {
  if (!(epsilon <= 700.0)) return 0.0;  // (shared_test: e^eps must be a double)
  const double grow = std::exp(epsilon);
  auto value_at = [&](long i) {
    double best = 0.0;
    for (int form = 0; form < 3; ++form) {
      double a = 0.0, b = 0.0, scale = 0.0;
      if (!shared_test(i, epsilon, form, &a, &b, &scale)) continue;
      best = std::max(best, a - grow * b - scale);
    }
    return best;
  };
  return std::min(std::max(best_test(value_at, epsilon, false), any_infinity_lower_), 1.0);
}

// epsilon_lower from the shared labels.
double ComposedPld::shared_epsilon_lower(double delta, double near) const {
  // eps_j = log(A - delta) - log B of each form (the second only where that is >= 0, as its
  // charge assumed), less the rounding: the pieces err by `scale` in all (at eps), amplified
  // by 1 / (A - delta); evaluated at the answer's e^eps by a second pass.
  auto epsilon_at = [&](long i) {
    double best = kNegInf;
    for (int form = 0; form < 3; ++form) {
      double a = 0.0, b = 0.0, scale = 0.0;
      if (!shared_test(i, 0.0, form, &a, &b, &scale)) continue;
      if (!(a > delta && b > 0.0)) continue;
      double e = std::log(a - delta) - std::log(b);
      if ((!(e > 0.0) && form == 1) || !(e <= 700.0)) continue;
      if (!shared_test(i, std::max(e, 0.0), form, &a, &b, &scale)) continue;
      if (!(a - scale > delta)) continue;
      e = std::log(a - scale - delta) - std::log(b) - 64.0 * kU * (std::fabs(e) + 8.0);
      if (!(e >= 0.0) && form == 1) continue;
      best = std::max(best, e);
    }
    return best;
  };
  return std::max(best_test(epsilon_at, std::isfinite(near) ? std::max(near, 0.0) : 0.0, true), 0.0);
}

// The largest epsilon that the threshold tests certify below epsilon(delta):
// P(K >= j) - e^eps Q(K >= j) > delta for eps < eps_j = log(P(K >= j) - delta) - log Q(K >= j)
// (P taken low, Q high, as in lower_bound), so epsilon(delta) >= eps_j for every j; the
// best j lies near the crossing of the per-entry likelihood ratio with e^eps, searched
// from the tests that lower_bound(near) would use. One pass of a few hundred entries
// instead of a bisection over lower_bound.
double ComposedPld::epsilon_lower(double delta, double near) const {
  if (any_infinity_lower_ > delta) return kInf;
  if (sp_.empty()) return 0.0;
  const double shared = shared_ ? shared_epsilon_lower(delta, near) : 0.0;
  const double d = discretization_;
  const double log_infinity = any_infinity_lower_ > 0.0 ? std::log(any_infinity_lower_) : kNegInf;
  const double log_delta = std::log(delta);
  auto epsilon_at = [&](long i) {
    const double kd = static_cast<double>(cells_start_ + i) * d;
    const double p_part = bounds_p_.low(sp_[static_cast<std::size_t>(i)]);
    const double log_p_finite = p_part > 0.0 ? log_shift_p_ - tilt_ * kd + std::log(p_part) : kNegInf;
    const double log_p = log_add(log_p_finite, log_infinity);
    // log(P - delta) = log_p + log1mexp(x), x = log_delta - log_p (the rounding of x, amplified
    // by 1 / (1 - e^x), is in the margin below).
    const double x = log_delta - log_p;
    if (!(x < 0.0)) return kNegInf;
    const double q_part = bounds_q_.high(sq_[static_cast<std::size_t>(i)]);
    if (!(q_part > 0.0)) return kNegInf;  // cannot happen (the error is > 0); no test then
    const double log_q = log_shift_q_ - (tilt_ + 1.0) * kd + std::log(q_part);
    // Each log above errs by a few ulps of the magnitudes summed (taken off), and x's error
    // reaches log1mexp(x) multiplied by at most 1 / (1 - e^x). The margin is twice what
    // lower_bound takes off delta for the same test, so lower_bound(eps_j) > delta still.
    const double magnitude = std::fabs(log_shift_p_) + std::fabs(log_shift_q_) + (2.0 * tilt_ + 1.0) * std::fabs(kd) +
                             std::fabs(log_p) + std::fabs(log_q) + std::fabs(log_delta) + 8.0;
    const double margin = 128.0 * kU * magnitude * (1.0 + 1.0 / -std::expm1(x));
    return log_p + log1mexp(x) - log_q - margin;
  };
  // Start where lower_bound(e) would (see best_test).
  const double best = best_test(epsilon_at, std::isfinite(near) ? std::max(near, 0.0) : 0.0, true);
  return std::max({best, shared, 0.0});
}

void ComposedPld::delta_bounds(double epsilon, double* lower, double* upper) const {
  if (std::isnan(epsilon)) fail("epsilon", "a number", epsilon);
  if (empty_) {  // nothing composed
    *lower = 0.0;
    *upper = 0.0;
    return;
  }
  *upper = upper_bound(epsilon);
  *lower = lower_bound(epsilon);
}


void ComposedPld::epsilon_bounds(double delta, double* lower, double* upper, bool* below_window) const {
  if (!(delta > 0.0 && delta < 1.0)) fail("delta", "in (0, 1)", delta);
  *below_window = false;
  if (empty_) {
    *lower = *upper = 0.0;
    return;
  }
  auto up = [&](double e) { return upper_bound(e); };
  const double d = discretization_;
  const double start = std::max(0.0, window_low() + 2.0 * d);
  const double stop = window_high() + 1.0;
  // Upper bound: the smallest eps with upper(eps) <= delta.
  if (up(start) <= delta) {
    *upper = start;
    *below_window = start > 0.0;
  } else if (up(stop) > delta) {
    *upper = kInf;  // this window cannot certify delta
  } else {
    *upper = detail::bisect([&](double e) { return up(e) <= delta; }, start, stop, false);
  }
  // Lower bound: directly from the threshold tests near the upper answer.
  *lower = std::min(epsilon_lower(delta, std::isfinite(*upper) ? *upper : stop), *upper);
}

namespace {

// compose_block also composes at tilt 0 where tilt times the block's window exceeds this: the
// entries' round-off, charged in tilted units, grows by up to e^{tilt window} untilted.
constexpr double kFlatCompanion = 8.0;

// The window of a block: entries [start, start + size) of the lattice.
struct BlockWindow {
  long start = 0;
  std::size_t size = 0;
  bool windowed = false;  // tails were cut: e^{log_tail} of tilted mass per side and sequence
};

// A window holding the tilted Chernoff window of each of `seqs` composed `count` times
// (and the loss `extra_low` at its low end), or their whole support where that is not
// much longer (then nothing is cut and nothing wraps around).
BlockWindow block_window(const std::vector<const Tilted*>& seqs, double count, double d, double log_tail,
                         double extra_low, std::size_t max_size) {
  const std::vector<double> counts{count};
  double low = kInf, high = kNegInf, full_low = kInf, full_high = kNegInf;
  bool ok = true;
  for (const Tilted* t : seqs) {
    ok = ok && chernoff_window({t}, counts, d, log_tail, &low, &high);
    double a = 0.0, b = 0.0;
    full_support({t}, counts, &a, &b);
    full_low = std::min(full_low, a);
    full_high = std::max(full_high, b);
  }
  low = std::min(low, extra_low);
  BlockWindow w;
  long last = 0;
  if (!ok || !(low < kInf) || prefer_full(full_high - full_low, (high - low) / d)) {
    w.start = static_cast<long>(full_low);
    last = static_cast<long>(full_high);
  } else {
    w.start = static_cast<long>(std::floor(low / d));
    last = static_cast<long>(std::ceil(high / d));
    w.windowed = true;
  }
  const double span = static_cast<double>(last - w.start) + 2.0;
  w.size = 2;
  while (static_cast<double>(w.size) < span && w.size <= max_size) w.size <<= 1;
  if (w.size > max_size) {
    throw std::invalid_argument("the composed block needs an FFT larger than max_size " + std::to_string(max_size) +
                                " at discretization " + format_value(d) + " (its window spans " +
                                std::to_string(static_cast<long long>(std::ceil(span))) +
                                " points); increase discretization");
  }
  return w;
}

// `seq` composed `count` times on the window: the tilted entries and a bound on every
// entry's round-off (power_window's per-entry bound, plus the steps' absolute rounding).
CachedVector<double> block_entries(const Tilted& seq, double count, const BlockWindow& w, Workspace& ws,
                                   double* error) {
  const std::shared_ptr<const fft::RealPlan> held_plan = fft::real_plan(w.size);
  const fft::RealPlan& plan = *held_plan;
  CachedVector<double> c;
  double norm_error = 0.0;
  *error = 0.0;
  power_window({&seq}, {count}, plan, w.start, 0, ws, c, &norm_error, nullptr, error);
  *error += count * seq.absolute_rounding * std::exp(count * seq.max_rounding) * (1.0 + 1e-6);
  return c;
}

// log(part) + shift - slope_kd + rounding, rounded up (or down): every term's rounding charged.
double untilt(double part, double shift, double slope_kd, double rounding, bool up) {
  const double lp = std::log(part);
  const double value = lp + shift - slope_kd + rounding;
  const double margin = 8.0 * kU * (std::fabs(lp) + std::fabs(shift) + std::fabs(slope_kd) + std::fabs(rounding) + 1.0);
  return up ? value + margin : value - margin;
}

}  // namespace

StepPmf compose_block(const StepPmf& step, double count, double tilt, std::size_t max_size, double log_window_tail) {
  require_nonnegative_finite("tilt", tilt);
  if (!(count >= 1.0 && count == std::floor(count) && count < 9.0e15)) fail("count", "an integer >= 1", count);
  if (!(log_window_tail <= -25.0 && log_window_tail >= -700.0)) fail("log_window_tail", "in [-700, -25]", log_window_tail);
  require_positive_finite("discretization", step.discretization);
  require_no_nan(step);
  if (count == 1.0) return step;
  const double d = step.discretization;
  StepPmf out;
  out.discretization = d;
  out.has_upper = step.has_upper;
  out.loss_slack = count * step.loss_slack * (1.0 + 4.0 * kU);
  out.infinity_upper = std::min(-std::expm1(count * std::log1p(-std::min(step.infinity_upper, 1.0))) * (1.0 + 16.0 * kU), 1.0);
  out.infinity_lower = std::max(-std::expm1(count * std::log1p(-std::min(step.infinity_lower, 1.0))) * (1.0 - 16.0 * kU), 0.0);
  PooledWorkspace pooled;
  Workspace& ws = *pooled;
  const double tail = std::exp(log_window_tail);

  // The tilts to compose at: the query's, and 0 where the block's window is wide against 1 / tilt
  // (there the charges untilted far below the centre would swamp the masses).
  std::vector<double> tilts{tilt};
  const auto add_flat = [&](const BlockWindow& w) {
    if (tilt > 0.0 && tilts.size() == 1 && tilt * static_cast<double>(w.size) * d > kFlatCompanion) tilts.push_back(0.0);
  };

  // Upper masses: each entry the smallest of its certified bounds over the tilts.
  std::vector<Tilted> u{tilt_sequence(step.log_upper, step.upper_low, tilt, d)};
  if (step.has_upper && !u.front().empty) {
    // The untilted lower tail sets the window's low end: the mass below it is moved up to
    // the window's first entry, and only an untilted bound keeps that small.
    const Tilted flat = tilt_sequence(step.log_upper, step.upper_low, 0.0, d);
    double flat_low = kInf, flat_high = kNegInf;
    const bool flat_ok = chernoff_window({&flat}, {count}, d, log_window_tail, &flat_low, &flat_high);
    const BlockWindow w = block_window({&u.front(), &flat}, count, d, log_window_tail, flat_ok ? flat_low : kInf,
                                       max_size);
    if (w.windowed && !flat_ok) {
      throw std::invalid_argument("the composed block has no finite lower tail bound; increase discretization");
    }
    add_flat(w);
    if (tilts.size() > 1) u.push_back(flat);
    const double alias = w.windowed ? 2.0 * tail : 0.0;
    out.upper_low = w.start;
    out.log_upper.assign(w.size, kInf);
    double log_above = kInf;
    const double top = static_cast<double>(w.start + static_cast<long>(w.size)) * d;
    for (std::size_t k = 0; k < tilts.size(); ++k) {
      double error = 0.0;
      const CachedVector<double> c = block_entries(u[k], count, w, ws, &error);
      const double rounding = count * u[k].max_rounding;
      const double shift = count * u[k].log_norm;
      for (std::size_t i = 0; i < w.size; ++i) {
        const double part = (c[i] + error + alias) * (1.0 + 4.0 * kU);
        const double kd = static_cast<double>(w.start + static_cast<long>(i)) * d;
        const double v = part > 0.0 ? untilt(part, shift, tilts[k] * kd, rounding, true) : kNegInf;
        out.log_upper[i] = std::min(out.log_upper[i], v);
      }
      // Above the window: at most e^{log_tail} of this tilt's composition (the computed
      // entries'; the true ones differ by their relative rounding, a factor, and the small
      // ones' absolute rounding, added), whose untilting factor e^{-tilt K D} is largest at
      // the first loss past the window.
      if (w.windowed) {
        const double above = tail + count * u[k].absolute_rounding * 1.01;
        log_above = std::min(log_above, untilt(above, shift, tilts[k] * top, rounding, true));
      }
    }
    if (w.windowed) {
      // Below the window: at most e^{log_tail} of the untilted, normalised composition.
      const double below = tail + count * flat.absolute_rounding * 1.01;
      const double log_below = count * flat.log_norm + std::log(below);
      const double margin = 8.0 * kU * (std::fabs(std::log(below)) + std::fabs(count * flat.log_norm) + 1.0) +
                            count * flat.max_rounding;
      out.log_upper[0] = log_add_directed(out.log_upper[0], log_below + margin, +1);
      out.infinity_upper = std::min(out.infinity_upper + std::exp(log_above) * (1.0 + 4.0 * kU), 1.0);
    }
  }

  // Labels on one window for every kind and tilt: P the largest lower bound, Q the smallest upper.
  std::vector<Tilted> p{tilt_sequence(step.log_p, step.label_low, tilt, d)};
  std::vector<Tilted> q{tilt_sequence(step.log_q, step.label_low, tilt + 1.0, d)};
  if (!p.front().empty && !q.front().empty) {
    const Tilted flat_p = tilt_sequence(step.log_p, step.label_low, 0.0, d);
    const Tilted flat_q = tilt_sequence(step.log_q, step.label_low, 1.0, d);
    const BlockWindow w = block_window({&p.front(), &q.front(), &flat_p, &flat_q}, count, d, log_window_tail, kInf,
                                       max_size);
    add_flat(w);
    if (tilts.size() > 1) {
      p.push_back(flat_p);
      q.push_back(flat_q);
    }
    const double alias = w.windowed ? 2.0 * tail : 0.0;
    out.label_low = w.start;
    out.log_p.assign(w.size, kNegInf);
    out.log_q.assign(w.size, kInf);
    for (std::size_t k = 0; k < tilts.size(); ++k) {
      double error_p = 0.0, error_q = 0.0;
      const CachedVector<double> cp = block_entries(p[k], count, w, ws, &error_p);
      const CachedVector<double> cq = block_entries(q[k], count, w, ws, &error_q);
      const double rounding = count * std::max(p[k].max_rounding, q[k].max_rounding);
      const double shift_p = count * p[k].log_norm, shift_q = count * q[k].log_norm;
      for (std::size_t i = 0; i < w.size; ++i) {
        const double kd = static_cast<double>(w.start + static_cast<long>(i)) * d;
        const double low = (cp[i] - error_p - alias) * (1.0 - 4.0 * kU);
        if (low > 0.0) out.log_p[i] = std::max(out.log_p[i], untilt(low, shift_p, tilts[k] * kd, -rounding, false));
        const double high = (cq[i] + error_q + alias) * (1.0 + 4.0 * kU);
        out.log_q[i] = std::min(out.log_q[i], untilt(high, shift_q, (tilts[k] + 1.0) * kd, rounding, true));
      }
    }
  }
  summarise(out);
  return out;
}

}  // namespace dpacct::pld

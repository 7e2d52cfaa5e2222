#include "dpacct/pld/one_rare.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <stdexcept>
#include <string>
#include <tuple>
#include <utility>

#include "dpacct/check.hpp"
#include "dpacct/logmath.hpp"
#include "dpacct/pld/split.hpp"

namespace dpacct::pld {

namespace {

constexpr double kU = kUnit;
constexpr double kWindowTail = -40.0;  // G's windows (see the constructor)

// A sorted list of (loss, log-mass) point masses, merged where two share a loss.
struct Points {
  std::vector<double> loss, log_mass;
  void add(double l, double v) {
    if (v == kNegInf) return;
    if (!loss.empty() && loss.back() == l) {
      log_mass.back() = log_add_directed(log_mass.back(), v, +1);  // (upper masses: rounded up)
    } else {
      loss.push_back(l);
      log_mass.push_back(v);
    }
  }
};

// The cells between consecutive (loss, x) edges, walked left to right: their connect-the-dots
// point masses go to `points`, their labels to `rare`.
void walk_cells(const MonotonePair& pair, const std::vector<std::pair<double, double>>& edges, Points& points,
                RareCells& rare) {
  if (edges.size() < 2) return;
  CellWalk walk(pair, edges.front().second);
  double x_prev = edges.front().second, a = edges.front().first;
  for (std::size_t i = 1; i < edges.size(); ++i) {
    const double b = edges[i].first, x = edges[i].second;
    // An empty cell (the inverse loss rounded onto its neighbour) joins the next one, whose
    // losses then start at the last edge walked to (a).
    if (!(x > x_prev)) continue;
    Mass pm{}, qm{}, own_loss_interval{};
    walk.next(x, &pm, &qm, &own_loss_interval);
    x_prev = x;
    const double cell_low = a;
    a = b;
    if (pm.hi == kNegInf) continue;
    const double fraction = spread_fraction(own_loss_interval, cell_low, b - cell_low);
    if (fraction > 0.0) points.add(cell_low, add_log_directed(pm.hi, std::log(fraction), +1));
    if (fraction < 1.0) points.add(b, add_log_directed(pm.hi, std::log1p(-fraction), +1));
    if (pm.lo > kNegInf) {
      const double own = 0.5 * (own_loss_interval.lo + own_loss_interval.hi);
      rare.label.push_back(std::isfinite(own) ? std::clamp(own, cell_low, b) : b);
      rare.log_p.push_back(pm.lo);
      rare.log_q.push_back(qm.hi);
    }
  }
}

// Losses from `start` (|start| > 0) growing by (1 + growth) while they stay strictly inside
// `limit` (same sign), at most max_cells of them.
std::vector<double> geometric(double start, double limit, double growth, std::size_t max_cells) {
  std::vector<double> out;
  for (double l = start; std::fabs(l) < std::fabs(limit); l *= 1.0 + growth) {
    out.push_back(l);
    if (out.size() > max_cells) {
      throw std::invalid_argument("the rare part would need more than " + std::to_string(max_cells) +
                                  " cells; increase the growth or the band");
    }
  }
  return out;
}

double sum_error(std::size_t n) { return 2.0 * kU * (static_cast<double>(n) + 4.0); }

// How many entries of the sorted v are <= x, and < x.
std::size_t count_at_most(const std::vector<double>& v, double x) {
  return static_cast<std::size_t>(std::upper_bound(v.begin(), v.end(), x) - v.begin());
}
std::size_t count_below(const std::vector<double>& v, double x) {
  return static_cast<std::size_t>(std::lower_bound(v.begin(), v.end(), x) - v.begin());
}

}  // namespace

OneRareStep discretize_one_rare(const MonotonePair& pair, double d, long band_low, long band_high, double growth,
                                double log_tail, std::size_t max_cells) {
  require_positive_finite("discretization", d);
  if (band_low < 1 || band_high < 1) throw std::invalid_argument("the band indices must be >= 1");
  if (!(growth > 0.0 && growth <= 1.0)) fail("growth", "in (0, 1]", growth);
  // The tail cut and the band's top edge exactly as discretize_split computes them.
  const ClampRange range = clamp_range(pair, log_tail);
  const double x_large = range.x_large, loss_low = range.loss_low, loss_high = range.loss_high;
  const auto k_low = static_cast<long>(std::floor(loss_low / d));
  const auto k_high = static_cast<long>(std::floor(loss_high / d));
  const long b1 = std::max(-band_low, k_low), b2 = std::min(band_high - 1, k_high);
  if (b1 > b2) throw std::invalid_argument("the band holds no loss of this step; choose a wider band");

  OneRareStep out;
  out.band = discretize_split(pair, d, 1, band_high, log_tail, max_cells, band_low).small;
  RareCells& rare = out.rare;
  Points points;
  if (b2 < k_high) {  // losses above tau: edges tau, tau (1 + growth), ..., loss_high
    const double tau = static_cast<double>(b2 + 1) * d;  // the band's own edge, computed as it does
    const std::vector<double> ls = geometric(tau * (1.0 + growth), loss_high, growth, max_cells);
    std::vector<std::pair<double, double>> edges{{tau, pair.x_of(tau)}};
    for (const double l : ls) edges.push_back({l, pair.x_of(l)});
    edges.push_back({loss_high, x_large});
    walk_cells(pair, edges, points, rare);
  }
  if (!std::isinf(x_large)) {
    const double tail = pair.edge_p(x_large).log_sf;
    rare.infinity_upper = std::exp(tail + kLogError * (1.0 + std::fabs(tail)));
  }
  rare.loss = std::move(points.loss);
  rare.log_upper = std::move(points.log_mass);
  const std::size_t n = rare.log_upper.size();
  double rare_error = 0.0;
  rare.log_mass_upper = n == 0 ? kNegInf : logsumexp_bounded(rare.log_upper.data(), n, &rare_error);
  if (rare.log_mass_upper > kNegInf) rare.log_mass_upper += rare_error;
  const double largest = std::max(std::fabs(loss_low), std::fabs(loss_high));
  rare.loss_slack = 64.0 * kU * (1.0 + largest) + pair.extra_loss_error();
  return out;
}

OneRareComposedPld::OneRareComposedPld(const OneRareStep& step, double count, double tilt, std::size_t max_size) {
  if (!(count >= 2.0 && count == std::floor(count) && count < 9.0e15)) fail("count", "an integer >= 2", count);
  require_nonnegative_finite("tilt", tilt);
  const StepPmf& band = step.band;
  require_no_nan(band);
  const RareCells& rare = step.rare;
  for (const std::vector<double>* v : {&rare.loss, &rare.log_upper, &rare.label, &rare.log_p, &rare.log_q}) {
    if (std::any_of(v->begin(), v->end(), [](double x) { return std::isnan(x); }) || std::isnan(rare.infinity_upper) ||
        std::isnan(rare.log_mass_upper) || std::isnan(rare.loss_slack)) {
      throw std::runtime_error("internal error in dpacct's PLD composer: a rare cell holds a NaN (please report)");
    }
  }
  d_ = band.discretization;
  if (band.log_upper.empty() || !band.has_upper) {
    throw std::invalid_argument("the band part has no upper discretisation");
  }

  // G = band^(T - 1), tilted and untilted.
  const std::vector<std::pair<const StepPmf*, double>> groups{{&band, count - 1.0}};
  // The windows cut at e^-40 of tilted mass per side rather than e^-25: G's tail at epsilon is
  // small against its tilted mass, which the one big jump of a band loss near tau dominates
  // (sigma=1.08, q=3.7e-8, T=132, delta(5.6e-6): 0.75 % wide at e^-25, 0.15 % at e^-35 and
  // e^-45, on the same FFT size).
  g_tilted_ = std::make_unique<ComposedPld>(groups, tilt, max_size, kWindowTail);
  if (tilt > 0.0) g_flat_ = std::make_unique<ComposedPld>(groups, 0.0, max_size, kWindowTail);
  g_low_ = kInf;
  g_high_ = kNegInf;
  cells_low_ = kInf;
  cells_high_ = kNegInf;
  for (const ComposedPld* g : {g_tilted_.get(), g_flat_.get()}) {
    if (g == nullptr) continue;
    if (g->has_finite_upper()) {
      g_low_ = std::min(g_low_, g->window_low() - g->epsilon_slack());
      g_high_ = std::max(g_high_, g->window_high() + g->epsilon_slack());
    }
    if (g->has_cells()) {
      cells_low_ = std::min(cells_low_, g->cells_low());
      cells_high_ = std::max(cells_high_, g->cells_high());
    }
  }
  if (!(g_low_ < kInf)) g_low_ = g_high_ = 0.0;
  if (!(cells_low_ < kInf)) cells_low_ = cells_high_ = 0.0;
  g_low_ -= d_;
  g_high_ += d_;
  cells_low_ -= d_;
  cells_high_ += d_;

  // Upper atoms: the band's grid masses (weight 1) and T times the rare point masses.
  std::vector<std::pair<double, double>> atoms;  // (loss, log weight)
  for (std::size_t j = 0; j < band.log_upper.size(); ++j) {
    if (band.log_upper[j] == kNegInf) continue;
    atoms.push_back({static_cast<double>(band.upper_low + static_cast<long>(j)) * d_, band.log_upper[j]});
  }
  const double log_t = std::log(count);
  for (std::size_t j = 0; j < rare.loss.size(); ++j) atoms.push_back({rare.loss[j], log_t + rare.log_upper[j]});
  std::sort(atoms.begin(), atoms.end());
  double magnitude = 0.0;
  for (const auto& a : atoms) magnitude = std::max(magnitude, std::fabs(a.second));
  // Each weight exp(v) within 4 u (1 + |v|) of exact, rounded up here once for all.
  const double up = 1.0 + 8.0 * kU * (2.0 + magnitude);
  const std::size_t n = atoms.size();
  loss_u_.resize(n);
  w_u_.resize(n);
  std::vector<double> we(n), reversed(n);
  for (std::size_t i = 0; i < n; ++i) {
    loss_u_[i] = atoms[i].first;
    w_u_[i] = std::exp(atoms[i].second) * up;
    reversed[n - 1 - i] = w_u_[i];
    // (w e^{-l} is used only in subtracted terms: each rounded down.)
    const double v = atoms[i].second - loss_u_[i];
    we[i] = std::exp(v) * (1.0 - 8.0 * kU * (2.0 + std::fabs(v)));
  }
  // Prefix and suffix sums in two levels (detail::suffix_sums), each within stored_error_ of
  // exact: one recursion over n atoms errs by ~u n, and the suffix sums near 1 whose difference
  // is delta(0) lost 0.7 % of it at n = 1.6e6 (sigma=0.331, q=2.75e-8, T=2).
  // (Suffix sums of w, not differences of prefix sums: the tail is tiny.)
  suffix_w_ = detail::suffix_sums(w_u_, 0.0, 1.0);
  suffix_w_.push_back(0.0);
  suffix_we_ = detail::suffix_sums(we, 0.0, 1.0);
  suffix_we_.push_back(0.0);
  const CachedVector<double> prefix_reversed = detail::suffix_sums(reversed, 0.0, 1.0);
  prefix_w_.assign(n + 1, 0.0);
  for (std::size_t i = 1; i <= n; ++i) prefix_w_[i] = prefix_reversed[n - i];

  // Lower atoms: the band's labels (P low, Q high) and T times the rare cells.
  std::vector<std::tuple<double, double, double>> labels;  // (label loss, log P, log Q)
  for (std::size_t j = 0; j < band.log_p.size(); ++j) {
    if (band.log_p[j] == kNegInf) continue;
    labels.emplace_back(static_cast<double>(band.label_low + static_cast<long>(j)) * d_, band.log_p[j], band.log_q[j]);
  }
  for (std::size_t j = 0; j < rare.label.size(); ++j) {
    labels.emplace_back(rare.label[j], log_t + rare.log_p[j], log_t + rare.log_q[j]);
  }
  std::sort(labels.begin(), labels.end());
  double mag_l = 0.0;
  for (const auto& [l, p, q] : labels) mag_l = std::max({mag_l, std::fabs(p), std::isfinite(q) ? std::fabs(q) : 0.0});
  const double rel_l = 8.0 * kU * (2.0 + mag_l);
  const std::size_t m = labels.size();
  label_l_.resize(m);
  p_l_.resize(m);
  q_l_.resize(m);
  for (std::size_t i = 0; i < m; ++i) {
    label_l_[i] = std::get<0>(labels[i]);
    p_l_[i] = std::exp(std::get<1>(labels[i])) * (1.0 - rel_l);
    q_l_[i] = std::exp(std::get<2>(labels[i])) * (1.0 + rel_l);
  }
  suffix_p_ = detail::suffix_sums(p_l_, 0.0, 1.0);
  suffix_p_.push_back(0.0);
  suffix_q_ = detail::suffix_sums(q_l_, 0.0, 1.0);
  suffix_q_.push_back(0.0);
  sum_error_ = sum_error(std::max(n, m));
  stored_error_ = detail::suffix_relative_error(std::max(n, m));
  epsilon_slack_ = std::max(band.loss_slack, rare.loss_slack);
  // The label sum of the T - 1 steps in G lies about (T - 1) (E[loss] - E[label]) from their
  // loss sum (band means; the band's lowest label gathers the moved-up losses, so the sign
  // varies). An estimate: it only centres the search of the lower bound's threshold offset,
  // every offset giving a valid bound. (The search had spanned +-400 cells around 0: at
  // sigma=0.331, q=2.75e-8, T=1e5 the bias is -900 cells, and delta(0)'s lower bound on a
  // band of 32768 cells was 8.1e-6 against 1.58e-4.)
  {
    double w = 0.0, wl = 0.0, p = 0.0, pl = 0.0;
    for (std::size_t j = 0; j < band.log_upper.size(); ++j) {
      if (band.log_upper[j] == kNegInf) continue;
      const double v = std::exp(band.log_upper[j]);
      w += v;
      wl += v * static_cast<double>(band.upper_low + static_cast<long>(j)) * d_;
    }
    for (std::size_t j = 0; j < band.log_p.size(); ++j) {
      if (band.log_p[j] == kNegInf) continue;
      const double v = std::exp(band.log_p[j]);
      p += v;
      pl += v * static_cast<double>(band.label_low + static_cast<long>(j)) * d_;
    }
    const double bias = w > 0.0 && p > 0.0 ? (count - 1.0) * (wl / w - pl / p) : 0.0;
    label_bias_ = std::isfinite(bias) ? bias : 0.0;
  }

  // |R| <= C(T, 2) |r|^2 (|s| + |r|)^(T - 2), and P(some step at +inf) <= 1 - (1 - m_inf)^T.
  double band_error = 0.0;
  const double log_s = logsumexp_bounded(band.log_upper.data(), band.log_upper.size(), &band_error) + band_error;
  const double log_r = rare.log_mass_upper;
  double tail = 0.0;
  if (log_r > kNegInf) {
    const double log_sr = log_add(log_s, log_r);
    const double log_pairs = std::log(count) + std::log(count - 1.0) - std::log(2.0);
    const double log_big = log_pairs + 2.0 * log_r + (count - 2.0) * std::max(log_sr, 0.0);
    tail = std::exp(log_big + 1e-9 * (1.0 + std::fabs(log_big)));
  }
  const double m_inf = std::min(rare.infinity_upper + band.infinity_upper, 1.0);
  const double inf_part = -std::expm1(count * std::log1p(-m_inf)) * (1.0 + 16.0 * kU);
  charged_ = std::min(tail + inf_part, 1.0);
}

std::size_t OneRareComposedPld::fine_size() const {
  std::size_t s = g_tilted_->size();
  if (g_flat_) s = std::max(s, g_flat_->size());
  return s;
}

double OneRareComposedPld::g_upper(double e) const {
  double v = g_tilted_->upper_finite(e);
  if (g_flat_) v = std::min(v, g_flat_->upper_finite(e));
  return v;
}

double OneRareComposedPld::g_p(double y) const {
  double v = g_tilted_->tail_p_lower(y);
  if (g_flat_) v = std::max(v, g_flat_->tail_p_lower(y));
  return v;
}

double OneRareComposedPld::g_q(double y) const {
  double v = g_tilted_->tail_q_upper(y);
  if (g_flat_) v = std::min(v, g_flat_->tail_q_upper(y));
  return v;
}

// sum_a w_a U_G(eps - l_a): atoms with eps - l above G's windows get U_G at the windows' top
// (the true piece decreases in its argument); below them the closed form of upper_finite,
// M_G - e^{eps - l} X_G, summed with the suffix sums; the rest one by one.
double OneRareComposedPld::upper_bound(double epsilon) const {
  const double eps = epsilon - epsilon_slack_;
  const std::size_t n = loss_u_.size();
  const std::size_t ia = count_at_most(loss_u_, eps - g_high_);
  const std::size_t ib = std::max(count_at_most(loss_u_, eps - g_low_), ia);
  double value = 0.0;
  if (ia > 0) value += prefix_w_[ia] * (1.0 + stored_error_) * g_upper(g_high_);
  double middle = 0.0;
  for (std::size_t i = ia; i < ib; ++i) middle += w_u_[i] * g_upper(eps - loss_u_[i]);
  value += middle * (1.0 + sum_error_);
  if (ib < n) {
    // Every G: eps - l - slack_G < window_low_G for these atoms (g_low_ is below all windows).
    const double w = suffix_w_[ib] * (1.0 + stored_error_);
    double best = kInf;
    for (const ComposedPld* g : {g_tilted_.get(), g_flat_.get()}) {
      if (g == nullptr || !g->has_finite_upper()) continue;
      const double total = std::exp(g->log_mass_upper()) * (1.0 + 8.0 * kU);
      double v = total * w;
      const double log_x = g->log_window_sum_lower();
      const double y = suffix_we_[ib] * (1.0 - stored_error_);
      if (log_x > kNegInf && y > 0.0 && std::isfinite(y)) {
        const double arg = eps - g->epsilon_slack() + log_x + std::log(y);
        v -= std::exp(arg - 8.0 * kU * (2.0 + std::fabs(arg)));
      }
      best = std::min(best, std::max(v, 0.0) * (1.0 + 8.0 * kU));
    }
    if (best < kInf) value += best;
  }
  if (std::isnan(value)) return 1.0;
  return std::max(std::min(value + charged_, 1.0), std::numeric_limits<double>::denorm_min());
}

// sum_a max(p_a P_G(K >= y_a) - e^eps q_a Q_G(K >= y_a), 0), y_a = eps - label_a + offset: atoms
// whose y_a lies below every label of G are accepted together (P_G and Q_G are then G's totals),
// those above every label are left out (P_G = 0), the rest one by one.
double OneRareComposedPld::lower_at(double epsilon, double offset) const {
  const std::size_t m = label_l_.size();
  const double shift = epsilon + offset;
  const std::size_t ia = count_at_most(label_l_, shift - cells_high_);
  const std::size_t ib = std::max(count_below(label_l_, shift - cells_low_), ia);
  const double e_eps = std::exp(epsilon) * (1.0 + 4.0 * kU);
  double value = 0.0;
  for (std::size_t i = ia; i < ib; ++i) {
    const double y = shift - label_l_[i];
    const double p = g_p(y);
    if (!(p > 0.0)) continue;
    const double t = p_l_[i] * p * (1.0 - 4.0 * kU) - e_eps * q_l_[i] * g_q(y) * (1.0 + 4.0 * kU);
    if (t > 0.0) value += t;
  }
  value *= 1.0 - sum_error_;
  if (ib < m) {
    const double all = suffix_p_[ib] * (1.0 - stored_error_) * g_p(cells_low_) * (1.0 - 4.0 * kU) -
                       e_eps * suffix_q_[ib] * (1.0 + stored_error_) * g_q(cells_low_) * (1.0 + 4.0 * kU);
    if (all > 0.0) value += all * (1.0 - 4.0 * kU);
  }
  if (!std::isfinite(value)) return 0.0;
  return value;
}

double OneRareComposedPld::lower_bound(double epsilon, double* offset) const {
  const double width = std::clamp(cells_high_ - cells_low_, 4.0 * d_, 400.0 * d_);
  const double coarse = width / 20.0;
  const double fine = std::max(coarse / 8.0, 0.25 * d_);
  double best = 0.0, best_o = *offset;
  auto test = [&](double o) {
    const double v = lower_at(epsilon, o);
    if (v > best) {
      best = v;
      best_o = o;
    }
  };
  for (int j = -20; j <= 20; ++j) test(static_cast<double>(j) * coarse - label_bias_);
  const double around = best > 0.0 ? best_o : -label_bias_;
  for (int j = -8; j <= 8; ++j) test(around + static_cast<double>(j) * fine);
  if (best > 0.0) *offset = best_o;
  return std::min(best, 1.0);
}

void OneRareComposedPld::delta_bounds(double epsilon, double* lower, double* upper) const {
  if (std::isnan(epsilon)) fail("epsilon", "a number", epsilon);
  *upper = upper_bound(epsilon);
  double offset = 0.0;
  *lower = std::min(lower_bound(epsilon, &offset), *upper);
}

void OneRareComposedPld::epsilon_bounds(double delta, double* lower, double* upper) const {
  if (!(delta > 0.0 && delta < 1.0)) fail("delta", "in (0, 1)", delta);
  auto up = [&](double e) { return upper_bound(e); };
  const double top = loss_u_.empty() ? 0.0 : std::max(loss_u_.back(), 0.0);
  const double stop = top + std::max(g_high_, 0.0) + epsilon_slack_ + 1.0;
  // The upper bound first; the lower bound's threshold offset is searched once, at the upper
  // answer (the best offset moves little over the inversion's bracket; every offset gives a
  // valid bound).
  double offset = 0.0;
  bool searched = false;
  auto down = [&](double e) {
    if (!searched) {
      lower_bound(std::isfinite(*upper) ? *upper : stop, &offset);
      searched = true;
    }
    return lower_at(e, offset);
  };
  detail::invert_delta(up, down, delta, stop, 1e-12, lower, upper, detail::kInversionWidth);  // (as in split.cpp)
}

}  // namespace dpacct::pld

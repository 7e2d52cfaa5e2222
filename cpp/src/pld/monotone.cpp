#include "dpacct/pld/monotone.hpp"

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>
#include <utility>

#include "dpacct/check.hpp"
#include "dpacct/logmath.hpp"

namespace dpacct::pld {

namespace {

// The same for the Laplace distribution with location mu and scale b:
// F(x) = e^{(x - mu)/b} / 2 below mu, 1 - e^{-(x - mu)/b} / 2 above.
Edge laplace_edge(double x, double mu, double b) {
  if (x == kNegInf) return {kNegInf, 0.0};
  if (x == kInf) return {0.0, kNegInf};
  const double t = (x - mu) / b;
  if (t <= 0.0) {
    const double c = t - kLn2;
    return {c, log1mexp(c)};
  }
  const double s = -t - kLn2;
  return {log1mexp(s), s};
}

// z with Phi(-z) <= e^{log_tail}: the Chernoff bound Phi(-z) <= e^{-z^2/2} / 2.
double normal_tail_point(double log_tail) { return std::sqrt(std::max(-2.0 * log_tail, 1.0)); }

}  // namespace

// ---------------------------------------------------------------- Gaussian

GaussianPair::GaussianPair(double noise_multiplier) : sigma_(noise_multiplier) {
  require_positive_finite("noise_multiplier", noise_multiplier);
}

// L(x) = log N(x; 1, s^2) / N(x; 0, s^2) = (2x - 1) / (2 s^2).
double GaussianPair::loss(double x) const { return (2.0 * x - 1.0) / (2.0 * sigma_ * sigma_); }
double GaussianPair::x_of(double l) const { return sigma_ * sigma_ * l + 0.5; }
Edge GaussianPair::edge_p(double x) const { return normal_edge((x - 1.0) / sigma_); }
Edge GaussianPair::edge_q(double x) const { return normal_edge(x / sigma_); }
double GaussianPair::loss_inf() const { return kNegInf; }
double GaussianPair::loss_sup() const { return kInf; }
double GaussianPair::clamp_low(double log_tail) const { return -normal_tail_point(log_tail) * sigma_; }
double GaussianPair::clamp_high(double log_tail) const { return 1.0 + normal_tail_point(log_tail) * sigma_; }
double GaussianPair::clamp_high_q(double log_tail) const { return normal_tail_point(log_tail) * sigma_; }
// (Both by quadrature on the cell (xa, xb] itself, so that P and Q describe one partition.)
bool GaussianPair::cell_masses(double xa, double xb, Mass* p, Mass* q, Mass* own) const {
  if (!(normal_cell_mass(xa, xb, 1.0, sigma_, p) && normal_cell_mass(xa, xb, 0.0, sigma_, q))) {
    return false;
  }
  if (own != nullptr) *own = own_loss(*p, *q);
  return true;
}

// (2x - 1) / (2 s s): 2x and 2s are exact; the subtraction, the product s s and the division
// round once each, 3 u/2 relative in all, charged twice over.
double GaussianPair::loss_error(double x, double value) const {
  if (std::isinf(x)) return 0.0;  // the loss is then exactly -inf or +inf
  return 4.0 * kUnit * std::fabs(value) + 1e-300;
}

// ---------------------------------------------------------------- Laplace

LaplacePair::LaplacePair(double scale) : scale_(scale) { require_positive_finite("noise_multiplier", scale); }

// L(x) = (|x| - |x - 1|) / b: -1/b below 0, (2x - 1)/b on [0, 1], 1/b above 1.
double LaplacePair::loss(double x) const { return std::clamp((2.0 * x - 1.0) / scale_, -1.0 / scale_, 1.0 / scale_); }
double LaplacePair::x_of(double l) const { return std::clamp(0.5 * (scale_ * l + 1.0), 0.0, 1.0); }
Edge LaplacePair::edge_p(double x) const { return laplace_edge(x, 1.0, scale_); }
Edge LaplacePair::edge_q(double x) const { return laplace_edge(x, 0.0, scale_); }
double LaplacePair::clamp_low(double) const { return kNegInf; }   // the loss is bounded: no clamp
double LaplacePair::clamp_high(double) const { return kInf; }

// ---------------------------------------------------------------- mixture of Gaussians

MixtureGaussianPair::MixtureGaussianPair(double noise_multiplier, std::vector<double> sensitivities,
                                         std::vector<double> probabilities)
    : sigma_(noise_multiplier), log_w_zero_(kNegInf) {
  require_positive_finite("noise_multiplier", noise_multiplier);
  if (sensitivities.empty() || sensitivities.size() != probabilities.size()) {
    throw std::invalid_argument("sensitivities and probabilities must be non-empty and of the same length");
  }
  double total = 0.0;
  bool any_positive = false;
  c_min_ = kInf;
  for (std::size_t i = 0; i < sensitivities.size(); ++i) {
    const double c = sensitivities[i], w = probabilities[i];
    if (!(c >= 0.0 && std::isfinite(c))) fail("sensitivities", "finite and >= 0", c);
    if (!(w >= 0.0 && w <= 1.0)) fail("probabilities", "in [0, 1]", w);
    total += w;
    if (w == 0.0) continue;
    if (c == 0.0) {
      log_w_zero_ = log_add(log_w_zero_, std::log(w));
      continue;
    }
    any_positive = true;
    c_.push_back(c);
    log_w_.push_back(std::log(w));
    c_min_ = std::min(c_min_, c);
    c_max_ = std::max(c_max_, c);
  }
  if (!(std::fabs(total - 1.0) <= 1e-12)) fail("probabilities", "summing to 1 (within 1e-12)", total);
  if (!any_positive) {
    throw std::invalid_argument("sensitivities must have a positive value with positive probability");
  }
}

// L(x) = log(w_0 + sum_{c_i > 0} w_i exp((c_i x - c_i^2 / 2) / s^2)), convex and increasing.
double MixtureGaussianPair::loss(double x) const {
  const double s2 = sigma_ * sigma_;
  double total = log_w_zero_;
  for (std::size_t i = 0; i < c_.size(); ++i) total = log_add(total, log_w_[i] + (c_[i] * x - 0.5 * c_[i] * c_[i]) / s2);
  return total;
}

// Newton's method from the right: L is convex and increasing, so from a
// point with L(x) >= l the iterates decrease monotonically to the root.
double MixtureGaussianPair::x_of(double l) const {
  const double s2 = sigma_ * sigma_;
  // L(x) >= log w_max-term: start where the largest-sensitivity term alone reaches l.
  std::size_t top = 0;
  for (std::size_t i = 1; i < c_.size(); ++i) {
    if (c_[i] > c_[top]) top = i;
  }
  double x = (s2 * (l - log_w_[top]) + 0.5 * c_[top] * c_[top]) / c_[top];
  for (int iteration = 0; iteration < 200; ++iteration) {
    // L(x) and L'(x) = (sum_i w_i c_i e^{t_i}) / (s^2 sum_i w_i e^{t_i}) together.
    double value = log_w_zero_, slope_log = kNegInf;
    for (std::size_t i = 0; i < c_.size(); ++i) {
      const double t = log_w_[i] + (c_[i] * x - 0.5 * c_[i] * c_[i]) / s2;
      value = log_add(value, t);
      slope_log = log_add(slope_log, t + std::log(c_[i]));
    }
    const double slope = std::exp(slope_log - value) / s2;
    const double step = (value - l) / slope;
    if (!(step > 0.0) || !std::isfinite(step)) break;  // at (or just left of) the root
    const double next = x - step;
    if (next == x) break;
    x = next;
    if (step <= 4.0 * kUnit * (1.0 + std::fabs(x))) break;
  }
  return x;
}

Edge MixtureGaussianPair::edge_p(double x) const {
  if (x == kNegInf) return {kNegInf, 0.0};
  if (x == kInf) return {0.0, kNegInf};
  Edge total{kNegInf, kNegInf};
  if (log_w_zero_ > kNegInf) {
    const Edge e = normal_edge(x / sigma_);
    total = {log_w_zero_ + e.log_cdf, log_w_zero_ + e.log_sf};
  }
  for (std::size_t i = 0; i < c_.size(); ++i) {
    const Edge e = normal_edge((x - c_[i]) / sigma_);
    total = {log_add(total.log_cdf, log_w_[i] + e.log_cdf), log_add(total.log_sf, log_w_[i] + e.log_sf)};
  }
  return total;
}

Edge MixtureGaussianPair::edge_q(double x) const { return normal_edge(x / sigma_); }
double MixtureGaussianPair::loss_inf() const { return log_w_zero_; }  // -inf without a c = 0 component
double MixtureGaussianPair::loss_sup() const { return kInf; }
double MixtureGaussianPair::clamp_low(double log_tail) const { return -normal_tail_point(log_tail) * sigma_; }
double MixtureGaussianPair::clamp_high(double log_tail) const {
  return c_max_ + normal_tail_point(log_tail) * sigma_;
}
double MixtureGaussianPair::clamp_high_q(double log_tail) const { return normal_tail_point(log_tail) * sigma_; }
bool MixtureGaussianPair::cell_masses(double xa, double xb, Mass* p, Mass* q, Mass* own) const {
  if (!normal_cell_mass(xa, xb, 0.0, sigma_, q)) return false;
  // Positive weights: the components' intervals add up (in log space, with a few ulps per term).
  Mass total{kNegInf, kNegInf};
  double magnitudes = 0.0;
  if (log_w_zero_ > kNegInf) {
    total = {log_w_zero_ + q->lo, log_w_zero_ + q->hi};
    magnitudes += std::fabs(log_w_zero_);
  }
  for (std::size_t i = 0; i < c_.size(); ++i) {
    Mass m{};
    if (!normal_cell_mass(xa, xb, c_[i], sigma_, &m)) return false;
    total = {log_add(total.lo, log_w_[i] + m.lo), log_add(total.hi, log_w_[i] + m.hi)};
    magnitudes += std::fabs(log_w_[i]);
  }
  const double margin = 4.0 * kUnit * (static_cast<double>(c_.size()) + 2.0 + magnitudes + std::fabs(total.hi));
  *p = {total.lo - margin, total.hi + margin};
  if (own != nullptr) *own = own_loss(*p, *q);
  return true;
}

// The terms (c x - c^2/2)/s^2 are summed in log space; each errs by a few ulps of its own size.
double MixtureGaussianPair::extra_loss_error() const {
  const double s2 = sigma_ * sigma_;
  const double x = c_max_ + 40.0 * sigma_;
  return 64.0 * kUnit * (c_max_ * x + c_max_ * c_max_) / s2;
}

// ---------------------------------------------------------------- Poisson subsampling

Subsampled::Subsampled(std::shared_ptr<const MonotonePair> base, double sampling_probability, double query_tail)
    : base_(std::move(base)), q_(sampling_probability), query_tail_(query_tail) {
  if (!(q_ > 0.0 && q_ <= 1.0)) fail("sampling_probability", "in (0, 1]", q_);
  if (std::isnan(query_tail) || query_tail > 0.0) fail("query_tail", "a log mass <= 0 (or -inf)", query_tail);
  log_q_ = std::log(q_);
  log_1mq_ = std::log1p(-q_);
}

// log(1 - q + q e^l), accurate near 0 through log1p/expm1.
double Subsampled::lift(double l) const {
  if (q_ == 1.0) return l;
  if (l == kNegInf) return log_1mq_;
  if (l > 700.0) return log_add(log_1mq_, log_q_ + l);
  return std::log1p(q_ * std::expm1(l));
}

double Subsampled::loss(double x) const { return lift(base_->loss(x)); }

// Beyond the query's point, P'(> x) = (1 - q) Q(> x) + q P(> x) <= e^t / 2 + e^t / 2 and
// Q'(> x) = Q(> x) <= e^t / 2 (t = query_tail); the base pair's own point bounds both P and Q
// by e^{log_tail}. (The masses cut are those of the cells, measured by the discretisation and
// charged: the point only decides how far the step reaches.)
double Subsampled::clamp_high(double log_tail) const {
  const double base_point = base_->clamp_high(log_tail);
  if (q_ == 1.0 || query_tail_ == kNegInf) return base_point;
  const double half = query_tail_ - std::log(2.0);
  return std::min(base_point, std::max(base_->clamp_high_q(half), base_->clamp_high(half - log_q_)));
}

double Subsampled::x_of(double l) const {
  if (q_ == 1.0) return base_->x_of(l);
  return base_->x_of(log_sub(l, log_1mq_) - log_q_);
}

Edge Subsampled::edge_p(double x) const {
  const Edge p = base_->edge_p(x);
  if (q_ == 1.0) return p;
  return mix(p, base_->edge_q(x));
}

void Subsampled::edges(double x, Edge* p, Edge* q) const {
  Edge base_p{};
  base_->edges(x, &base_p, q);
  *p = q_ == 1.0 ? base_p : mix(base_p, *q);
}

// The edge of P' = (1 - q) Q + q P from the base pair's edges.
Edge Subsampled::mix(const Edge& p, const Edge& q) const {
  return {log_add(log_1mq_ + q.log_cdf, log_q_ + p.log_cdf), log_add(log_1mq_ + q.log_sf, log_q_ + p.log_sf)};
}

// P' = (1 - q) Q + q P on the cell: a positive combination of the base pair's intervals.
// Its own loss is lift(l) = log(1 - q + q e^l) of the base cell's own loss l: that interval
// is q e^l times as narrow as the ratio of the two mass intervals (~1e-14 wide each), which
// matters where the losses are ~q: the connect-the-dots split is first order in
// (own loss - lower grid point) / D, and at sigma=9.88, q=2.3e-8 (cells of 3e-10) the
// ratio's width had moved each cell's split by ~1e-4 of its mass, 3.6 % of epsilon at T=7.6e6.
bool Subsampled::cell_masses(double xa, double xb, Mass* p, Mass* q, Mass* own) const {
  Mass base_p{}, base_q{}, base_own{};
  if (!base_->cell_masses(xa, xb, &base_p, &base_q, own != nullptr ? &base_own : nullptr)) return false;
  *q = base_q;
  if (q_ == 1.0) {
    *p = base_p;
    if (own != nullptr) *own = base_own;
    return true;
  }
  const double lo = log_add(log_1mq_ + base_q.lo, log_q_ + base_p.lo);
  const double hi = log_add(log_1mq_ + base_q.hi, log_q_ + base_p.hi);
  // log(e^x + e^y) moves by w_x dx + w_y dy (w the terms' shares): each term's own rounding
  // (a few ulps of |log coefficient| + |log mass|) counts by its share. (A flat margin of
  // ulps of |log q| = 17.5 at q = 2.5e-8 had cost every cell 2e-14 of its mass.)
  const double share_q = std::exp(std::min(log_q_ + base_p.hi - hi, 0.0));
  const double share_1mq = std::exp(std::min(log_1mq_ + base_q.hi - hi, 0.0));
  const double margin = 4.0 * kUnit * (4.0 + std::fabs(hi)) +
                        2.0 * kUnit * (share_1mq * (std::fabs(log_1mq_) + std::fabs(base_q.hi)) +
                                       share_q * (std::fabs(log_q_) + std::fabs(base_p.hi)));
  *p = {lo - margin, hi + margin};
  if (own == nullptr) return true;
  // lift is increasing: its value at the upper end rounded up, and the lower end from it by the
  // slope q e^l / (1 - q + q e^l) <= min(1, q e^{l_hi} / (1 - q)) over the (tiny) interval.
  const Mass plain = own_loss(*p, *q);
  const double l_hi = base_own.hi, l_lo = base_own.lo;
  double own_hi = 0.0, y = kNegInf;
  const double err_hi = lift_bounded(l_hi, 0.0, &own_hi, &y);
  if (!(std::isfinite(l_hi) && std::isfinite(l_lo) && err_hi >= 0.0 && std::isfinite(own_hi))) {
    *own = plain;
    return true;
  }
  // (y = q expm1(l_hi) where lift_bounded formed it, else the slope bound 1.)
  const double slope = y == kNegInf ? 1.0 : std::min(1.0, (q_ + y) / (1.0 - q_) * (1.0 + 8.0 * kUnit));
  const double drop = (l_hi - l_lo) * (1.0 + 2.0 * kUnit) * slope * (1.0 + 2.0 * kUnit);
  *own = intersect(plain, Mass{own_hi - err_hi - drop - 2.0 * kUnit * std::fabs(own_hi), own_hi + err_hi});
  return true;
}

// The rounding of lift(l) at the computed base loss l (error e from the base pair). glibc's
// exp, expm1 and log1p are within 1 ulp; 2 u is charged for each.
double Subsampled::loss_error(double x, double /*value*/) const {
  const double l = base_->loss(x);
  const double e = base_->loss_error(x, l);
  if (!(e >= 0.0)) return -1.0;
  double value = 0.0, y = 0.0;  // (value: the same lift(l) as the caller's loss(x))
  return lift_bounded(l, e, &value, &y);
}

double Subsampled::lift_bounded(double l, double e, double* value, double* y) const {
  if (q_ == 1.0 || !(l <= 700.0)) {
    *value = lift(l);
    if (q_ == 1.0) return e;
    if (l == kInf) return 0.0;  // +inf, exactly
    // log_add(log(1 - q), log q + l): the two logs, the sum and the log-add
    return e + 4.0 * kUnit * (std::fabs(log_q_) + std::fabs(l) + std::fabs(log_1mq_) + 2.0);
  }
  if (l == kNegInf) {
    *value = log_1mq_;
    return 2.0 * kUnit * std::fabs(*value);  // log1p(-q): one rounding
  }
  // y = q expm1(l): expm1's and the product's rounding, and the base error carried by the
  // derivative q e^l (at most q e^{l + e} between l and the true base loss).
  *y = q_ * std::expm1(l);
  *value = std::log1p(*y);  // = lift(l)
  const double a = 3.0 * kUnit * std::fabs(*y) + (e > 0.0 ? q_ * std::exp(l + e) * e * (1.0 + 4.0 * kUnit) : 0.0);
  // log1p moves by at most |dy| / (1 + min y) and rounds once.
  const double floor = 1.0 + *y - a;
  if (!(floor > 0.0)) return -1.0;
  return 2.0 * kUnit * std::fabs(*value) + a / floor * (1.0 + 4.0 * kUnit) + 1e-300;
}

double Subsampled::loss_inf() const { return lift(base_->loss_inf()); }
double Subsampled::loss_sup() const { return base_->loss_sup() == kInf ? kInf : lift(base_->loss_sup()); }

// ---------------------------------------------------------------- swapped pair

// Y = -X: P'(Y <= y) = Q(X >= -y) and P'(Y > y) = Q(X < -y) (no atoms).
Edge Swapped::edge_p(double y) const {
  const Edge e = base_->edge_q(-y);
  return {e.log_sf, e.log_cdf};
}

Edge Swapped::edge_q(double y) const {
  const Edge e = base_->edge_p(-y);
  return {e.log_sf, e.log_cdf};
}

void Swapped::edges(double y, Edge* p, Edge* q) const {
  Edge base_p{}, base_q{};
  base_->edges(-y, &base_p, &base_q);
  *p = {base_q.log_sf, base_q.log_cdf};
  *q = {base_p.log_sf, base_p.log_cdf};
}

// ---------------------------------------------------------------- discretisation

SlackMeter::SlackMeter(const MonotonePair& pair, double largest_abs_loss)
    : pair_(pair), tight_(pair.has_loss_error() && largest_abs_loss <= 1.0) {}

void SlackMeter::edge(double x, double g, int side) {
  if (!tight_) return;
  if (!have_last_ || x != last_x_) {
    last_x_ = x;
    last_value_ = std::isinf(x) ? (x < 0.0 ? pair_.loss_inf() : pair_.loss_sup()) : pair_.loss(x);
    last_error_ = pair_.loss_error(x, last_value_);
    have_last_ = true;
  }
  if (!(last_error_ >= 0.0) || !std::isfinite(last_value_)) {  // no bound here: the flat rule
    tight_ = false;
    return;
  }
  // g itself is k * d rounded: within u |g| of the grid point k D.
  const double off = side < 0 ? g - last_value_ : (side > 0 ? last_value_ - g : std::fabs(last_value_ - g));
  const double poke = (std::max(off, 0.0) + last_error_ + kUnit * std::fabs(g)) * (1.0 + 4.0 * kUnit);
  worst_ = std::max(worst_, poke);
}

double SlackMeter::slack() const { return worst_; }

void CellWalk::next(double x_next, Mass* pm, Mass* qm, Mass* own) {
  // Quadrature alone where it is this sharp (nearly always where the pair has it): a CDF
  // difference is no better there (ulps of the CDF against ulps of the mass), and its edges
  // cost about as much again. (At 2e-13 the cells beyond |z| = 7, whose quadrature now runs to
  // |z| = 16 at up to 9e-13, took both: steps of 1.3e6-2.1e6 cells cost 1.6-1.8x as much.)
  constexpr double kSharp = 1e-12;
  Mass p{}, q{}, o{};
  const bool sharp = sharp_own_ && own != nullptr;
  const bool quadrature = pair_.cell_masses(x_prev_, x_next, &p, &q, sharp ? &o : nullptr);
  if (quadrature && p.hi - p.lo <= kSharp && q.hi - q.lo <= kSharp) {
    *pm = p;
    *qm = q;
    if (own != nullptr) *own = sharp ? o : own_loss(p, q);
    have_prev_ = false;
  } else {
    if (!have_prev_) pair_.edges(x_prev_, &p_prev_, &q_prev_);
    Edge p_next{}, q_next{};
    pair_.edges(x_next, &p_next, &q_next);
    *pm = log_interval(p_prev_, p_next);
    *qm = log_interval(q_prev_, q_next);
    if (quadrature) {
      *pm = intersect(*pm, p);
      *qm = intersect(*qm, q);
    }
    if (own != nullptr) *own = quadrature && sharp ? intersect(own_loss(*pm, *qm), o) : own_loss(*pm, *qm);
    p_prev_ = p_next;
    q_prev_ = q_next;
    have_prev_ = true;
  }
  x_prev_ = x_next;
}

namespace {

// The shared labels of step.hpp, collected cell by cell: each label's cells' Q-mass midpoints
// and own-loss midpoints, then per label log_q_mid = log sum Q~_c and
// own_mid = log(sum Q~_c e^{l~_c} / sum Q~_c) = log1p(sum w_c expm1(l~_c)), w_c = Q~_c / sum Q~_c.
// Error bounds, per label j:
//  - eta_j, the relative error of Q~_j against the label's Q-mass: the Q~-weighted mean of its
//    cells' half-widths (each cell's Q~_c within e^{half_c} - 1 of Q_c, midpoint rounding
//    included), over (1 - the largest), plus the rounding of the sum of exponentials;
//  - nu_j, the error of own_mid against log(P_j / Q_j) = log(sum Q_c e^{l_c} / sum Q_c): its
//    cells' largest own-loss half-width (times 1 + the spread below), the weights' error (the
//    normalised weights from Q~ are within a relative 2 eta / (1 - eta) of the true ones,
//    moving the mean of expm1(l) by at most that times its spread over the label, divided by 1
//    + its smallest value), and the rounding of the mean and of log1p.
// The composer needs the largest (mid_error, own_error) and the weighted sums
// sum_j eta_j P_j, sum_j eta_j |P_j - Q_j|, sum_j eta_j Q_j, sum_j P_j expm1(nu_j) (each
// with P_j, Q_j and |P_j - Q_j| taken at upper bounds): far below the largest, since the
// widest cells are the far tails' (quadrature intervals grow like z^2).
// Only on grids finer than kSharpOwnBelow (the subsampled pairs' sharp own losses).
class SharedLabels {
 public:
  SharedLabels(std::size_t labels, bool on) : on_(on), labels_(labels) {
    if (on_) {
      log_q_.assign(labels, kNegInf);
      own_.assign(labels, 0.0);
      eta_.assign(labels, 0.0);
      nu_.assign(labels, 0.0);
    }
  }
  // Cells arrive in loss order and a cell's label rounds its own loss, so labels close in
  // order too: those below the current one less 2 are finished. A cell for a finished label
  // (not expected) turns the shared labels off for the step.
  void add(std::size_t j, const Mass& qm, const Mass& own) {
    if (!on_) return;
    if (!(std::isfinite(qm.lo) && std::isfinite(qm.hi) && std::isfinite(own.lo) && std::isfinite(own.hi)) ||
        (have_done_ && j <= done_)) {
      on_ = false;
      return;
    }
    const double half = 0.5 * (qm.hi - qm.lo) + 2.0 * kUnit * (std::fabs(qm.lo) + std::fabs(qm.hi));
    const double own_half = 0.5 * (own.hi - own.lo) + 2.0 * kUnit * (std::fabs(own.lo) + std::fabs(own.hi));
    const double q_mid = 0.5 * (qm.lo + qm.hi);
    const double f = std::expm1(0.5 * (own.lo + own.hi));
    const double eta = std::expm1(half) * (1.0 + 4.0 * kUnit);
    while (!open_.empty() && open_.front().label + 2 < j) flush();
    Acc* acc = nullptr;
    for (Acc& o : open_) {
      if (o.label == j) acc = &o;
    }
    if (acc == nullptr) {
      auto at = open_.begin();
      while (at != open_.end() && at->label < j) ++at;
      acc = &*open_.insert(at, Acc{j});
    }
    if (q_mid > acc->ref) {  // rescale the sums to the new reference
      const double r = acc->ref == kNegInf ? 0.0 : std::exp(acc->ref - q_mid);
      acc->total *= r;
      acc->mean *= r;
      acc->terms *= r;
      acc->weighted_eta *= r;
      acc->ref = q_mid;
    }
    const double w = std::exp(q_mid - acc->ref);
    acc->total += w;
    acc->mean += w * f;
    acc->terms += w * std::fabs(f);
    acc->weighted_eta += w * eta;
    acc->cell_eta = std::max(acc->cell_eta, eta);
    acc->own_half = std::max(acc->own_half, own_half);
    acc->low = std::min(acc->low, f);
    acc->high = std::max(acc->high, f);
    acc->count += 1.0;
  }
  void finish(StepPmf& out) {
    while (on_ && !open_.empty()) flush();
    if (!on_) return;
    const double round = 1.0 + 4.0 * kUnit * static_cast<double>(labels_ + 2);
    out.log_q_mid = std::move(log_q_);
    out.own_mid = std::move(own_);
    out.mid_error = eta_max_;
    out.own_error = nu_max_;
    out.mid_weights = {w_p_ * round, w_pq_ * round, w_q_ * round, w_nu_ * round};
    out.mid_eta = std::move(eta_);
    out.mid_nu = std::move(nu_);
  }

 private:
  struct Acc {
    std::size_t label;
    double ref = kNegInf, total = 0.0, mean = 0.0, terms = 0.0, weighted_eta = 0.0, cell_eta = 0.0;
    double own_half = 0.0, low = kInf, high = kNegInf, count = 0.0;
  };
  void flush() {
    const Acc a = open_.front();
    open_.erase(open_.begin());
    done_ = a.label;
    have_done_ = true;
    if (!(1.0 + a.low > 0.0) || !(a.cell_eta < 0.25)) {
      on_ = false;
      return;
    }
    const std::size_t j = a.label;
    log_q_[j] = a.ref + std::log(a.total);
    const double m = a.mean / a.total;
    own_[j] = std::log1p(m);
    // eta_j: sum Q~_c eta_c / sum Q~_c bounds sum Q_c eta_c / sum Q_c up to (1 + eta) / (1 - eta);
    // exp, the sums and the log round by (n + 3) u relative, plus an ulp of the log-mass.
    const double eta = (a.weighted_eta / a.total) * (1.0 + a.cell_eta) / (1.0 - a.cell_eta) +
                       ((a.count + 3.0) * kUnit + kUnit * std::fabs(log_q_[j])) * (1.0 + 1e-6);
    const double spread = (a.high - a.low) / (1.0 + a.low);
    const double weights = 2.0 * a.cell_eta / (1.0 - a.cell_eta);
    const double rounding = 8.0 * kUnit * ((a.count + 4.0) * a.terms / a.total + std::fabs(own_[j])) / (1.0 + std::min(m, 0.0));
    const double nu = (a.own_half * (1.0 + spread) + weights * spread + rounding) * (1.0 + 1e-6);
    eta_[j] = eta;
    nu_[j] = nu;
    eta_max_ = std::max(eta_max_, eta);
    nu_max_ = std::max(nu_max_, nu);
    // Upper bounds of the label's masses: Q_j <= Q~_j (1 + eta), P_j <= that e^{own + nu},
    // |P_j - Q_j| = Q_j |e^{l_j} - 1| <= that (|expm1(own)| + e^{|own|} expm1(nu)).
    const double q_up = std::exp(log_q_[j]) * (1.0 + eta) * (1.0 + 4.0 * kUnit);
    const double p_up = q_up * std::exp(own_[j] + nu) * (1.0 + 4.0 * kUnit);
    const double pq_up = q_up * (std::fabs(std::expm1(own_[j])) + std::exp(std::fabs(own_[j])) * std::expm1(nu)) *
                         (1.0 + 8.0 * kUnit);
    w_p_ += eta * p_up;
    w_pq_ += eta * pq_up;
    w_q_ += eta * q_up;
    w_nu_ += p_up * std::expm1(nu);
  }
  bool on_;
  std::size_t labels_;
  std::vector<double> log_q_, own_, eta_, nu_;
  std::vector<Acc> open_;  // the labels still collecting cells, in order (a handful)
  std::size_t done_ = 0;
  bool have_done_ = false;
  double eta_max_ = 0.0, nu_max_ = 0.0, w_p_ = 0.0, w_pq_ = 0.0, w_q_ = 0.0, w_nu_ = 0.0;
};

// Neumaier's compensated sum (Higham, "Accuracy and Stability of Numerical Algorithms", 2nd ed.,
// Sec. 4.3), with its error bound (error(), charged by the caller).
class CompensatedSum {
 public:
  void add(double x) {
    const double t = sum_ + x;
    carry_ += std::fabs(sum_) >= std::fabs(x) ? (sum_ - t) + x : (x - t) + sum_;
    sum_ = t;
    absolute_ += std::fabs(x);
    ++n_;
  }
  double value() const { return sum_ + carry_; }
  // (Ogita, Rump, Oishi, "Accurate Sum and Dot Product", SIAM J. Sci. Comput. 2005, Prop. 4.5:
  // u |s| + gamma_{n-1}^2 sum |x_i|, gamma_k = k u / (1 - k u); charged twice over.)
  double error() const {
    const double v = value();
    const double nu = static_cast<double>(n_ + 2) * kUnit;
    return 2.0 * kUnit * std::fabs(v) * (1.0 + 4.0 * kUnit) + 2.0 * nu * nu * absolute_;
  }
  double absolute() const { return absolute_; }

 private:
  double sum_ = 0.0, carry_ = 0.0, absolute_ = 0.0;
  long n_ = 0;
};

// e^{a + b} of two doubles (their sum carried exactly), within 3 u relative: exp's ulp, the
// product by 1 + lo and lo's own rounding (|lo| <= u |a + b| / 2 < 2^-40 where it matters).
double exp_of_sum(double a, double b) {
  const double s = a + b;
  const double bb = s - a;
  const double lo = (a - (s - bb)) + (b - bb);
  return std::exp(s) * (1.0 + lo);
}

// The concentrated labels' drifts (step.hpp, mid_drift): sum_j P~_j - sum_j P_j and the same for
// Q, where the labelled cells partition (x_small, x_large] less the `dropped` cells (P- and
// Q-mass at most dropped_p, dropped_q): sum_j P_j = 1 - P(X <= x_small) - P(X > x_large) - the
// dropped P-mass. The tails come from the pair's edges (each log within kLogError (1 + |value|)).
void concentrated_drift(const MonotonePair& pair, double x_small, double x_large, double dropped_p, double dropped_q,
                        StepPmf& out) {
  const std::size_t n = out.log_q_mid.size();
  if (n == 0 || out.own_mid.size() != n || out.mid_eta.size() != n || out.mid_nu.size() != n) return;
  // [lo, hi] of the P- and Q-tails beyond the clamp points.
  double tail_p_lo = 0.0, tail_p_hi = 0.0, tail_q_lo = 0.0, tail_q_hi = 0.0;
  auto add_tail = [](double log_value, double* lo, double* hi) {
    if (log_value == kNegInf) return;
    const double e = kLogError * (1.0 + std::fabs(log_value));
    *lo += std::exp(log_value - e) * (1.0 - 4.0 * kUnit);
    *hi += std::exp(log_value + e) * (1.0 + 4.0 * kUnit);
  };
  Edge ep{}, eq{};
  if (!std::isinf(x_small)) {
    pair.edges(x_small, &ep, &eq);
    add_tail(ep.log_cdf, &tail_p_lo, &tail_p_hi);
    add_tail(eq.log_cdf, &tail_q_lo, &tail_q_hi);
  }
  if (!std::isinf(x_large)) {
    pair.edges(x_large, &ep, &eq);
    add_tail(ep.log_sf, &tail_p_lo, &tail_p_hi);
    add_tail(eq.log_sf, &tail_q_lo, &tail_q_hi);
  }
  CompensatedSum sum_p, sum_q;
  sum_p.add(-1.0);
  sum_q.add(-1.0);
  for (std::size_t j = 0; j < n; ++j) {
    if (out.log_q_mid[j] == kNegInf) continue;
    sum_p.add(exp_of_sum(out.log_q_mid[j], out.own_mid[j]));
    sum_q.add(std::exp(out.log_q_mid[j]));
  }
  // Each term within 3 u of its exact value (exp_of_sum; exp alone within 1 u), the sums within
  // their compensated error, the -1 exact.
  const double err_p = 3.0 * kUnit * (sum_p.absolute() - 1.0) + sum_p.error();
  const double err_q = 3.0 * kUnit * (sum_q.absolute() - 1.0) + sum_q.error();
  const double dp = sum_p.value(), dq = sum_q.value();
  const double r = 1.0 + 8.0 * kUnit;
  if (!(std::isfinite(dp) && std::isfinite(dq) && std::isfinite(dropped_p) && std::isfinite(dropped_q))) return;
  // (Each sum rounded: its bound moved outward by ulps of its terms, whatever its sign.)
  const double drift_p_lo = (dp - err_p + tail_p_lo) - 8.0 * kUnit * (std::fabs(dp) + err_p + tail_p_lo);
  const double drift_p_hi = (dp + err_p + tail_p_hi + dropped_p) + 8.0 * kUnit * (std::fabs(dp) + err_p + tail_p_hi + dropped_p);
  const double drift_q_lo = (dq - err_q + tail_q_lo) - 8.0 * kUnit * (std::fabs(dq) + err_q + tail_q_lo);
  const double drift_q_hi = (dq + err_q + tail_q_hi + dropped_q) + 8.0 * kUnit * (std::fabs(dq) + err_q + tail_q_hi + dropped_q);
  out.mid_drift = {drift_p_lo, drift_p_hi, drift_q_lo, drift_q_hi, (tail_p_hi + dropped_p) * r, (tail_q_hi + dropped_q) * r};
}

// The clamp points and the grid indices of the lowest and highest loss a discretisation keeps.
struct Range {
  double x_small, x_large;
  long k_low, k_high;
};

Range loss_range(const MonotonePair& pair, double d, double log_tail) {
  require_positive_finite("discretization", d);
  const ClampRange c = clamp_range(pair, log_tail);
  return {c.x_small, c.x_large, static_cast<long>(std::floor(c.loss_low / d)),
          static_cast<long>(std::floor(c.loss_high / d))};
}

}  // namespace

ClampRange clamp_range(const MonotonePair& pair, double log_tail) {
  const double loss_inf = pair.loss_inf(), loss_sup = pair.loss_sup();
  double x_small = pair.clamp_low(log_tail), x_large = pair.clamp_high(log_tail);
  if (loss_inf != kNegInf && !(std::isfinite(x_small) && loss_inf < 0.0 && pair.loss(x_small) > 0.5 * loss_inf)) {
    x_small = kNegInf;
  }
  if (loss_sup != kInf && !(std::isfinite(x_large) && loss_sup > 0.0 && pair.loss(x_large) < 0.5 * loss_sup)) {
    x_large = kInf;
  }
  const double loss_low = std::isinf(x_small) ? loss_inf : pair.loss(x_small);
  const double loss_high = std::isinf(x_large) ? loss_sup : pair.loss(x_large);
  if (!(std::isfinite(loss_low) && std::isfinite(loss_high) && loss_low <= loss_high)) {
    throw std::domain_error("could not bound the privacy loss of one step");
  }
  return {x_small, x_large, loss_low, loss_high};
}

std::size_t discretized_size(const MonotonePair& pair, double d, double log_tail) {
  const Range r = loss_range(pair, d, log_tail);
  return static_cast<std::size_t>(r.k_high - r.k_low + 2);
}

StepPmf discretize(const MonotonePair& pair, double d, double log_tail, std::size_t max_cells, bool shared_labels) {
  const Range range = loss_range(pair, d, log_tail);
  const double x_small = range.x_small, x_large = range.x_large;
  const long k_low = range.k_low, k_high = range.k_high;
  const auto n = static_cast<std::size_t>(k_high - k_low + 1);  // cells
  if (n + 1 > max_cells) {
    throw std::invalid_argument("discretization " + format_value(d) + " is too fine: one step would need " +
                                std::to_string(n + 1) + " loss cells (more than " + std::to_string(max_cells) +
                                "); increase discretization");
  }
  // x at the lower loss end kD of cell k (k in (k_low, k_high]); the outer edges are the clamp points.
  auto edge_x = [&](long k) {
    if (k <= k_low) return x_small;
    if (k > k_high) return x_large;
    return pair.x_of(static_cast<double>(k) * d);
  };
  StepPmf out;
  out.discretization = d;
  out.upper_low = k_low;
  out.log_upper.assign(n + 1, kNegInf);
  // Labels: each cell's own loss log(P/Q), rounded to the nearest grid index
  // (within [k_low - 1, k_high + 1]): the label sum then tracks the composed
  // loss without the +-D/2 noise per step that labelling by the cell index
  // would add where the loss is a narrow spike inside one cell.
  out.label_low = k_low - 1;
  out.log_p.assign(n + 2, kNegInf);
  out.log_q.assign(n + 2, kNegInf);
  const bool sharp = d < kSharpOwnBelow;
  CellWalk walk(pair, edge_x(k_low), sharp);
  const double largest = std::max(std::fabs(static_cast<double>(k_low) * d), std::fabs(static_cast<double>(k_high + 1) * d));
  SlackMeter meter(pair, largest);
  meter.edge(edge_x(k_low), static_cast<double>(k_low) * d, -1);
  SharedLabels shared(n + 2, sharp && shared_labels);
  // For the concentrated labels: the cells left out of the labels (upper ends of their masses),
  // and whether the cells' edges rose throughout (so that the cells partition (x_small, x_large]).
  double dropped_p = 0.0, dropped_q = 0.0;
  bool partition = true;
  double x_prev = edge_x(k_low);
  for (std::size_t i = 0; i < n; ++i) {
    const long k = k_low + static_cast<long>(i);
    const double x_next = edge_x(k + 1);
    partition = partition && x_next >= x_prev;
    x_prev = x_next;
    meter.edge(x_next, static_cast<double>(k + 1) * d, k + 1 > k_high ? 1 : 0);
    Mass pm{}, qm{}, own{};
    walk.next(x_next, &pm, &qm, &own);
    if (pm.lo > kNegInf && qm.hi > kNegInf) {
      const double ratio = 0.5 * (own.lo + own.hi) / d;
      const long label = std::clamp(std::lround(std::isfinite(ratio) ? ratio : static_cast<double>(k)), k_low - 1,
                                    k_high + 1);
      const auto j = static_cast<std::size_t>(label - out.label_low);
      out.log_p[j] = log_add_directed(out.log_p[j], pm.lo, -1);  // (P low, Q high also where cells share a label)
      out.log_q[j] = log_add_directed(out.log_q[j], qm.hi, +1);
      shared.add(j, qm, own);
    } else {
      dropped_p += std::exp(pm.hi) * (1.0 + 4.0 * kUnit);
      dropped_q += std::exp(qm.hi) * (1.0 + 4.0 * kUnit);
    }
    split_cell_by_loss(pm, own, k, k + 1, d, k_low, out.log_upper);
  }
  shared.finish(out);
  if (partition) concentrated_drift(pair, x_small, x_large, dropped_p, dropped_q, out);
  // Clamped tails: the smallest losses move up to grid point k_low + 1 (> every
  // clamped loss); the largest go to +inf. For the labels both tails carry the
  // label -inf (dropped from P and Q alike: a valid labelling).
  if (!std::isinf(x_small)) {
    const double tail = pair.edge_p(x_small).log_cdf;
    out.log_upper[1] = log_add_directed(out.log_upper[1], tail + kLogError * (1.0 + std::fabs(tail)), +1);
  }
  if (!std::isinf(x_large)) {
    const double tail = pair.edge_p(x_large).log_sf;
    out.infinity_upper = std::exp(tail + kLogError * (1.0 + std::fabs(tail)));
  }
  summarise(out);
  // x at a cell edge is within a few ulps of the exact preimage of kD, so a
  // cell's losses may poke out of [kD, (k+1)D] by <= 64 u (1 + |loss|) (for
  // the closed-form inverses; iterative ones add their own error), or by the
  // measured amount where the meter could measure it.
  out.loss_slack = meter.tight() ? meter.slack() : 64.0 * kUnit * (1.0 + out.max_abs_loss) + pair.extra_loss_error();
  return out;
}

}  // namespace dpacct::pld

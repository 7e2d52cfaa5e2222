#include "dpacct/pld/allocation.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <memory>
#include <stdexcept>
#include <string>
#include <utility>

#include "dpacct/check.hpp"
#include "dpacct/fft.hpp"
#include "dpacct/logmath.hpp"
#include "dpacct/pld/power.hpp"

namespace dpacct::pld {

namespace {

constexpr double kU = kUnit;

// The lattice masses of one coordinate, as certified intervals: cell j = [jh, (j+1)h) for
// j < J and the lump {Y >= y_b} at j = J; "q" under Q (the cell masses m_j), "r" for the
// record's coordinate under P (mu_j = E_Q[Y; cell]).
struct Lattice {
  double h = 0.0;
  long cut = 0;
  std::vector<double> q_lo, q_hi, r_lo, r_hi;  // size J + 1
};

// Upper bound on the rounding of the normal coordinate a = (log y + s^2/2) / s of y = j h.
double coordinate_error(double a, double log_y, double s) {
  return 8.0 * kU * (std::fabs(a) + (std::fabs(log_y) + s * s + 1.0) / s + 1.0);
}

// [lo, hi] of a normal mass between coordinates a < b (each known to +- its error).
void normal_mass(double a, double ea, double b, double eb, double* lo, double* hi) {
  const Mass outer = log_interval(normal_edge(a - ea), normal_edge(b + eb));
  const Mass inner = (a + ea < b - eb) ? log_interval(normal_edge(a + ea), normal_edge(b - eb)) : Mass{kNegInf, kNegInf};
  *hi = std::min(std::exp(outer.hi) * (1.0 + 4.0 * kU), 1.0);
  *lo = inner.lo == kNegInf ? 0.0 : std::exp(inner.lo) * (1.0 - 4.0 * kU);
}

Lattice make_lattice(double s, double h, long cut) {
  Lattice out;
  out.h = h;
  out.cut = cut;
  const auto n = static_cast<std::size_t>(cut) + 1;
  out.q_lo.resize(n);
  out.q_hi.resize(n);
  out.r_lo.resize(n);
  out.r_hi.resize(n);
  // Normal coordinates of the edges y = j h: a_j for Q, a_j - s for the record.
  std::vector<double> a(n), ea(n);
  a[0] = kNegInf;
  ea[0] = 0.0;
  for (std::size_t j = 1; j < n; ++j) {
    const double log_y = std::log(static_cast<double>(j) * h);
    a[j] = (log_y + 0.5 * s * s) / s;
    ea[j] = coordinate_error(a[j], log_y, s);
  }
  for (std::size_t j = 0; j + 1 < n; ++j) {
    normal_mass(a[j], ea[j], a[j + 1], ea[j + 1], &out.q_lo[j], &out.q_hi[j]);
    normal_mass(a[j] - s, ea[j] + 4.0 * kU * s, a[j + 1] - s, ea[j + 1] + 4.0 * kU * s, &out.r_lo[j], &out.r_hi[j]);
  }
  normal_mass(a[n - 1], ea[n - 1], kInf, 0.0, &out.q_lo[n - 1], &out.q_hi[n - 1]);
  normal_mass(a[n - 1] - s, ea[n - 1] + 4.0 * kU * s, kInf, 0.0, &out.r_lo[n - 1], &out.r_hi[n - 1]);
  return out;
}

// Upper ends of the connect-the-dots masses of min(Y, y_b) at the lattice points 0..J: cell j
// gives (j + 1) m_j - mu_j / h to j and mu_j / h - j m_j to j + 1 (each in [0, m_j]); the lump
// {Y >= y_b} stays at J.
std::vector<double> connect_the_dots(const Lattice& lat) {
  const long cut = lat.cut;
  const double h = lat.h;
  std::vector<double> p(static_cast<std::size_t>(cut) + 1, 0.0);
  for (long j = 0; j < cut; ++j) {
    const auto i = static_cast<std::size_t>(j);
    const double jd = static_cast<double>(j);
    const double m_hi = lat.q_hi[i], m_lo = lat.q_lo[i];
    const double mu_hi = lat.r_hi[i] / h, mu_lo = lat.r_lo[i] / h;
    const double left = (jd + 1.0) * m_hi - mu_lo + 4.0 * kU * ((jd + 1.0) * m_hi + mu_lo);
    const double right = mu_hi - jd * m_lo + 4.0 * kU * (mu_hi + jd * m_lo);
    p[i] += std::min(m_hi, std::max(left, 0.0));
    p[i + 1] += std::min(m_hi, std::max(right, 0.0));
  }
  p[static_cast<std::size_t>(cut)] += lat.q_hi[static_cast<std::size_t>(cut)];
  for (double& v : p) v *= 1.0 + 2.0 * kU;  // the additions above
  return p;
}

// Certified tail bounds of a sum of n independent copies of a lattice variable on 0..J,
// from upper ends p of its masses (each bound holds for every law below p entrywise).
class TailBound {
 public:
  explicit TailBound(const std::vector<double>& p) : cut_(static_cast<long>(p.size()) - 1) {
    double mass = 0.0, m1 = 0.0, m2 = 0.0;
    for (std::size_t j = 0; j < p.size(); ++j) {
      const double v = static_cast<double>(j);
      mass += p[j];
      m1 += p[j] * v;
      m2 += p[j] * v * v;
    }
    mean_ = m1 / mass;
    sd_ = std::sqrt(std::max(m2 / mass - mean_ * mean_, 0.0)) + 1.0;
    log_mass_ = std::max(std::log(mass) + 4.0 * kU * static_cast<double>(p.size() + 2), 0.0);  // log+ of the total
    // Tail masses pi_m = sum_{j > m} p_j (all m), and the cut points m where pi_m first drops
    // below e^-5, e^-10, ..., and m = J (pi = 0: the plain Chernoff bound).
    std::vector<double> above(p.size(), 0.0);
    for (long j = cut_ - 1; j >= 0; --j) above[static_cast<std::size_t>(j)] = above[static_cast<std::size_t>(j) + 1] + p[static_cast<std::size_t>(j) + 1];
    for (double level = -5.0; level >= -80.0; level -= 5.0) {
      long m = 0;
      while (m < cut_ && !(above[static_cast<std::size_t>(m)] <= std::exp(level))) ++m;
      if (cuts_.empty() || cuts_.back().first != m) {
        cuts_.push_back({m, above[static_cast<std::size_t>(m)] * (1.0 + 4.0 * kU * static_cast<double>(p.size()))});
      }
    }
    if (cuts_.back().first != cut_) cuts_.push_back({cut_, 0.0});
    // log M_m(+lambda) = lambda m + log(sum_{j < m} p_j e^{-lambda (m - j)} + sum_{j >= m} p_j), and
    // log M(-lambda) = log sum_j p_j e^{-lambda j}, over a geometric set of slopes; one pass per
    // slope (all terms positive: the sums err by at most 2 (J + 2) u relative, charged). Terms that
    // underflow are lost, at most the smallest normal double each: that much is added back, so a
    // sum that underflows altogether gives a (useless) upper bound, never log 0.
    const double slack = std::log1p(4.0 * kU * static_cast<double>(p.size() + 2));
    const double lost = static_cast<double>(p.size() + 2) * std::numeric_limits<double>::min();
    // Slopes from 1/(64 sd) to 64/sd, and down to 2/J for the sums truncated at a large cut.
    std::vector<double> slopes;
    for (int i = 0; i <= 24; ++i) slopes.push_back(std::ldexp(1.0, i / 2) * (i % 2 ? 1.4142135623730951 : 1.0) / (64.0 * sd_));
    for (double c = 2.0; c / static_cast<double>(cut_) < slopes.front(); c *= 2.0) slopes.push_back(c / static_cast<double>(cut_));
    for (const double lambda : slopes) {
      slopes_.push_back(lambda);
      const double r = std::exp(-lambda);
      double acc = 0.0;  // sum_{j < k} p_j r^(k - 1 - j) at step k
      std::size_t next = 0;
      std::vector<double> logs(cuts_.size(), kNegInf);
      for (long k = 0; k <= cut_ && next < cuts_.size(); ++k) {
        while (next < cuts_.size() && cuts_[next].first == k) {
          const double below = acc * r;  // sum_{j < m} p_j r^(m - j)
          const double rest = cuts_[next].second + p[static_cast<std::size_t>(k)];
          logs[next] = lambda * static_cast<double>(k) + std::log(below + rest + lost) + slack;
          ++next;
        }
        acc = acc * r + p[static_cast<std::size_t>(k)];
      }
      upper_.push_back(std::move(logs));
      double low = 0.0;  // Horner from the top: sum_j p_j r^j
      for (long j = cut_; j >= 0; --j) low = low * r + p[static_cast<std::size_t>(j)];
      lower_.push_back(std::log(low + lost) + slack);
    }
  }

  // An upper bound on log P(S_n >= x).
  double log_upper(long n, double x) const {
    if (n <= 0) return x <= 0.0 ? 0.0 : kNegInf;
    if (x > static_cast<double>(n) * static_cast<double>(cut_)) return kNegInf;
    const double nd = static_cast<double>(n);
    double best = 0.0;
    for (std::size_t c = 0; c < cuts_.size(); ++c) {
      const auto [m, pi] = cuts_[c];
      const double log_pi = pi > 0.0 ? std::log(pi) : kNegInf;
      for (long k = 1; k <= std::min<long>(12, n); ++k) {
        if (log_pi == kNegInf && k > 1) break;
        // P(at least k of n exceed m) <= C(n, k) pi^k M^(n - k) (M the total mass of p, >= 1 for
        // upper ends); below that, S <= A + (k - 1)(J - m).
        const double jumps = log_pi == kNegInf ? kNegInf
                                               : log_binom(nd, static_cast<double>(k)) + static_cast<double>(k) * log_pi +
                                                     (nd - static_cast<double>(k)) * log_mass_;
        const double rest = x - static_cast<double>(k - 1) * static_cast<double>(cut_ - m);
        double chernoff = 0.0;
        for (std::size_t i = 0; i < slopes_.size(); ++i) {
          chernoff = std::min(chernoff, nd * upper_[i][c] - slopes_[i] * rest);
        }
        best = std::min(best, log_add(jumps, chernoff) + 1e-12);
      }
    }
    return best;
  }

  // An upper bound on log P(S_n <= x).
  double log_lower(long n, double x) const {
    if (x < 0.0) return kNegInf;
    if (n <= 0) return 0.0;
    double best = 0.0;
    for (std::size_t i = 0; i < slopes_.size(); ++i) {
      best = std::min(best, static_cast<double>(n) * lower_[i] + slopes_[i] * x);
    }
    return best + 1e-12;
  }

  // The smallest lattice point x with log_upper(n, x - shift) <= log_tail (x - shift >= n mean).
  long high(long n, long shift, double log_tail) const {
    long lo = static_cast<long>(std::floor(static_cast<double>(n) * mean_)), hi = n * cut_ + 1;
    while (hi - lo > 1) {
      const long mid = lo + (hi - lo) / 2;
      if (log_upper(n, static_cast<double>(mid)) <= log_tail) {
        hi = mid;
      } else {
        lo = mid;
      }
    }
    return hi + shift;
  }

  // The largest lattice point x with log_lower(n, x) <= log_tail.
  long low(long n, double log_tail) const {
    long lo = -1, hi = static_cast<long>(std::ceil(static_cast<double>(n) * mean_));
    while (hi - lo > 1) {
      const long mid = lo + (hi - lo) / 2;
      if (log_lower(n, static_cast<double>(mid)) <= log_tail) {
        lo = mid;
      } else {
        hi = mid;
      }
    }
    return lo;
  }

 private:
  long cut_;
  double mean_ = 0.0, sd_ = 1.0, log_mass_ = 0.0;
  std::vector<std::pair<long, double>> cuts_;
  std::vector<double> slopes_;
  std::vector<std::vector<double>> upper_;  // [slope][cut]
  std::vector<double> lower_;               // [slope]
};

// A composed lattice law on the window, tilted by e^{slope K}: entry i (lattice point
// K = start + i) is worth entries[i] e^{log_scale - slope K}, within the relative rounding
// `rounding`; the entries' round-off has 2-norm at most `error` (in the tilted scale).
struct Composed {
  CachedVector<double> entries;
  long start = 0;
  double slope = 0.0;
  double log_scale = 0.0;
  double rounding = 0.0;
  double error = 0.0;
  double factor(std::size_t i) const {
    return std::exp(log_scale - slope * (static_cast<double>(start) + static_cast<double>(i)));
  }
  double value(std::size_t i) const { return entries[i] * factor(i); }
  double entry_error(std::size_t i) const { return error * factor(i); }  // >= |error of value(i)|
};

std::vector<double> logs_of(const std::vector<double>& v) {
  std::vector<double> out(v.size());
  for (std::size_t i = 0; i < v.size(); ++i) out[i] = v[i] > 0.0 ? std::log(v[i]) : kNegInf;
  return out;
}

Composed compose_laws(const std::vector<std::pair<const std::vector<double>*, long>>& groups, double slope,
                      long start, std::size_t size, const fft::RealPlan* plan, Workspace& ws) {
  std::vector<Tilted> seqs;
  std::vector<double> counts;
  double absolute = 0.0;  // the entries below e^-50 of their sequence err absolutely (tilt_sequence)
  Composed out;
  out.start = start;
  out.slope = slope;
  for (const auto& [law, count] : groups) {
    if (count <= 0) continue;
    seqs.push_back(tilt_sequence(logs_of(*law), 0, slope, 1.0));
    counts.push_back(static_cast<double>(count));
    out.log_scale += static_cast<double>(count) * seqs.back().log_norm;
    // log(p) and exp(log p + slope j - log_norm) per entry; each composed entry is a sum of products
    // of count such entries: relative (1 + r)^count - 1, bounded as count r (1 + count r).
    const double r = seqs.back().max_rounding + 4.0 * kU;
    out.rounding += static_cast<double>(count) * r * (1.0 + static_cast<double>(count) * r);
    absolute += static_cast<double>(count) * seqs.back().absolute_rounding;
  }
  // exp(log_scale - slope K): its argument errs by a few ulps of its magnitude.
  out.rounding += 8.0 * kU * (std::fabs(out.log_scale) + std::fabs(slope) * static_cast<double>(start + static_cast<long>(size)) + 2.0);
  std::vector<const Tilted*> ptrs;
  for (const auto& t : seqs) ptrs.push_back(&t);
  const bool single = counts.size() == 1 && counts[0] == 1.0;
  static const fft::RealPlan trivial(2);
  power_window(ptrs, counts, single ? trivial : *plan, start, single ? size : 0, ws, out.entries, &out.error);
  // Composed with sequences of total mass ~1, their errors add up in the 1-norm of the entries.
  out.error += absolute * (1.0 + out.rounding) * (1.0 + 1e-6);
  return out;
}

}  // namespace

AllocationLaws allocation_laws(double noise_multiplier, long steps, double resolution, double log_truncation,
                               double log_tail, std::size_t max_cells) {
  require_positive_finite("noise_multiplier", noise_multiplier);
  if (steps < 1) fail("steps", "an integer >= 1", static_cast<double>(steps));
  require_positive_finite("resolution", resolution);
  if (!(log_truncation < 0.0)) fail("log_truncation", "< 0", log_truncation);
  if (!(log_tail < 0.0)) fail("log_tail", "< 0", log_tail);
  const double s = 1.0 / noise_multiplier;
  const auto cells = static_cast<double>(max_cells);
  // The cut y_b: the smallest with E(Y - y_b)_+ = Phi(s - a) - y_b Phi(-a) <= e^{log_truncation},
  // a = (log y_b + s^2/2) / s (bisection on a; the value only guides the choice).
  auto log_excess = [&](double a) {
    const double y = std::exp(s * a - 0.5 * s * s);
    const double v = std::exp(log_ndtr(s - a)) - y * std::exp(log_ndtr(-a));
    return v > 0.0 ? std::log(v) : log_ndtr(s - a) - 30.0;  // cancelled: far below Phi(s - a)
  };
  double a_lo = s, a_hi = s + 40.0;
  for (int i = 0; i < 100; ++i) {
    const double mid = 0.5 * (a_lo + a_hi);
    (log_excess(mid) <= log_truncation ? a_hi : a_lo) = mid;
  }
  const double log_y_cut = s * a_hi - 0.5 * s * s;
  // Lattice spacing: resolution sd(Y); with few steps also small enough that connect-the-dots puts
  // at most e^-37 on S = 0 (p_0^t, p_0 = E[1 - Y/h; Y < h] the mass it moves to Y = 0: Z = 0 is an
  // infinite loss in the "add" direction), but at most 32 times smaller, and not so small that the
  // cut needs more than max_cells / 8 lattice points. (Only the accuracy depends on this choice.)
  const double h_default = resolution * std::sqrt(std::expm1(s * s));
  if (!(h_default > 0.0 && std::isfinite(h_default))) {
    throw std::invalid_argument("noise_multiplier " + format_value(noise_multiplier) +
                                " is too small for the balls-in-bins lattice");
  }
  double h = h_default;
  auto log_p0 = [&](double spacing) {
    const double a = (std::log(spacing) + 0.5 * s * s) / s;
    const double p0 = std::exp(log_ndtr(a)) - std::exp(log_ndtr(a - s)) / spacing;
    return p0 > 0.0 ? std::log(p0) : kNegInf;
  };
  while (steps > 1 && static_cast<double>(steps) * log_p0(h) > -37.0 && h > h_default / 32.0 &&
         log_y_cut - std::log(0.5 * h) <= std::log(cells / 8.0)) {
    h *= 0.5;
  }
  // At most max_cells / 8 lattice points (the window holds about two cuts): a heavier tail is
  // cut lower, and rho is then what that cut leaves.
  const double cut_d = std::min(std::ceil(std::exp(std::min(log_y_cut - std::log(h), 60.0))), std::floor(cells / 8.0));
  if (!(cut_d >= 2.0)) {
    throw std::invalid_argument("max_cells " + std::to_string(max_cells) + " is too small for a balls-in-bins lattice");
  }
  const auto cut = static_cast<long>(cut_d);
  const Lattice lat = make_lattice(s, h, cut);
  const std::vector<double> ctd = connect_the_dots(lat);

  AllocationLaws out;
  out.noise_multiplier = noise_multiplier;
  out.steps = steps;
  out.lattice = h;
  out.cut = cut;
  // rho >= E(Y - y_b)_+ = E[Y; Y >= y_b] - y_b Q(Y >= y_b) (upper and lower ends; the products rounded).
  const double y_b = static_cast<double>(cut) * h;
  out.truncation = std::min(std::max(lat.r_hi[static_cast<std::size_t>(cut)] * (1.0 + 4.0 * kU) -
                                     y_b * lat.q_lo[static_cast<std::size_t>(cut)] * (1.0 - 4.0 * kU), 0.0), 1.0);

  // The window of S: every composed law within e^{log_tail} per side, or the whole support.
  const TailBound tail_ctd(ctd), tail_q(lat.q_hi);
  const long t = steps;
  long lo = std::min({tail_ctd.low(t, log_tail), tail_q.low(t, log_tail), tail_q.low(t - 1, log_tail)}) + 1;
  long hi = std::max({tail_ctd.high(t, 0, log_tail), tail_ctd.high(t - 1, cut, log_tail), tail_q.high(t, 0, log_tail),
                      tail_q.high(t - 1, cut, log_tail)}) - 1;
  lo = std::max(lo, 0L);
  hi = std::min(hi, t * cut);
  const bool full = static_cast<double>(t) * static_cast<double>(cut) + 1.0 <=
                    std::max(2.0 * static_cast<double>(hi - lo + 1), 65536.0);
  if (full) {
    lo = 0;
    hi = t * cut;
  }
  std::size_t size = 2;
  while (static_cast<double>(size) < static_cast<double>(hi - lo + 1)) size <<= 1;
  if (t == 1) size = static_cast<std::size_t>(cut) + 1;  // no transform
  if (static_cast<double>(size) > cells) {
    throw std::invalid_argument("balls-in-bins at noise_multiplier " + format_value(noise_multiplier) + ", steps " +
                                std::to_string(steps) + " needs an FFT of more than " + std::to_string(max_cells) +
                                " points");
  }
  out.start = lo;
  out.window_end = hi;
  out.fft_size = t == 1 ? 0 : size;
  // Mass beyond the window (0 with the whole support): P-mass above (remove: E[Y_1; S >= hi + 1]
  // <= E[Y_1] P(S_{t-1} >= hi + 1 - J)), Q-mass below (add; for remove its P-mass is at most
  // z_lo times it), and the mass the window may alias into the floor laws (taken off their lower ends).
  const auto top = static_cast<double>(lo) + static_cast<double>(size);  // first point above the window
  const double below = static_cast<double>(lo) - 1.0;
  auto bound = [&](double log_value) { return full ? 0.0 : std::exp(log_value) * (1.0 + 1e-9); };
  double ctd_mean = 0.0;  // E[Y_1] of the upper ends, rounded up
  for (std::size_t j = 0; j < ctd.size(); ++j) ctd_mean += static_cast<double>(j) * h * ctd[j];
  ctd_mean *= 1.0 + 4.0 * kU * static_cast<double>(ctd.size() + 2);
  out.tail_above = std::max(ctd_mean, 1.0) * bound(tail_ctd.log_upper(t - 1, top - static_cast<double>(cut)));
  out.tail_below = bound(tail_ctd.log_lower(t, below));
  const double alias_null = bound(log_add(tail_q.log_upper(t, top), tail_q.log_lower(t, below)));
  const double alias_record = bound(log_add(tail_q.log_upper(t - 1, top - static_cast<double>(cut)), tail_q.log_lower(t - 1, below)));

  std::shared_ptr<const fft::RealPlan> held_plan;
  const fft::RealPlan* plan = nullptr;
  if (t > 1) {
    held_plan = fft::real_plan(size);
    plan = held_plan.get();
  }
  PooledWorkspace pooled;
  Workspace& ws = *pooled;
  // Each law is composed twice: untilted, and tilted by e^{slope K} (its mean near the window's top,
  // e^{slope J} at most e^25), so that the upper tail keeps its relative accuracy (the round-off of the untilted composition is
  // uniform, and in the tail it exceeds the masses). Entry by entry the better bound is kept.
  double slope = 0.0;
  if (t > 1) {
    double m1 = 0.0, m2 = 0.0;
    for (std::size_t j = 0; j < ctd.size(); ++j) {
      m1 += static_cast<double>(j) * ctd[j];
      m2 += static_cast<double>(j) * static_cast<double>(j) * ctd[j];
    }
    const double variance = std::max(m2 - m1 * m1, 1.0) * static_cast<double>(t);
    // Tilting by e^{slope K} moves the mean by about slope * variance: put it near the window's top.
    slope = std::min(25.0 / static_cast<double>(cut), std::max(static_cast<double>(hi) - static_cast<double>(t) * m1, 1.0) / variance);
  }
  auto both = [&](const std::vector<std::pair<const std::vector<double>*, long>>& groups) {
    std::vector<Composed> out_c{compose_laws(groups, 0.0, lo, size, plan, ws)};
    if (slope > 0.0) out_c.push_back(compose_laws(groups, slope, lo, size, plan, ws));
    return out_c;
  };
  {
    // Upper half: per entry the composition with the smaller round-off bound (allocation_step
    // bounds the mass the round-off may take, by Cauchy-Schwarz over each composition's entries).
    const std::vector<Composed> u = both({{&ctd, t}});
    out.sum.resize(size);
    out.error_weight.assign(u.size(), std::vector<double>(size, 0.0));
    out.error_norm.resize(u.size());
    for (std::size_t c = 0; c < u.size(); ++c) out.error_norm[c] = u[c].error * (1.0 + 1e-9);
    for (std::size_t i = 0; i < size; ++i) {
      std::size_t best = 0;
      for (std::size_t c = 1; c < u.size(); ++c) {
        if (u[c].entry_error(i) < u[best].entry_error(i)) best = c;
      }
      const Composed& c = u[best];
      out.sum[i] = c.value(i) * (1.0 + c.rounding);
      out.error_weight[best][i] = c.factor(i) * (1.0 + c.rounding);
    }
  }
  // Lower half: lower ends from the untilted composition (its round-off and aliased mass are taken
  // off per label in allocation_step; the tilted one's aliased mass is not bounded here), upper ends
  // per entry from the composition with the smaller round-off bound (aliased mass only adds).
  auto fill = [&](AllocationLaws::Law& law, const Composed& low, const std::vector<Composed>& high, double alias) {
    law.low.resize(size);
    law.high.resize(size);
    const double keep = std::max(1.0 - low.rounding, 0.0);
    law.low_error = low.error * std::exp(low.log_scale) * (1.0 + 1e-9);  // untilted: the same factor everywhere
    law.alias = alias;
    law.high_weight.assign(high.size(), std::vector<double>(size, 0.0));
    law.high_norm.resize(high.size());
    for (std::size_t c = 0; c < high.size(); ++c) law.high_norm[c] = high[c].error * (1.0 + 1e-9);
    for (std::size_t i = 0; i < size; ++i) {
      law.low[i] = low.value(i) * keep;
      std::size_t best = 0;
      for (std::size_t c = 1; c < high.size(); ++c) {
        if (high[c].entry_error(i) < high[best].entry_error(i)) best = c;
      }
      law.high[i] = high[best].value(i) * (1.0 + high[best].rounding);
      law.high_weight[best][i] = high[best].factor(i) * (1.0 + high[best].rounding);
    }
  };
  fill(out.null, compose_laws({{&lat.q_lo, t}}, 0.0, lo, size, plan, ws), both({{&lat.q_hi, t}}), alias_null);
  fill(out.record, compose_laws({{&lat.r_lo, 1}, {&lat.q_lo, t - 1}}, 0.0, lo, size, plan, ws),
       both({{&lat.r_hi, 1}, {&lat.q_hi, t - 1}}), alias_record);
  return out;
}

double AllocationLaws::Law::low_end(std::size_t i) const { return std::max(low[i] - low_error - alias, 0.0); }

double AllocationLaws::Law::high_end(std::size_t i) const {
  double v = high[i];
  for (std::size_t c = 0; c < high_norm.size(); ++c) v += high_norm[c] * high_weight[c][i];
  return v;
}

StepPmf allocation_step(const AllocationLaws& laws, bool add, double d, std::size_t max_cells) {
  require_positive_finite("discretization", d);
  const std::size_t n = laws.sum.size();
  const double per = laws.lattice / static_cast<double>(laws.steps);  // z = K h / t
  const double sign = add ? -1.0 : 1.0;                                 // loss = sign log z
  StepPmf out;
  out.discretization = d;
  auto z_of = [&](std::size_t i) { return (static_cast<double>(laws.start) + static_cast<double>(i)) * per; };

  // -- upper half: the atoms, gathered by grid interval [a D, (a + 1) D) of their loss, each
  // interval split over its two grid points by connect-the-dots (step.hpp). The mass the
  // round-off may take from the atoms at or above a level is at most T(level), by
  // Cauchy-Schwarz over those atoms (weights z for "remove", 1 for "add"); extra P-mass
  // T(a) - T(a + 1) at each interval's top a + 1 covers it at every level (it is mass moved
  // to larger losses), so a query pays only for the round-off of the losses above it. --
  // Beyond the window: "add" charges the Q-mass below it; "remove" the P-mass above it and the
  // P-mass below it (at most z_lo times its Q-mass: the tilted composition may not hold it).
  double infinity = add ? laws.tail_below : laws.truncation + laws.tail_above + laws.tail_below * std::max(z_of(0), 0.0);
  const std::size_t compositions = laws.error_norm.size();
  std::size_t first = 0;  // entries with z > 0
  while (first < n && !(z_of(first) > 0.0)) {
    if (add) {  // z = 0: loss +inf ("add"), with its round-off
      infinity += laws.sum[first];
      for (std::size_t c = 0; c < compositions; ++c) infinity += laws.error_norm[c] * laws.error_weight[c][first];
    }
    ++first;
  }
  double largest = 0.0;
  if (first < n) {
    // Entries in the order of increasing loss: z ascending ("remove") or descending ("add").
    const std::size_t count = n - first;
    auto entry = [&](std::size_t k) { return add ? n - 1 - k : first + k; };
    const double loss_low = sign * std::log(z_of(entry(0)));
    const double loss_high = sign * std::log(z_of(entry(count - 1)));
    largest = std::max(std::fabs(loss_low), std::fabs(loss_high));
    // The last interval used is at most `top` (the rounding of log and exp may move the highest
    // entry one interval up), whose upper end is top + 1.
    const long top = static_cast<long>(std::floor(loss_high / d)) + 1;
    const long lowest = static_cast<long>(std::floor(loss_low / d));
    // Losses below top D - 60 are raised to it (mass moved to larger losses: their P-mass is at most
    // e^(top D - 60) times their Q-mass), and the grid has at most max_cells points.
    const long floor_index = std::max({lowest, top - static_cast<long>(max_cells) + 2,
                                       static_cast<long>(std::floor((static_cast<double>(top) * d - 60.0) / d))});
    out.upper_low = floor_index;
    out.log_upper.assign(static_cast<std::size_t>(top - floor_index + 2), kNegInf);
    // Per interval a (index a - floor_index): sum over its entries of (weight v)^2, per composition.
    std::vector<std::vector<double>> squares(compositions, std::vector<double>(out.log_upper.size(), 0.0));
    long cell = floor_index;
    double bound = 0.0;  // the z at which the current interval ends
    auto set_bound = [&](long a) { bound = std::exp(sign * static_cast<double>(a + 1) * d); };
    auto inside = [&](double z) { return add ? z > bound : z < bound; };
    set_bound(cell);
    double p_mass = 0.0, q_mass = 0.0;
    std::size_t members = 0;
    auto flush = [&]() {
      if (members == 0) return;
      const double e = 4.0 * kU * (static_cast<double>(members) + 4.0);
      const Mass m{std::log(p_mass) - e, std::log(p_mass) + e};
      const Mass w{std::log(q_mass) - e, std::log(q_mass) + e};
      if (cell == floor_index && floor_index > lowest) {
        split_cell(m, w, cell + 1, cell + 1, d, floor_index, out.log_upper);  // clamped: raised to the top
      } else {
        split_cell(m, w, cell, cell + 1, d, floor_index, out.log_upper);
      }
      p_mass = q_mass = 0.0;
      members = 0;
    };
    for (std::size_t k = 0; k < count; ++k) {
      const std::size_t i = entry(k);
      const double z = z_of(i);
      if (!inside(z)) {
        flush();
        cell = std::max(cell + 1, static_cast<long>(std::floor(sign * std::log(z) / d)));
        set_bound(cell);
        while (!inside(z)) set_bound(++cell);  // the rounding of log and exp
      }
      const double v = add ? 1.0 : z;
      for (std::size_t c = 0; c < compositions; ++c) {
        const double g = laws.error_weight[c][i] * v;
        squares[c][static_cast<std::size_t>(cell - floor_index)] += g * g;
      }
      const double w = laws.sum[i];
      if (!(w > 0.0)) continue;
      p_mass += add ? w : w * z;
      q_mass += add ? w * z : w;
      ++members;
    }
    flush();
    // The round-off's tail bound T(a) from the top, and its increments at the intervals' tops.
    std::vector<double> suffix(compositions, 0.0);
    double previous = 0.0;
    for (long a = top; a >= floor_index; --a) {
      double tail = 0.0;
      for (std::size_t c = 0; c < compositions; ++c) {
        suffix[c] += squares[c][static_cast<std::size_t>(a - floor_index)];
        tail += laws.error_norm[c] * std::sqrt(suffix[c]) * (1.0 + 4.0 * kU * static_cast<double>(n));
      }
      if (tail > previous) {
        auto& slot = out.log_upper[static_cast<std::size_t>(a + 1 - floor_index)];
        slot = log_add(slot, std::log(tail - previous) + 4.0 * kU);
        previous = tail;
      }
    }
  }
  out.infinity_upper = std::min(infinity * (1.0 + 4.0 * kU), 1.0);

  // -- lower half: each lattice value labelled with its rounded loss log(P / Q) (point values; any
  // fixed labelling is post-processing), each label's masses certified as a whole --
  const AllocationLaws::Law& lp = add ? laws.null : laws.record;
  const AllocationLaws::Law& lq = add ? laws.record : laws.null;
  std::vector<long> label(n, std::numeric_limits<long>::min());
  long label_top = std::numeric_limits<long>::min(), label_low = std::numeric_limits<long>::max();
  // Values with less than e^-45 of the largest P-mass are labelled -inf (with their Q-mass): they
  // cannot move a lower bound, and their losses would stretch the grid.
  const double p_floor = std::exp(-45.0) * *std::max_element(lp.low.begin(), lp.low.end());
  for (std::size_t i = 0; i < n; ++i) {
    if (!(lp.low[i] > p_floor && lp.low[i] > 0.0 && lq.high[i] > 0.0)) continue;  // label -inf, with its Q-mass
    const double ratio = (std::log(lp.low[i]) - std::log(lq.high[i])) / d;
    if (!(std::fabs(ratio) < 1e15)) continue;
    label[i] = std::lround(ratio);
    label_top = std::max(label_top, label[i]);
    label_low = std::min(label_low, label[i]);
  }
  if (label_top > std::numeric_limits<long>::min()) {
    label_low = std::max(label_low, label_top - static_cast<long>(max_cells) + 1);
    const std::size_t labels = static_cast<std::size_t>(label_top - label_low + 1);
    const std::size_t compositions_q = lq.high_norm.size();
    std::vector<double> p_sum(labels, 0.0), q_sum(labels, 0.0), members(labels, 0.0);
    std::vector<std::vector<double>> q_square(compositions_q, std::vector<double>(labels, 0.0));
    for (std::size_t i = 0; i < n; ++i) {
      if (label[i] < label_low) continue;  // dropped with its Q-mass: label -inf
      const auto slot = static_cast<std::size_t>(label[i] - label_low);
      p_sum[slot] += lp.low[i];
      q_sum[slot] += lq.high[i];
      members[slot] += 1.0;
      for (std::size_t c = 0; c < compositions_q; ++c) q_square[c][slot] += lq.high_weight[c][i] * lq.high_weight[c][i];
    }
    out.label_low = label_low;
    out.log_p.assign(labels, kNegInf);
    out.log_q.assign(labels, kNegInf);
    for (std::size_t j = 0; j < labels; ++j) {
      if (members[j] == 0.0) continue;
      // Sums of positive terms: within (members + 1) u relative; the log: a few ulps.
      const double e = (members[j] + 4.0) * kU;
      const double p = p_sum[j] * (1.0 - e) - lp.low_error * std::sqrt(members[j]) - lp.alias;
      double q = q_sum[j] * (1.0 + e);
      for (std::size_t c = 0; c < compositions_q; ++c) q += lq.high_norm[c] * std::sqrt(q_square[c][j]) * (1.0 + e);
      if (!(p > 0.0)) continue;  // no certain P-mass: the whole label goes to -inf, with its Q-mass
      out.log_p[j] = std::log(p) - 4.0 * kU * (1.0 + std::fabs(std::log(p)));
      out.log_q[j] = std::log(q) + 4.0 * kU * (1.0 + std::fabs(std::log(q)));
    }
  }
  summarise(out);
  out.loss_slack = 8.0 * kU * (1.0 + largest);
  return out;
}

}  // namespace dpacct::pld

#include "dpacct/pld.hpp"

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <complex>
#include <limits>
#include <stdexcept>
#include <string>

#include "dpacct/check.hpp"
#include "dpacct/fft.hpp"
#include "dpacct/logmath.hpp"

namespace dpacct::pld {

namespace {

constexpr double kU = DBL_EPSILON;       // a generous unit round-off
constexpr double kLogC = 16.0 * kU;      // assumed error of log_ndtr / log_add results, per (1 + |value|)
constexpr double kTailSigmas = 12.5;     // clamp points: P(beyond) < 4e-36 per step
constexpr double kLogWindowTail = -25.0; // tilted mass outside the FFT window: e^-25 ~ 1e-11 per side
constexpr std::size_t kMaxStepBuckets = std::size_t{1} << 26;

// The privacy loss of one step of the Poisson-subsampled Gaussian in one
// direction, as a function of the output x (SPEC §5):
//  remove: P = (1-q) N(0,s^2) + q N(1,s^2), Q = N(0,s^2), L(x) = log(1 - q + q e^u),
//  add:    P = N(0,s^2), Q = (1-q) N(0,s^2) + q N(1,s^2), L(x) = -log(1 - q + q e^u),
// with u = (2x - 1)/(2 s^2). L is increasing in x (remove) or decreasing (add).
struct LossModel {
  double q, sigma, log_q, log_1mq;
  Direction direction;

  double v(double x) const {  // log(1 - q + q e^u), accurate near 0 through log1p/expm1
    const double u = (2.0 * x - 1.0) / (2.0 * sigma * sigma);
    if (q == 1.0) return u;
    if (u > 700.0) return log_add(log_1mq, log_q + u);
    return std::log1p(q * std::expm1(u));
  }
  double loss(double x) const { return direction == Direction::remove ? v(x) : -v(x); }
  // The x with loss(x) = l (l strictly inside the loss range).
  double x_of(double l) const {
    const double value = direction == Direction::remove ? l : -l;
    const double u = q == 1.0 ? value : log_sub(value, log_1mq) - log_q;
    return sigma * sigma * u + 0.5;
  }
};

struct Edge {
  double log_cdf, log_sf;
};

// N(0, s^2) (mixture = false) or (1 - q) N(0, s^2) + q N(1, s^2) (mixture = true).
struct Dist {
  double q, sigma, log_q, log_1mq;
  bool mixture;

  double log_cdf(double x) const {
    if (!mixture) return log_ndtr(x / sigma);
    if (q == 1.0) return log_ndtr((x - 1.0) / sigma);
    return log_add(log_1mq + log_ndtr(x / sigma), log_q + log_ndtr((x - 1.0) / sigma));
  }
  double log_sf(double x) const {
    if (!mixture) return log_ndtr(-x / sigma);
    if (q == 1.0) return log_ndtr((1.0 - x) / sigma);
    return log_add(log_1mq + log_ndtr(-x / sigma), log_q + log_ndtr((1.0 - x) / sigma));
  }
  // Evaluate only the tail that is <= 1/2 where one is (log1mexp then recovers
  // the other to full relative accuracy): the CDF below every component's
  // mean, the survival function above every component's mean, both in between.
  Edge edge(double x) const {
    if (x == kNegInf) return {kNegInf, 0.0};
    if (x == kInf) return {0.0, kNegInf};
    const double below = mixture && q == 1.0 ? 1.0 : 0.0;
    const double above = mixture ? 1.0 : 0.0;
    if (x <= below) {
      const double c = log_cdf(x);
      return {c, log1mexp(c)};
    }
    if (x >= above) {
      const double s = log_sf(x);
      return {log1mexp(s), s};
    }
    return {log_cdf(x), log_sf(x)};
  }
};

// A certified interval [lo, hi] for a log-mass.
struct Mass {
  double lo, hi;
};

// |v| for a finite log-value, 0 for -inf (an exact log of 0).
double magnitude(double v) { return std::isfinite(v) ? std::fabs(v) : 0.0; }

// log(e^x - e^y) for y <= x, as an interval, given that x and y each err by
// at most kLogC (1 + |value|).
Mass log_difference(double x, double y) {
  if (x == kNegInf) return {kNegInf, kNegInf};
  const double err = kLogC * (2.0 + magnitude(x) + magnitude(y));
  const double w = y == kNegInf ? 1.0 : -std::expm1(std::min(y - x, 0.0));  // 1 - e^{y - x}
  // d/dz log(1 - e^z) = -e^z / (1 - e^z): an error err in z = y - x and in x
  // moves the result by <= err (1 + 1/w); 4 u for the final log/expm1.
  const double spread = err * (1.0 + 1.0 / std::max(w, 1e-300)) + 4.0 * kU;
  if (spread > 0.5) {  // the difference cancels: only an upper bound is known
    return {kNegInf, x + std::log(w + 2.0 * err * (1.0 + err))};
  }
  const double v = x + std::log(w);
  return {v - spread, v + spread};
}

// log P(a < X <= b), as an interval, from the endpoint data; the branch avoids cancellation.
Mass log_interval(const Edge& a, const Edge& b) {
  constexpr double kLogHalf = -kLn2;
  if (b.log_cdf < kLogHalf) return log_difference(b.log_cdf, a.log_cdf);
  if (a.log_sf < kLogHalf) return log_difference(a.log_sf, b.log_sf);
  // 1 - F(a) - S(b), both terms <= 1/2 here.
  const double z = log_add(a.log_cdf, b.log_sf);
  const double err = kLogC * (2.0 + magnitude(a.log_cdf) + magnitude(b.log_sf));
  const double w = -std::expm1(std::min(z, 0.0));
  const double spread = err * (1.0 + 1.0 / std::max(w, 1e-300)) + 4.0 * kU;
  if (spread > 0.5) return {kNegInf, std::log(w + 2.0 * err)};
  const double v = std::log(w);
  return {v - spread, v + spread};
}

// exp(v) rounded so that the result is <= the exact value,
// for v itself computed with absolute error <= v_err.
double exp_down(double v, double v_err) { return std::exp(v - v_err - 2.0 * kU * (1.0 + std::fabs(v))); }

// One step's three log-PMFs (untilted): the connect-the-dots split on the grid
// points (upper bound) and the cell masses under P (lower end) and Q (upper end).
struct StepPmfs {
  long low = 0;                  // grid index of entry 0 of all three
  std::vector<double> log_u;     // upper: grid points low .. low + n (n + 1 entries)
  std::vector<double> log_p;     // P(cell k), lower end, cells low .. low + n - 1
  std::vector<double> log_q;     // Q(cell k), upper end
  double tail_high = 0.0;        // P-mass sent to +inf (upper bound on it)
  double max_abs_loss = 0.0;     // largest |loss| of the grid points
};

StepPmfs make_step(const LossModel& m, double d) {
  const double s = m.sigma;
  const bool remove = m.direction == Direction::remove;
  const Dist p_dist{m.q, s, m.log_q, m.log_1mq, remove};
  const Dist q_dist{m.q, s, m.log_q, m.log_1mq, !remove};
  // Loss range and clamp points in x. remove: losses grow with x; add: they fall.
  //  q < 1: the loss is bounded on one side by log(1 - q) (remove: below; add: above).
  double x_small_loss, x_large_loss;  // x at the clamp of the smallest / largest losses (+-inf: none)
  if (remove) {
    x_small_loss = m.q < 1.0 ? kNegInf : 1.0 - kTailSigmas * s;
    x_large_loss = 1.0 + kTailSigmas * s;
  } else {
    x_small_loss = kTailSigmas * s;
    x_large_loss = m.q < 1.0 ? kNegInf : -kTailSigmas * s;
  }
  const double loss_low = std::isinf(x_small_loss) ? (remove ? m.log_1mq : -m.log_1mq) : m.loss(x_small_loss);
  const double loss_high = std::isinf(x_large_loss) ? -m.log_1mq : m.loss(x_large_loss);
  const long k_low = static_cast<long>(std::floor(loss_low / d));
  const long k_high = static_cast<long>(std::floor(loss_high / d));
  const auto n = static_cast<std::size_t>(k_high - k_low + 1);  // cells
  if (n + 1 > kMaxStepBuckets) {
    throw std::invalid_argument("discretization " + format_value(d) + " is too fine for noise_multiplier " +
                                format_value(s) + ": one step would need " + std::to_string(n) +
                                " loss buckets; increase discretization");
  }
  // x edge of cell k's lower loss end kD (k in (k_low, k_high]); the outer edges are the clamp points.
  auto edge_x = [&](long k) {
    if (k <= k_low) return x_small_loss;
    if (k > k_high) return x_large_loss;
    return m.x_of(static_cast<double>(k) * d);
  };
  StepPmfs out;
  out.low = k_low;
  out.log_u.assign(n + 1, kNegInf);
  out.log_p.resize(n);
  out.log_q.resize(n);
  const double e_minus_d = std::exp(-d);
  const double one_minus = -std::expm1(-d);
  double x_prev = edge_x(k_low);
  Edge p_prev = p_dist.edge(x_prev), q_prev = q_dist.edge(x_prev);
  for (std::size_t i = 0; i < n; ++i) {
    const long k = k_low + static_cast<long>(i);
    const double x_next = edge_x(k + 1);
    const Edge p_next = p_dist.edge(x_next), q_next = q_dist.edge(x_next);
    const Mass pm = remove ? log_interval(p_prev, p_next) : log_interval(p_next, p_prev);
    const Mass qm = remove ? log_interval(q_prev, q_next) : log_interval(q_next, q_prev);
    out.log_p[i] = pm.lo;
    out.log_q[i] = qm.hi;
    // Connect the dots on [kD, (k+1)D]: fraction at kD = (w e^{kD}/m - e^{-D}) / (1 - e^{-D}),
    // taken at its certified lower end (w low, m high); the rest of m (high) goes to (k+1)D.
    if (pm.hi > kNegInf) {
      const double kd = static_cast<double>(k) * d;
      double fraction = 0.0;
      if (qm.lo > kNegInf) {
        const double arg = qm.lo + kd - pm.hi;
        const double ratio = exp_down(arg, kU * (std::fabs(qm.lo) + std::fabs(kd) + std::fabs(pm.hi)));
        fraction = (ratio * (1.0 - 2.0 * kU) - e_minus_d * (1.0 + 2.0 * kU)) / (one_minus * (1.0 + 4.0 * kU));
        fraction = std::clamp(fraction * (1.0 - 4.0 * kU), 0.0, 1.0);
      }
      if (fraction > 0.0) out.log_u[i] = log_add(out.log_u[i], pm.hi + std::log(fraction));
      if (fraction < 1.0) out.log_u[i + 1] = log_add(out.log_u[i + 1], pm.hi + std::log1p(-fraction) + 4.0 * kU);
    }
    x_prev = x_next;
    p_prev = p_next;
    q_prev = q_next;
  }
  // Clamped tails: the smallest losses move up to grid point k_low + 1 (> every
  // clamped loss); the largest go to +inf.
  if (!std::isinf(x_small_loss)) {
    const Edge e = p_dist.edge(x_small_loss);
    const double tail = remove ? e.log_cdf : e.log_sf;
    out.log_u[1] = log_add(out.log_u[1], tail + kLogC * (1.0 + std::fabs(tail)));
  }
  if (!std::isinf(x_large_loss)) {
    const Edge e = p_dist.edge(x_large_loss);
    const double tail = remove ? e.log_sf : e.log_cdf;
    out.tail_high = std::exp(tail + kLogC * (1.0 + std::fabs(tail)));
  }
  out.max_abs_loss = std::max(std::fabs(static_cast<double>(k_low) * d), std::fabs(static_cast<double>(k_high + 1) * d));
  return out;
}

// z^count by binary exponentiation (count >= 1). The products are written out:
// std::complex's operator* adds NaN/inf recovery branches (C99 Annex G) that
// cost time and change nothing for finite data.
std::complex<double> integer_power(std::complex<double> z, double count) {
  double rr = 1.0, ri = 0.0, zr = z.real(), zi = z.imag();
  auto n = static_cast<unsigned long long>(count);
  while (n > 0) {
    if (n & 1ULL) {
      const double t = rr * zr - ri * zi;
      ri = rr * zi + ri * zr;
      rr = t;
    }
    n >>= 1;
    if (n == 0) break;
    const double t = zr * zr - zi * zi;
    zi = 2.0 * zr * zi;
    zr = t;
  }
  return {rr, ri};
}

// One tilted, normalised step sequence: p[j] at grid index low + j.
struct Tilted {
  long low = 0;
  std::vector<double> p, log_p;
  double log_norm = 0.0;  // log of the normaliser (untilted mass = p e^{log_norm - slope K D})
  double l2 = 0.0;        // ||p||_2
  double max_rounding = 0.0;  // relative rounding of the entries
};

Tilted tilt_sequence(const std::vector<double>& log_mass, long low, double slope, double d) {
  Tilted t;
  t.low = low;
  const std::size_t n = log_mass.size();
  std::vector<double> logs(n);
  double largest = 0.0;
  for (std::size_t j = 0; j < n; ++j) {
    const double kd = static_cast<double>(low + static_cast<long>(j)) * d;
    logs[j] = log_mass[j] + slope * kd;
    largest = std::max(largest, std::fabs(log_mass[j] == kNegInf ? 0.0 : log_mass[j]) + std::fabs(slope * kd));
  }
  t.log_norm = logsumexp(logs.data(), n);
  t.p.resize(n);
  t.log_p.resize(n);
  double l2 = 0.0;
  for (std::size_t j = 0; j < n; ++j) {
    t.log_p[j] = logs[j] - t.log_norm;
    t.p[j] = std::exp(t.log_p[j]);
    l2 += t.p[j] * t.p[j];
  }
  t.l2 = std::sqrt(l2);
  // Each exponent carries <= (|log m| + |slope k D| + |log norm| + 4) u of
  // absolute error (the sums and the exp), i.e. that much relative error.
  t.max_rounding = 2.0 * kU * (largest + std::fabs(t.log_norm) + 4.0);
  return t;
}

// Chernoff window of a sum of independent steps (tilted PMFs): the losses
// [low, high] outside which the composed mass is <= e^{kLogWindowTail} per side,
// from P(S >= t) <= exp(K(s) - s t) and P(S <= t) <= exp(K(-s) + s t),
// K(s) = sum_g count_g log sum_j p_gj e^{s (low_g + j) D}, minimised over a
// geometric set of slopes around 1 / sd.
void chernoff_window(const std::vector<const Tilted*>& seqs, const std::vector<double>& counts, double d,
                     double* low, double* high) {
  double variance = 0.0;
  for (std::size_t g = 0; g < seqs.size(); ++g) {
    double m1 = 0.0, m2 = 0.0;
    const Tilted& t = *seqs[g];
    for (std::size_t j = 0; j < t.p.size(); ++j) {
      const double loss = static_cast<double>(t.low + static_cast<long>(j)) * d;
      m1 += t.p[j] * loss;
      m2 += t.p[j] * loss * loss;
    }
    variance += counts[g] * std::max(m2 - m1 * m1, 0.0);
  }
  const double sd = std::sqrt(variance) + d;
  // K(s) as an upper bound, by Horner's rule in r = e^{s D} (no exp per entry):
  // every term is >= 0, so the computed sum is within 2 n u (relative) of the
  // exact one; an overflow gives +inf, which only makes that slope useless.
  auto cumulant = [&](double s) {
    double k = 0.0;
    for (std::size_t g = 0; g < seqs.size(); ++g) {
      const Tilted& t = *seqs[g];
      const std::size_t n = t.p.size();
      const bool up = s > 0.0;  // sum from the end whose powers are smallest
      const double r = std::exp((up ? 1.0 : -1.0) * s * d);
      double acc = 0.0;
      if (up) {
        for (std::size_t j = n; j-- > 0;) acc = acc * r + t.p[j];        // sum_j p_j r^j
      } else {
        for (std::size_t j = 0; j < n; ++j) acc = acc * r + t.p[j];      // sum_j p_j r^(n-1-j)
      }
      const double first = static_cast<double>(t.low) * d, last = static_cast<double>(t.low + static_cast<long>(n) - 1) * d;
      const double log_sum = std::log(acc * (1.0 + 4.0 * kU * static_cast<double>(n + 2))) + s * (up ? first : last);
      k += counts[g] * log_sum;
    }
    return k;
  };
  // Slopes from 1/(256 sd) to 32/sd: heavy-tailed tilted steps (small sigma) need the small ones.
  double hi = kInf, lo = kNegInf;
  for (double scale = 1.0 / 256.0; scale <= 32.0; scale *= 2.0) {
    const double s = scale / sd;
    hi = std::min(hi, (cumulant(s) - kLogWindowTail) / s);
    lo = std::max(lo, (cumulant(-s) - kLogWindowTail) / -s);
  }
  if (!(std::isfinite(hi) && std::isfinite(lo) && hi > lo)) {
    throw std::domain_error("could not bound the composed privacy loss (non-finite Chernoff bound)");
  }
  *low = std::min(*low, lo);
  *high = std::max(*high, hi);
}

// Composes one kind of sequence over the groups on the window [start, start + N)
// and returns the tilted composed entries (circular, clipped at 0).
std::vector<double> compose(const std::vector<const Tilted*>& seqs, const std::vector<double>& counts,
                            const fft::RealPlan& plan, long start) {
  const std::size_t size = plan.size();
  const auto n_mod = static_cast<long>(size);
  std::vector<std::complex<double>> total(size / 2 + 1, {1.0, 0.0});
  std::vector<double> buffer(size);
  for (std::size_t g = 0; g < seqs.size(); ++g) {
    std::fill(buffer.begin(), buffer.end(), 0.0);
    const Tilted& t = *seqs[g];
    for (std::size_t j = 0; j < t.p.size(); ++j) {
      long index = (t.low + static_cast<long>(j)) % n_mod;
      if (index < 0) index += n_mod;
      buffer[static_cast<std::size_t>(index)] += t.p[j];
    }
    const std::vector<std::complex<double>> spectrum = plan.forward(buffer);
    for (std::size_t k = 0; k < total.size(); ++k) {
      const std::complex<double> z = integer_power(spectrum[k], counts[g]);
      const double re = total[k].real() * z.real() - total[k].imag() * z.imag();
      const double im = total[k].real() * z.imag() + total[k].imag() * z.real();
      total[k] = {re, im};
    }
  }
  const std::vector<double> circular = plan.inverse(total);
  std::vector<double> out(size);
  const double inv_n = 1.0 / static_cast<double>(size);
  for (std::size_t i = 0; i < size; ++i) {
    long r = (start + static_cast<long>(i)) % n_mod;
    if (r < 0) r += n_mod;
    out[i] = std::max(circular[static_cast<std::size_t>(r)] * inv_n, 0.0);  // FFT noise below 0 -> 0
  }
  return out;
}

// sqrt(sum_{j >= 0, j < n} e^{-2 slope j D}): with the 2-norm round-off bound e2 of
// the composed entries, Cauchy-Schwarz bounds the error of a suffix sum by e2 times this.
double weight_norm(double slope, double d, std::size_t n) {
  if (slope > 0.0) return std::sqrt(1.0 / -std::expm1(-2.0 * slope * d));
  return std::sqrt(static_cast<double>(n));
}

// suffix[i] = sum_{j >= i} c_j e^{-slope (j - i) D}.
std::vector<double> suffix_sums(const std::vector<double>& c, double slope, double d) {
  std::vector<double> s(c.size() + 1, 0.0);
  const double r = std::exp(-slope * d);
  for (std::size_t i = c.size(); i-- > 0;) s[i] = c[i] + r * s[i + 1];
  s.pop_back();
  return s;
}

// 2-norm round-off bound of the composed entries (Higham Thm 24.2 per
// transform; forward errors amplified by the powers (|z| <= 1) are <= T eta
// ||p||_2, the products add ~2 log2(count) ulps each, the inverse adds eta).
double entry_error(const std::vector<const Tilted*>& seqs, const std::vector<double>& counts, std::size_t size) {
  const double eta = fft::error_bound(size);
  double steps = 0.0, max_l2 = 0.0, log2_count = 0.0;
  for (std::size_t g = 0; g < seqs.size(); ++g) {
    steps += counts[g];
    max_l2 = std::max(max_l2, seqs[g]->l2);
    log2_count += std::log2(counts[g] + 1.0) + 1.0;
  }
  return (steps + 2.0) * eta * max_l2 + (2.0 * log2_count + 8.0) * kU;
}

}  // namespace

ComposedPld::ComposedPld(const std::vector<StepGroup>& groups, Direction direction, double discretization,
                         double tilt, std::size_t max_size)
    : discretization_(discretization), tilt_(tilt), log_tail_u_(kLogWindowTail), log_tail_c_(kLogWindowTail) {
  require_positive_finite("discretization", discretization);
  require_nonnegative_finite("tilt", tilt);
  const double d = discretization;
  std::vector<Tilted> upper, cells_p, cells_q;
  std::vector<double> counts;
  double max_abs_loss = 0.0;
  for (const auto& g : groups) {
    require_probability("sampling_probability", g.sampling_probability);
    require_positive_finite("noise_multiplier", g.noise_multiplier);
    if (!(g.count >= 0.0 && g.count == std::floor(g.count))) fail("count", "an integer >= 0", g.count);
    if (g.count == 0.0 || g.sampling_probability == 0.0) continue;
    const LossModel model{g.sampling_probability, g.noise_multiplier, std::log(g.sampling_probability),
                          std::log1p(-g.sampling_probability), direction};
    const StepPmfs step = make_step(model, d);
    upper.push_back(tilt_sequence(step.log_u, step.low, tilt, d));
    cells_p.push_back(tilt_sequence(step.log_p, step.low, tilt, d));
    cells_q.push_back(tilt_sequence(step.log_q, step.low, tilt + 1.0, d));
    counts.push_back(g.count);
    steps_ += g.count;
    tail_above_ += g.count * step.tail_high;
    max_abs_loss = std::max(max_abs_loss, step.max_abs_loss);
    log_shift_u_ += g.count * upper.back().log_norm;
    log_shift_p_ += g.count * cells_p.back().log_norm;
    log_shift_q_ += g.count * cells_q.back().log_norm;
    log_rounding_ += g.count * std::max({upper.back().max_rounding, cells_p.back().max_rounding,
                                         cells_q.back().max_rounding});
  }
  if (counts.empty()) {  // nothing composed: the loss is 0 with probability 1
    size_ = 1;
    window_start_ = 0;
    return;
  }
  // x at a cell edge is within ~8 u (1 + |x|) of the exact preimage of kD, so
  // a cell's losses may poke out of [kD, (k+1)D] by <= 64 u (1 + |loss|) (the
  // slope of L is <= 1/sigma^2 and x ~ sigma^2 L): charged as a shift of epsilon.
  epsilon_slack_ = steps_ * 64.0 * kU * (1.0 + max_abs_loss);

  std::vector<const Tilted*> pu, pp, pq;
  for (std::size_t g = 0; g < counts.size(); ++g) {
    pu.push_back(&upper[g]);
    pp.push_back(&cells_p[g]);
    pq.push_back(&cells_q[g]);
  }
  // Windows: one for the connect-the-dots losses, one for the cell labels (their sum
  // sits ~T D / 2 below the loss, so the two are kept apart), one FFT size for both.
  double low_u = kInf, high_u = kNegInf, low_c = kInf, high_c = kNegInf;
  chernoff_window(pu, counts, d, &low_u, &high_u);
  chernoff_window(pp, counts, d, &low_c, &high_c);
  chernoff_window(pq, counts, d, &low_c, &high_c);
  // Where the whole composed support is shorter than the Chernoff window (few steps),
  // use it: nothing can wrap around, and no tail needs to be charged.
  double full_low_u = 0.0, full_high_u = 0.0, full_low_c = 0.0, full_high_c = 0.0;
  for (std::size_t g = 0; g < counts.size(); ++g) {
    full_low_u += counts[g] * static_cast<double>(upper[g].low);
    full_high_u += counts[g] * static_cast<double>(upper[g].low + static_cast<long>(upper[g].p.size()) - 1);
    full_low_c += counts[g] * static_cast<double>(cells_p[g].low);
    full_high_c += counts[g] * static_cast<double>(cells_p[g].low + static_cast<long>(cells_p[g].p.size()) - 1);
  }
  if ((full_high_u - full_low_u) * d <= high_u - low_u) {
    low_u = full_low_u * d;
    high_u = full_high_u * d;
    log_tail_u_ = kNegInf;
  }
  if ((full_high_c - full_low_c) * d <= high_c - low_c) {
    low_c = full_low_c * d;
    high_c = full_high_c * d;
    log_tail_c_ = kNegInf;
  }
  const double span = std::max(high_u - low_u, high_c - low_c) / d + 2.0;
  std::size_t size = 2;
  while (static_cast<double>(size) < span) size <<= 1;
  if (size > max_size) {
    throw std::invalid_argument("the composed PLD needs an FFT of size " + std::to_string(size) +
                                " > max_size " + std::to_string(max_size) +
                                " at discretization " + format_value(d) + "; increase discretization");
  }
  size_ = size;
  window_start_ = static_cast<long>(std::floor(low_u / d + (log_tail_u_ == kNegInf ? 0.5 : 0.0)));
  cells_start_ = static_cast<long>(std::floor(low_c / d + (log_tail_c_ == kNegInf ? 0.5 : 0.0)));
  const fft::RealPlan plan(size_);

  {
    const std::vector<double> c = compose(pu, counts, plan, window_start_);
    s1_ = suffix_sums(c, tilt, d);
    s2_ = suffix_sums(c, tilt + 1.0, d);
    entry_error_u_ = entry_error(pu, counts, size_);
  }
  const std::vector<double> cp = compose(pp, counts, plan, cells_start_);
  sp_ = suffix_sums(cp, tilt, d);
  entry_error_p_ = entry_error(pp, counts, size_);
  const std::vector<double> cq = compose(pq, counts, plan, cells_start_);
  sq_ = suffix_sums(cq, tilt + 1.0, d);
  entry_error_q_ = entry_error(pq, counts, size_);
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
}

double ComposedPld::window_low() const { return static_cast<double>(window_start_) * discretization_; }

double ComposedPld::window_high() const {
  return static_cast<double>(window_start_ + static_cast<long>(size_) - 1) * discretization_;
}

// Upper bound: delta_u(eps) = sum_{K D > eps} p_K (1 - e^{eps - K D}) of the
// composed connect-the-dots PMF, plus round-off, window and tail terms.
double ComposedPld::upper_bound(double epsilon_in) const {
  const double d = discretization_;
  const double epsilon = epsilon_in - epsilon_slack_;
  if (epsilon < window_low()) return 1.0;  // losses below the window are not represented
  const long k = static_cast<long>(std::floor(epsilon / d)) + 1;  // first loss index above epsilon
  const long i = k - window_start_;
  const double kd = static_cast<double>(k) * d;
  double value = 0.0;
  if (i < static_cast<long>(size_)) {
    const double s1 = s1_[static_cast<std::size_t>(i)];
    const double s2 = s2_[static_cast<std::size_t>(i)];
    if (s1 > 0.0) {
      // s1 (1 - x s2 / s1) with both suffix sums within 16 u N (relative) of exact:
      // the difference errs by <= 32 u N s1.
      const double fraction = -std::expm1(std::min(epsilon - kd + std::log(s2) - std::log(s1), 0.0));
      const double log_delta = log_shift_u_ - tilt_ * kd + std::log(s1) +
                               std::log(fraction + 32.0 * kU * static_cast<double>(size_));
      value = std::exp(log_delta + log_rounding_) * (1.0 + 8.0 * kU);
    }
  }
  // Round-off of the represented entries K >= k (weights e^{-tilt (K - k) D} <= 1),
  // the aliased tilted mass (<= 2 e^-25 in total), and the mass above the window.
  const double entries = weight_norm(tilt_, d, size_);
  const double scale = std::exp(log_shift_u_ - tilt_ * kd + log_rounding_);
  const double top = window_high() + d;
  value += (entry_error_u_ * entries + 2.0 * std::exp(log_tail_u_)) * scale +
           std::exp(log_shift_u_ + log_rounding_ - tilt_ * std::max(top, kd) + log_tail_u_);
  // A positive delta below the double range is still positive: never claim 0.
  return std::max(std::min(value + tail_above_ * (1.0 + 4.0 * kU), 1.0), std::numeric_limits<double>::denorm_min());
}

// Lower bound: max over thresholds j of P(K >= j) - e^eps Q(K >= j), with the
// P side taken low and the Q side high.
double ComposedPld::lower_bound(double epsilon) const {
  const double d = discretization_;
  const long n = static_cast<long>(size_);
  const double rp = std::exp(-tilt_ * d), rq = std::exp(-(tilt_ + 1.0) * d);
  const double err_p = entry_error_p_ * weight_norm(tilt_, d, size_) + 2.0 * std::exp(log_tail_c_);
  const double err_q = entry_error_q_ * weight_norm(tilt_ + 1.0, d, size_) + std::exp(log_tail_c_);
  // P_K >= e^eps Q_K  <=>  log c^P_K - log c^Q_K >= eps + log_shift_q - log_shift_p - K D.
  const double offset = epsilon + log_shift_q_ - log_shift_p_;
  auto entry = [&](const std::vector<double>& s, double r, long i) {
    return s[static_cast<std::size_t>(i)] - (i + 1 < n ? r * s[static_cast<std::size_t>(i + 1)] : 0.0);
  };
  auto p_wins = [&](long i) {
    const double cp = entry(sp_, rp, i), cq = entry(sq_, rq, i);
    if (!(cp > 0.0)) return false;
    if (!(cq > 0.0)) return true;
    const double kd = static_cast<double>(cells_start_ + i) * d;
    return std::log(cp) - std::log(cq) >= offset - kd;
  };
  // First i where P wins (the per-entry likelihood ratio increases with K),
  // searched where both entries stand above their round-off.
  long lo = reliable_low_, hi = reliable_high_;
  if (p_wins(lo)) {
    hi = lo;
  } else if (!p_wins(hi)) {
    lo = hi;
  } else {
    while (hi - lo > 1) {
      const long mid = lo + (hi - lo) / 2;
      if (p_wins(mid)) {
        hi = mid;
      } else {
        lo = mid;
      }
    }
  }
  const double factor_p = std::exp(-log_rounding_) * (1.0 - 16.0 * kU * static_cast<double>(size_));
  const double factor_q = std::exp(log_rounding_) * (1.0 + 16.0 * kU * static_cast<double>(size_));
  auto value_at = [&](long i) {  // P(K >= j) - e^eps Q(K >= j), j = cells_start + i, or 0
    const double kd = static_cast<double>(cells_start_ + i) * d;
    const double p_part = (sp_[static_cast<std::size_t>(i)] - err_p) * factor_p;
    if (!(p_part > 0.0)) return 0.0;
    const double q_part = (sq_[static_cast<std::size_t>(i)] + err_q) * factor_q;
    const double ratio_log = offset - kd + std::log(q_part) - std::log(p_part);  // log(e^eps Q / P)
    if (ratio_log >= 0.0) return 0.0;
    return std::exp(log_shift_p_ - tilt_ * kd + std::log(p_part) + log1mexp(ratio_log));
  };
  // The threshold test is best at the crossing; round-off can move the
  // computed crossing by a few entries, so climb to the local maximum.
  long at = hi;
  double best = value_at(at);
  for (int dir : {-1, 1}) {
    for (long i = at + dir, steps = 0; i >= 0 && i < n && steps < 4096; i += dir, ++steps) {
      const double v = value_at(i);
      if (v > best) {
        best = v;
        at = i;
      } else if (steps >= 8) {
        break;
      }
    }
  }
  return std::min(best, 1.0);
}

void ComposedPld::delta_bounds(double epsilon, double* lower, double* upper) const {
  if (steps_ == 0.0) {  // nothing composed
    *lower = 0.0;
    *upper = 0.0;
    return;
  }
  *upper = upper_bound(epsilon);
  *lower = lower_bound(epsilon);
}

}  // namespace dpacct::pld

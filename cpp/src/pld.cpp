#include "dpacct/pld.hpp"

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <complex>
#include <stdexcept>
#include <string>

#include "dpacct/check.hpp"
#include "dpacct/fft.hpp"
#include "dpacct/logmath.hpp"

namespace dpacct::pld {

namespace {

constexpr double kEps = DBL_EPSILON;
constexpr double kTailSigmas = 12.5;    // clamp points: P(beyond) < 4e-36 per step
constexpr double kLogWindowTail = -25.0; // tilted mass outside the FFT window: e^-25 ~ 1e-11 per side (charged to both bounds)
constexpr double kMassRtol = 1e-9;      // relative error budget of the bucket masses (CDF differences)
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
  // The x with loss(x) = l; -inf when l is beyond the loss's finite end.
  double x_of(double l) const {
    if (l == kInf) return direction == Direction::remove ? kInf : kNegInf;
    if (l == kNegInf) return direction == Direction::remove ? kNegInf : kInf;
    const double value = direction == Direction::remove ? l : -l;
    double u;
    if (q == 1.0) {
      u = value;
    } else {
      if (value <= log_1mq) return direction == Direction::remove ? kNegInf : kNegInf;
      u = log_sub(value, log_1mq) - log_q;
    }
    return sigma * sigma * u + 0.5;
  }
  // log CDF and log survival function of x under P.
  double log_cdf(double x) const {
    if (direction == Direction::add || q == 0.0) return log_ndtr(x / sigma);
    if (q == 1.0) return log_ndtr((x - 1.0) / sigma);
    return log_add(log_1mq + log_ndtr(x / sigma), log_q + log_ndtr((x - 1.0) / sigma));
  }
  double log_sf(double x) const {
    if (direction == Direction::add || q == 0.0) return log_ndtr(-x / sigma);
    if (q == 1.0) return log_ndtr((1.0 - x) / sigma);
    return log_add(log_1mq + log_ndtr(-x / sigma), log_q + log_ndtr((1.0 - x) / sigma));
  }
  double log_density(double x) const {
    const double l0 = -0.5 * (x / sigma) * (x / sigma) - std::log(sigma) - 0.5 * kLogTwoPi;
    if (direction == Direction::add) return l0;
    const double l1 = -0.5 * ((x - 1.0) / sigma) * ((x - 1.0) / sigma) - std::log(sigma) - 0.5 * kLogTwoPi;
    if (q == 1.0) return l1;
    return log_add(log_1mq + l0, log_q + l1);
  }
};

// Endpoint data of an x interval, cached so adjacent buckets share evaluations.
struct Edge {
  double log_cdf, log_sf;
};

Edge edge_at(const LossModel& m, double x) {
  if (x == kNegInf) return {kNegInf, 0.0};
  if (x == kInf) return {0.0, kNegInf};
  // Evaluate only the tail that is <= 1/2 (there log1mexp recovers the other
  // one to full relative accuracy): the CDF below every component's mean, the
  // survival function above every component's mean, both in between.
  const bool mixture = m.direction == Direction::remove && m.q > 0.0;
  const double below = 0.0;
  const double above = mixture ? 1.0 : 0.0;
  if (x <= below && !(mixture && m.q == 1.0)) {
    const double c = m.log_cdf(x);
    return {c, log1mexp(c)};
  }
  if (x >= above) {
    const double sf = m.log_sf(x);
    return {log1mexp(sf), sf};
  }
  return {m.log_cdf(x), m.log_sf(x)};
}

// log P(a < x < b) from cached endpoint data, choosing the branch without cancellation.
double log_interval(const Edge& a, const Edge& b) {
  constexpr double kLogHalf = -kLn2;
  if (b.log_cdf < kLogHalf) return log_sub(b.log_cdf, a.log_cdf);
  if (a.log_sf < kLogHalf) return log_sub(a.log_sf, b.log_sf);
  return log1mexp(log_add(a.log_cdf, b.log_sf));
}

// One step's clamped, rounded-to-nearest loss distribution.
struct StepPmf {
  long low_index = 0;             // the first bucket is loss low_index * D
  std::vector<double> log_mass;   // log P(L~ = (low_index + j) D)
  double tail_low = 0.0;          // P(L < clamp low): charged to the lower bound
  double tail_high = 0.0;         // P(L > clamp high): charged to the upper bound
  double mean_shift = 0.0;        // E[L~] - E[L'] (L' = clamped loss)
  double mean_error = 0.0;        // bound on the error of mean_shift
};

StepPmf make_step(const LossModel& m, double d) {
  StepPmf pmf;
  const double s = m.sigma;
  // Clamp points in x and the loss range. Clamping is exact for the clamped
  // loss L' that is composed; only the untilted probability of clamping
  // (< 1e-35 per step at 12.5 sigma) is charged to the bounds, so the clamp
  // points do not depend on the tilt.
  double x_low, x_high;  // the loss is clamped outside (x_low, x_high)
  double loss_low, loss_high;
  if (m.direction == Direction::remove) {
    x_low = m.q < 1.0 ? kNegInf : 1.0 - kTailSigmas * s;
    x_high = 1.0 + kTailSigmas * s;
    loss_low = m.q < 1.0 ? m.log_1mq : m.loss(x_low);
    loss_high = m.loss(x_high);
    pmf.tail_low = m.q < 1.0 ? 0.0 : std::exp(m.log_cdf(x_low));
    pmf.tail_high = std::exp(m.log_sf(x_high));
  } else {
    x_low = m.q < 1.0 ? kNegInf : -kTailSigmas * s;  // high losses
    x_high = kTailSigmas * s;                                 // low losses
    loss_high = m.q < 1.0 ? -m.log_1mq : m.loss(x_low);
    loss_low = m.loss(x_high);
    pmf.tail_high = m.q < 1.0 ? 0.0 : std::exp(m.log_cdf(x_low));
    pmf.tail_low = std::exp(m.log_sf(x_high));
  }
  const long j_low = std::lround(loss_low / d);
  const long j_high = std::lround(loss_high / d);
  const auto n = static_cast<std::size_t>(j_high - j_low + 1);
  if (n > kMaxStepBuckets) {
    throw std::invalid_argument("discretization " + format_value(d) + " is too fine for noise_multiplier " +
                                format_value(s) + ": one step would need " + std::to_string(n) +
                                " loss buckets; increase discretization");
  }
  pmf.low_index = j_low;
  pmf.log_mass.resize(n);
  // Bucket j holds losses in ((j - 1/2) D, (j + 1/2) D]; the end buckets also
  // hold everything clamped into them.
  auto boundary_x = [&](long j) {  // x at loss (j + 1/2) D, the upper loss edge of bucket j
    if (j >= j_high) return m.direction == Direction::remove ? kInf : kNegInf;
    return m.x_of((static_cast<double>(j) + 0.5) * d);
  };
  const double x_start = m.direction == Direction::remove ? kNegInf : kInf;
  Edge previous = edge_at(m, x_start);
  for (std::size_t k = 0; k < n; ++k) {
    const long j = j_low + static_cast<long>(k);
    const Edge next = edge_at(m, boundary_x(j));
    pmf.log_mass[k] = m.direction == Direction::remove ? log_interval(previous, next) : log_interval(next, previous);
    previous = next;
  }
  // E[L~] by compensated summation.
  double mean_discrete = 0.0, c = 0.0, abs_discrete = 0.0;
  for (std::size_t k = 0; k < n; ++k) {
    const double t = std::exp(pmf.log_mass[k]) * (static_cast<double>(j_low) + static_cast<double>(k)) * d;
    const double y = t - c;
    const double sum = mean_discrete + y;
    c = (sum - mean_discrete) - y;
    mean_discrete = sum;
    abs_discrete += std::fabs(t);
  }
  // E[L'] by the trapezoid rule: p(x) L(x) is analytic and negligible (< e^-90)
  // at both ends of the interval, so the rule converges spectrally; the clamped
  // tails contribute their constant loss times their probability.
  const double a = std::max(x_low, (m.direction == Direction::remove ? 0.0 : 0.0) - (kTailSigmas + 1.0) * s);
  const double b = std::min(x_high, (m.direction == Direction::remove ? 1.0 : 0.0) + (kTailSigmas + 1.0) * s);
  const double h = s / 64.0;
  const long points = static_cast<long>(std::ceil((b - a) / h));
  const double step = (b - a) / static_cast<double>(points);
  double integral = 0.0, abs_integral = 0.0;
  for (long i = 0; i <= points; ++i) {
    const double x = a + step * static_cast<double>(i);
    const double weight = (i == 0 || i == points) ? 0.5 : 1.0;
    const double t = weight * std::exp(m.log_density(x)) * m.loss(x);
    integral += t;
    abs_integral += std::fabs(t);
  }
  integral *= step;
  abs_integral *= step;
  double mean_clamped = integral;
  if (m.direction == Direction::remove) {
    mean_clamped += loss_high * std::exp(m.log_sf(b)) + (x_low == kNegInf ? 0.0 : loss_low * std::exp(m.log_cdf(a)));
  } else {
    mean_clamped += loss_low * std::exp(m.log_sf(b)) + (x_low == kNegInf ? 0.0 : loss_high * std::exp(m.log_cdf(a)));
  }
  // Outside [a, b] but inside the clamp points the loss is unclamped; its mass is
  // below e^-100, bounded by the clamp values.
  const double outside = std::exp(m.log_cdf(a)) + std::exp(m.log_sf(b));
  pmf.mean_shift = mean_discrete - mean_clamped;
  pmf.mean_error = kMassRtol * (abs_discrete + abs_integral + d) +
                   outside * (std::fabs(loss_low) + std::fabs(loss_high));
  return pmf;
}

// z^count by binary exponentiation (count >= 1).
std::complex<double> integer_power(std::complex<double> z, double count) {
  std::complex<double> result(1.0, 0.0);
  auto n = static_cast<unsigned long long>(count);
  while (n > 0) {
    if (n & 1ULL) result *= z;
    z *= z;
    n >>= 1;
  }
  return result;
}

}  // namespace

ComposedPld::ComposedPld(const std::vector<StepGroup>& groups, Direction direction, double discretization,
                         double tilt, std::size_t max_size)
    : discretization_(discretization), tilt_(tilt) {
  require_positive_finite("discretization", discretization);
  require_nonnegative_finite("tilt", tilt);
  const double d = discretization;
  struct Tilted {
    StepPmf pmf;
    std::vector<double> p;      // tilted, normalised masses
    std::vector<double> log_p;  // their logarithms
    double log_mgf = 0.0;   // log E[e^{tilt L~}]
    double count = 0.0;
  };
  std::vector<Tilted> steps;
  double mean = 0.0, variance = 0.0, max_l2 = 0.0;
  for (const auto& g : groups) {
    require_probability("sampling_probability", g.sampling_probability);
    require_positive_finite("noise_multiplier", g.noise_multiplier);
    if (!(g.count >= 0.0 && g.count == std::floor(g.count))) fail("count", "an integer >= 0", g.count);
    if (g.count == 0.0 || g.sampling_probability == 0.0) continue;
    const LossModel model{g.sampling_probability, g.noise_multiplier, std::log(g.sampling_probability),
                          std::log1p(-g.sampling_probability), direction};
    Tilted t;
    t.pmf = make_step(model, d);
    t.count = g.count;
    const std::size_t n = t.pmf.log_mass.size();
    std::vector<double> logs(n);
    for (std::size_t k = 0; k < n; ++k) {
      logs[k] = t.pmf.log_mass[k] + tilt * (static_cast<double>(t.pmf.low_index) + static_cast<double>(k)) * d;
    }
    t.log_mgf = logsumexp(logs.data(), n);
    t.p.resize(n);
    t.log_p.resize(n);
    for (std::size_t k = 0; k < n; ++k) t.log_p[k] = logs[k] - t.log_mgf;
    double m1 = 0.0, m2 = 0.0, l2 = 0.0;
    for (std::size_t k = 0; k < n; ++k) {
      const double pk = std::exp(logs[k] - t.log_mgf);
      const double loss = (static_cast<double>(t.pmf.low_index) + static_cast<double>(k)) * d;
      t.p[k] = pk;
      m1 += pk * loss;
      m2 += pk * loss * loss;
      l2 += pk * pk;
    }
    mean += t.count * m1;
    variance += t.count * std::max(m2 - m1 * m1, 0.0);
    max_l2 = std::max(max_l2, std::sqrt(l2));
    steps_ += t.count;
    mean_shift_ += t.count * t.pmf.mean_shift;
    tail_above_ += t.count * t.pmf.tail_high;
    tail_below_ += t.count * t.pmf.tail_low;
    log_shift_ += t.count * t.log_mgf;
    steps.push_back(std::move(t));
  }
  mean_error_ = 0.0;
  for (const auto& t : steps) mean_error_ += t.count * t.pmf.mean_error;
  if (steps.empty()) {  // nothing composed: the loss is 0 with probability 1
    size_ = 1;
    window_start_ = 0;
    s1_.assign(1, 1.0);
    s2_.assign(1, 1.0);
    return;
  }
  // Window of the tilted composed loss: Chernoff bounds with a few slopes s,
  // P(S >= t) <= exp(K(s) - s t), K(s) = sum_g count_g log E~[e^{s L}].
  const double sd = std::sqrt(variance) + d;
  auto cumulant = [&](double s) {  // K(s) = sum_g count_g log E~[e^{s L}], exact on the discrete PMFs
    double k = 0.0;
    std::vector<double> logs;
    for (const auto& t : steps) {
      const std::size_t n = t.p.size();
      logs.resize(n);
      for (std::size_t j = 0; j < n; ++j) {
        logs[j] = t.log_p[j] + s * (static_cast<double>(t.pmf.low_index) + static_cast<double>(j)) * d;
      }
      k += t.count * logsumexp(logs.data(), n);
    }
    return k;
  };
  double high = kInf, low = kNegInf;
  for (double scale : {0.25, 0.5, 1.0, 2.0, 4.0, 8.0, 16.0, 32.0}) {
    const double s = scale / sd;
    high = std::min(high, (cumulant(s) - kLogWindowTail) / s);
    low = std::max(low, (cumulant(-s) - kLogWindowTail) / -s);
  }
  if (!(std::isfinite(high) && std::isfinite(low) && high > low)) {
    throw std::domain_error("could not bound the composed privacy loss (non-finite Chernoff bound)");
  }
  const double span = (high - low) / d + 2.0;
  std::size_t size = 2;
  while (static_cast<double>(size) < span) size <<= 1;
  if (size > max_size) {
    throw std::invalid_argument("the composed PLD needs an FFT of size " + std::to_string(size) +
                                " > max_size " + std::to_string(max_size) +
                                " at discretization " + format_value(d) + "; increase discretization");
  }
  size_ = size;
  window_start_ = static_cast<long>(std::floor(low / d));
  (void)mean;

  // Compose: place each tilted PMF at its absolute loss index mod N, transform,
  // raise to the count, multiply, and transform back.
  const fft::RealPlan plan(size_);
  const auto n_mod = static_cast<long>(size_);
  std::vector<std::complex<double>> total(size_ / 2 + 1, {1.0, 0.0});
  std::vector<double> buffer(size_);
  double log2_count = 0.0;
  for (const auto& t : steps) {
    std::fill(buffer.begin(), buffer.end(), 0.0);
    for (std::size_t j = 0; j < t.p.size(); ++j) {
      long index = (t.pmf.low_index + static_cast<long>(j)) % n_mod;
      if (index < 0) index += n_mod;
      buffer[static_cast<std::size_t>(index)] += t.p[j];
    }
    const std::vector<std::complex<double>> spectrum = plan.forward(buffer);
    for (std::size_t k = 0; k < total.size(); ++k) total[k] *= integer_power(spectrum[k], t.count);
    log2_count += std::log2(t.count + 1.0) + 1.0;
  }
  const std::vector<double> composed = plan.inverse(total);
  // Round-off bound per output entry (2-norm bounds, Higham Thm 24.2 per transform;
  // the real-input packing adds one butterfly-like stage, covered by using the
  // bound of the full length n): forward errors amplified by the powers (|z| <= 1)
  // are <= T eta ||p~||_2, the products add ~2 log2(count) ulps each, the inverse adds eta.
  const double eta = fft::error_bound(size_);
  entry_error_ = (steps_ + 2.0) * eta * max_l2 + (2.0 * log2_count + 8.0) * kEps +
                 2.0 * std::exp(kLogWindowTail);  // plus the tilted mass that wrapped around
  log_alias_above_ = kLogWindowTail;

  // Suffix sums in tilted units, entry i = loss index window_start + i:
  //   s1[i] = sum_{j >= i} p~_j e^{-tilt (j - i) D},  s2[i] = sum_{j >= i} p~_j e^{-(tilt + 1)(j - i) D},
  // so that sum_{K' >= K} p_K' = e^{log_shift - tilt K D} s1 and
  // sum_{K' >= K} p_K' e^{-K' D} = e^{log_shift - (tilt + 1) K D} s2 (p untilted).
  s1_.assign(size_ + 1, 0.0);
  s2_.assign(size_ + 1, 0.0);
  const double r1 = std::exp(-tilt * d);
  const double r2 = std::exp(-(tilt + 1.0) * d);
  const double inv_n = 1.0 / static_cast<double>(size_);
  for (std::size_t i = size_; i-- > 0;) {
    const long absolute = window_start_ + static_cast<long>(i);
    long r = absolute % n_mod;
    if (r < 0) r += n_mod;
    const double value = std::max(composed[static_cast<std::size_t>(r)] * inv_n, 0.0);  // FFT noise below 0 -> 0
    s1_[i] = value + r1 * s1_[i + 1];
    s2_[i] = value + r2 * s2_[i + 1];
  }
  s1_.pop_back();
  s2_.pop_back();
}

double ComposedPld::window_low() const { return static_cast<double>(window_start_) * discretization_; }

double ComposedPld::window_high() const {
  return static_cast<double>(window_start_ + static_cast<long>(size_) - 1) * discretization_;
}

double ComposedPld::hoeffding_width(double beta) const {
  // Hoeffding: sum of T independent errors, each in an interval of length D.
  return discretization_ * std::sqrt(steps_ * std::log(1.0 / beta) / 2.0);
}

double ComposedPld::log_discrete_delta(double epsilon) const {
  const double d = discretization_;
  const long k = static_cast<long>(std::floor(epsilon / d)) + 1;  // first loss index above epsilon
  const long i = k - window_start_;
  if (i >= static_cast<long>(size_)) return kNegInf;
  const double s1 = s1_[static_cast<std::size_t>(i)];
  const double s2 = s2_[static_cast<std::size_t>(i)];
  if (!(s1 > 0.0)) return kNegInf;
  const double kd = static_cast<double>(k) * d;
  return log_shift_ - tilt_ * kd + std::log(s1) + log1mexp(std::min(epsilon - kd + std::log(s2) - std::log(s1), 0.0));
}

double ComposedPld::error_term(double epsilon) const {
  const double d = discretization_;
  const long k = std::max(static_cast<long>(std::floor(epsilon / d)) + 1, window_start_);
  const double kd = static_cast<double>(k) * d;
  const long above = window_start_ + static_cast<long>(size_) - k;
  double entries;  // sum over represented K >= k of e^{-tilt (K - k) D}
  if (tilt_ > 0.0) {
    entries = 1.0 / -std::expm1(-tilt_ * d);
  } else {
    entries = static_cast<double>(std::max(above, 0L));
  }
  const double top = window_high() + d;
  return entry_error_ * entries * std::exp(log_shift_ - tilt_ * kd) +
         std::exp(log_shift_ - tilt_ * top + log_alias_above_);
}

void ComposedPld::delta_bounds(double epsilon, double beta, double* lower, double* upper) const {
  require_open_unit("beta", beta);
  if (steps_ == 0.0) {  // nothing composed
    *lower = 0.0;
    *upper = 0.0;
    return;
  }
  const double a = hoeffding_width(beta);
  const double eps_upper = epsilon + mean_shift_ - a - mean_error_;
  const double eps_lower = epsilon + mean_shift_ + a + mean_error_;
  const double first_valid = window_low();  // delta~(eps) needs every loss above eps represented
  if (eps_upper < first_valid) {
    *upper = 1.0;  // cannot certify anything tighter from this window
  } else {
    const double value = std::exp(log_discrete_delta(eps_upper)) * (1.0 + kMassRtol) + error_term(eps_upper) + beta +
                         tail_above_;
    *upper = std::min(value, 1.0);
  }
  if (eps_lower < first_valid) {
    *lower = 0.0;
  } else {
    const double value = std::exp(log_discrete_delta(eps_lower)) * (1.0 - kMassRtol) - 2.0 * error_term(eps_lower) -
                         beta - tail_below_;
    *lower = std::max(value, 0.0);
  }
}

}  // namespace dpacct::pld

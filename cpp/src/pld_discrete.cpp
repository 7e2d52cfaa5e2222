#include "dpacct/pld_discrete.hpp"

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <complex>
#include <stdexcept>
#include <string>

#include "dpacct/check.hpp"
#include "dpacct/fft.hpp"
#include "dpacct/logmath.hpp"

namespace dpacct::pld_discrete {

namespace {

constexpr double kU = DBL_EPSILON;  // 2 x unit round-off, used as a generous ulp
constexpr double kMassSlack = 1e-9;  // sum of P(cell) may exceed 1 by this much (caller's round-off)

// Neumaier's compensated sum: error <= 2u sum|x| + O(n u^2) (Higham, 2nd ed., §4.3).
struct Sum {
  double sum = 0.0, c = 0.0;
  void add(double x) {
    const double t = sum + x;
    c += std::fabs(sum) >= std::fabs(x) ? (sum - t) + x : (x - t) + sum;
    sum = t;
  }
  double value() const { return sum + c; }
};

// Grid index of a finite loss: the smallest k with k D >= loss (round up) or
// the largest k with k D <= loss (round down), checked in floating point so
// that the products k D used later are on the right side of the loss.
long grid_index(double loss, double d, bool up) {
  const double r = loss / d;
  if (!(std::fabs(r) < 4e18)) {
    throw std::invalid_argument("a privacy loss of " + format_value(loss) + " is out of range for discretization " +
                                format_value(d) + "; increase discretization");
  }
  auto k = static_cast<long>(up ? std::ceil(r) : std::floor(r));
  if (up) {
    while (static_cast<double>(k) * d < loss) ++k;
  } else {
    while (static_cast<double>(k) * d > loss) --k;
  }
  return k;
}

// z^n by binary exponentiation: at most 2 log2(n) + 1 complex products.
std::complex<double> integer_power(std::complex<double> z, unsigned long long n) {
  std::complex<double> result(1.0, 0.0);
  while (n > 0) {
    if (n & 1ULL) result *= z;
    z *= z;
    n >>= 1;
  }
  return result;
}

void require_size(std::size_t needed, std::size_t max_size, const char* what, double d) {
  if (needed > max_size) {
    throw std::invalid_argument(std::string(what) + " needs " + std::to_string(needed) + " entries > max_size " +
                                std::to_string(max_size) + " at discretization " + format_value(d) +
                                "; increase discretization or max_size");
  }
}

constexpr double kLogWindowTail = -80.0;  // Chernoff window: composed mass outside <= e^-80 ~ 1.8e-35 per side

struct Window {
  long low, high;                 // loss indices kept
  double tail_low, tail_high;     // bounds on the composed finite mass below low / above high
};

// Chernoff bounds on the composed finite mass, from the exact cumulant of the
// discrete PMFs: for every s > 0,
//   P(S >= t) <= exp(K(s) - s t),  P(S <= t) <= exp(K(-s) + s t),
//   K(s) = sum_g count_g log sum_j m_{g,j} e^{s (offset_g + j) D}
// (Chernoff 1952; the same tail bound dp_accounting uses to size its PLDs). The
// bounds are minimised over a geometric set of slopes around 1/sd.
Window chernoff_window(const std::vector<const Group*>& active, double d, long full_low, double support) {
  double variance = 0.0;
  for (const Group* g : active) {
    double mass = 0.0, m1 = 0.0, m2 = 0.0;  // finite mass and its first two moments
    for (std::size_t j = 0; j < g->pmf.mass.size(); ++j) {
      const double loss = static_cast<double>(g->pmf.offset + static_cast<long>(j)) * d;
      mass += g->pmf.mass[j];
      m1 += g->pmf.mass[j] * loss;
      m2 += g->pmf.mass[j] * loss * loss;
    }
    if (!(mass > 0.0)) continue;  // no finite mass: contributes nothing to the spread
    m1 /= mass;
    m2 /= mass;
    variance += g->count * std::max(m2 - m1 * m1, 0.0);
  }
  const double sd = std::sqrt(variance) + d;
  std::vector<double> logs;
  auto cumulant = [&](double s) {
    double k = 0.0;
    for (const Group* g : active) {
      logs.resize(g->pmf.mass.size());
      for (std::size_t j = 0; j < logs.size(); ++j) {
        logs[j] = std::log(g->pmf.mass[j]) + s * static_cast<double>(g->pmf.offset + static_cast<long>(j)) * d;
      }
      k += g->count * logsumexp(logs.data(), logs.size());
    }
    return k;
  };
  std::vector<double> slopes, k_plus, k_minus;
  for (double scale = 1.0 / 64.0; scale <= 256.0; scale *= 2.0) {
    slopes.push_back(scale / sd);
    k_plus.push_back(cumulant(scale / sd));
    k_minus.push_back(cumulant(-scale / sd));
  }
  double high = kInf, low = kNegInf;
  for (std::size_t i = 0; i < slopes.size(); ++i) {
    high = std::min(high, (k_plus[i] - kLogWindowTail) / slopes[i]);
    low = std::max(low, (kLogWindowTail - k_minus[i]) / slopes[i]);
  }
  const long full_high = full_low + static_cast<long>(std::min(support, 4e18)) - 1;
  if (!(std::isfinite(high) && std::isfinite(low) && high >= low)) {
    throw std::domain_error("could not bound the composed privacy loss (non-finite Chernoff bound)");
  }
  // Clamp in floating point before converting, so that the cast cannot overflow.
  const double lo_index = std::clamp(std::floor(low / d), static_cast<double>(full_low), static_cast<double>(full_high));
  const double hi_index = std::clamp(std::ceil(high / d), static_cast<double>(full_low), static_cast<double>(full_high));
  Window w{static_cast<long>(lo_index), static_cast<long>(hi_index), 0.0, 0.0};
  // Tail bounds at the actual window edges, inflated by 1e-9 (relative) for the
  // round-off of the cumulants (each a sum of exact-ish exponentials).
  double log_high = kInf, log_low = kInf;
  const double t_high = static_cast<double>(w.high + 1) * d, t_low = static_cast<double>(w.low - 1) * d;
  for (std::size_t i = 0; i < slopes.size(); ++i) {
    log_high = std::min(log_high, k_plus[i] - slopes[i] * t_high);
    log_low = std::min(log_low, k_minus[i] + slopes[i] * t_low);
  }
  w.tail_high = w.high == full_high ? 0.0 : std::min(std::exp(log_high) * (1.0 + 1e-9), 1.0);
  w.tail_low = w.low == full_low ? 0.0 : std::min(std::exp(log_low) * (1.0 + 1e-9), 1.0);
  return w;
}

}  // namespace

Pmf from_cells(const double* log_p, const double* log_q, std::size_t n_cells, const double* log_ratio_at_edges,
               double discretization, bool pessimistic, std::size_t max_size) {
  require_positive_finite("discretization", discretization);
  const double d = discretization;
  if (n_cells == 0) throw std::invalid_argument("log_p must have at least one cell, got 0");
  for (std::size_t i = 0; i < n_cells; ++i) {
    if (!(log_p[i] <= 0.0)) {
      throw std::invalid_argument("log_p must be <= 0 (a log-probability), got " + format_value(log_p[i]) +
                                  " at index " + std::to_string(i));
    }
    if (!pessimistic && !(log_q[i] <= 0.0)) {
      throw std::invalid_argument("log_q must be <= 0 (a log-probability), got " + format_value(log_q[i]) +
                                  " at index " + std::to_string(i));
    }
  }
  if (pessimistic) {
    if (log_ratio_at_edges == nullptr) {
      throw std::invalid_argument("log_ratio_at_edges is required for pessimistic rounding");
    }
    for (std::size_t i = 0; i + 1 < n_cells; ++i) {
      if (std::isnan(log_ratio_at_edges[i])) {
        throw std::invalid_argument("log_ratio_at_edges must not be NaN, got nan at index " + std::to_string(i));
      }
      if (i > 0 && log_ratio_at_edges[i] < log_ratio_at_edges[i - 1]) {
        throw std::invalid_argument("log_ratio_at_edges must be non-decreasing (pessimistic rounding needs a monotone "
                                    "log-density ratio), got " +
                                    format_value(log_ratio_at_edges[i]) + " < " +
                                    format_value(log_ratio_at_edges[i - 1]) + " at index " + std::to_string(i));
      }
    }
  }
  // Loss of each cell (+inf: atom, -inf or empty: dropped) and its grid index.
  std::vector<long> index(n_cells, 0);
  std::vector<signed char> kind(n_cells, 0);  // 0 dropped, 1 finite, 2 infinite
  long lo = 0, hi = 0;
  bool any = false;
  Sum total_p;
  for (std::size_t i = 0; i < n_cells; ++i) {
    if (log_p[i] == kNegInf) continue;
    total_p.add(std::exp(log_p[i]));
    double loss;
    if (pessimistic) {
      loss = i + 1 < n_cells ? log_ratio_at_edges[i] : kInf;  // sup of L on the cell: its right end
    } else {
      loss = log_q[i] == kNegInf ? kInf : log_p[i] - log_q[i];  // loss of the bucketed pair
    }
    if (loss == kNegInf) continue;
    if (loss == kInf) {
      kind[i] = 2;
      continue;
    }
    kind[i] = 1;
    index[i] = grid_index(loss, d, pessimistic);
    if (!any) {
      lo = hi = index[i];
      any = true;
    } else {
      lo = std::min(lo, index[i]);
      hi = std::max(hi, index[i]);
    }
  }
  const double total = total_p.value();
  if (!(total <= 1.0 + kMassSlack)) {
    throw std::invalid_argument("log_p must describe at most probability 1 (sum of exp(log_p) <= 1 + 1e-9), got " +
                                format_value(total));
  }
  Pmf pmf;
  if (any) {
    require_size(static_cast<std::size_t>(hi - lo) + 1, max_size, "one step's PMF", d);
    pmf.offset = lo;
    pmf.mass.assign(static_cast<std::size_t>(hi - lo) + 1, 0.0);
  }
  Sum inf_mass;
  for (std::size_t i = 0; i < n_cells; ++i) {
    if (kind[i] == 1) {
      pmf.mass[static_cast<std::size_t>(index[i] - lo)] += std::exp(log_p[i]);
    } else if (kind[i] == 2) {
      inf_mass.add(std::exp(log_p[i]));
    }
  }
  double infinity = inf_mass.value();
  if (pessimistic) {
    // P-mass not in any cell (the caller's round-off, or masses that underflow
    // exp) might carry any loss: charge it to +inf. The compensated sum is within
    // 2u of the true sum plus O(n u^2); round the deficit up by 4u + n u^2.
    const double deficit = 1.0 - total + 4.0 * kU + static_cast<double>(n_cells) * kU * kU;
    infinity += std::max(deficit, 0.0);
    infinity = std::min(infinity * (1.0 + 4.0 * kU), 1.0);
  } else {
    infinity *= 1.0 - 4.0 * kU;
  }
  pmf.infinity_mass = infinity;
  return pmf;
}

Composed::Composed(const std::vector<Group>& groups, double discretization, bool pessimistic, std::size_t max_size)
    : discretization_(discretization), pessimistic_(pessimistic) {
  require_positive_finite("discretization", discretization);
  const double d = discretization;
  std::vector<const Group*> active;
  double support = 1.0, log_finite = 0.0, log_inf_free = 0.0;
  for (const auto& g : groups) {
    if (!(g.count >= 0.0 && g.count == std::floor(g.count) && g.count < 9e15)) {
      fail("count", "an integer >= 0", g.count);
    }
    if (g.count == 0.0) continue;
    if (g.pmf.mass.empty() && !(g.pmf.infinity_mass > 0.0)) {  // all mass at -inf: delta is 0 from now on
      active.clear();
      log_finite = kNegInf;
      log_inf_free = 0.0;
      break;
    }
    // P(no step of the group hits +inf) = (1 - p_inf)^count.
    log_inf_free += g.count * std::log1p(-g.pmf.infinity_mass);
    if (g.pmf.mass.empty()) {
      log_finite = kNegInf;
      continue;
    }
    support += g.count * static_cast<double>(g.pmf.mass.size() - 1);
    active.push_back(&g);
  }
  // Composed +inf atom: 1 - prod_g (1 - p_inf,g)^count_g, rounded towards the bound.
  const double inf_mass = -std::expm1(log_inf_free);
  infinity_mass_ = std::clamp(pessimistic ? inf_mass * (1.0 + 8.0 * kU) + 8.0 * kU * (inf_mass > 0.0)
                                          : inf_mass * (1.0 - 8.0 * kU),
                              0.0, 1.0);
  if (active.empty() || log_finite == kNegInf) {
    offset_ = 0;
    mass_.clear();
  } else if (active.size() == 1 && active[0]->count == 1.0) {  // nothing to compose: exact
    offset_ = active[0]->pmf.offset;
    mass_ = active[0]->pmf.mass;
  } else {
    long full_low = 0;  // loss index of the smallest composed loss
    for (const Group* g : active) full_low += static_cast<long>(g->count) * g->pmf.offset;
    long low = full_low;
    std::size_t len = 0, n = 2;
    if (support <= static_cast<double>(max_size)) {
      len = static_cast<std::size_t>(support);
      while (n < len) n <<= 1;
    }
    if (len == 0 || n > max_size) {
      // The full support does not fit: keep the window [low, high] outside which
      // the composed finite mass is <= e^kLogWindowTail on each side (Chernoff).
      const Window w = chernoff_window(active, d, full_low, support);
      low = w.low;
      len = static_cast<std::size_t>(w.high - w.low + 1);
      n = 2;
      while (n < len) n <<= 1;
      if (n > max_size) {
        throw std::invalid_argument("the composed PLD needs " + std::to_string(n) + " entries > max_size " +
                                    std::to_string(max_size) + " at discretization " + format_value(d) +
                                    " (even after Chernoff truncation); increase discretization or max_size");
      }
      tail_high_ = w.tail_high;
      tail_low_ = w.tail_low;
    }
    fft_size_ = n;
    const fft::RealPlan plan(n);
    std::vector<std::complex<double>> total(n / 2 + 1, {1.0, 0.0});
    std::vector<double> buffer(n);
    const double eta = fft::error_bound(n);
    double sum_l2 = 0.0, log2_counts = 0.0;
    const auto n_mod = static_cast<long>(n);
    for (const Group* g : active) {
      // Each step's entry at absolute loss index K goes to K mod n: the circular
      // convolution then holds at r the composed mass of all K = r (mod n).
      std::fill(buffer.begin(), buffer.end(), 0.0);
      for (std::size_t j = 0; j < g->pmf.mass.size(); ++j) {
        long r = (g->pmf.offset + static_cast<long>(j)) % n_mod;
        if (r < 0) r += n_mod;
        buffer[static_cast<std::size_t>(r)] += g->pmf.mass[j];
      }
      double l2 = 0.0;
      for (const double v : buffer) l2 += v * v;
      sum_l2 += g->count * std::sqrt(l2) * (1.0 + kU);
      log2_counts += std::log2(g->count + 1.0) + 1.0;
      const auto spectrum = plan.forward(buffer);
      const auto count = static_cast<unsigned long long>(g->count);
      for (std::size_t k = 0; k < total.size(); ++k) total[k] *= integer_power(spectrum[k], count);
    }
    const std::vector<double> composed = plan.inverse(total);
    // Round-off of the composition in the 2-norm, see the header comment.
    const double growth = std::exp(sum_l2 * eta * std::sqrt(static_cast<double>(n)));
    error_l2_ = 1.01 * growth * (sum_l2 * eta + eta + (6.0 * log2_counts + 8.0) * kU);
    offset_ = low;
    mass_.resize(len);
    const double inv_n = 1.0 / static_cast<double>(n);
    for (std::size_t k = 0; k < len; ++k) {
      long r = (low + static_cast<long>(k)) % n_mod;
      if (r < 0) r += n_mod;
      mass_[k] = std::max(composed[static_cast<std::size_t>(r)] * inv_n, 0.0);
    }
  }
  // Suffix sums for O(1) delta queries.
  const std::size_t len = mass_.size();
  s1_.assign(len + 1, 0.0);
  s2_.assign(len + 1, 0.0);
  const double r = std::exp(-d);
  for (std::size_t i = len; i-- > 0;) {
    s1_[i] = mass_[i] + s1_[i + 1];
    s2_[i] = mass_[i] + r * s2_[i + 1];
  }
  const double max_loss = std::max(std::fabs(static_cast<double>(offset_) * d),
                                   std::fabs(static_cast<double>(offset_ + static_cast<long>(len)) * d));
  gamma_ = (static_cast<double>(len) + 16.0 + max_loss) * kU;
}

double Composed::delta(double epsilon) const {
  if (std::isnan(epsilon)) throw std::invalid_argument("epsilon must not be NaN, got nan");
  const double d = discretization_;
  const auto len = static_cast<long>(mass_.size());
  double finite = 0.0, error = 0.0;
  if (len > 0) {
    // First entry whose loss is > epsilon, consistent with the products k D in floating point.
    long k;
    if (epsilon == kInf) {
      k = len;
    } else if (epsilon == kNegInf) {
      k = 0;
    } else {
      const double r = std::floor(epsilon / d) + 1.0 - static_cast<double>(offset_);
      k = static_cast<long>(std::clamp(r, 0.0, static_cast<double>(len)));
      while (k > 0 && static_cast<double>(offset_ + k - 1) * d > epsilon) --k;
      while (k < len && static_cast<double>(offset_ + k) * d <= epsilon) ++k;
    }
    if (k < len) {
      const auto i = static_cast<std::size_t>(k);
      const double loss = static_cast<double>(offset_ + k) * d;
      const double s1 = s1_[i];
      // sum_{j >= k} c_j (1 - e^{eps - jD}) = s1 - e^{eps - kD} s2 (each term >= 0).
      finite = epsilon == kNegInf ? s1 : std::max(s1 - std::exp(epsilon - loss) * s2_[i], 0.0);
      // Round-off of the sums (2 s1 >= s1 + e^{..} s2, so the charge is monotone in
      // epsilon) and of the FFT (Cauchy-Schwarz over the entries above epsilon).
      error = 2.0 * gamma_ * s1 + error_l2_ * std::sqrt(static_cast<double>(len - k));
    }
  }
  // Chernoff truncation (tails are 0 when the full support was kept): the circular
  // composition holds, in the window, the true mass plus the mass aliased in from
  // outside (>= 0, <= tail_low + tail_high). Upper bound: the mass above the window
  // may have any loss (charged as if at +inf), the mass below it matters only if
  // epsilon is below its losses. Lower bound: subtract everything aliased in.
  if (pessimistic_) {
    const double below = epsilon < static_cast<double>(offset_ - 1) * d ? tail_low_ : 0.0;
    return std::min(finite + error + infinity_mass_ + tail_high_ + below, 1.0);
  }
  return std::clamp(finite - error - tail_low_ - tail_high_, 0.0, 1.0 - infinity_mass_) + infinity_mass_;
}

double Composed::epsilon(double delta_target) const {
  require_open_unit("delta", delta_target);
  const double d = discretization_;
  // Above the largest loss only the +inf atom (and for the upper bound nothing
  // else) remains.
  const double top = std::max(static_cast<double>(offset_ + static_cast<long>(mass_.size())) * d, 0.0) + d;
  if (this->delta(0.0) <= delta_target) return 0.0;
  if (this->delta(top) > delta_target) return kInf;
  // Bisection keeping lo with delta(lo) > target and hi with delta(hi) <= target.
  // Upper bound: the true delta(hi) <= target, so epsilon(target) <= hi.
  // Lower bound: the true delta(lo) > target and delta is non-increasing, so
  // epsilon(target) >= lo (valid even where the bound is not monotone).
  double lo = 0.0, hi = top;
  for (int it = 0; it < 200 && hi - lo > 1e-13 * std::max(1.0, hi); ++it) {
    const double mid = 0.5 * (lo + hi);
    if (this->delta(mid) > delta_target) {
      lo = mid;
    } else {
      hi = mid;
    }
  }
  return pessimistic_ ? hi : lo;
}

}  // namespace dpacct::pld_discrete

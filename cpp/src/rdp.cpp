#include "dpacct/rdp.hpp"

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <numeric>
#include <stdexcept>
#include <vector>

#include "dpacct/check.hpp"
#include "dpacct/logmath.hpp"

namespace dpacct::rdp {

namespace {

constexpr double kEps = DBL_EPSILON;

// Streaming log(sum exp(v)) over positive terms.
struct LogSum {
  double max = kNegInf;
  double sum = 0.0;  // sum of exp(v - max)
  void add(double v) {
    if (v == kNegInf) return;
    if (v > max) {
      sum = sum * std::exp(max - v) + 1.0;
      max = v;
    } else {
      sum += std::exp(v - max);
    }
  }
  double value() const { return max == kNegInf ? kNegInf : max + std::log(sum); }
};

// log(1 + exp(x)): log A from log(A - 1).
double log1p_exp(double x) { return x > 0.0 ? x + std::log1p(std::exp(-x)) : std::log1p(std::exp(x)); }

// Upper bound on log(A_a - 1) for integer a >= 2 and 0 < q < 1.
//
// sum_k C(a,k) (1-q)^(a-k) q^k = 1 and the k = 0, 1 exponents vanish, so
//   A_a - 1 = sum_{k=2..a} C(a,k) (1-q)^(a-k) q^k (exp((k^2 - k)/(2 sigma^2)) - 1),
// a sum of positive terms: no cancellation, unlike summing A_a and subtracting 1
// (which loses every digit once A - 1 < 1e-16, e.g. q = 1e-6, sigma = 100).
//
// The terms are visited in blocks of kBlock. Within a block, log C(a,k) is
// maximal at the block point nearest a/2 (log-concave in k), the linear part
// k log(q/(1-q)) at one end, and log expm1(...) at the right end; their sum plus
// log(block size) bounds the block's total. Blocks whose bound is below the
// largest exact term by more than kPrune are not evaluated: their bound is
// added instead, so the result stays an upper bound.
double log_a_minus_one_integer(double q, double sigma, double order) {
  constexpr long kBlock = 32;
  constexpr double kPrune = 60.0;  // e^-60 ~ 1e-26 relative
  const long n = static_cast<long>(order);
  const double log_q = std::log(q);
  const double log_1mq = std::log1p(-q);
  const double half_inv_var = 0.5 / (sigma * sigma);
  const double log_binom_n = std::lgamma(order + 1.0);
  auto log_binom_k = [&](double k) {
    return log_binom_n - std::lgamma(k + 1.0) - std::lgamma(order - k + 1.0);
  };
  auto term = [&](double k, double log_binom) {
    return log_binom + (order - k) * log_1mq + k * log_q + log_expm1((k * k - k) * half_inv_var);
  };

  // Pass 1: block bounds, and a lower bound on the largest term (block starts).
  const long n_blocks = (n - 2) / kBlock + 1;
  double largest_term = kNegInf;
  for (long b = 0; b < n_blocks; ++b) {
    const double k1 = static_cast<double>(2 + b * kBlock);
    largest_term = std::max(largest_term, term(k1, log_binom_k(k1)));
  }
  largest_term = std::max(largest_term, term(order, 0.0));

  LogSum exact;
  LogSum pruned;
  const double mode = 0.5 * order;
  const double slope = log_q - log_1mq;
  for (long b = 0; b < n_blocks; ++b) {
    const long k1 = 2 + b * kBlock;
    const long k2 = std::min(n, k1 + kBlock - 1);
    const double d1 = static_cast<double>(k1);
    const double d2 = static_cast<double>(k2);
    const double binom_bound = (d1 <= mode && mode <= d2) ? log_binom_k(mode)
                               : (d2 < mode)              ? log_binom_k(d2)
                                                          : log_binom_k(d1);
    const double bound = binom_bound + order * log_1mq + std::max(d1 * slope, d2 * slope) +
                         log_expm1((d2 * d2 - d2) * half_inv_var) + std::log(d2 - d1 + 1.0);
    if (bound < largest_term - kPrune) {
      pruned.add(bound);
      continue;
    }
    double log_binom = log_binom_k(d1);
    for (long k = k1; k <= k2; ++k) {
      const double dk = static_cast<double>(k);
      exact.add(term(dk, log_binom));
      log_binom += std::log((order - dk) / (dk + 1.0));
    }
  }
  // Floating-point error budget: each term is a sum of components whose
  // magnitudes are at most M = n (|log q| + |log(1-q)| + 1) + n^2/(2 sigma^2);
  // lgamma, the in-block recurrence (<= kBlock steps) and exp/log each add a few
  // ulps of M. 64 ulps of (M + kBlock) is a generous bound, added in log space.
  const double magnitude = order * (std::fabs(log_q) + std::fabs(log_1mq) + 1.0) +
                           order * order * half_inv_var + log_binom_n;
  const double error = 64.0 * kEps * (magnitude + kBlock);
  return log_add(exact.value(), pruned.value()) + error;
}

// log((1 + x)^a - 1 - a x) for x > -1, a > 1: the integrand of A_a - 1 below,
// which is >= 0 by convexity. Three regimes keep relative accuracy:
//  * a|x| < 1/2 and |x| < 1/2: the binomial series sum_{k>=2} C(a,k) x^k, whose
//    ratio of successive terms is below 1/2 (no cancellation: the k = 2 term dominates);
//  * otherwise expm1(a log1p(x)) - a x, whose cancellation costs at most
//    ~4a/(a-1) ulps once a|x| >= 1/2;
//  * a log1p(x) > 700: factor out (1 + x)^a to avoid overflow.
double log_power_excess(double x, double order) {
  if (std::fabs(x) < 0.5 && order * std::fabs(x) < 0.5) {
    double term = 0.5 * order * (order - 1.0) * x * x;
    double sum = term;
    for (int k = 2; k < 200; ++k) {
      term *= (order - k) / (k + 1.0) * x;
      sum += term;
      if (std::fabs(term) <= 1e-17 * sum) break;
    }
    return std::log(sum);
  }
  const double y = order * std::log1p(x);
  if (y > 700.0) return y + std::log1p(-(1.0 + order * x) * std::exp(-y));
  return std::log(std::expm1(y) - order * x);
}

// Upper estimate of log(A_a - 1) by the trapezoid rule, for any order a > 1.
//
// Since E[x] = 0 for x = q (exp((2z - 1)/(2 sigma^2)) - 1) under z ~ N(0, sigma^2),
//   A_a - 1 = E[(1 + x)^a - 1 - a x],
// an integral of a non-negative analytic function of z: no cancellation. Its
// mass sits in at most two bumps of width ~sigma (near z = 0 and z = a); a
// coarse scan at step sigma/2 over [-25 sigma, a + 25 sigma] finds the cells
// within e^-50 of the peak, and the trapezoid rule is applied there with step h.
// The integrand is analytic in the strip |Im z| < pi sigma^2 (the power's branch
// point) and carries the Gaussian factor of width sigma, so with
// h = min(sigma/4, pi sigma^2/16) the trapezoid error decays like
// exp(-min(8 pi^2 sigma, 16 pi)) relative (Trefethen & Weideman, "The
// exponentially convergent trapezoidal rule", SIAM Review 2014, Thm 5.1). The estimate is rounded up by
// twice the difference between the h and 2h sums (an a-posteriori error
// estimate that dominates the true error for a converged rule), the mass of
// the skipped cells, and the rounding of the components.
double log_a_minus_one_quadrature(double q, double sigma, double order) {
  constexpr double kSkip = 50.0;
  const double var = sigma * sigma;
  const double log_norm = -std::log(sigma) - 0.5 * kLogTwoPi;
  auto log_integrand = [&](double z) {
    const double u = (2.0 * z - 1.0) / (2.0 * var);
    double log_g;
    if (u > 700.0) {
      const double log1p_x = log_add(std::log1p(-q), std::log(q) + u);
      const double log1p_ax = log_add(0.0, std::log(order) + std::log(q) + log1mexp(-u) + u);
      log_g = order * log1p_x + log1mexp(log1p_ax - order * log1p_x);
    } else {
      log_g = log_power_excess(q * std::expm1(u), order);
    }
    return log_norm - z * z / (2.0 * var) + log_g;
  };
  const double lo = -25.0 * sigma;
  const double hi = order + 25.0 * sigma;
  const double coarse = 0.5 * sigma;
  const long n_coarse = static_cast<long>(std::ceil((hi - lo) / coarse));
  std::vector<double> coarse_values(static_cast<std::size_t>(n_coarse) + 1);
  double peak = kNegInf;
  for (long k = 0; k <= n_coarse; ++k) {
    coarse_values[static_cast<std::size_t>(k)] = log_integrand(lo + k * coarse);
    peak = std::max(peak, coarse_values[static_cast<std::size_t>(k)]);
  }
  if (peak == kNegInf) return kNegInf;
  const double h_target = std::min(sigma / 4.0, kPi * var / 16.0);
  const long per_cell = std::max(2L, 2 * static_cast<long>(std::ceil(coarse / h_target / 2.0)));  // even
  const double h = coarse / static_cast<double>(per_cell);
  LogSum fine;    // all points of the significant cells at step h
  LogSum half;    // every other point: the 2h rule
  LogSum skipped; // bound on the skipped cells (coarse cell width times the larger endpoint value, plus margin)
  double magnitude = 0.0;
  for (long k = 0; k < n_coarse; ++k) {
    const double left = coarse_values[static_cast<std::size_t>(k)];
    const double right = coarse_values[static_cast<std::size_t>(k + 1)];
    if (std::max(left, right) < peak - kSkip) {
      // Within a cell of width sigma/2 the log-integrand varies by far less than
      // kSkip/2 around its endpoint values; count the cell at e^25 times its endpoints.
      skipped.add(std::max(left, right) + 25.0 + std::log(coarse));
      continue;
    }
    const double z_left = lo + k * coarse;
    for (long m = 0; m < per_cell; ++m) {
      const double z = z_left + m * h;
      const double v = m == 0 ? left : log_integrand(z);
      fine.add(v);
      if (m % 2 == 0) half.add(v);
      magnitude = std::max(magnitude, z * z / (2.0 * var) + std::fabs(z) * order / var);
    }
  }
  const double log_fine = fine.value() + std::log(h);
  const double log_half = half.value() + std::log(2.0 * h);
  const double discretization = log_fine > log_half ? log_sub(log_fine, log_half) : log_sub(log_half, log_fine);
  double log_upper = log_add(log_fine, discretization + kLn2);
  log_upper = log_add(log_upper, skipped.value());
  // Rounding of the exponent components (z^2/(2 sigma^2) and a log(1 + x)).
  return log_upper + 64.0 * kEps * (magnitude + 1.0);
}

// Whether the quadrature below costs a bounded amount of work. Its coarse scan has
// ~2 (order + 50 sigma) / sigma points and each significant cell ~8 / (pi sigma)
// fine points (h = pi sigma^2 / 16 for small sigma), so the work grows like
// 1/sigma^2 (measured: 2 s for order 1000.5 at sigma = 1e-4; hours at 1e-6). The chord
// bound needs no quadrature and is always a valid upper bound (log A is convex
// in the order), so past this budget it is used alone. In that regime (tiny
// noise or huge orders) the RDP is astronomically large and the chord is as
// good as any refinement for the (epsilon, delta) conversion.
bool quadrature_is_affordable(double sigma, double order) {
  constexpr double kMaxWork = 1.0e5;          // integrand evaluations, a few ms
  constexpr double kSignificantCells = 100.0;  // two bumps of a few sigma, in cells of sigma / 2
  const double coarse_points = 2.0 * (order + 50.0 * sigma) / sigma;
  const double per_cell = std::max(2.0, 8.0 / (kPi * sigma));
  return coarse_points + kSignificantCells * per_cell <= kMaxWork;
}

double order_rdp(double q, double sigma, double order) {
  if (q == 0.0) return 0.0;
  if (order == kInf) return kInf;
  if (q == 1.0) return order * 0.5 / (sigma * sigma);
  if (order == std::floor(order)) {
    return log1p_exp(log_a_minus_one_integer(q, sigma, order)) / (order - 1.0);
  }
  // log A is convex in the order (a log moment-generating function), so the
  // chord between the neighbouring integer orders (exact sums; log A_1 = 0) is
  // a second upper bound, independent of the quadrature: take the smaller.
  const double lower = std::floor(order);
  const double log_a_lower = lower < 2.0 ? 0.0 : log1p_exp(log_a_minus_one_integer(q, sigma, lower));
  const double log_a_upper = log1p_exp(log_a_minus_one_integer(q, sigma, lower + 1.0));
  const double chord = (lower + 1.0 - order) * log_a_lower + (order - lower) * log_a_upper;
  double log_a = chord * (1.0 + 4.0 * kEps);
  // A third bound: the Renyi divergence is jointly quasi-convex in the pair of
  // distributions (van Erven & Harremoes, arXiv:1206.2459, convexity properties), and
  // both mixtures share the component N(0, sigma^2), so the subsampled RDP is at most
  // the Gaussian's order / (2 sigma^2), i.e. log A <= (order - 1) order / (2 sigma^2).
  // It matters only when the quadrature is skipped (tiny sigma), where the chord is loose.
  log_a = std::min(log_a, (order - 1.0) * order * 0.5 / (sigma * sigma) * (1.0 + 4.0 * kEps));
  if (quadrature_is_affordable(sigma, order)) {
    log_a = std::min(log_a, log1p_exp(log_a_minus_one_quadrature(q, sigma, order)));
  }
  return std::max(log_a, 0.0) / (order - 1.0);
}

void require_rdp_curve(const double* orders, const double* rdp, std::size_t n) {
  require_orders(orders, n);
  for (std::size_t i = 0; i < n; ++i) {
    if (!(rdp[i] >= 0.0)) {
      throw std::invalid_argument("rdp must all be >= 0, got " + format_value(rdp[i]) +
                                  " at index " + std::to_string(i));
    }
  }
}

}  // namespace

Conversion parse_conversion(const std::string& name) {
  if (name == "classic") return Conversion::classic;
  if (name == "improved") return Conversion::improved;
  throw std::invalid_argument("conversion must be 'classic' or 'improved', got '" + name + "'");
}

void subsampled_gaussian(double sampling_probability, double noise_multiplier,
                         const double* orders, std::size_t n, double* out) {
  require_probability("sampling_probability", sampling_probability);
  require_positive_finite("noise_multiplier", noise_multiplier);
  require_orders(orders, n);
  for (std::size_t i = 0; i < n; ++i) {
    out[i] = order_rdp(sampling_probability, noise_multiplier, orders[i]);
  }
  // The true RDP is non-decreasing in the order (van Erven & Harremoes, "Renyi
  // Divergence and Kullback-Leibler Divergence", arXiv:1206.2459 (v1), Thm 3), so
  // the bound at any higher order also bounds a lower one: take the suffix
  // minimum over the sorted orders. This tightens fractional orders whose
  // rounding margin dominates (tiny RDP) and keeps the result monotone.
  std::vector<std::size_t> by_order(n);
  std::iota(by_order.begin(), by_order.end(), std::size_t{0});
  std::sort(by_order.begin(), by_order.end(), [&](std::size_t a, std::size_t b) { return orders[a] < orders[b]; });
  double suffix_min = kInf;
  for (std::size_t k = n; k-- > 0;) {
    const std::size_t i = by_order[k];
    suffix_min = std::min(suffix_min, out[i]);
    out[i] = suffix_min;
  }
}

Optimum epsilon_from_rdp(const double* orders, const double* rdp, std::size_t n, double delta,
                         Conversion conversion) {
  require_open_unit("delta", delta);
  require_rdp_curve(orders, rdp, n);
  const double log_delta = std::log(delta);
  Optimum best{kInf, n};
  for (std::size_t i = 0; i < n; ++i) {
    const double a = orders[i];
    if (rdp[i] == kInf || a == kInf) continue;
    const double eps = conversion == Conversion::classic
                           ? rdp[i] - log_delta / (a - 1.0)
                           : rdp[i] + std::log1p(-1.0 / a) - (log_delta + std::log(a)) / (a - 1.0);
    if (eps < best.value) best = {eps, i};
  }
  best.value = std::max(best.value, 0.0);
  return best;
}

Optimum delta_from_rdp(const double* orders, const double* rdp, std::size_t n, double epsilon,
                       Conversion conversion) {
  require_nonnegative_finite("epsilon", epsilon);
  require_rdp_curve(orders, rdp, n);
  Optimum best{0.0, n};  // log delta; delta <= 1 always holds
  for (std::size_t i = 0; i < n; ++i) {
    const double a = orders[i];
    const double r = rdp[i];
    if (r == kInf || a == kInf) continue;
    double log_delta;
    if (conversion == Conversion::classic) {
      log_delta = (a - 1.0) * (r - epsilon);
    } else {
      log_delta = (a - 1.0) * (r - epsilon + std::log1p(-1.0 / a)) - std::log(a);
      const double bretagnolle_huber = r == 0.0 ? kNegInf : 0.5 * log1mexp(-r);
      log_delta = std::min(log_delta, bretagnolle_huber);
    }
    if (log_delta < best.value) best = {log_delta, i};
  }
  best.value = std::exp(best.value);
  return best;
}

}  // namespace dpacct::rdp

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

// Streaming signed sum of +-exp(v), kept relative to a moving scale so that
// neither huge nor tiny terms overflow. Both signs are accumulated with
// Neumaier's compensated summation, and the sum of |term| * (relative error of
// the term in ulps) is tracked so the caller can bound the total rounding error.
struct SignedLogSum {
  double scale = kNegInf;
  double positive = 0.0, positive_c = 0.0;
  double negative = 0.0, negative_c = 0.0;
  double weighted_error = 0.0;  // sum |t| * ulps(t)
  long rescales = 0;
  static void neumaier(double& sum, double& c, double t) {
    const double s = sum + t;
    c += std::fabs(sum) >= std::fabs(t) ? (sum - s) + t : (t - s) + sum;
    sum = s;
  }
  void add(bool negative_sign, double v, double ulps) {
    if (v == kNegInf) return;
    if (v > scale) {
      if (scale != kNegInf) {
        const double r = std::exp(scale - v);
        positive *= r;
        positive_c *= r;
        negative *= r;
        negative_c *= r;
        weighted_error *= r;
        ++rescales;
      }
      scale = v;
    }
    const double t = std::exp(v - scale);
    if (negative_sign) {
      neumaier(negative, negative_c, t);
    } else {
      neumaier(positive, positive_c, t);
    }
    weighted_error += t * ulps;
  }
  double abs_total() const { return positive + positive_c + negative + negative_c; }
  double value() const { return (positive + positive_c) - (negative + negative_c); }
  double log_abs_total() const { return scale == kNegInf ? kNegInf : scale + std::log(abs_total()); }
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

// Upper bound on log A_a for fractional a > 1 and 0 < q < 1, or +inf if the
// series does not converge.
//
// MTZ Section 3.3: split the integral at z0 where q exp((2z0 - 1)/(2 sigma^2)) = 1 - q,
// i.e. z0 = sigma^2 log(1/q - 1) + 1/2, and expand the power as a binomial
// series in the smaller of the two summands on each side:
//   A = sum_i C(a,i) [ q^i (1-q)^(a-i) e^{(i^2-i)/(2 sigma^2)} Phi((z0 - i)/sigma)
//                    + q^(a-i) (1-q)^i e^{((a-i)^2-(a-i))/(2 sigma^2)} Phi((a - i - z0)/sigma) ].
// C(a,i) alternates in sign once i > a, so the terms are summed with their
// signs; the result is rounded up by the accumulated rounding error and by an
// estimate of the truncated tail (terms decay like i^-(a+2), so the tail after
// a term t_i is about t_i * i / (a + 1); four times that is added).
double log_a_fractional(double q, double sigma, double order) {
  constexpr long kMaxTerms = 1000000;
  constexpr double kStop = 40.0;  // stop once terms are e^-40 below the total
  const double log_q = std::log(q);
  const double log_1mq = std::log1p(-q);
  const double half_inv_var = 0.5 / (sigma * sigma);
  const double z0 = sigma * sigma * (log_1mq - log_q) + 0.5;

  SignedLogSum sum;
  double log_abs_coef = 0.0;  // log |C(a, i)|
  bool coef_negative = false;
  long small_in_a_row = 0;
  double tail = kNegInf;
  long i = 0;
  for (; i < kMaxTerms; ++i) {
    const double di = static_cast<double>(i);
    const double j = order - di;
    const double e0 = (di * di - di) * half_inv_var;
    const double e1 = (j * j - j) * half_inv_var;
    const double x0 = (z0 - di) / sigma;
    const double x1 = (j - z0) / sigma;
    const double s0 = log_abs_coef + di * log_q + j * log_1mq + e0 + log_ndtr(x0);
    const double s1 = log_abs_coef + j * log_q + di * log_1mq + e1 + log_ndtr(x1);
    // Relative error of exp(s) in ulps: each component of s carries an absolute
    // error of a few ulps of its magnitude, and log Phi(x) moves by ~|x| per unit
    // of x, whose own error is ~ulps of (|x| + |z0|/sigma).
    const double common = std::fabs(log_abs_coef) + 4.0 * (di + 1.0);
    const double ulps0 = 8.0 + common + std::fabs(di * log_q) + std::fabs(j * log_1mq) + std::fabs(e0) +
                         std::fabs(x0) * (std::fabs(x0) + std::fabs(z0) / sigma + 2.0);
    const double ulps1 = 8.0 + common + std::fabs(j * log_q) + std::fabs(di * log_1mq) + std::fabs(e1) +
                         std::fabs(x1) * (std::fabs(x1) + std::fabs(z0) / sigma + 2.0);
    sum.add(coef_negative, s0, ulps0);
    sum.add(coef_negative, s1, ulps1);
    const double s_max = std::max(s0, s1);
    if (di > order + 1.0 && s_max < sum.log_abs_total() - kStop) {
      if (++small_in_a_row >= 3) {
        tail = s_max + std::log(4.0 * (di + 1.0) / (order + 1.0));
        break;
      }
    } else {
      small_in_a_row = 0;
    }
    // C(a, i+1) = C(a, i) (a - i) / (i + 1)
    const double ratio = (order - di) / (di + 1.0);
    if (ratio == 0.0) break;  // integer order: the series is finite
    log_abs_coef += std::log(std::fabs(ratio));
    if (ratio < 0.0) coef_negative = !coef_negative;
  }
  if (i >= kMaxTerms) return kInf;
  const double value = sum.value();
  if (!(value > 0.0)) return kInf;  // lost to cancellation: fail closed
  // Rounding bound: the terms' own errors (weighted_error), compensated
  // summation (a few ulps of the total plus N eps^2), and one ulp per rescale.
  const double abs_total = sum.abs_total();
  const double n_terms = 2.0 * static_cast<double>(i + 1);
  const double rounding = kEps * (sum.weighted_error + abs_total * (8.0 + static_cast<double>(sum.rescales) +
                                                                     n_terms * kEps));
  const double log_upper = sum.scale + std::log(value + rounding);
  return log_add(log_upper, tail);
}

double order_rdp(double q, double sigma, double order) {
  if (q == 0.0) return 0.0;
  if (order == kInf) return kInf;
  if (q == 1.0) return order * 0.5 / (sigma * sigma);
  if (order == std::floor(order)) {
    return log1p_exp(log_a_minus_one_integer(q, sigma, order)) / (order - 1.0);
  }
  // log A is convex in the order (a log moment-generating function), so the
  // chord between the neighbouring integer orders bounds it from above (log A_1 = 0).
  // This is exact-arithmetic safe and rescues the series when A - 1 is so small
  // that its rounding margin dominates (e.g. q = 1e-5, sigma = 10).
  const double lower = std::floor(order);
  const double log_a_lower = lower < 2.0 ? 0.0 : log1p_exp(log_a_minus_one_integer(q, sigma, lower));
  const double log_a_upper = log1p_exp(log_a_minus_one_integer(q, sigma, lower + 1.0));
  const double chord = (lower + 1.0 - order) * log_a_lower + (order - lower) * log_a_upper;
  const double log_a = std::min(log_a_fractional(q, sigma, order), chord * (1.0 + 4.0 * kEps));
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

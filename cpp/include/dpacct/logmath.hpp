// Log-space arithmetic shared by every kernel.
//
// Privacy accounting multiplies probabilities that underflow double precision
// long before they stop mattering (delta = 1e-300 still composes), so every
// kernel works with logarithms and combines them with the helpers below.
#pragma once

#include <cmath>
#include <cstddef>
#include <limits>

namespace dpacct {

inline constexpr double kInf = std::numeric_limits<double>::infinity();
inline constexpr double kNegInf = -std::numeric_limits<double>::infinity();
inline constexpr double kLogTwoPi = 1.8378770664093454836;  // log(2*pi)
inline constexpr double kLn2 = 0.69314718055994530942;
inline constexpr double kPi = 3.14159265358979323846;

// log(exp(a) + exp(b)), exact for infinite arguments.
inline double log_add(double a, double b) {
  if (a < b) std::swap(a, b);
  if (b == kNegInf) return a;
  return a + std::log1p(std::exp(b - a));
}

// log(1 - exp(x)) for x <= 0.  The two branches avoid cancellation near 0 and
// underflow for very negative x (Maechler, "Accurately Computing log(1 - exp(-|a|))",
// CRAN Rmpfr vignette, 2012, eq. (7)).
inline double log1mexp(double x) {
  if (x > -kLn2) return std::log(-std::expm1(x));
  return std::log1p(-std::exp(x));
}

// log(exp(a) - exp(b)) for a >= b; -inf when a == b.
inline double log_sub(double a, double b) {
  if (b == kNegInf) return a;
  if (b >= a) return kNegInf;
  return a + log1mexp(b - a);
}

// log(exp(x) - 1) for x > 0: expm1 keeps digits for small x, and for large x
// exp(x) would overflow, so use x + log(1 - exp(-x)).
inline double log_expm1(double x) {
  if (x > 30.0) return x + std::log1p(-std::exp(-x));
  return std::log(std::expm1(x));
}

// log of the standard normal CDF, accurate in both tails.
double log_ndtr(double x);

// log(sum_i exp(v[i])); -inf for an empty or all -inf input.
double logsumexp(const double* values, std::size_t n);

// logsumexp with a certified bound on its error: returns log(sum_i exp(v[i])) and sets *error
// to a bound on |returned - exact| (0 for an empty or all -inf input; NaN with error +inf where
// any value is NaN). The exponentials are
// summed in two levels (blocks of ~sqrt(n) terms), so the sum's rounding is ~2 u sqrt(n)
// relative instead of one recursion's ~u n; each term's own rounding, u (|v[i] - max| + 2)
// relative (the shifted exponent rounds by an ulp of itself, exp by one more), is summed
// with its weight. (A flat 8 u n had cost the composed masses of 1.6e6-cell steps 3e-10 of
// their total: delta(0) at sigma=0.331, q=2.75e-8, T=2, itself 4.5e-8, lost 0.5 % to it.)
double logsumexp_bounded(const double* values, std::size_t n, double* error);

// log sum_j mass_j e^{slope step j} over j < n, for masses >= 0 with mass[n - 1] > 0 and
// slope step >= 0: by Horner's rule in rho = e^{-slope step} from the bottom (four
// interleaved chains), so that every partial sum stays between mass[n - 1] and sum_j mass_j
// and nothing overflows; terms that underflow are below 1e-308 of the last mass. Relative
// rounding about 4 n u. Meant for estimates (it does not round outward).
double log_power_sum(const double* mass, std::size_t n, double slope_step);

// log of the binomial coefficient C(n, k) for real n >= k >= 0.
inline double log_binom(double n, double k) {
  return std::lgamma(n + 1.0) - std::lgamma(k + 1.0) - std::lgamma(n - k + 1.0);
}

}  // namespace dpacct

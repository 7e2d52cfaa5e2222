#include "dpacct/pld/step.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <stdexcept>

#include "dpacct/logmath.hpp"

namespace dpacct::pld {

namespace {

// |v| for a finite log-value, 0 for -inf (an exact log of 0).
double magnitude(double v) { return std::isfinite(v) ? std::fabs(v) : 0.0; }

}  // namespace

Edge normal_edge(double z) {
  if (z == kNegInf) return {kNegInf, 0.0};
  if (z == kInf) return {0.0, kNegInf};
  if (z <= 0.0) {
    const double c = log_ndtr(z);
    return {c, log1mexp(c)};
  }
  const double s = log_ndtr(-z);
  return {log1mexp(s), s};
}

Mass log_difference(double x, double y) {
  if (x == kNegInf) return {kNegInf, kNegInf};
  const double err = kLogError * (2.0 + magnitude(x) + magnitude(y));
  const double w = y == kNegInf ? 1.0 : -std::expm1(std::min(y - x, 0.0));  // 1 - e^{y - x}
  // d/dz log(1 - e^z) = -e^z / (1 - e^z): an error err in z = y - x and in x
  // moves the result by <= err (1 + 1/w); 4 u for the final log/expm1.
  const double spread = err * (1.0 + 1.0 / std::max(w, 1e-300)) + 4.0 * kUnit;
  if (spread > 0.5) {  // the difference cancels: only an upper bound is known
    return {kNegInf, x + std::log(w + 2.0 * err * (1.0 + err))};
  }
  const double v = x + std::log(w);
  return {v - spread, v + spread};
}

Mass log_interval(const Edge& a, const Edge& b) {
  constexpr double kLogHalf = -kLn2;
  // The branch avoids cancellation: difference the CDFs where both are small,
  // the survival functions where both are small, else 1 - F(a) - S(b).
  if (b.log_cdf < kLogHalf) return log_difference(b.log_cdf, a.log_cdf);
  if (a.log_sf < kLogHalf) return log_difference(a.log_sf, b.log_sf);
  const double z = log_add(a.log_cdf, b.log_sf);
  const double err = kLogError * (2.0 + magnitude(a.log_cdf) + magnitude(b.log_sf));
  const double w = -std::expm1(std::min(z, 0.0));
  const double spread = err * (1.0 + 1.0 / std::max(w, 1e-300)) + 4.0 * kUnit;
  if (spread > 0.5) return {kNegInf, std::log(w + 2.0 * err)};
  const double v = std::log(w);
  return {v - spread, v + spread};
}

namespace {

// Gauss-Legendre nodes t_i > 0 and weights on [-1, 1], n = 4 and n = 8 (each node +-t_i).
constexpr double kNodes4[2] = {0.339981043584856264803, 0.861136311594052575224};
constexpr double kWeights4[2] = {0.652145154862546142627, 0.347854845137453857373};
constexpr double kNodes[4] = {0.183434642495649804939, 0.525532409916328985818, 0.796666477413626739592,
                              0.960289856497536231684};
constexpr double kWeights[4] = {0.362683783378361982965, 0.313706645877887287338, 0.222381034453374470544,
                                0.101228536290376259153};
// The n-point rule on an interval of length h errs by h^{2n+1} (n!)^4 / ((2n+1) ((2n)!)^3) f^(2n)(xi)
// (Abramowitz and Stegun, "Handbook of Mathematical Functions", 1964, 25.4.30); for n = 4 and 8:
constexpr double kGaussLegendre4 = 5.62394269877263074542e-10;
constexpr double kGaussLegendre8 = 1.697361671430412404e-23;
constexpr double kLogSqrt2Pi = 0.91893853320467274178;

// |He_16(z)| <= E[(z^2 + Y^2)^8] = sum_j C(8, j) z^{2j} E[Y^{16 - 2j}] (Y ~ N(0, 1)), since
// He_k(z) = E[(z + iY)^k]: the derivative of the standard normal density phi^(16) = He_16 phi.
double hermite8_bound(double z) {  // E[(z^2 + Y^2)^4] = 105 + 60 z^2 + 18 z^4 + 4 z^6 + z^8
  const double z2 = z * z;
  return 105.0 + z2 * (60.0 + z2 * (18.0 + z2 * (4.0 + z2)));
}

double hermite16_bound(double z) {
  static constexpr double kBinomial[9] = {1, 8, 28, 56, 70, 56, 28, 8, 1};
  static constexpr double kMoment[9] = {2027025, 135135, 10395, 945, 105, 15, 3, 1, 1};  // (15 - 2j)!!
  const double z2 = z * z;
  double total = 0.0, power = 1.0;
  for (int j = 0; j <= 8; ++j) {
    total += kBinomial[j] * kMoment[j] * power;
    power *= z2;
  }
  return total;
}

}  // namespace

bool normal_cell_mass(double xa, double xb, double mean, double sigma, Mass* out) {
  if (!(std::isfinite(xa) && std::isfinite(xb) && xa < xb && sigma > 0.0)) return false;
  // The rule integrates over [xa, xa + 2 hx]: hx = (xb - xa) / 2 within u of exact, so the far
  // end is within u (xb - xa) of xb, a sliver of relative mass <= u e^{(far^2 - near^2) / 2}
  // (charged below). The standardised ends serve the bounds only; they are widened by a few ulps.
  const double inverse = 1.0 / sigma;
  const double hx = 0.5 * (xb - xa);
  const double half = hx * inverse;
  if (!(half <= 0.25)) return false;
  const double za = (xa - mean) * inverse, zb = (xb - mean) * inverse;
  const double ulps = 8.0 * kUnit;
  const double near =
      (za <= 0.0 && zb >= 0.0) ? 0.0 : std::min(std::fabs(za), std::fabs(zb)) * (1.0 - ulps);
  const double far = std::max(std::fabs(za), std::fabs(zb)) * (1.0 + ulps);
  // Beyond |z| = 16 the rounding below (8 u z^2) outgrows what it would buy: the tail CDFs there
  // are differenced in log space, good to ulps of the tail. (Up to 4.5 only, the cells just beyond
  // it had taken their masses from those differences, ~5e-12 relative where the cells are narrow
  // (1/30 of sigma): at sigma=2.34, q=3.6e-8 they set the spread of the labels' mass errors
  // (concentration.hpp) and with it 1.4e-8 of each composed mass at T=2.2e6.)
  if (far > 16.0) return false;
  // The mass is phi(near) times half sum_i w_i e^{-(z_i^2 - near^2) / 2} (every factor <= 1).
  // The quadrature error, relative to phi(near), is at most C_n width^(2n+1) max |He_2n| (the
  // 2n-th derivative of phi is He_2n phi, and phi <= phi(near) on the cell): the 4-point rule
  // where that is below a thousandth of an ulp of the mass (narrow cells), else the 8-point one.
  const double n2 = near * near;
  const double width = 2.0 * half * (1.0 + ulps);
  const double width2 = width * width, width4 = width2 * width2, width8 = width4 * width4;
  const double smallest = width * std::exp(-0.5 * (far * far - n2));  // <= the mass / phi(near)
  double quadrature = kGaussLegendre4 * width8 * width * hermite8_bound(far);
  double sum = 0.0;
  // Node i at xa + hx (1 + t_i): its position rounds (an ulp of x and of z), the cell does not.
  auto term = [&](double t, double w) {
    const double z = (xa + hx * (1.0 + t) - mean) * inverse;
    return w * std::exp(-0.5 * (z * z - n2));
  };
  if (quadrature <= 1e-3 * kUnit * smallest) {
    for (int i = 0; i < 2; ++i) sum += term(-kNodes4[i], kWeights4[i]) + term(kNodes4[i], kWeights4[i]);
  } else {
    quadrature = kGaussLegendre8 * width8 * width8 * width * hermite16_bound(far);
    for (int i = 0; i < 4; ++i) sum += term(-kNodes[i], kWeights[i]) + term(kNodes[i], kWeights[i]);
  }
  const double value = half * sum;
  // Rounding: each node moves by a few ulps of |x| / sigma and |z| (1 / sigma rounds too; an evaluation-point change:
  // about |z| times that, relative), each exponent errs by a few ulps of z^2, the sum of (at
  // most eight) positive terms by 8 ulps, half (hx times 1 / sigma) and the product by 4:
  // within 8 u (far^2 + far |x| / sigma + 4) in all, relative, about four times over; and the
  // sliver by u e^{(far^2 - near^2) / 2} <= u e^{far width}.
  const double reach = std::max(std::fabs(xa), std::fabs(xb)) * inverse;
  const double relative = 8.0 * kUnit * (far * far + far * reach + 4.0) + kUnit * std::exp(far * width);
  const double low = value * (1.0 - relative) - quadrature;
  if (!(low > 0.0)) return false;
  const double high = value * (1.0 + relative) + quadrature;
  const double log_phi = -0.5 * n2 - kLogSqrt2Pi;
  const double margin = 4.0 * kUnit * (2.0 + 0.5 * n2 + std::fabs(log_phi) + std::fabs(std::log(high)));
  *out = {std::log(low) + log_phi - margin, std::log(high) + log_phi + margin};
  return true;
}

double log_add_directed(double a, double b, int side) {
  if (a == kNegInf || b == kNegInf) return a == kNegInf ? b : a;
  if (a == kInf || b == kInf) return kInf;  // (log_add(inf, inf) and inf - inf would be NaNs)
  const double sum = log_add(a, b);
  if (std::isnan(sum)) return sum;
  if (std::isinf(sum)) return side > 0 ? sum : std::numeric_limits<double>::max();  // (finite terms near DBL_MAX)
  const double correction = kUnit * (2.0 + 0.5 * std::fabs(sum)) * (1.0 + 1e-6);
  return std::nextafter(sum + side * correction, side * kInf);
}

double add_log_directed(double a, double b, int side) {
  if (a == kNegInf || b == kNegInf) return kNegInf;
  const double sum = a + b;
  if (std::isinf(a) || std::isinf(b) || std::isnan(sum)) return sum;  // (inf - inf would be a NaN)
  // Finite terms whose sum overflows: the largest finite value on the side asked for, never an infinity against it.
  if (std::isinf(sum)) return side > 0 ? (sum > 0.0 ? sum : -std::numeric_limits<double>::max())
                                       : (sum < 0.0 ? sum : std::numeric_limits<double>::max());
  const double correction = kUnit * (0.5 * std::fabs(sum) + std::fabs(b)) * (1.0 + 1e-6);
  return std::nextafter(sum + side * correction, side * kInf);
}

Mass intersect(const Mass& a, const Mass& b) {
  const Mass both{std::max(a.lo, b.lo), std::min(a.hi, b.hi)};
  // Two certified intervals always meet; should they ever not, neither is trusted: keep their hull.
  if (!(both.lo <= both.hi)) return {std::min(a.lo, b.lo), std::max(a.hi, b.hi)};
  return both;
}


Mass own_loss(const Mass& p, const Mass& q) {
  // (A certainly empty Q side makes the own loss +inf; an empty P side, -inf: never inf - inf.)
  const double lo = p.lo == kNegInf ? kNegInf : (q.hi == kNegInf ? kInf : p.lo - q.hi);
  const double hi = q.lo == kNegInf ? kInf : p.hi - q.lo;
  // Each difference rounds once (by at most u of its terms); +-inf ends stay as they are.
  return {std::isfinite(lo) ? lo - kUnit * (std::fabs(p.lo) + std::fabs(q.hi)) : lo,
          std::isfinite(hi) ? hi + kUnit * (std::fabs(p.hi) + std::fabs(q.lo)) : hi};
}

// (A NaN once came from an overflowing spread fraction in coarsen, below.)
void require_no_nan(const StepPmf& step) {
  auto any_nan = [](const std::vector<double>& v) {
    return std::any_of(v.begin(), v.end(), [](double x) { return std::isnan(x); });
  };
  if (any_nan(step.log_upper) || any_nan(step.log_p) || any_nan(step.log_q) || any_nan(step.log_q_mid) ||
      any_nan(step.own_mid) || any_nan(step.mid_weights) || std::isnan(step.mid_error) || std::isnan(step.own_error) ||
      std::isnan(step.infinity_upper) || std::isnan(step.infinity_lower) || std::isnan(step.loss_slack)) {
    throw std::runtime_error("internal error in dpacct's PLD composer: a step's masses hold a NaN (please report)");
  }
}

// Spans beyond which spread_fraction's expm1(span) would come near overflow (709.78).
constexpr double kWideSpan = 512.0;
// Fractions below this are taken as 0 (all the mass at the top): the relative charges hold for normal numbers only.
constexpr double kTinyFraction = 0x1p-1000;

double spread_fraction(const Mass& own, double a, double span) {
  if (!(span > 0.0) || !(own.hi < kInf)) return 0.0;  // (no spread, or no Q-mass: all at the top)
  if (own.hi == kNegInf) return 1.0;
  // (e^{a - own} - e^{-span}) / (1 - e^{-span}) = expm1(s) / expm1(span), s = span - (own - a).
  // a = k * d and span = (b - a) * d are each within u of the grid's exact values, and
  // t = own - a and s = span - t round once each: s is within u (|a| + |span| + |t| + |s|)
  // of its exact value, charged twice over. The fraction increases with s; expm1 is within
  // 1 ulp and the division rounds once (6 u charged for these and span's own rounding).
  // (The form e^{a - own} - e^{-span} would add a few u / span to the fraction, a few u of
  // loss per step: 0.16 % of epsilon at sigma=9.88, q=2.3e-8, T=7.6e6.)
  const double t = own.hi - a;
  const double s = span - t;
  const double s_low = s - kUnit * (std::fabs(a) + std::fabs(span) + std::fabs(t) + std::fabs(s));
  if (!(s_low > 0.0)) return 0.0;
  if (span > kWideSpan) {
    // expm1(span) overflows beyond 709.78 (the fraction was then inf / inf, a NaN that coarsen summed into every
    // cell of the run: sigma=0.034, q=0.365, T=1.6e7 coarsened a step to cells of 1419 and the remove direction's
    // upper bound on epsilon came out as 0). The same fraction as e^{-t} (1 - e^{-s}) / (1 - e^{-span}), with
    // t = span - s_low rounded up (nextafter), so each factor is at most its value at s_low; exp, the two expm1,
    // the product and the division round once each, charged 12 kUnit.
    const double t_high = std::nextafter(span - s_low, kInf);
    const double wide = std::exp(-t_high) * -std::expm1(-s_low) / -std::expm1(-span) * (1.0 - 12.0 * kUnit);
    return wide >= kTinyFraction ? std::min(wide, 1.0) : 0.0;
  }
  // A step's cells mostly share one span (the grid width): the last expm1(span) is kept per thread.
  thread_local double last_span = -1.0, expm1_span = 0.0;
  if (span != last_span) {
    expm1_span = std::expm1(span);
    last_span = span;
  }
  const double fraction = std::expm1(s_low) / expm1_span * (1.0 - 6.0 * kUnit);
  // (A NaN is all at the top, never passed on; so is a fraction below 2^-1000, whose relative charges above would not
  // cover its rounding among subnormals.)
  return fraction >= kTinyFraction ? std::min(fraction, 1.0) : 0.0;
}

void split_cell_by_loss(const Mass& m, const Mass& own, long a, long b, double d, long upper_low,
                        std::vector<double>& log_upper) {
  if (m.hi == kNegInf) return;
  const auto ia = static_cast<std::size_t>(a - upper_low);
  const auto ib = static_cast<std::size_t>(b - upper_low);
  if (b <= a) {
    log_upper[ia] = log_add_directed(log_upper[ia], m.hi, +1);
    return;
  }
  // The rest of m (high) goes to b.
  const double fraction = spread_fraction(own, static_cast<double>(a) * d, static_cast<double>(b - a) * d);
  // (Each part and each entry rounded up: upper masses may be added, never lost.)
  if (fraction > 0.0) {
    log_upper[ia] = log_add_directed(log_upper[ia], add_log_directed(m.hi, std::log(fraction), +1), +1);
  }
  if (fraction < 1.0) {
    log_upper[ib] = log_add_directed(log_upper[ib], add_log_directed(m.hi, std::log1p(-fraction), +1), +1);
  }
}

void split_cell(const Mass& m, const Mass& w, long a, long b, double d, long upper_low,
                std::vector<double>& log_upper) {
  split_cell_by_loss(m, own_loss(m, w), a, b, d, upper_low, log_upper);
}

void summarise(StepPmf& step) {
  const double d = step.discretization;
  // The upper discretisation where there is one, else the labels' P-masses.
  const std::vector<double>& logs = step.has_upper ? step.log_upper : step.log_p;
  const long low = step.has_upper ? step.upper_low : step.label_low;
  double mass = 0.0, m1 = 0.0, m2 = 0.0, abs1 = 0.0, largest = 0.0;
  for (std::size_t j = 0; j < logs.size(); ++j) {
    const double loss = static_cast<double>(low + static_cast<long>(j)) * d;
    largest = std::max(largest, std::fabs(loss));
    if (logs[j] == kNegInf) continue;
    const double p = std::exp(logs[j]);
    mass += p;
    m1 += p * loss;
    m2 += p * loss * loss;
    abs1 += p * std::fabs(loss);
  }
  if (mass > 0.0) {
    m1 /= mass;
    step.mean_abs_loss = abs1 / mass;
    step.loss_sd = std::sqrt(std::max(m2 / mass - m1 * m1, 0.0));
  }
  step.max_abs_loss = std::max(largest, std::fabs(static_cast<double>(step.label_low) * d));
}

}  // namespace dpacct::pld

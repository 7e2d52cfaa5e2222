#include "dpacct/pld/concentration.hpp"

#include <algorithm>
#include <cmath>
#include <limits>

#include "dpacct/logmath.hpp"

namespace dpacct::pld {

namespace {

constexpr double kU = kUnit;
constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr double kNegInf = -kInf;
constexpr double kTiny = std::numeric_limits<double>::min();
// The most mass (absolute, summed over all steps) the excluded labels may carry: far below
// any delta a query asks about, and a charge on the tests (never a loss of soundness).
constexpr double kBadMass = 1e-30;
// log 1 / the deviations' probabilities: P~'s side, and Q~'s (e^eps times it, eps <= 700).
constexpr double kLogP = 700.0;
constexpr double kLogQ = 1400.0;

// log phi(y), phi(y) = e^y - 1 - y, y > 0, rounded up.
double log_phi(double y) {
  if (y < 1e-3) {
    // y^2 / 2 (1 + y / 3 + y^2 / 12 + ...): the rest is below y^3 / 50 of it.
    return std::log(0.5 * y * y * (1.0 + y / 3.0 + y * y / 12.0)) + 1e-8;
  }
  if (y <= 1.0) {
    // expm1 within an ulp: the difference loses at most about u expm1(y) / phi(y) ~ 2 u / y
    // <= 4.4e-13 relative (y >= 1e-3).
    return std::log(std::expm1(y) - y) + 1e-11;
  }
  return y + std::log1p(-(1.0 + y) * std::exp(-y)) + 1e-12 * (y + 1.0);
}

// Error bins: 8 per octave of a (the bound on |log(tilde / true)|), from 2^-1100 to 2^20.
constexpr int kBinsPerOctaveA = 8;
constexpr int kLowestOctave = -1100;
constexpr int kBins = (20 - kLowestOctave) * kBinsPerOctaveA;

// One step's labels for one measure, binned by a: each bin's largest a, and its labels' true
// masses (upper), tilde masses (upper), sum of mass (e^a - 1 - a) and of mass (e^a - 1).
struct Binned {
  std::vector<double> a, mass, tilde, curvature, shift;
  double zero_mass = 0.0, zero_tilde = 0.0;  // labels with a = 0 (exact)
};

int bin_of(double a) {
  const int i = static_cast<int>(std::floor(kBinsPerOctaveA * std::log2(a))) - kLowestOctave * kBinsPerOctaveA;
  return std::clamp(i, 0, kBins - 1);
}

// The labels of one step for P (p_side) or Q, binned; false where their bounds are unusable.
bool bin_labels(const StepPmf& s, bool p_side, Binned* out) {
  out->a.assign(kBins, 0.0);
  out->mass.assign(kBins, 0.0);
  out->tilde.assign(kBins, 0.0);
  out->curvature.assign(kBins, 0.0);
  out->shift.assign(kBins, 0.0);
  const std::size_t n = s.log_q_mid.size();
  for (std::size_t j = 0; j < n; ++j) {
    if (s.log_q_mid[j] == kNegInf) continue;
    const double eta = s.mid_eta[j], nu = s.mid_nu[j];
    if (!(eta >= 0.0 && eta < 0.5 && nu >= 0.0 && nu < 1.0)) return false;
    const double a = (-std::log1p(-eta) + (p_side ? nu : 0.0)) * (1.0 + 8.0 * kU);
    const double added = p_side ? s.own_mid[j] : 0.0;
    const double log_tilde = s.log_q_mid[j] + added;
    if (!std::isfinite(log_tilde) || log_tilde > 1.0) return false;
    // Upper bounds of P~_j = e^{log_q_mid + own_mid} (the sum's rounding charged) and of P_j <= P~_j e^{a_j},
    // at least the smallest normal double (a label whose masses underflow still counts in the bins).
    const double rounding = kU * (std::fabs(s.log_q_mid[j]) + std::fabs(added) + 2.0);
    const double tilde = std::max(std::exp(log_tilde + rounding) * (1.0 + 8.0 * kU), kTiny);
    const double mass = std::max(tilde * std::exp(a) * (1.0 + 4.0 * kU), kTiny);
    if (!(a > 0.0)) {
      out->zero_mass += mass;
      out->zero_tilde += tilde;
      continue;
    }
    const int i = bin_of(a);
    const double e = std::expm1(a);
    out->a[i] = std::max(out->a[i], a);
    out->mass[i] += mass;
    out->tilde[i] += tilde;
    out->curvature[i] += mass * (a < 1e-4 ? 0.5 * a * a * (1.0 + a) : e - a);  // e^a - 1 - a
    out->shift[i] += mass * e;
  }
  return true;
}

// The lowest excluded bin: the bins from it up (over all groups, count times each) carry at most
// kBadMass of true and tilde mass together; the bins below it are kept.
int first_excluded(const std::vector<Binned>& binned, const std::vector<double>& counts) {
  double cumulative = 0.0;
  for (int i = kBins - 1; i >= 0; --i) {
    double w = 0.0;
    for (std::size_t g = 0; g < binned.size(); ++g) w += counts[g] * (binned[g].mass[i] + binned[g].tilde[i]);
    if (cumulative + w * (1.0 + 1e-9) > kBadMass) return i + 1;
    cumulative += w * (1.0 + 1e-9);
  }
  return 0;
}

// One group's side: the mean's bounds, the excluded labels' masses and the Bennett bins.
struct Side {
  double count = 0.0;
  double mean_lo = 0.0, mean_hi = 0.0;  // the mean of X over the kept labels (per step)
  double deficit = 0.0;                 // 1 - the labels' true total mass, upper bound
  double bad_true = 0.0;                // true mass of the excluded labels (upper)
  double bad_tilde = 0.0;               // their P~ (or Q~) mass (upper)
  std::vector<double> b, mass;          // bins: bound on |X - m|, true mass (upper)
};

Side side_of(const Binned& binned, double count, double drift_lo, double drift_hi, double deficit, int excluded) {
  Side side;
  side.count = count;
  side.deficit = deficit;
  double bad_shift = 0.0, curvature = 0.0;
  for (int i = 0; i < kBins; ++i) {
    if (i >= excluded) {
      side.bad_true += binned.mass[i];
      side.bad_tilde += binned.tilde[i];
      bad_shift += binned.shift[i];  // |sum_bad P_j r_j|
    } else {
      curvature += binned.curvature[i];  // r - log(1 + r) <= e^a - 1 - a
    }
  }
  const double grow = 1.0 + 1e-9;  // (the sums' rounding, far within)
  side.bad_true *= grow;
  side.bad_tilde *= grow;
  // m = sum_kept P_j log(1 + r_j), r_j = tilde_j / true_j - 1: at most sum_kept P_j r_j = drift -
  // sum_bad P_j r_j, and at least that less the curvature.
  side.mean_hi = drift_hi + bad_shift * grow;
  side.mean_lo = drift_lo - (bad_shift + curvature) * grow;
  const double big = std::max(std::fabs(side.mean_lo), std::fabs(side.mean_hi));
  // Bennett's bins: a + |m| for the kept labels, |m| for the excluded and exact ones (X = 0 there).
  for (int i = 0; i < excluded; ++i) {
    if (binned.mass[i] > 0.0) {
      side.b.push_back((binned.a[i] + big) * (1.0 + 4.0 * kU));
      side.mass.push_back(binned.mass[i] * grow);
    }
  }
  const double at_mean = side.bad_true + binned.zero_mass * grow;
  if (at_mean > 0.0 && big > 0.0) {
    side.b.push_back(big);
    side.mass.push_back(at_mean);
  }
  return side;
}

// An upper bound on log E[e^{theta (X - m)}] (and on log E[e^{-theta (X - m)}]) for one step.
double log_mgf(const Side& side, double theta) {
  const double big = std::max(std::fabs(side.mean_lo), std::fabs(side.mean_hi));
  std::vector<double> logs;
  logs.reserve(side.b.size() + 1);
  const double linear = theta * big * side.deficit;
  if (linear > 0.0) logs.push_back(std::log(linear));
  for (std::size_t i = 0; i < side.b.size(); ++i) logs.push_back(std::log(side.mass[i]) + log_phi(theta * side.b[i]));
  if (logs.empty()) return 0.0;
  const double log_x = logsumexp(logs.data(), logs.size()) + 1e-10;
  if (!(log_x < 700.0)) return log_x + 1e-10;  // log(1 + x) <= log x + 1/x
  return std::log1p(std::exp(log_x)) * (1.0 + 4.0 * kU);
}

// The smallest s with exp(sum_g count_g K_g(theta + shift) + extra - theta s) <= e^{-log_target}
// over a geometric grid of theta, rounded up; +inf where none is finite.
double deviation(const std::vector<Side>& sides, double shift, double extra, double log_target) {
  double best = kInf;
  for (int k = 0; k <= 8 * 22; ++k) {
    const double theta = std::pow(10.0, k / 8.0);
    double total = extra + log_target;
    for (const Side& side : sides) total += side.count * log_mgf(side, theta + shift);
    if (!std::isfinite(total)) continue;
    best = std::min(best, total / theta);
  }
  return best * (1.0 + 16.0 * kU);
}

}  // namespace

Concentration concentrate(const std::vector<std::pair<const StepPmf*, double>>& groups) {
  Concentration out;
  std::vector<Binned> binned_p, binned_q;
  std::vector<double> counts;
  std::vector<const StepPmf*> steps;
  for (const auto& [step, count] : groups) {
    if (count == 0.0) continue;
    if (step->mid_drift.size() != 6 || step->mid_eta.size() != step->log_q_mid.size() ||
        step->mid_nu.size() != step->log_q_mid.size() || step->own_mid.size() != step->log_q_mid.size()) {
      return out;
    }
    for (double v : step->mid_drift) {
      if (!std::isfinite(v)) return out;
    }
    binned_p.emplace_back();
    binned_q.emplace_back();
    if (!bin_labels(*step, true, &binned_p.back()) || !bin_labels(*step, false, &binned_q.back())) return out;
    counts.push_back(count);
    steps.push_back(step);
  }
  if (counts.empty()) return out;
  const int excluded_p = first_excluded(binned_p, counts), excluded_q = first_excluded(binned_q, counts);
  std::vector<Side> sides_p, sides_q;
  double shift_p = 0.0, shift_q = 0.0, bad_p = 0.0, bad_q = 0.0, growth = 0.0, magnitude_p = 0.0, magnitude_q = 0.0;
  for (std::size_t g = 0; g < counts.size(); ++g) {
    const std::vector<double>& drift = steps[g]->mid_drift;
    const double count = counts[g];
    sides_p.push_back(side_of(binned_p[g], count, drift[0], drift[1], drift[4], excluded_p));
    sides_q.push_back(side_of(binned_q[g], count, drift[2], drift[3], drift[5], excluded_q));
    shift_p += count * sides_p.back().mean_hi;
    shift_q += count * sides_q.back().mean_lo;
    magnitude_p += count * std::fabs(sides_p.back().mean_hi);
    magnitude_q += count * std::fabs(sides_q.back().mean_lo);
    bad_p += count * sides_p.back().bad_tilde;
    bad_q += count * sides_q.back().bad_true;
    growth += count * std::log1p(std::max(drift[1], 0.0));  // P~'s total per step <= 1 + drift
  }
  // P side: E_P[1{S - T m > s} e^S] <= e^{T m - theta s} prod E[e^{(1 + theta)(X - m)}].
  const double s_p = deviation(sides_p, 1.0, std::max(shift_p, 0.0), kLogP);
  // Q side: Q(S - T m < -s) <= e^{-theta s} prod E[e^{-theta (X - m)}].
  const double s_q = deviation(sides_q, 0.0, 0.0, kLogQ);
  if (!(std::isfinite(s_p) && std::isfinite(s_q) && s_p < 1.0 && s_q < 1.0)) return out;
  const double round = 1.0 + 16.0 * kU;
  // (Each exponent rounded up by ulps of the magnitudes summed into it.)
  const double up_p = shift_p + s_p + 16.0 * kU * (magnitude_p + s_p);
  const double up_q = -shift_q + s_q + 16.0 * kU * (magnitude_q + s_q);
  out.ok = true;
  out.factor_p = std::exp(-up_p) * (1.0 - 4.0 * kU);
  // P~(B) <= sum_t P~(step t excluded) <= T beta~ prod_g (1 + the group's drift)^(count_g): a step's
  // P~ total is at most 1 + its drift.
  out.charge_p = bad_p * std::exp(growth * round) * round;
  out.factor_q = std::exp(up_q) * round;
  out.charge_q = bad_q * round;
  // factor_p e^{-700} (P~'s deviation, where factor_p may exceed 1) and e^eps e^{-1400} <= e^{-700}.
  out.charge_a = (std::max(out.factor_p, 1.0) + 1.0) * std::exp(-kLogP) * round;
  return out;
}

}  // namespace dpacct::pld

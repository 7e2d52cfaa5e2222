// The one PLD composer: any list of discretised steps (step.hpp), each
// repeated `count` times, composed by FFT with exponential tilting, with
// certified upper and lower bounds on delta(epsilon) and epsilon(delta).
//
// Notation (one direction of a dominating pair): for the T-fold composition
//     delta(eps) = E_{P^T}[(1 - e^{eps - sum_t L_t})_+] + P(some L_t = +inf)
// (Sommer, Meiser, Mohammadi, "Privacy Loss Classes", PoPETs 2019). Each step
// brings two discretisations (see step.hpp): the connect-the-dots grid masses
// (upper bound) and the P/Q masses of cell labels (lower bound, data
// processing). Three sequences per step are composed: the grid masses, the
// label P-masses and the label Q-masses.
//
// TILTING. Each sequence is multiplied by e^{lambda k D} (lambda = `tilt`; the
// Q-labels by e^{(lambda + 1) k D}, which makes them comparable with P) and
// normalised, so that the region around the queried epsilon carries O(1)
// mass and small deltas keep their relative accuracy after the FFT; the
// composition is untilted in log space (the tilt factorises over a sum).
//
// WINDOW. The composed support can be far longer than what matters; the FFT
// holds a window of losses outside which the tilted composed mass is
// <= e^-25 per side by default (Chernoff bounds P(S >= t) <= exp(K(s) - s t) from the
// exact cumulants of the tilted steps, over a geometric set of slopes), or
// the whole support when that is shorter. Steps are placed at their absolute
// index mod N, so the circular result holds every window entry plus mass
// aliased in from outside (>= 0, bounded by the two tails): charged to both
// bounds.
//
// ROUND-OFF. Each forward transform errs by at most fft::error_bound(N) in every
// component (Higham, "Accuracy and Stability of Numerical Algorithms", 2nd ed.,
// Sec. 24.1); that error is carried through the power of the spectrum frequency by
// frequency (so it follows the composed distribution, not T times one step's),
// turned into a 2-norm bound on the entries by Parseval (compose.cpp, compose()),
// and carried to the suffix sums by Cauchy-Schwarz; entries lost to underflow are
// charged too. The relative rounding of the tilted entries is composed as a log
// factor; the losses' own rounding (StepPmf::loss_slack) shifts epsilon.
//
// UPPER BOUND: delta_u(eps) = sum_{K D > eps} p_K (1 - e^{eps - K D}) of the
// composed grid masses, plus the round-off, window and +inf terms.
// LOWER BOUND: max over thresholds j of P(K >= j) - e^eps Q(K >= j) of the
// composed labels (P low, Q high), plus P(some step has label +inf); with `shared`,
// also of the steps' shared labels (step.hpp), less the charge for their common
// error (compose.cpp, shared_test), and the better of the two taken.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <limits>
#include <utility>
#include <vector>

#include "dpacct/cached.hpp"
#include "dpacct/pld/concentration.hpp"
#include "dpacct/pld/power.hpp"
#include "dpacct/pld/step.hpp"

namespace dpacct::pld {

namespace detail {

// suffix[i] = sum_{j >= i} c_j e^{-slope (j - i) d} of non-negative c_j, summed in two
// levels (blocks of ~sqrt(n) entries) so that each is within suffix_relative_error(n) of exact,
// relative: 6 u (B + n / B + 4) instead of one recursion's ~u n (compose.cpp shows the bound).
// (Instantiated for std::vector<double> and CachedVector<double>.)
template <class Vector>
CachedVector<double> suffix_sums(const Vector& c, double slope, double d);
double suffix_relative_error(std::size_t n);
// excess[i] = sum_{j >= i} c_j e^{-slope (j - i) d} (1 - e^{-(j - i) d}) from the suffix sums s2 of the same c at
// slope + 1, by the recursion excess[i] = r (excess[i + 1] + g s2[i + 1]) (r = e^{-slope d}, g = 1 - e^{-d}) of
// non-negative terms: within excess_relative_error(n, error of s2) of exact, relative (each step rounds
// ~5 times, r^j carries exp's ulp j times).
CachedVector<double> excess_sums(const CachedVector<double>& s2, double slope, double d);
double excess_relative_error(std::size_t n, double s2_error);
// sqrt(sum_{j < n} w_j^2) bounded from above for w_j = e^{-slope j d} min(1, (j + 1) d), the weights with which the
// entries at and above the first loss index k above epsilon count in delta (k d - eps <= d).
double excess_weight_norm(double slope, double d, std::size_t n);

// The relative width at which the composers built on ComposedPld (split.hpp, one_rare.hpp)
// stop inverting delta: their every bound evaluation sums over many terms.
inline constexpr double kInversionWidth = 1e-7;

// Bisection for a monotone predicate false at `low` and true at `high`, to
// relative width `relative` (1e-10 by default); returns the end where the predicate
// holds (`high`), or the other one.
template <class F>
double bisect(F holds, double low, double high, bool return_low, double relative = 1e-10) {
  for (int i = 0; i < 200; ++i) {
    if (high - low <= relative * (high > 1e-300 ? high : 1e-300)) break;
    const double mid = 0.5 * (low + high);
    if (holds(mid)) {
      high = mid;
    } else {
      low = mid;
    }
  }
  return return_low ? low : high;
}

// The crossing of a monotone score (> 0 at `low`, <= 0 at `high`) to relative width
// `relative`, by regula falsi with the Illinois modification (Dowell and Jarratt, "A modified
// regula falsi method for computing the root of an equation", BIT 11, 1971): log delta is
// nearly linear in epsilon, so interpolating the log of a delta bound against the log of the
// target takes a few evaluations where bisection from a wide bracket takes 30-40. The point
// tried is kept half the target width inside the bracket, and a bisection is taken where
// three steps in a row did not halve the bracket (step-like scores: a grid's bounds are flat
// between its points), so it never takes more than four times bisection's steps.
// `f_low`, `f_high`: the scores at the ends where known (NaN where not). A NaN score counts
// as > 0, as the predicate `value <= target` it replaces would. Only evaluated points are
// returned: `high` (score <= 0) or, with `return_low`, `low` (score > 0).
template <class S>
double crossing(S score, double low, double high, double f_low, double f_high, bool return_low, double relative) {
  double checkpoint = high - low;
  int stalled = 0;
  int kept = 0;  // +1: the last step moved `low`, -1: `high`
  for (int i = 0; i < 400; ++i) {
    const double width = high - low;
    const double tol = relative * (high > 1e-300 ? high : 1e-300);
    if (width <= tol) break;
    double x = 0.5 * (low + high);
    if (stalled < 3 && std::isfinite(f_low) && std::isfinite(f_high) && f_low > 0.0 && f_high <= 0.0) {
      const double t = f_low / (f_low - f_high);
      const double guard = 0.5 * tol;
      x = std::min(std::max(low + t * width, low + guard), high - guard);
    }
    const double fx = score(x);
    if (fx <= 0.0) {
      high = x;
      f_high = fx;
      if (kept == -1) f_low *= 0.5;  // `low` kept twice: its weight halved (Illinois)
      kept = -1;
    } else {
      low = x;
      f_low = fx;  // (NaN: not interpolated from until replaced)
      if (kept == 1) f_high *= 0.5;
      kept = 1;
    }
    if (high - low <= 0.5 * checkpoint) {
      checkpoint = high - low;
      stalled = 0;
    } else if (++stalled > 3) {
      checkpoint = high - low;  // (this step bisected)
      stalled = 0;
    }
  }
  return return_low ? low : high;
}

// Certified epsilon bounds at `delta` from certified delta bounds: `upper` where the
// non-increasing up(eps) first falls to delta over [0, stop] (+inf where up(stop) > delta
// still), `lower` where down(eps) (any certified lower bound) exceeds delta, found by probing
// down from the upper answer in doubling steps (the first max(1e-3 upper, min_width)) and
// searching there. Both searches (crossing() above, on log(bound / delta)) stop at relative
// width `relative`: each end kept is an evaluated point, certified whatever the width, which
// only costs that much tightness.
template <class Up, class Down>
void invert_delta(Up up, Down down, double delta, double stop, double min_width, double* lower, double* upper,
                  double relative = 1e-10) {
  const double log_delta = std::log(delta);
  // log(bound / delta). Where a bound is NaN the answer keeps to the side it proves nothing on:
  // an upper bound's NaN counts as above delta, a lower bound's as below.
  auto score = [log_delta](double v) {
    if (std::isnan(v)) return v;
    return v > 0.0 ? std::log(v) - log_delta : -std::numeric_limits<double>::infinity();
  };
  auto score_down = [log_delta](double v) {
    return v > 0.0 ? std::log(v) - log_delta : -std::numeric_limits<double>::infinity();
  };
  const double at_zero = up(0.0);
  const double at_stop = at_zero <= delta ? 0.0 : up(stop);
  if (at_zero <= delta) {
    *upper = 0.0;
  } else if (at_stop > delta) {
    *upper = std::numeric_limits<double>::infinity();
  } else {
    *upper = crossing([&](double e) { return score(up(e)); }, 0.0, stop, score(at_zero), score(at_stop), false,
                      relative);
  }
  *lower = 0.0;
  double anchor = *upper < std::numeric_limits<double>::infinity() ? *upper : stop;
  double at_anchor = std::numeric_limits<double>::quiet_NaN();  // score of down(anchor) where evaluated
  double width = 1e-3 * anchor > min_width ? 1e-3 * anchor : min_width;
  while (anchor > 0.0) {
    const double probe = anchor - width > 0.0 ? anchor - width : 0.0;
    const double at_probe = score_down(down(probe));
    if (at_probe > 0.0) {
      if (std::isnan(at_anchor)) at_anchor = score_down(down(anchor));
      // (down may fail to be monotone by a little: an anchor found above delta after all is itself a lower bound.)
      *lower = at_anchor > 0.0 ? anchor
                               : crossing([&](double e) { return score_down(down(e)); }, probe, anchor, at_probe, at_anchor,
                                          true, relative);
      break;
    }
    anchor = probe;
    at_anchor = at_probe;
    width *= 2.0;
  }
  if (*lower > *upper) *lower = *upper;
}

}  // namespace detail

// COMPOSITION IN STAGES (Ghazi, Kamath, Kumar, Manurangsi, "Faster Privacy Accounting
// via Evolving Discretization", ICML 2022, arXiv:2207.04381: their two-stage
// self-composition, with O(T^(1/4)) buckets per stage, made certified). A long composition on one
// grid pays for two things at once: the grid must be fine (connect the dots adds up to
// D^2 / 4 of loss variance per step, T of them in all), and the window must hold the
// whole composed spread (sqrt(T) standard deviations of a step), so the FFT grows like T.
// Composing blocks of B steps on the fine grid D, then re-spreading each block onto a
// grid r D (coarsen() in split.hpp, which adds at most (r D)^2 / 4 per block, a quarter
// of B steps' worth at B = 4 r^2, the accountant's choice) and composing T / B blocks
// there, keeps the spread and shrinks both windows: the block's by sqrt(T / B), the
// whole one by r; r ~ (T / 2)^(1/4) balances the two.
//
// compose_block returns the `count`-fold composition of `step` as one StepPmf on the
// same grid, certified entry by entry, so that it composes like any step:
//  - upper masses: each window entry p_K at its computed value plus a bound on that
//    entry's FFT round-off (power_window's entry_error: the spectrum's error bounds summed
//    over N, far below the 2-norm bound where few frequencies carry the error) and the
//    aliased tilted mass, untilted and rounded up; the mass below the window (an untilted
//    Chernoff bound) is moved up to the
//    window's first loss and the mass above it (the tilted one, untilted at the window's
//    top) is sent to +inf: both only raise delta (step.hpp);
//  - labels: the label sums in the window, P at its computed value less round-off and
//    aliasing, Q plus them (P low, Q high); the label sums outside the window are labelled
//    -inf, P- and Q-mass together (post-processing);
//  - +inf masses composed (1 - (1 - m)^count), loss_slack count times the step's.
// The entries' round-off is charged to every entry, and untilting multiplies it by
// e^{-tilt K D}: far below a tilt's centre it would swamp the true masses (and inflate the
// block's total Q-mass, which the composer uses below its windows). So where `tilt`
// times the window's span exceeds 8, the block is composed at tilt 0 as well and every
// entry takes the tightest of its two bounds: the two cover the entries above and below
// the centre. The window holds both tilts' Chernoff windows (tails e^{log_window_tail}
// per side).
// Throws std::invalid_argument (the message counts the window's points and says to
// increase discretization) beyond max_size.
StepPmf compose_block(const StepPmf& step, double count, double tilt, std::size_t max_size, double log_window_tail);

class ComposedPld {
 public:
  // Composes the (step, count) groups; every step must have the same
  // discretization; counts are integers >= 0. `tilt` >= 0; `max_size` caps
  // the FFT size (a power of two). Throws std::invalid_argument if the
  // composition cannot fit (the message says to increase discretization).
  // `log_window_tail` (<= -25) is the tilted mass the window may leave out per
  // side (charged to both bounds): a query whose delta is tiny against the
  // tilted mass near its epsilon (delta(0), a difference of two masses near
  // 1/2) needs a deeper cut than the default e^-25 ~ 1.4e-11.
  // `thorough` spends more direct sums on the live frequencies of the FFT power
  // (power.hpp), for the same kind of query. `lower` = false composes the upper masses
  // alone (no label sequences: the lower bounds are then the trivial ones, 0 but for the
  // +inf mass), for a direction whose upper bound only has to fall below another's lower.
  // `shared` also composes the steps' shared labels (step.hpp) where every step has them
  // (shared_labels() says whether it did): the lower bounds are then the better of the two
  // kinds of labels, for two more sequences.
  ComposedPld(const std::vector<std::pair<const StepPmf*, double>>& groups, double tilt, std::size_t max_size,
              double log_window_tail = -25.0, bool thorough = false, bool lower = true, bool shared = false);

  // Certified bounds on delta(epsilon) for this direction (lower <= upper).
  void delta_bounds(double epsilon, double* lower, double* upper) const;

  // Certified bounds on epsilon(delta), 0 < delta < 1: the upper by bisection on
  // the monotone upper delta bound (to relative width 1e-10, rounded outward), the
  // lower straight from the threshold tests near it (epsilon_lower).
  // `upper` is +inf when this window cannot certify delta; `below_window`
  // says the upper bound's root lies below the represented losses (a
  // smaller tilt would do better).
  void epsilon_bounds(double delta, double* lower, double* upper, bool* below_window) const;

  // Pieces for compositions built on top of this one (split.hpp): certified
  // bounds on sums over the composed finite part only (no +inf terms).
  // upper_finite(e) >= sum_{K D > e} p_K (1 - e^{e - K D}) of the connect-the-dots
  // masses (below the window: total mass - e^e * sum_window p_K e^{-K D}).
  double upper_finite(double epsilon) const;
  // tail_p_lower(y) <= P(K D >= y), tail_q_upper(y) >= Q(K D >= y) for the label sum K.
  double tail_p_lower(double y) const;
  double tail_q_upper(double y) const;
  double cells_low() const { return static_cast<double>(cells_start_) * discretization_; }
  double cells_high() const { return static_cast<double>(cells_start_ + static_cast<long>(size_) - 1) * discretization_; }
  bool has_cells() const { return !sp_.empty(); }
  // log of the exact total upper mass (rounded up), and of a certified lower
  // bound on sum_{K in window} p_K e^{-K D} (-inf when none is known).
  double log_mass_upper() const { return log_mass_u_; }
  double log_window_sum_lower() const;
  bool has_finite_upper() const { return !s1_.empty(); }

  double discretization() const { return discretization_; }
  double epsilon_slack() const { return epsilon_slack_; }  // the shift of epsilon for the losses' rounding
  double window_low() const;   // smallest loss represented (upper bound's grid)
  double window_high() const;  // largest loss represented
  std::size_t size() const { return size_; }
  std::size_t memory_bytes() const;  // the working memory this composition held at its peak
  std::size_t held_bytes() const;    // the memory its kept vectors hold (suffix sums, label sums)
  // Diagnostics of the FFT power (power.hpp): frequencies recomputed in extended precision,
  // and whether only a bulk of some step was (the rest through its own transform).
  bool shared_labels() const { return shared_; }
  const Concentration& concentration() const { return concentration_; }
  std::size_t direct_frequencies() const { return stats_.direct; }
  bool bulk_split() const { return stats_.bulk_split; }

 private:
  double upper_bound(double epsilon) const;
  double lower_bound(double epsilon) const;
  long crossing(double epsilon) const;  // where the label tests are best (see compose.cpp)
  // The best certified lower bound on epsilon(delta) from the threshold tests near `near`.
  double epsilon_lower(double delta, double near) const;
  // Bounds on one label kind's true weighted suffix sums (tilted units, weights in [0, 1]) from a
  // computed one s, whose error is `err` (the transforms' entries, the aliased mass) and a relative
  // suffix error. The steps' rounding enters either as the factor e^{-+R}, R = sum count max_rounding,
  // or as the composed mean rounding (a factor in [e^{-B}, e^{-A}], A and B the sums of count times the
  // steps' log_mean_low and log_mean_high) and a deviation of at most sqrt(root S), S the true sum
  // (compose.cpp). low(s) and high(s) take the better of the two.
  struct SumBounds {
    double err = 0.0;
    double low_old = 1.0, high_old = 1.0;  // e^{-R} (1 - suffix error), e^{R} (1 + suffix error)
    double low_new = 0.0, high_new = 0.0;  // e^{-B} (1 - suffix error), e^{-A} (1 + suffix error)
    double dev_low = 0.0, dev_high = 0.0;  // e^{-B} and e^{-A} times sqrt(root high_old)
    bool sharp = false;                    // whether the second form can beat the first at all
    double low(double s) const;
    double high(double s) const;
  };
  // A label set's bounds for its P and Q sums, from its entries' error bounds and rounding and its
  // steps' sequences (the composed window's aliasing and suffix-sum error included).
  void test_terms(double entry_p, double entry_q, double log_rounding, const std::vector<const Tilted*>& seq_p,
                  const std::vector<const Tilted*>& seq_q, const std::vector<double>& counts, SumBounds* p,
                  SumBounds* q) const;
  // The best of value(i) over the threshold tests near epsilon e (compose.cpp).
  template <class F>
  double best_test(F value, double e, bool exhaustive) const;
  // The same from the shared labels (compose.cpp).
  bool shared_test(long i, double epsilon, int form, double* a, double* b, double* scale) const;
  double shared_lower_bound(double epsilon) const;
  double shared_epsilon_lower(double delta, double near) const;

  double discretization_ = 0.0;
  double tilt_ = 0.0;
  std::size_t size_ = 0;
  bool has_upper_ = true;
  bool empty_ = true;             // nothing composed (loss 0 with probability 1)
  bool upper_finite_empty_ = false;  // the composed grid masses are all 0 (everything at +inf)
  bool labels_empty_ = false;     // the composed label masses are all 0 (or, !lower_, not composed)
  bool lower_ = true;             // the label sequences were composed (the constructor's `lower`)
  bool single_ = false;           // one step, count 1: no transform (exact entries)
  long window_start_ = 0;         // loss index of entry 0 of s1_ and s2_
  long cells_start_ = 0;          // label sum of entry 0 of sp_ and sq_
  // Upper: untilted p_K = c_K exp(log_shift_u - tilt K D);
  // s1[i] = sum_{j >= i} c_j e^{-tilt (j - i) D}, s2 the same with tilt + 1.
  double log_shift_u_ = 0.0;
  CachedVector<double> s1_, s2_;
  // s3[i] = sum_{j >= i} c_j e^{-tilt (j - i) D} (1 - e^{-(j - i) D}) (= s1 - s2 without the difference),
  // within excess_error_ (relative) of exact.
  CachedVector<double> s3_;
  double excess_error_ = 0.0;
  double entry_error_u_ = 0.0;
  // Lower: P(K >= j) = e^{log_shift_p - tilt j D} sp[j] (+ P(some +inf)),
  // Q(K >= j) = e^{log_shift_q - (tilt + 1) j D} sq[j].
  double log_shift_p_ = 0.0, log_shift_q_ = 0.0;
  CachedVector<double> sp_, sq_;
  double entry_error_p_ = 0.0, entry_error_q_ = 0.0;
  long reliable_low_ = 0, reliable_high_ = 0;
  double log_rounding_ = 0.0;     // relative rounding of the tilted entries, composed (log factor)
  double suffix_error_ = 0.0;     // relative error of a computed suffix sum (see suffix_sums)
  double epsilon_slack_ = 0.0;    // sum of count * loss_slack
  // Exact total masses of the composed finite parts (upper masses, P- and Q-labels), logs rounded outward.
  double log_mass_u_ = 0.0, log_mass_q_ = 0.0;
  double tail_above_ = 0.0;       // 1 - prod (1 - infinity_upper)^count, rounded up
  double any_infinity_lower_ = 0.0;  // 1 - prod (1 - infinity_lower)^count, rounded down
  double log_tail_u_ = 0.0, log_tail_c_ = 0.0;  // log tilted mass allowed outside each window
  // Set once composed (see the constructor): upper_finite's round-off charge and its log, and
  // the threshold tests' error terms and rounding factors (P low, Q high) and Q's total.
  double charge_u_ = 0.0, log_charge_u_ = 0.0;
  SumBounds bounds_p_, bounds_q_;
  double total_q_ = 0.0;
  // Shared labels: gamma = (1 + eta)^T - 1, kappa = e^{nu_T} - 1, the factors from the computed
  // P~, Q~ to upper bounds on the true P(A) and Q(A), and TV <= delta_u(0).
  bool shared_ = false;
  // ... and their composed sequences, as sp_ and sq_ with their own terms.
  CachedVector<double> sp2_, sq2_;
  double log_shift_p2_ = 0.0, log_shift_q2_ = 0.0, log_rounding2_ = 0.0;
  double entry_error_p2_ = 0.0, entry_error_q2_ = 0.0;
  SumBounds bounds_p2_, bounds_q2_;
  double shared_gamma_ = 0.0, shared_kappa_ = 0.0, shared_up_p_ = 1.0, shared_up_q_ = 1.0;
  double shared_kappa_w_ = 0.0, shared_kappa_n_ = 0.0;                  // (compose.cpp)
  double shared_w_p_ = 0.0, shared_w_pq_ = 0.0, shared_w_q_ = 0.0;
  double tv_upper_ = 1.0;
  Concentration concentration_;  // the shared labels' errors by their concentration (form 2 of shared_test)
  PowerStats stats_;
};

}  // namespace dpacct::pld

// Privacy loss distributions (PLD) of (Poisson-subsampled) Gaussian mechanisms,
// composed by FFT, with certified upper and lower bounds on delta(epsilon).
//
// Method (each step's privacy loss L, in one direction of the add/remove pair):
//  1. Clamp L to [L_lo, L_hi] (L' = clamp(L)); the probability tau that a step
//     is clamped is computed exactly and charged to the bounds: T tau_hi to the
//     upper bound, T tau_lo to the lower bound.
//  2. Round L' to the NEAREST multiple of `discretization` D: L~ = L' + e with
//     |e| <= D/2. The exact mean rounding error mu = E[L~] - E[L'] is computed
//     (E[L'] by spectrally accurate quadrature) and corrected for; the random
//     remainder sum_t (e_t - mu_t) is bounded by Hoeffding's inequality:
//     |sum| <= a = D sqrt(T log(1/beta) / 2) except with probability beta. Hence
//       delta(eps) <= delta~(eps + sum mu - a) + beta + T tau_hi,
//       delta(eps) >= delta~(eps + sum mu + a) - beta - T tau_lo,
//     where delta~ is the hockey-stick of the composed discrete PLD. The gap
//     grows like D sqrt(T), not like D T as with one-sided rounding.
//  3. Compose the discrete PLDs by one FFT per distinct step, a power of the
//     spectrum and one inverse FFT, after exponential tilting by e^{lambda L}
//     so that the region around the queried epsilon carries O(1) mass: FFT
//     round-off is then relative there, which keeps delta ~ 1e-12 and below
//     accurate. The transform covers the tilted composed mass up to a Chernoff
//     tail bound; the mass outside it (which wraps around) and a rigorous FFT
//     round-off bound are charged to both bounds.
#pragma once

#include <cstddef>
#include <vector>

namespace dpacct::pld {

// A run of `count` identical steps: Poisson rate q (q = 1: plain Gaussian) and
// noise multiplier sigma, add/remove adjacency.
struct StepGroup {
  double sampling_probability;
  double noise_multiplier;
  double count;
};

enum class Direction { remove, add };

// The composed, tilted PLD of one direction, ready for delta queries.
class ComposedPld {
 public:
  // Builds the composition. `tilt` >= 0 is lambda; `max_size` caps the FFT
  // size (a power of two); throws std::invalid_argument if the request cannot
  // fit (the message says what to change).
  ComposedPld(const std::vector<StepGroup>& groups, Direction direction, double discretization,
              double tilt, std::size_t max_size);

  // Certified bounds on delta(epsilon) for this direction; `beta` is the
  // Hoeffding failure probability (0 < beta < 1) spent on the discretisation.
  void delta_bounds(double epsilon, double beta, double* lower, double* upper) const;

  double discretization() const { return discretization_; }
  double window_low() const;   // smallest loss represented
  double window_high() const;  // largest loss represented
  double hoeffding_width(double beta) const;
  double mean_shift() const { return mean_shift_; }
  std::size_t size() const { return size_; }

 private:
  // log delta~(eps) of the discrete composition (no error terms), and the
  // FFT/alias error term for the same eps.
  double log_discrete_delta(double epsilon) const;
  double error_term(double epsilon) const;

  double discretization_;
  double tilt_;
  std::size_t size_ = 0;
  long window_start_ = 0;              // loss index of s1_[0]
  double log_shift_ = 0.0;             // untilted p_K = p~_K exp(log_shift - tilt K D)
  std::vector<double> s1_, s2_;        // tilted suffix sums (see pld.cpp)
  double entry_error_ = 0.0;           // bound on |error| of each tilted entry
  double log_alias_above_ = 0.0;       // log tilted mass above the window
  double steps_ = 0.0;                 // total number of steps T
  double mean_shift_ = 0.0;            // sum of count * mean rounding error
  double mean_error_ = 0.0;            // bound on the error of mean_shift_
  double tail_above_ = 0.0;            // T tau_hi
  double tail_below_ = 0.0;            // T tau_lo
};

}  // namespace dpacct::pld

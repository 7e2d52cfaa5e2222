// Privacy loss distributions (PLD) of (Poisson-subsampled) Gaussian mechanisms,
// composed by FFT, with certified upper and lower bounds on delta(epsilon).
//
// Notation (one direction of the add/remove pair): P, Q the output
// distributions of one step, L = log dP/dQ, and for the T-fold composition
//     delta(eps) = E_{P^T}[(1 - e^{eps - sum_t L_t})_+]
// (Sommer, Meiser, Mohammadi, PoPETs 2019). The loss axis is cut into cells
// [k D, (k+1) D) of width D = `discretization`; cell k is an interval of the
// output x (L is monotone in x). For every cell the kernel computes the P-mass
// m_k and the Q-mass w_k = E_P[e^{-L}; cell k], each as a certified interval
// (see RELATIVE ERRORS).
//
// UPPER BOUND: connect the dots (Doroshenko, Ghazi, Kamath, Kumar, Manurangsi,
// "Connect the Dots: Tighter Discrete Approximations of Privacy Loss
// Distributions", PoPETs 2022, arXiv:2207.04380). The mass of cell k is split
// between the grid points a = kD and b = (k+1)D so that both m_k and
// E[e^{-L}] are kept: p_a = (w_k e^{kD} - m_k e^{-D}) / (1 - e^{-D}),
// p_b = m_k - p_a. In the variable Y = e^{-L} this is a mean-preserving spread,
// and delta(eps) = E[g(Y_1 ... Y_T)] with g(y) = (1 - e^eps prod y)_+ convex
// and non-increasing in each y_t separately; with the steps independent,
// conditional Jensen gives E[g] over the spread >= E[g] over the truth, for
// every composition. Kernel choices that only move mass to larger losses or
// add mass keep this: the split takes the certified lower end of p_a (the rest
// goes to b), m_k is taken at its upper end, mass beyond the clamp point of
// the largest losses goes to +inf (charged: T tau_hi), and mass beyond the
// clamp point of the smallest losses is moved up to the bottom grid point.
// The error of the split is second order in D (the chord of a convex curve),
// so a coarse grid certifies a tight bound.
//
// LOWER BOUND: data processing. Labelling each step's output by its cell index
// is post-processing, and so is labelling the composed output by the sum K of
// the labels; the hockey-stick divergence cannot grow under post-processing,
// so for every threshold j
//     delta(eps) >= P(K >= j) - e^eps Q(K >= j),
// where the P- and Q-distributions of K are the T-fold compositions of the
// cell masses (m_k at its lower end, w_k at its upper end, tails dropped: all
// of these only lower the right side). The best j is found near the crossing
// P_K = e^eps Q_K. The loss of using K instead of sum L is second order in D.
//
// COMPOSITION. The three sequences (split masses, m, w) are tilted by
// e^{lambda L} (lambda = `tilt`; w by e^{(lambda + 1) L}) so that the region
// around the queried epsilon carries O(1) mass, normalised, composed by one
// real FFT each per distinct step, a power of the spectrum and one inverse FFT
// on a window sized by Chernoff bounds (tilted mass outside <= e^-25 per side,
// aliased mass charged to the bounds), and untilted in log space. FFT round-off
// (Higham, "Accuracy and Stability of Numerical Algorithms", 2nd ed., Thm
// 24.2, through fft::error_bound) is charged to both bounds.
//
// RELATIVE ERRORS. Cell masses are differences of log-CDFs. The kernel assumes
// that log_ndtr, log_add and log1mexp return values within 16 u (1 + |value|)
// of the exact ones (u = 2^-52; erfc and log in glibc are within 1-2 ulp) and
// propagates that through each difference, so every mass interval holds the
// exact mass under that assumption; a cell whose difference cancels
// completely gets the interval [0, its upper error bound]. Rounding of the
// tilts and of x at the cell edges is charged as a relative factor and a shift
// of epsilon.
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

  // Certified bounds on delta(epsilon) for this direction.
  void delta_bounds(double epsilon, double* lower, double* upper) const;

  double discretization() const { return discretization_; }
  double window_low() const;   // smallest loss represented
  double window_high() const;  // largest loss represented
  std::size_t size() const { return size_; }

 private:
  double upper_bound(double epsilon) const;
  double lower_bound(double epsilon) const;

  double discretization_;
  double tilt_;
  std::size_t size_ = 0;
  long window_start_ = 0;          // loss index of entry 0 of s1_ and s2_
  long cells_start_ = 0;           // cell-label sum of entry 0 of sp_ and sq_
  double steps_ = 0.0;             // total number of steps T
  // Upper (connect the dots): untilted p_K = c_K exp(log_shift_u - tilt K D);
  // s1[i] = sum_{j >= i} c_j e^{-tilt (j - i) D}, s2 the same with tilt + 1.
  double log_shift_u_ = 0.0;
  std::vector<double> s1_, s2_;
  double entry_error_u_ = 0.0;     // 2-norm bound on the round-off of the c_K
  // Lower (cell labels): P(K >= j) = e^{log_shift_p - tilt j D} sp[j],
  // Q(K >= j) = e^{log_shift_q - (tilt + 1) j D} sq[j] (suffix sums as above).
  double log_shift_p_ = 0.0, log_shift_q_ = 0.0;
  std::vector<double> sp_, sq_;
  double entry_error_p_ = 0.0, entry_error_q_ = 0.0;
  long reliable_low_ = 0, reliable_high_ = 0;  // entries above round-off, where the crossing is searched
  double log_rounding_ = 0.0;      // relative rounding of the tilted entries, composed (log factor)
  double epsilon_slack_ = 0.0;     // shift of epsilon for the rounding of the cell edges
  double tail_above_ = 0.0;        // sum_g count_g tau_hi,g (mass sent to +inf)
  // log of the tilted mass allowed outside each window (wrap-around and above it):
  // the Chernoff tail of pld.cpp, or -inf where the window holds the whole composed support.
  double log_tail_u_, log_tail_c_;
};

}  // namespace dpacct::pld

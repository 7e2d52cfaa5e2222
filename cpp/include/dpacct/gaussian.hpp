// The exact privacy curve of the Gaussian mechanism.
#pragma once

namespace dpacct::gaussian {

// log delta(epsilon) of the Gaussian mechanism with L2 sensitivity 1 and noise
// standard deviation `noise_multiplier` (Balle & Wang, "Improving the Gaussian
// Mechanism for Differential Privacy", ICML 2018, arXiv:1805.06530 (v2), Theorem 8):
//   delta(eps) = Phi(-eps*s + 1/(2s)) - e^eps * Phi(-eps*s - 1/(2s)).
// Exact up to floating point (relative error ~1e-13); evaluated in log space so
// that delta down to 1e-300 and below keeps its digits.
// Throws std::invalid_argument for noise_multiplier <= 0 or epsilon < 0 or NaN.
double log_delta(double noise_multiplier, double epsilon);

// The smallest epsilon >= 0 with delta(epsilon) <= delta, i.e. the inverse of
// the curve above, found by bisection on log delta to relative tolerance 1e-14
// aimed at delta * (1 - 1e-9), so that the returned epsilon satisfies the true
// curve despite its ~1e-12 evaluation error. Returns 0 when delta >= delta(0).
// Throws std::invalid_argument for noise_multiplier <= 0 or delta outside (0, 1).
double epsilon(double noise_multiplier, double delta);

}  // namespace dpacct::gaussian

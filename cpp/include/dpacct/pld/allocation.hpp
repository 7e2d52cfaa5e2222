// One epoch of balls-in-bins batches as one PLD step: the law of its likelihood
// ratio, computed once on a lattice, then discretised for the composer on any
// loss grid (step.hpp), in either direction.
//
// THE PAIR. An epoch of t Gaussian steps in which each record is put into one
// uniformly random step (Chua et al., "Balls-and-Bins Sampling for DP-SGD",
// AISTATS 2025, arXiv:2412.16802) is dominated, under zero-out adjacency, by
//     P = (1/t) sum_i N(e_i, sigma^2 I_t)   against   Q = N(0, sigma^2 I_t)
// (sigma = noise multiplier). Its likelihood ratio is Z = dP/dQ(x) = S / t with
//     S = sum_i Y_i,   Y_i = exp((x_i - 1/2) / sigma^2),
// the Y_i independent and log-normal under Q with E Y = 1. Both hockey-stick
// divergences are expectations under Q of convex functions of Z,
//     remove  H_{e^eps}(P||Q) = E_Q (Z - e^eps)_+,   add  H_{e^eps}(Q||P) = E_Q (1 - e^eps Z)_+,
// and those of E epochs of the product of the epochs' Z, convex in each. So the
// one-dimensional law of S under Q carries everything (Feldman and Shenfeld
// compute the privacy loss distribution of random allocation from a law of this
// kind: "Efficient privacy loss accounting for subsampling and random
// allocation", 2026, arXiv:2602.17284).
//
// THE LATTICE. Y is put on the lattice j h, j = 0..J (h = resolution * sd(Y)),
// cut at y_b = J h. The cell masses m_j = Q(Y in [jh, (j+1)h)) and first moments
// mu_j = E_Q[Y; cell] = P(the record's coordinate's Y in the cell) are normal-CDF
// differences, bracketed (Edge data at cell edges moved outward and inward by the
// rounding of the edges' normal coordinates).
//
// UPPER HALF (a certified upper bound for every composition, both directions).
// (1) Cut: Y_b = min(Y, y_b). For "remove", Z <= Z_b + (1/t) sum_i (Y_i - y_b)_+,
// and the pair with Q-law of Z_b, P-part z Q_b, and P-mass rho = E(Y - y_b)_+ at
// +inf dominates (P, Q): the kernel that draws x given Z_b maps it onto (P, Q),
// the +inf atom supplying the missing P-mass. For "add" Z_b <= Z and the cut only
// lowers the Q-side: no charge. (2) Connect the dots: each Y_b is spread over the
// two lattice points around it keeping its mean (cell j gives
// (j + 1) m_j - mu_j / h to j and mu_j / h - j m_j to j + 1). A mean-preserving
// spread of Z is a garbling of the pair (Blackwell), so it dominates in both
// directions, for every composition, with an error second order in h. (3) The
// t-fold sum is taken by the FFT power (power.hpp) of the lattice masses'
// upper ends on a window of S, twice: untilted, and tilted by e^{25 K / J} so
// that the heavy upper tail keeps its relative accuracy; entry by entry the one
// with the smaller round-off bound is kept. The composed masses are upper ends
// too, but for the round-off, whose 2-norm bound gives by Cauchy-Schwarz the
// P-mass that may be missing at or above each loss; allocation_step adds that
// much P-mass at the tops of the loss intervals (mass moved to larger losses),
// so a query pays only for the round-off above it. The P-mass beyond the window
// is charged at +inf (remove: above it, and below it, at most z_lo times its
// Q-mass, since the tilted composition need not hold the mass aliased from below;
// add: below it; the untilted composition's mass aliased into the window from
// the other side only adds mass). An atom of S at K gives the loss
// log(K h / t) with P-mass w_K K h / t and Q-mass w_K ("remove"), or the
// reverse ("add"); the atoms of each loss interval [a D, (a + 1) D) are split
// over its ends by connect-the-dots (step.hpp).
//
// LOWER HALF (data processing). Labelling an output x by floor(S(x) / h) summed
// over coordinates, i.e. the lattice statistic S_down = sum_i floor(Y_i / h)
// (with Y_i >= y_b lumped at J), is post-processing; its laws are exact lattice
// laws: t-fold sums of the floor masses m_j under Q, and of t - 1 of them and the
// record's mu_j under P. Each lattice value is labelled with its rounded loss
// (a fixed function of the value); each label's P-mass enters at its certified
// lower end (round-off by Cauchy-Schwarz over the label's values, aliased mass
// taken off), its Q-mass at its upper end. The statistic differs from S by the
// sum of the fractional parts, whose variance, t h^2 / 12, is what the test loses.
//
// TAILS. The window must hold S up to a few large Y: log-normal tails are too
// heavy for a Chernoff bound alone. Above, P(S >= x) <= C(n, k) pi_m^k +
// P(sum_i min(Y_i, m) >= x - (k - 1)(J - m)) (fewer than k of the n variables
// exceed m, pi_m = P(Y > m), each of those at most J), the last by a Chernoff bound;
// below, a Chernoff bound.
#pragma once

#include <cstddef>
#include <vector>

#include "dpacct/pld/step.hpp"

namespace dpacct::pld {

struct AllocationLaws {
  double noise_multiplier = 0.0;
  long steps = 0;             // t
  double lattice = 0.0;       // h
  long cut = 0;               // J: Y is cut at y_b = J h
  long start = 0;             // lattice index of entry 0 of the windowed laws (S = K h)
  long window_end = 0;        // the last lattice index the tail bounds asked for (<= start + size - 1)
  // Upper half: upper ends of the t-fold sum of the connect-the-dots law (Q-masses), but
  // for the round-off. Entry i comes from composition c with error_weight[c][i] > 0, and
  // for any set A of entries sum_{i in A} |round-off_i| v_i <= sum_c error_norm[c]
  // (sum_{i in A} (error_weight[c][i] v_i)^2)^(1/2) (Cauchy-Schwarz on each composition).
  std::vector<double> sum;
  std::vector<std::vector<double>> error_weight;
  std::vector<double> error_norm;
  double truncation = 0.0;    // rho >= E(Y - y_b)_+, the "remove" P-mass at +inf per epoch
  double tail_above = 0.0;    // >= P-mass of S above the window (remove)
  double tail_below = 0.0;    // >= Q-mass of S below the window (add)
  // Lower half: the laws of the lattice statistic, under Q ("null") and under P ("record").
  struct Law {
    // Lower ends: low[i] (rounding taken off); the round-off of any set A of entries is at most
    // low_error |A|^(1/2) (Cauchy-Schwarz), and the mass aliased into the window at most alias
    // in all. Upper ends: high[i] (rounding added), with the round-off of a set A at most
    // sum_c high_norm[c] (sum_{i in A} high_weight[c][i]^2)^(1/2) (aliased mass only adds).
    std::vector<double> low, high;
    double low_error = 0.0, alias = 0.0;
    std::vector<std::vector<double>> high_weight;
    std::vector<double> high_norm;
    // Per-entry bounds (each entry its own set), for inspection.
    double low_end(std::size_t i) const;
    double high_end(std::size_t i) const;
  };
  Law null, record;
  std::size_t fft_size = 0;
};

// The lattice laws of one epoch of t steps at noise multiplier sigma: lattice
// spacing resolution * sd(Y) (finer for few steps), Y cut where
// E(Y - y_b)_+ <= e^{log_truncation} but at most max_cells / 8 lattice points (rho
// is then what that cut leaves), FFT window with at most e^{log_tail} outside it
// per side. Throws std::invalid_argument when the window would exceed max_cells
// points, or the lattice is not representable (noise multipliers below ~0.04).
AllocationLaws allocation_laws(double noise_multiplier, long steps, double resolution, double log_truncation,
                               double log_tail, std::size_t max_cells);

// One direction ("remove": add == false) of the epoch's pair as a StepPmf on the
// loss grid k D. Losses below the largest loss minus max_cells D are raised to it
// (upper half) or dropped with their Q-mass (lower half, label -inf).
StepPmf allocation_step(const AllocationLaws& laws, bool add, double discretization, std::size_t max_cells);

}  // namespace dpacct::pld

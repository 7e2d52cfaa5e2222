// Generic privacy loss distributions (PLD) of any pair of distributions (P, Q)
// on the real line, given as the masses of a partition of the output space,
// with pessimistic (certified upper bound) or optimistic (certified lower
// bound) rounding, and composition by FFT.
//
// Notation. D is the grid width; a discrete PLD is a sub-probability vector
// p_k on the losses k D (k = offset, offset + 1, ...) plus an atom p_inf at
// +inf. Its hockey-stick curve is
//     delta(eps) = sum_k p_k (1 - e^{eps - k D})_+ + p_inf.
// For a pair (P, Q) with privacy loss L = log dP/dQ (L = +inf on the part of P
// singular to Q), delta_{P,Q}(eps) = E_{X~P}[g_eps(L(X))] with
// g_eps(l) = (1 - e^{eps - l})_+ (g(+inf) = 1), and the T-fold composition
// (products of the pairs) has loss sum_t L(X_t) with X_t ~ P independent
// (Sommer, Meiser, Mohammadi, "Privacy Loss Classes", PoPETs 2019, Thm 1 and
// Lemma 5; Zhu, Dong, Wang, "Optimal Accounting of Differential Privacy via
// Characteristic Function", AISTATS 2022, arXiv:2106.08567, Lemma 4). g_eps is
// non-decreasing in l, so the composed delta is non-decreasing in every step's
// loss, pointwise.
//
// Partition. Edges x_0 < ... < x_{m-1} (m = n_cells - 1) split the line into
// n_cells cells: (-inf, x_0], (x_0, x_1], ..., (x_{m-1}, +inf). The caller
// gives log P(cell) and log Q(cell) for every cell.
//
// PESSIMISTIC (upper bound). Requires L non-decreasing in x; the caller gives
// L(x_i) at every edge and the kernel checks monotonicity. Cell i gets the
// largest loss in it, L(x_i) (its right end), rounded UP to the grid; the right
// tail cell, whose loss is unbounded, goes to the +inf atom. Coupling X with the
// rounded loss L~(X) >= L(X) pointwise, the monotonicity of g_eps gives
// E[g_eps(sum_t L~_t)] >= E[g_eps(sum_t L_t)] for every composition: a certified
// upper bound (the coupling argument of Meiser & Mohammadi, "Tight on Budget?",
// CCS 2018, §5, and Koskela, Jalko, Honkela, AISTATS 2020, arXiv:1906.03049,
// Thm 5, applied to the sup of each cell). Only the P-side of the pair enters
// delta(eps) in this representation, so Q's cell masses are not used. P-mass
// missing from the cells (1 - sum_i P(cell i), rounded up) is charged to +inf;
// cells with L(x_i) = -inf have g = 0 under every composition and are dropped.
//
// OPTIMISTIC (lower bound). Bucketing the output into the cells is
// post-processing, so the bucketed pair (P(cell), Q(cell)) has delta <= the true
// one (data processing inequality for the hockey-stick divergence, which also
// holds for every composition since the product of the bucketings is a
// bucketing). Cell i gets the loss log(P(cell)/Q(cell)) rounded DOWN to the
// grid, which lowers delta for every composition (monotonicity of g_eps again);
// P-mass may be dropped (g >= 0). No monotonicity is needed.
//
// COMPOSITION. Groups (pmf, count) are composed by one real FFT of a size that
// holds the full composed support (sum_g count_g (n_g - 1) + 1 entries) when
// that fits in max_size (see TRUNCATION otherwise), so nothing wraps around; each group's spectrum is raised to its count by binary
// exponentiation and the groups' spectra are multiplied (Koskela et al. 2020,
// §4). A single group with count 1 is not transformed at all. The round-off of
// the transforms is bounded in the 2-norm (Higham, "Accuracy and Stability of
// Numerical Algorithms", 2nd ed., Thm 24.2, through fft::error_bound): with
// eta = fft::error_bound(N), each computed entry c_k of the composed PMF obeys
//     ||c - p||_2 <= e_2 := G (sum_g count_g ||p_g||_2 eta + eta + (6 sum_g log2(count_g + 1) + 8) u),
// G = exp(sum_g count_g eta sqrt(N) ||p_g||_2) absorbing |perturbed spectrum| > 1,
// and clipping c at 0 only moves it towards p. By Cauchy-Schwarz the error of
// sum_k c_k g_eps(kD) is <= e_2 sqrt(#{k : kD > eps}), charged to the upper
// bound (+) or the lower bound (-, clipped at 0). Summation round-off is charged
// the same way (relative gamma = (len + 16 + max|kD|) u on the sums used).
//
// TRUNCATION. When the full composed support does not fit in `max_size`, only
// the window of losses outside which the composed finite mass is <= e^-80 per
// side (Chernoff bounds from the exact cumulants of the discrete PMFs) is
// kept, and the transform is sized to the window. Each step is placed at its
// absolute loss index mod N, so the circular composition holds, at each window
// entry, the true mass plus mass aliased in from outside the window (>= 0 and
// <= tail_low + tail_high in total). Upper bound: + tail_high (mass above the
// window, as if at +inf) + tail_low when epsilon is below the window; lower
// bound: - (tail_low + tail_high). If even the window does not fit,
// std::invalid_argument says to increase the discretization or max_size. The
// single-step PMF must always fit in `max_size` entries.
#pragma once

#include <cstddef>
#include <vector>

namespace dpacct::pld_discrete {

// One discrete PLD: mass[j] at loss (offset + j) * discretization, plus an atom at +inf.
struct Pmf {
  long offset = 0;
  std::vector<double> mass;
  double infinity_mass = 0.0;
};

// Builds a single-step PMF from the cells of a partition (see the header
// comment). `log_p`, `log_q`: n_cells >= 1 log-masses (each <= 0, not NaN;
// log_q is ignored when pessimistic). `log_ratio_at_edges`: n_cells - 1 values
// L(x_i), non-decreasing, not NaN (required when pessimistic, ignored
// otherwise). Throws std::invalid_argument on bad input, if sum_i P(cell i)
// exceeds 1 + 1e-9, or if the PMF would need more than max_size entries.
Pmf from_cells(const double* log_p, const double* log_q, std::size_t n_cells, const double* log_ratio_at_edges,
               double discretization, bool pessimistic, std::size_t max_size);

// A run of `count` identical steps.
struct Group {
  Pmf pmf;
  double count;
};

// The composition of a list of groups, ready for delta/epsilon queries.
class Composed {
 public:
  // Throws std::invalid_argument for a bad count/discretization or if the
  // composed support needs an FFT larger than max_size.
  Composed(const std::vector<Group>& groups, double discretization, bool pessimistic, std::size_t max_size);

  // Certified bound on delta(epsilon) (upper if pessimistic, lower otherwise),
  // in [0, 1]; epsilon may be any real number (not NaN).
  double delta(double epsilon) const;
  // Certified bound on epsilon(delta) for 0 < delta < 1 (upper if pessimistic,
  // lower otherwise); +inf when no finite epsilon can be certified.
  double epsilon(double delta) const;

  long offset() const { return offset_; }
  const std::vector<double>& mass() const { return mass_; }  // composed, clipped at 0
  double infinity_mass() const { return infinity_mass_; }    // rounded towards the bound
  double error_l2() const { return error_l2_; }               // e_2 above (0 without FFT)
  std::size_t fft_size() const { return fft_size_; }          // 0 when no FFT was needed
  double tail_low() const { return tail_low_; }    // composed mass below the kept window (bound)
  double tail_high() const { return tail_high_; }  // composed mass above the kept window (bound)

 private:
  double discretization_;
  bool pessimistic_;
  long offset_ = 0;
  std::vector<double> mass_;
  std::vector<double> s1_, s2_;  // s1[i] = sum_{j>=i} c_j, s2[i] = sum_{j>=i} c_j e^{-(j-i)D}
  double infinity_mass_ = 0.0;
  double error_l2_ = 0.0;
  double gamma_ = 0.0;  // relative round-off allowance of the suffix sums
  double tail_low_ = 0.0, tail_high_ = 0.0;  // Chernoff bounds on the mass outside the window
  std::size_t fft_size_ = 0;
};

}  // namespace dpacct::pld_discrete

// One step of a privacy loss distribution (PLD), discretised for the composer
// (pld/compose.hpp), and the certified-interval arithmetic the discretisations share.
//
// A mechanism enters the PLD engine as a StepPmf: two discretisations of its
// dominating pair (P, Q) for one direction, on the loss grid k D (D =
// `discretization`), each of which is a certified bound for every composition:
//
// UPPER (connect the dots; Doroshenko, Ghazi, Kamath, Kumar, Manurangsi,
// "Connect the Dots: Tighter Discrete Approximations of Privacy Loss
// Distributions", PoPETs 2022, arXiv:2207.04380, Thm 3.3). `log_upper[j]` is
// the log-mass at loss (upper_low + j) D, and `infinity_upper` the mass at
// +inf. It must be a *pessimistic* stand-in for the true loss L under P:
// obtainable from L by mean-preserving spreads of Y = e^{-L}, by moving
// mass to larger losses and by adding mass. delta(eps) = E[g(Y_1 ... Y_T)] with
// g(y) = (1 - e^eps prod y)_+ >= 0, convex and non-increasing in each y_t, so
// conditional Jensen (independent steps) makes every composed delta an upper
// bound. A cell whose loss lies in [a, b] (any two grid points) with P-mass m
// and Q-mass w = E_P[e^{-L}; cell] is spread to a and b with
//     p_a = f m,  p_b = (1 - f) m,  f = (e^{a - l} - e^{-(b - a)}) / (1 - e^{-(b - a)}),
// l = log(m / w) the cell's own loss, which keeps m and E[e^{-L}]. It is taken
// with f at its certified lower end and m at its upper end (spread_fraction):
// against the exact split that is mass moved up to b or added at a or b, so
// E[e^{-L}] of a step may exceed 1 by the masses' rounding (~1e-14).
//
// LOWER (data processing). Labelling each output by an integer label is
// post-processing, and so is labelling the composed output by the sum K of
// the labels; the hockey-stick divergence cannot grow under post-processing,
// so for every threshold j, delta(eps) >= P(K >= j) - e^eps Q(K >= j).
// `log_p[j]` / `log_q[j]` are the P- and Q-masses of label (label_low + j),
// P at its certified lower end and Q at its upper end; `infinity_lower` is
// P-mass certainly carrying the label +inf (outputs Q cannot produce), at its
// lower end. P-mass may be dropped (it only lowers P(K >= j)); Q-mass may be
// dropped only together with the P-mass of the same outputs (that is the
// label -inf, never in {K >= j}). The label of a cell is its own loss
// log(P(cell)/Q(cell)) rounded to the nearest grid index, so the label sum
// tracks the composed loss and the bound is second order in D.
//
// SHARED LABELS (optional). P low and Q high per label cost T times each label's
// relative mass error in a difference of two masses: where epsilon is tiny the
// test P(K >= j) - e^eps Q(K >= j) compares masses near 1/2 to a delta many
// digits below them, and ~1e-14 per label times T = 1e7 swamps it. Where the
// cells' own losses l_c = log(P_c / Q_c) are known far more sharply than their
// masses (the subsampled pairs' sharp own losses), each label j also carries
//     log_q_mid[j] = log sum_c Q~_c,   own_mid[j] = log(sum_c Q~_c e^{l~_c} / sum_c Q~_c),
// over its cells c (Q~_c, l~_c the midpoints of the cells' intervals): the label's
// Q~_j = e^{log_q_mid[j]} is within a relative eta_j of its Q-mass Q_j and own_mid[j]
// within nu_j of log(P_j / Q_j). The composer forms P~_j = Q~_j e^{own_mid[j]} without
// rounding the sum, so P~ and Q~ share the masses' error: the composed test then errs
// from the exact one by E_Q[1_A (prod_t (1 + rho_t) - 1)(e^{L+N} - e^eps)] +
// E_Q[1_A e^L (e^N - 1)], which meets only |e^L - e^eps| (TV and eps where epsilon is
// tiny); compose.cpp bounds it from the largest errors (mid_error, own_error) and from
// the sums mid_weights = (sum_j eta_j P_j, sum_j eta_j |P_j - Q_j|, sum_j eta_j Q_j,
// sum_j P_j (e^{nu_j} - 1)), the masses at upper bounds (the widest labels are the far
// tails', whose weight is small). The analysis is at the level of labels: a
// post-processing. Empty where unavailable (grids of 1e-4 and coarser).
//
// `loss_slack` bounds how far a cell's true losses may poke out of the grid
// interval it was assigned to (the rounding of its edges); the composer
// shifts epsilon by count * loss_slack.
#pragma once

#include <cstddef>
#include <vector>

namespace dpacct::pld {

struct StepPmf {
  double discretization = 0.0;
  bool has_upper = true;        // false: only the lower bound is available (upper queries give 1)
  long upper_low = 0;           // grid index of log_upper[0]
  std::vector<double> log_upper;
  double infinity_upper = 0.0;  // P-mass sent to +inf (upper end)
  long label_low = 0;           // label of log_p[0] and log_q[0]
  std::vector<double> log_p, log_q;
  double infinity_lower = 0.0;  // P-mass certainly at +inf (lower end)
  double loss_slack = 0.0;      // see the header comment
  std::vector<double> log_q_mid, own_mid;  // shared labels (header comment), indexed like log_p
  double mid_error = 0.0;       // eta: the largest relative error of a label's Q~
  double own_error = 0.0;       // nu: the largest error of a label's own loss own_mid
  // sum_j eta_j P_j, sum_j eta_j |P_j - Q_j|, sum_j eta_j Q_j and sum_j P_j (e^{nu_j} - 1),
  // with the labels' own eta_j and nu_j and upper bounds of the masses (monotone.cpp).
  std::vector<double> mid_weights;
  // CONCENTRATED LABELS (optional, with the shared labels). Per label j, mid_eta[j] and mid_nu[j]
  // (the eta_j and nu_j above), and mid_drift = (lo, hi) bounds on sum_j P~_j - sum_j P_j, the
  // same on sum_j Q~_j - sum_j Q_j, then upper bounds on 1 - sum_j P_j and 1 - sum_j Q_j (P~_j =
  // e^{log_q_mid[j] + own_mid[j]} and Q~_j = e^{log_q_mid[j]} exactly, P_j and Q_j the labels'
  // true masses). The composer bounds the product of T steps' relative label errors by their
  // concentration instead of its worst case (compose.cpp, concentration()). Empty where unknown.
  std::vector<double> mid_eta, mid_nu, mid_drift;
  // Summary of the upper discretisation, used to choose grids: E_P|L| and
  // sd_P(L) over the finite part, and the largest |loss| represented.
  double mean_abs_loss = 0.0;
  double loss_sd = 0.0;
  double max_abs_loss = 0.0;
};

// Helpers shared by the discretisations: certified log-mass intervals.
// Each log-CDF value is assumed to be within kLogError (1 + |value|) of the
// exact one (log_ndtr, log_add and log1mexp in glibc are within a few ulps).
inline constexpr double kUnit = 2.220446049250313e-16;  // DBL_EPSILON, a generous unit round-off
inline constexpr double kLogError = 16.0 * kUnit;

// A certified interval [lo, hi] for a log-mass.
struct Mass {
  double lo, hi;
};

// log P(X <= x) and log P(X > x) of a distribution at one point, each accurate
// to kLogError (1 + |value|) in absolute terms (evaluate the tail that is
// <= 1/2 and recover the other with log1mexp).
struct Edge {
  double log_cdf, log_sf;
};

// The edge data of the standard normal distribution at z: {log Phi(z), log(1 - Phi(z))};
// only the tail that is <= 1/2 is evaluated, and log1mexp recovers the other to full
// relative accuracy.
Edge normal_edge(double z);

// log P(xa < X <= xb) for X ~ N(mean, sigma^2) as a certified interval, by 4- or 8-point
// Gauss-Legendre quadrature of the density on [xa, xb] itself, for cells of width
// (xb - xa) / sigma <= 1/2. Its relative width is about 8 u (z^2 + |z| |x| / sigma + 4)
// plus the quadrature error bound, whatever the width: a difference of two CDF values
// (log_interval) carries an absolute error of some ulps of the CDF instead, which in a
// cell of mass m is a relative error of ulps / m. (Summed over the cells of a step, that
// absolute error raised its total mass and mean loss by ~1e-16 per cell: at sigma=3.4,
// q=2.5e-8, T=33222 it moved the composed delta(0) by 3 %.) The nodes are placed from
// xa in x, so that only their positions round, not the cell: a rule on the standardised
// ends (xa - mean) / sigma, each rounded by an ulp of z, integrated over a cell shifted by
// that much, a relative error of u |z| / width (5e-13 at width 1e-3) the interval did not
// hold. Returns false for an empty, infinite or wider cell, and beyond |z| = 16.
bool normal_cell_mass(double xa, double xb, double mean, double sigma, Mass* out);

// The intersection of two certified intervals for the same log-mass.
Mass intersect(const Mass& a, const Mass& b);

// log(e^a + e^b) rounded down (`side` -1) or up (+1): log_add errs by at most 2 + |result| / 2 ulps at 1 (exp and
// log1p within an ulp each, the sum with the larger operand half an ulp of the result), and the correction rounds
// once more (nextafter). Exact where either operand is -inf. For the labels' P-masses (down) and Q-masses and the
// upper masses (up) that several cells add to one entry.
double log_add_directed(double a, double b, int side);

// a + b rounded down (`side` -1) or up (+1) where b is a log computed within an ulp of itself (log, log1p): half
// an ulp of the sum and b's ulp, then nextafter for the correction's own rounding. -inf where either is -inf. For
// a log-mass times a factor (a cell's split, a shift's fraction).
double add_log_directed(double a, double b, int side);

// log(e^x - e^y) for y <= x, as an interval, given that x and y each err by
// at most kLogError (1 + |value|); a difference that cancels completely gets
// the interval [-inf, upper error bound].
Mass log_difference(double x, double y);

// log P(a < X <= b) as an interval, from the edge data at a and b.
Mass log_interval(const Edge& a, const Edge& b);


// A certified interval for a cell's own loss log(P(cell) / Q(cell)) from its P- and Q-mass
// intervals (logs): [p.lo - q.hi, p.hi - q.lo], rounded outward.
Mass own_loss(const Mass& p, const Mass& q);

// Throws std::runtime_error (an internal error) where any of a step's masses, tails or slack is NaN: every composer
// checks its inputs, since a NaN carried into the entries makes every comparison false and a query's answer
// arbitrary.
void require_no_nan(const StepPmf& step);

// The certified lower end of the fraction of a cell's P-mass that the connect-the-dots split
// puts at its lower loss a, for losses in [a, a + span] and the cell's own loss log(P / Q) in
// `own`: (e^{a - own} - e^{-span}) / (1 - e^{-span}) = expm1(span - (own - a)) / expm1(span),
// taken at own.hi. The rest of the P-mass's upper end goes to a + span. (With the fraction
// at its lower end and the mass at its upper end, the split holds at least the true one's
// mass at a + span and at a either more, mass created, or less, mass moved up to a + span:
// both only raise delta.) The fraction is first order in (own - a) / span, so the
// absolute accuracy of `own` is what counts where cells are narrow.
double spread_fraction(const Mass& own, double a, double span);
// Appends the connect-the-dots split of a cell with P-mass interval `m` and own loss `own`
// (logs) whose losses lie in [a D, b D] (a <= b grid indices) to `log_upper` (indexed from
// `upper_low`). When b == a the whole upper end of m goes to a.
void split_cell_by_loss(const Mass& m, const Mass& own, long a, long b, double d, long upper_low,
                        std::vector<double>& log_upper);
// The same with the cell's Q-mass interval `w` (log) in place of its own loss.
void split_cell(const Mass& m, const Mass& w, long a, long b, double d, long upper_low,
                std::vector<double>& log_upper);

// Fills mean_abs_loss, loss_sd and max_abs_loss from log_upper (log_p for a lower-only step).
void summarise(StepPmf& step);

}  // namespace dpacct::pld

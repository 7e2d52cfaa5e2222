// Concentrated labels: the shared labels' mass errors (step.hpp) over T steps bounded by
// their concentration instead of their worst case.
//
// A step's shared label j carries masses P~_j = e^{log_q_mid[j] + own_mid[j]} and
// Q~_j = e^{log_q_mid[j]} that err from the label's true masses P_j, Q_j by relative factors
// bounded per label: |log(P~_j / P_j)| <= a_j = -log(1 - eta_j) + nu_j, |log(Q~_j / Q_j)| <=
// -log(1 - eta_j). The composed masses of an event A of label sequences then are
//     P~(A) = E_P[1_A e^S],  S = sum_t X_t,  X_t = log(P~_{J_t} / P_{J_t}),
// and the same for Q~. The worst case, e^{T max_j a_j}, is first order in T: at T = 2.2e6 and
// a_j ~ 2e-14 (quadrature intervals) it is 4.4e-8 of P(A), and where the threshold test
// P(A) - e^eps Q(A) is a delta 3e5 times smaller than P(A) (sigma=2.34, q=3.6e-8,
// delta(1.2e-4) ~ 1.6e-12) that is 2.6 % of delta. But the X_t are independent and
// identically distributed within each group of steps, bounded, and their mean is known far
// more sharply than their range: m = E_P[X] <= E_P[P~_J / P_J - 1] = sum_j P~_j - sum_j P_j,
// which each step computes to a few ulps (step.hpp, mid_drift). So S stays within
// T m + s of its mean except on an event of probability e^{-L}, s ~ sqrt(2 T Var(X) L):
//     P(A) >= e^{-(T m + s)} (P~(A) - P~(B) - e^{-L}),
//     Q(A) <= e^{-(T m' - s)} Q~(A) + Q(B) + e^{-L'},
// (B: some step on a label whose error bound exceeds a cap, whose mass is kept below
// kBadMass, excluded so that a few far-tail labels with wide intervals cannot widen s). The
// deviation bound is Bennett's: with phi(y) = e^y - 1 - y, E[e^{theta (X - m)}] <= 1 +
// theta |m| (1 - Z) + sum_j P_j phi(theta (a_j + |m|)) (Z the true total mass of the labels:
// the labels are a sub-probability), then Chernoff, minimised over theta on a geometric grid
// (Boucheron, Lugosi, Massart, "Concentration Inequalities", 2013, Sec. 2.7). This is the
// argument of Gopi, Lee and Wutschitz ("Numerical Composition of Differential Privacy",
// NeurIPS 2021, arXiv:2106.02848, their error analysis) for their rounding errors, applied to the labels'
// certified mass errors.
#pragma once

#include <utility>
#include <vector>

#include "dpacct/pld/step.hpp"

namespace dpacct::pld {

// The composed labels' bounds, for a threshold test on an event A of composed label sums:
//   P(A) >= factor_p (P~(A) - charge_p)    and    Q(A) <= factor_q Q~(A) + charge_q,
// with the exceptional events' probabilities for Q~'s deviation at most e^{-1400} (so that
// e^eps of it, eps <= 700, is at most e^{-700}) and for P~'s at most e^{-700}: both are in
// `charge_a`, which a test subtracts from P(A) - e^eps Q(A) as it stands. `ok` is false where
// some step lacks the per-label errors or their bounds are not usable.
struct Concentration {
  bool ok = false;
  double factor_p = 1.0, charge_p = 0.0;
  double factor_q = 1.0, charge_q = 0.0;
  double charge_a = 0.0;
};

// Per-step counts are the groups' second members (integers >= 0).
Concentration concentrate(const std::vector<std::pair<const StepPmf*, double>>& groups);

}  // namespace dpacct::pld

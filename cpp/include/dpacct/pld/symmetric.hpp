// The symmetrised step of a mechanism under a symmetric neighbouring relation
// (replace-one), where one pair of datasets can realise the dominating pair in
// either order at different steps of an adaptive run.
//
// Why composing the two directions separately is not enough there. Under
// add/remove adjacency a pair of datasets D' = D + {x} keeps its order at every
// step, so the "remove" pair (P, Q) bounds every step of (M(D'), M(D)) and the
// "add" pair (Q, P) every step of (M(D), M(D')), and delta is the larger of the
// two compositions (Zhu, Dong, Wang, "Optimal Accounting of Differential Privacy
// via Characteristic Function", AISTATS 2022, arXiv:2106.08567, Thm 10). Under
// replace-one an adversary choosing the gradients can realise (P, Q) at some
// steps and (Q, P) at others for the same datasets (fixed-size batches: make the
// other records' gradients -u and swap the roles of x and x'), so each step is
// only known to be f-DP for the symmetrised trade-off function
// C(f) = min{f, f^-1}** with f = T(P, Q) (Dong, Roth, Su, "Gaussian Differential
// Privacy", JRSS-B 2022, arXiv:1905.02383, Thm 4.2 for subsampling without
// replacement), and the run for its T-fold composition. The privacy profile of
// C(f) is max(delta_{P,Q}(eps), delta_{Q,P}(eps)) for every eps (the convex
// conjugate of a minimum is the maximum of the conjugates).
//
// The construction. A symmetric pair is fixed by its loss distribution w on
// (0, +inf]: mass w(l) at l > 0, its mirror e^{-l} w(l) at -l, and the rest at 0.
// Given pessimistic stand-ins `a` (for (P, Q)) and `b` (for (Q, P)) on one grid,
// take w = s * (a restricted to l > 0, and a's +inf mass), with the smallest
// s >= 1 such that delta_w(eps) >= delta_a(eps) and >= delta_b(eps) at every grid
// point eps = i D, i >= 0 (delta of a grid distribution is linear in e^eps
// between grid points, so the grid points suffice; for the subsampled Gaussian
// s = 1). Its profile then dominates C(f) for eps >= 0, and, both being
// symmetric (delta(-eps) = 1 - e^-eps + e^-eps delta(eps)), for every eps, so the
// pair's trade-off lies below C(f) and its composition is an upper bound. The
// mass at 0 is rounded up (total mass >= 1 only raises delta).
//
// The lower half (labels) is copied from `lower`: a pair of datasets realising
// one direction at every step is a valid lower bound.
#pragma once

#include "dpacct/pld/step.hpp"

namespace dpacct::pld {

// Throws std::invalid_argument when the steps are on different grids, lack an
// upper half, or the symmetric pair cannot hold the scaled mass (s w beyond 1).
StepPmf symmetrised_step(const StepPmf& a, const StepPmf& b, const StepPmf& lower);

}  // namespace dpacct::pld

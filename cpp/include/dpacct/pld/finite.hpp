// Discretisations of dominating pairs given by finitely many masses: exact
// finite PMFs (randomized response, the tight pair of an (epsilon, delta)-DP
// black box, any discrete pair, and their Poisson subsampling) and partitions
// of the output space given by a caller (generic pairs on the line).
#pragma once

#include <cstddef>

#include "dpacct/pld/step.hpp"

namespace dpacct::pld {

// A finite pair: atom j has log P-mass log_p[j] and log Q-mass log_q[j]
// (each <= 0, -inf for 0, not NaN; each sum <= 1 + 1e-12), taken as exact to
// a few ulps. With sampling_probability q < 1 the pair is first Poisson
// subsampled atom by atom: P' = (1 - q) Q + q P against Q ("remove"), or Q
// against P' when `swap` ("add"); with q = 1 and `swap` the pair is (Q, P).
// Atoms with Q = 0 carry the loss +inf (in both bounds), atoms with P = 0
// the loss -inf (dropped). Each finite atom is split between the two grid
// points around its loss (connect the dots, exact for an atom) and labelled
// with its loss rounded to the nearest grid index. Throws std::invalid_argument on bad input
// or if the losses span more than max_cells grid points.
StepPmf finite_step(const double* log_p, const double* log_q, std::size_t n, double sampling_probability, bool swap,
                    double discretization, std::size_t max_cells);

// A partition of the line into n cells (-inf, x_0], (x_0, x_1], ...,
// (x_{n-2}, inf) with log-masses log_p, log_q (taken as exact). Lower bound:
// each cell is labelled round(log(P/Q) / D) (+inf where Q = 0). Upper bound,
// only when `loss_at_edges` (L(x_i) at the n - 1 edges, non-decreasing, not
// NaN) is given: the cell with losses in [L(x_{i-1}), L(x_i)] is spread to the
// grid points floor(L(x_{i-1}) / D) and ceil(L(x_i) / D) (connect the dots
// over the cell); the first cell goes up to ceil(L(x_0) / D), the last cell
// and P-mass missing from the cells go to +inf. Without loss_at_edges the step
// has no upper half (has_upper = false).
StepPmf cells_step(const double* log_p, const double* log_q, std::size_t n, const double* loss_at_edges,
                   double discretization, std::size_t max_cells);

}  // namespace dpacct::pld

// Weighted mixtures of discretised steps (step.hpp) on a common grid: the PLD of
// a mechanism that first draws a public label b with probability w_b and then
// runs the pair (P_b, Q_b). Used by the DP-SGD-JL accountant (dpacct.fdp), whose
// projections-revealed step is the mixture over W ~ chi^2_r of Poisson-subsampled
// Gaussian pairs (Bu, Gopi, Kulkarni, Lee, Shen, Tantipongpipat, "Fast and Memory
// Efficient Differentially Private-SGD via JL Projections", NeurIPS 2021,
// arXiv:2102.03013; the revealed-label bound is dpacct's, see dpacct/fdp/jl.py).
//
// Why the mixture of certified steps is certified:
//
// UPPER. With the label public, the pair is (sum_b w_b [b] x P_b, sum_b w_b [b] x Q_b)
// and its privacy loss under P is L_b(x) with probability w_b: the loss
// distribution is the w-mixture of the components' loss distributions. Each
// component's `log_upper` is obtained from its loss by mean-preserving spreads of
// e^{-L} and upward moves (step.hpp); doing the same conditionally on b is again
// such a transformation of the mixture, so the w-mixture of the upper halves is a
// pessimistic stand-in for the mixture (Doroshenko et al., PoPETs 2022,
// arXiv:2207.04380, Thm 3.3, applied conditionally). Mass may also be added at
// +inf (`extra_infinity`, e.g. a component replaced by a perfectly revealing one)
// and at a grid point above its true loss (`extra_index`, `extra_mass`).
// `upper_shift` >= 0 adds s to every finite loss of the upper half (the loss of
// (Q, (1 - r) P' + r delta_inf) is the loss of (Q, P') plus -log(1 - r)): the
// integer part shifts the grid, the fractional part f D of each atom at j D is
// split between j and j + 1 with the fraction (1 - e^{-f D}) / (1 - e^{-D}) at
// j + 1, which keeps E[e^{-L}] (a mean-preserving spread), taken rounded up.
//
// LOWER. Labelling the output (b, x) by component b's label of x is
// post-processing of the labelled mechanism, so the masses of each label are the
// w-sums of the components' label masses (P rounded down, Q rounded up) and the
// data-processing bound of step.hpp holds for the labelled mixture.
//
// All sums of non-negative terms are rounded toward the bound: relative error
// <= (n + 2) u for n terms, so upper masses (and Q-masses) are raised and
// P-masses lowered by 2 (n + 4) u in relative terms.
#pragma once

#include <vector>

#include "dpacct/pld/step.hpp"

namespace dpacct::pld {

// The mixture described above. Requirements (std::invalid_argument otherwise):
// every step has the same `discretization`; weights are finite and >= 0 and
// match their steps; sum(upper_weights) + extra_infinity + extra_mass <= 1 + 1e-9;
// upper steps have an upper half; upper_shift finite and >= 0; at least one step
// in each list, or no upper steps (then the result has no upper half).
StepPmf mix_steps(const std::vector<const StepPmf*>& upper_steps, const std::vector<double>& upper_weights,
                  double extra_infinity, long extra_index, double extra_mass, double upper_shift,
                  const std::vector<const StepPmf*>& lower_steps, const std::vector<double>& lower_weights);

}  // namespace dpacct::pld

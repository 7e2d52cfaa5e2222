// Shuffled batches in adaptive batch linear queries (ABLQ): the lower bound of
// Chua, Ghazi, Kamath, Kumar, Manurangsi, Sinha, Zhang, "How Private are DP-SGD
// Implementations?", ICML 2024, arXiv:2403.17673, Section 3 (the lower bound on
// shuffled ABLQ from the events E_C; its tightness is their Conjecture 3.2).
//
// Setting: zero-out adjacency, one epoch of T batches, Gaussian noise with
// standard deviation `noise_multiplier` (sensitivity 1). With
//   P_S = (1/T) sum_t N(2 e_t, s^2 I),   Q_S = (1/T) sum_t N(e_t, s^2 I)
// and the events E_C = {w : max_t w_t >= C},
//   P_S(E_C) = 1 - Phi((C-2)/s) Phi(C/s)^(T-1),
//   Q_S(E_C) = 1 - Phi((C-1)/s) Phi(C/s)^(T-1),
// every C gives delta_S(eps) >= P_S(E_C) - e^eps Q_S(E_C).
//
// The paper scans C over a 0.01 grid on [0, 100]; here C is maximised
// continuously (branch and bound, then golden-section refinement), everything in
// log space so that T up to 1e7 and beyond neither underflows nor overflows.
#pragma once

namespace dpacct::samplers {

// log P_S(E_C) and log Q_S(E_C) for one threshold C.
struct LogEvent {
  double log_p;
  double log_q;
};

// The probabilities above, both in log space, accurate to a few ulp of the
// logarithm for every finite C (including C where P and Q are below 1e-308).
// Throws std::invalid_argument if noise_multiplier is not finite and > 0, steps
// is not finite and >= 1, or threshold is not finite.
LogEvent log_event(double noise_multiplier, double steps, double threshold);

// The best lower bound found and the threshold C that attains it.
struct Maximum {
  double value;      // log delta for delta queries, epsilon for epsilon queries
  double threshold;  // the maximising C (NaN when no C gives a positive bound)
};

// log of max_C [P_S(E_C) - e^eps Q_S(E_C)], reduced by a floating-point safety
// margin, so that exp(value) is a lower bound on delta_S(eps). Returns -inf
// when no C gives a positive difference (the trivial lower bound 0).
// The search brackets every local maximum (branch and bound), then refines the
// best to machine precision, so it is not below the best point of the paper's
// 0.01 grid on [0, 100] (the searched range contains it) beyond the margin.
// Throws std::invalid_argument for bad noise_multiplier/steps or epsilon that
// is not finite and >= 0.
Maximum log_delta_lower(double noise_multiplier, double steps, double epsilon);

// A lower bound on epsilon_S(delta): sup_C log((P_S(E_C) - delta) / Q_S(E_C)),
// clamped at 0 and reduced by a floating-point safety margin. This is exactly
// the root of max_C [P - e^eps Q] = delta (for each C the bound holds at delta
// iff eps <= log((P - delta)/Q)), so no nested root finding is needed.
// Throws std::invalid_argument for bad noise_multiplier/steps or delta outside (0, 1).
Maximum epsilon_lower(double noise_multiplier, double steps, double delta);

}  // namespace dpacct::samplers

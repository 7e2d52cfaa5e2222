// Composition by the number of rare steps: a PLD engine for losses that are a
// narrow spike near zero plus rare large jumps (tiny sampling rates, small noise).
//
// WHY. One exponential tilt e^{lambda L} cannot serve both parts of such a
// loss: the lambda that lifts delta ~ 1e-6 near a small epsilon to O(1) mass
// multiplies the rare losses of size ~10 by e^{10 lambda}, so the tilt must stay
// small and the FFT round-off (~ T u ||p||_2, the spike making ||p||_2 ~ 1)
// swamps delta. The rare losses are few, though: at sampling rate q about T q
// steps in all carry them.
//
// THE SPLIT. Each step's discretised loss is cut at a grid loss tau into its
// bounded part s (cells with losses in [-tau, tau], grid D_S) and its rare part
// r (the other cells, on a coarser grid D_R = m D_S), s + r + (mass at +inf).
// The binomial theorem for convolution powers gives, exactly,
//     (s + r)^{*T} = sum_h C(T, h) s^{*(T-h)} * r^{*h}
//                  = s^{*(T-H)} * sum_{h <= H} C(T, h) s^{*(H-h)} * r^{*h}  +  (terms h > H),
// whose mass is at most P(Binomial(T, |r| / |s + r|) > H) |s + r|^T (charged
// to the upper bound; dropped from P and charged to Q for the lower bound).
// G = s^{*(T-H)} is composed on the fine grid by ComposedPld with a tilt as
// strong as the query needs (its losses are bounded by tau), and once untilted;
// M = sum_h C(T, h) s'^{*(H-h)} * r^{*h} on the coarse grid by one FFT, where s'
// is s re-spread onto the coarse grid (a mean-preserving spread of e^{-L} for the
// upper bound, a relabelling for the lower one: both keep the certificates of
// step.hpp, over H steps only). Then
//     delta_u(eps) = sum_k M_k U_G(eps - k D_R) + err,
//     delta_l(eps) = max_z  sum_k M^P_k P_G(K D_S >= z - k D_R) - e^eps sum_k M^Q_k Q_G(...) - err,
// with U_G, P_G, Q_G the certified one-sided pieces of ComposedPld; outside
// G's windows they are constant or closed-form in k, so each query costs
// O(window / D_R), not O(|M|).
//
// The certificates are those of step.hpp (connect the dots: Doroshenko et al.,
// arXiv:2207.04380; labels: data processing); the split itself is an exact
// identity, and the truncation at H rare steps is charged.
#pragma once

#include <cstddef>
#include <limits>
#include <memory>
#include <utility>
#include <vector>

#include "dpacct/pld/compose.hpp"
#include "dpacct/pld/monotone.hpp"
#include "dpacct/pld/step.hpp"

namespace dpacct::pld {

struct SplitStep {
  StepPmf small;  // cells with losses in [-tau, tau], fine grid
  StepPmf rare;   // the other cells on the coarse grid, and the mass at +inf
};

// Discretises one step of `pair` with the cut at tau = tau_index * ratio * d_fine
// (ratio >= 1 and tau_index >= 1 integers); see discretize() in monotone.hpp.
// With `band_low` > 0 only the small part is built, as a band for one_rare.hpp: the
// cells of losses in [-band_low d, tau) (cut exactly there where the losses go beyond),
// every smaller loss moved up to -band_low d (upper masses; dropped from the labels),
// and nothing above tau (the caller discretises that part).
SplitStep discretize_split(const MonotonePair& pair, double d_fine, long ratio, long tau_index, double log_tail,
                           std::size_t max_cells, long band_low = 0);

// `fine` re-spread onto the grid of width ratio * fine.discretization (upper
// masses by connect-the-dots, labels to the nearest coarse label).
StepPmf coarsen(const StepPmf& fine, long ratio);

class SplitComposedPld {
 public:
  // T = `count` steps of split.small + split.rare; at most `rare_max` (H) rare
  // steps are composed exactly, the rest charged. `tilt` is G's tilt.
  // `rare_tilt` tilts M (its upper and P-label sequences by e^{rare_tilt L}, the
  // Q-labels by e^{(rare_tilt + 1) L}) so that its round-off is weighted like the
  // queried delta; it must leave the far rare losses small after tilting.
  // Each of `more_rare_tilts` (> 0) asks for M once more at that tilt (capped where the
  // weights across G's windows would overflow; not where within 10 % of a tilt already
  // built): each bound then takes the best of them. One tilt cannot serve rare losses that span many
  // e-folds of delta: a low one leaves the losses near epsilon under the round-off of the
  // total, a high one the losses far below it (where G's window meets them).
  // With `block_steps` B > 1, G is composed in two stages (compose.hpp, compose_block):
  // blocks of B small steps on the small grid, each (and the T - H - B floor((T - H) / B)
  // steps left) re-spread onto the grid `g_ratio` times as wide, which must divide the
  // rare grid's ratio; one block serves the tilted and the flat G (compose_block adds a
  // flat composition where its window is wide against 1 / tilt).
  // `rare_cut_low`, `rare_cut_high`: the rare part's losses outside them go to +inf (their upper
  // masses raise delta by at most their total; their labels are dropped): a shorter rare part lets
  // M take the tilts above.
  SplitComposedPld(const SplitStep& split, double count, long rare_max, double tilt, double rare_tilt,
                   std::size_t max_size, long block_steps = 0, long g_ratio = 1,
                   const std::vector<double>& more_rare_tilts = {},
                   double rare_cut_low = -std::numeric_limits<double>::infinity(),
                   double rare_cut_high = std::numeric_limits<double>::infinity());

  void delta_bounds(double epsilon, double* lower, double* upper) const;
  // Same contract as ComposedPld::epsilon_bounds (below_window is always false).
  void epsilon_bounds(double delta, double* lower, double* upper) const;

  std::size_t size() const { return size_; }                     // the coarse FFT size of M
  std::size_t fine_size() const;                                 // G's FFT size
  double charged_tail() const { return tail_u_; }                // mass of the h > H terms (upper)
  double rare_discretization() const { return d_coarse_; }       // M's grid (the rare part's)
  std::vector<double> rare_tilts() const;                        // M's tilts (the second, where built)
  // (lambda, an upper bound on (T - H) log sum_j s_j e^{lambda j D}) for the small part's upper masses s_j:
  // the Chernoff bounds on U_G beyond G's window (edge_upper).
  const std::vector<std::pair<double, double>>& chernoff_table() const { return g_chernoff_; }

 private:
  // M at one tilt: its upper masses, P- and Q-labels, and their inputs' relative rounding.
  struct Tilted;
  struct MSet;
  MSet build_m(const StepPmf& coarse, const StepPmf& rare, double count, double rare_tilt);
  double upper_bound(double epsilon) const;
  // `pieces`: G's piece at each middle entry i in [max(i_a + 1, 0), min(i_b, n)) (U_G(eps - k_i),
  // P_G(z - k_i) or Q_G(z - k_i)), evaluated once and shared by every set of M.
  double upper_with(const MSet& set, double epsilon, long i_a, long i_b, const std::vector<double>& pieces) const;
  // Bounds on P(Z >= z) (low) and Q(Z >= z) (high) from one set; NaN where it proves nothing.
  double p_tail(const MSet& set, long i_a, long i_b, const std::vector<double>& pieces) const;
  double q_tail(const MSet& set, long i_a, long i_b, const std::vector<double>& pieces) const;
  // The best threshold test over a span of G's windows around epsilon; `offset`
  // (if not null) receives its threshold minus epsilon.
  double lower_bound(double epsilon, double* offset) const;
  // The best test near threshold epsilon + *offset (updated).
  double lower_bound_near(double epsilon, double* offset) const;
  double threshold_value(double epsilon, double z) const;
  // G's pieces: the tightest of the tilted and the untilted composition.
  double g_upper(double e) const;
  double g_p(double y) const;
  double g_q(double y) const;
  // A Chernoff bound on U_G(y) from the small part's moment generating function.
  double g_chernoff(double y) const;
  // sum over i <= i_a of M_k U_G(eps - k D_R) (see split.cpp).
  double edge_upper(const MSet& set, double eps, long i_a) const;

  long rare_max_ = 0;
  double d_fine_ = 0.0, d_coarse_ = 0.0;
  double g_step_ = 0.0;  // G's grid: d_fine_, or g_ratio d_fine_ when composed in stages
  bool g_identity_ = false;  // T <= H: G is the unit mass at loss 0
  std::unique_ptr<ComposedPld> g_tilted_, g_flat_;
  double g_low_ = 0.0, g_high_ = 0.0;      // losses outside which G's pieces are constant / closed form
  double g_mass_u_ = 0.0, g_x_low_ = 0.0;  // G's total upper mass; a lower bound of sum_window p_K e^{-K D}
  double g_mass_p_low_ = 0.0, g_mass_q_ = 0.0;
  double g_slack_ = 0.0;                                  // G's loss_slack shift
  std::vector<std::pair<double, double>> g_chernoff_;   // (lambda, log E_G e^{lambda L} rounded up)
  // M on the coarse grid, tilted: M_k = c_i exp(log_scale - tilt_kind k D_R), k = m_start + i,
  // tilt_kind = rare_tilt for the upper masses and P-labels, rare_tilt + 1 for the Q-labels.
  struct Tilted {
    std::vector<double> c;       // tilted, scaled entries (clipped at 0)
    std::vector<double> suffix;  // sum_{j >= i} c_j e^{-tilt (j - i) D_R}
    std::vector<double> suffix1; // the same with tilt + 1 (upper masses only)
    std::vector<double> weight;  // e^{tilt j D_R} for j below the longest middle (see middle_sum)
    double tilt = 0.0, log_scale = 0.0, err = 0.0;  // err: 2-norm round-off of c
    double log_total = 0.0;      // log of the exact untilted total mass (rounded up)
    double c_total = 0.0;        // sum of c, rounded up
  };
  struct MSet {
    Tilted u, p, q;     // upper masses, P-labels, Q-labels
    double rel = 0.0;   // relative rounding of the inputs, composed (log factor)
  };
  long m_start_ = 0;
  std::size_t size_ = 0;
  std::vector<MSet> m_;  // M at rare_tilt, then at the second tilt where built
  double tail_u_ = 0.0, tail_q_ = 0.0;        // h > H terms
  double inf_upper_ = 0.0, inf_lower_ = 0.0;  // P(some step at +inf), up and down
  double epsilon_slack_ = 0.0;
};

}  // namespace dpacct::pld

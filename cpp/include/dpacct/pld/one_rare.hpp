// Composition with at most one rare step: a PLD engine for few steps at tiny
// sampling rates and small deltas, where the tail of a single hit sets epsilon.
//
// WHY. With T q << 1 and delta ~ 1e-13 the answer lies in the far tail of one
// hit, whose loss log(1 - q + q e^{(2x-1)/(2 s^2)}) is log-normal-like: it spans
// orders of magnitude above epsilon. A uniform grid fine enough near epsilon
// (cells of epsilon / 1000) cannot reach those losses, and a coarse one puts a
// whole answer's worth of error in each cell; one exponential tilt cannot lift
// delta near epsilon without multiplying the far losses out of range
// (split.hpp's rare grid at sigma=1.08, q=3.7e-8, T=132, delta=2.9e-13: epsilon
// in [5.5e-6, 2.8e-5], the truth 5.5e-6).
//
// THE IDENTITY. Cut each step's P-law of the loss into its band part s (losses
// below tau, on the fine grid of step.hpp; the far negative losses, frequent in
// the add direction, are moved up into it) and the rest r (losses above tau).
// The binomial theorem for convolution powers gives, exactly,
//     (s + r)^{*T} = s^{*(T-1)} * (s + T r)  +  R,
//     R = sum_{h >= 2} C(T, h) s^{*(T-h)} * r^{*h},  |R| <= C(T, 2) |r|^2 (|s| + |r|)^(T-2),
// so delta(eps) is that of G = s^{*(T-1)} (composed once on the fine grid by
// ComposedPld, tilted and untilted) against the finite list of "atoms" of
// s + T r, plus at most |R| (charged to the upper bound, dropped from the
// lower) and P(some step at +inf) (charged). The rare cells carry no grid:
// their loss edges grow geometrically from tau (relative width `growth`), so
// the cells near epsilon are as fine as the answer needs and the far ones few.
//
// UPPER: each atom is a point mass (connect the dots, Doroshenko et al.,
// arXiv:2207.04380, Thm 3.3: a rare cell's P-mass is spread to its two edges
// keeping E[e^{-L}], which only raises delta), and
//     delta_u(eps) = sum_atoms w_a U_G(eps - l_a) + |R| + P(+inf),
// U_G the certified piece ComposedPld::upper_finite (a bound on
// E_G[(1 - e^{e - S})_+] for every e, since that function is convex in e^{-l}).
// LOWER: on the event "x_t lies in atom a's cell (t = 1 for the band atoms, any
// one t for the rare cells), every other step in the band", the test
// "the label sum of the other steps >= y_a" has P-mass p_a P_G(K >= y_a) and
// Q-mass q_a Q_G(K >= y_a); these events are disjoint, so
//     delta_l(eps) = sum_atoms max(p_a P_G(K >= y_a) - e^eps q_a Q_G(K >= y_a), 0)
// is a valid test's value (data processing, as in step.hpp) for any y_a; here
// y_a = eps - l_a + offset, the offset searched.
#pragma once

#include <cstddef>
#include <memory>
#include <vector>

#include "dpacct/pld/compose.hpp"
#include "dpacct/pld/monotone.hpp"
#include "dpacct/pld/step.hpp"

namespace dpacct::pld {

// The part of one step above the band: cells with geometric loss edges, as
// connect-the-dots point masses (upper) and labelled cells (lower).
struct RareCells {
  std::vector<double> loss;       // increasing losses of the point masses (cell edges)
  std::vector<double> log_upper;  // their log-masses (upper ends)
  std::vector<double> label;      // one per cell: log(P / Q) of the cell, within its edges
  std::vector<double> log_p;      // P-mass, lower end
  std::vector<double> log_q;      // Q-mass, upper end
  double infinity_upper = 0.0;    // P-mass beyond the upper tail cut (sent to +inf)
  double log_mass_upper = 0.0;    // log of the total finite upper mass (rounded up)
  double loss_slack = 0.0;        // as StepPmf::loss_slack
};

struct OneRareStep {
  StepPmf band;  // losses in [-band_low d, tau) on the fine grid d, tau = band_high d
  RareCells rare;
};

// Discretises one step of `pair`: the band of losses [-band_low d, band_high d) on the
// grid d (discretize_split's band mode: smaller losses move up to -band_low d, which
// only raises delta; the lower bound drops them), and the losses above tau = band_high d
// in cells with edges tau, tau (1 + growth), ... up to the tail cut at e^{log_tail}
// (the P-mass beyond goes to +inf). `growth` in (0, 1]. Throws std::invalid_argument if
// the band is empty or either part needs more than `max_cells` cells.
OneRareStep discretize_one_rare(const MonotonePair& pair, double d, long band_low, long band_high, double growth,
                                double log_tail, std::size_t max_cells);

class OneRareComposedPld {
 public:
  // T = `count` >= 2 steps of step.band + step.rare; `tilt` is G's tilt (an
  // untilted G is composed too, and each piece takes the tighter of the two).
  OneRareComposedPld(const OneRareStep& step, double count, double tilt, std::size_t max_size);

  void delta_bounds(double epsilon, double* lower, double* upper) const;
  // Certified bounds on epsilon(delta), 0 < delta < 1 (the upper by bisection on
  // the upper delta bound, +inf where it cannot be certified; the lower likewise).
  void epsilon_bounds(double delta, double* lower, double* upper) const;

  double charged_tail() const { return charged_; }  // |R| + P(+inf), added to every upper bound
  std::size_t fine_size() const;
  std::size_t atoms() const { return loss_u_.size(); }

 private:
  double upper_bound(double epsilon) const;
  // The lower bound at one offset of the thresholds y_a = eps - l_a + offset.
  double lower_at(double epsilon, double offset) const;
  // The best over a search of offsets; *offset receives the best one.
  double lower_bound(double epsilon, double* offset) const;
  double g_upper(double e) const;
  double g_p(double y) const;
  double g_q(double y) const;

  std::unique_ptr<ComposedPld> g_tilted_, g_flat_;
  double d_ = 0.0;
  // Upper atoms, sorted by loss: weights w (linear), prefix sums of w, suffix sums of w and of w e^{-l}.
  std::vector<double> loss_u_, w_u_, prefix_w_;
  CachedVector<double> suffix_w_, suffix_we_;
  // Lower atoms, sorted by label: P-mass (low), Q-mass (high).
  std::vector<double> label_l_, p_l_, q_l_;
  CachedVector<double> suffix_p_, suffix_q_;
  double g_high_ = 0.0, g_low_ = 0.0;        // the union of G's upper windows
  double cells_high_ = 0.0, cells_low_ = 0.0;  // the union of G's label ranges
  double charged_ = 0.0;
  double epsilon_slack_ = 0.0;
  double label_bias_ = 0.0;  // about how far G's label sums lie below its losses (centres the offset search)
  double sum_error_ = 0.0;     // relative error of a sum computed in one loop (over at most all atoms)
  double stored_error_ = 0.0;  // relative error of the stored prefix and suffix sums (two-level)
};

}  // namespace dpacct::pld

// Dominating pairs (P, Q) on the real line whose privacy loss L(x) = log dP/dQ(x)
// is non-decreasing in x, and their discretisation into a StepPmf (step.hpp).
//
// With L monotone, the cell of losses [kD, (k+1)D) is an interval of x whose
// P- and Q-masses are differences of log-CDFs; the discretisation needs only
// L, its inverse and the two log-CDFs. Every mechanism here is one small class:
//   - GaussianPair:      P = N(1, s^2), Q = N(0, s^2) (sensitivity 1, noise multiplier s);
//   - LaplacePair:       P = Lap(1, b), Q = Lap(0, b) (L1 sensitivity 1, scale b);
//   - MixtureGaussianPair: P = sum_i w_i N(c_i, s^2), Q = N(0, s^2), c_i >= 0
//     (the mixture-of-Gaussians mechanism of Ganesh, "Tight group privacy and
//     the mixture-of-Gaussians mechanism", arXiv:2310.15526, used for
//     DP-SGD with random sensitivities);
// and two wrappers that build new monotone pairs from old ones:
//   - Subsampled(pair, q): P' = (1 - q) Q + q P, Q' = Q, the "remove" direction
//     of Poisson subsampling; its loss log(1 - q + q e^{L(x)}) is monotone in x
//     (Zhu, Dong, Wang, "Optimal Accounting of Differential Privacy via
//     Characteristic Function", AISTATS 2022, arXiv:2106.08567, Thm 10, and
//     Koskela et al. 2020 for the Gaussian);
//   - Swapped(pair): the pair (Q, P) on y = -x, so its loss -L(-y) is again
//     non-decreasing; Swapped(Subsampled(pair, q)) is the "add" direction.
#pragma once

#include <cstddef>
#include <limits>
#include <memory>
#include <vector>

#include "dpacct/pld/step.hpp"

namespace dpacct::pld {

class MonotonePair {
 public:
  virtual ~MonotonePair() = default;
  // L(x), non-decreasing; x finite.
  virtual double loss(double x) const = 0;
  // The x with L(x) = l, for loss_inf() < l < loss_sup() (may return the
  // boundary x for l at a bounded end).
  virtual double x_of(double l) const = 0;
  // {log P(X <= x), log P(X > x)} and the same for Q; x may be +-inf.
  virtual Edge edge_p(double x) const = 0;
  virtual Edge edge_q(double x) const = 0;
  // Both at once, the same values as edge_p and edge_q (a wrapper computes its base pair's
  // edges once for both: Poisson subsampling's P edge needs the base Q edge too).
  virtual void edges(double x, Edge* p, Edge* q) const {
    *p = edge_p(x);
    *q = edge_q(x);
  }
  // lim L(x) as x -> -inf and +inf (possibly infinite).
  virtual double loss_inf() const = 0;
  virtual double loss_sup() const = 0;
  // Points beyond which both P and Q have mass <= e^{log_tail} (only used on
  // a side where the loss is unbounded).
  virtual double clamp_low(double log_tail) const = 0;
  virtual double clamp_high(double log_tail) const = 0;
  // A point beyond which Q alone has mass <= e^{log_tail} (where the loss is unbounded above):
  // beyond x, Poisson subsampling's P' = (1 - q) Q + q P has at most Q's tail plus q times P's,
  // so its clamp point needs Q's own. The default, clamp_high, bounds both P and Q.
  virtual double clamp_high_q(double log_tail) const { return clamp_high(log_tail); }
  // Absolute error bound of the computed loss at the computed edge of a
  // cell, beyond 64 u (1 + |loss|) (the default for closed-form inverses).
  virtual double extra_loss_error() const { return 0.0; }
  // Whether loss_error() bounds the rounding of loss(x); where it does, discretisations whose
  // losses are all small measure their loss_slack edge by edge (SlackMeter) instead of charging
  // the flat 64 u (1 + |loss|) above.
  virtual bool has_loss_error() const { return false; }
  // A bound on |loss(x) - L(x)| for the computed `value` = loss(x) at x (x may be +-inf where
  // the loss is bounded there: value is then loss_inf() or loss_sup()); negative where none is
  // known. Only called where has_loss_error().
  virtual double loss_error(double /*x*/, double /*value*/) const { return -1.0; }
  // Certified log-mass intervals of P and Q on (xa, xb] that keep their relative
  // accuracy in narrow cells (see normal_cell_mass in step.hpp), where the pair has
  // them; false where it does not (the discretisation then uses the CDF differences
  // alone, and otherwise the intersection of both). `own`, unless null, receives a certified
  // interval for the cell's own loss log(P(cell) / Q(cell)): p - q, or a sharper one where the
  // pair knows more (Poisson subsampling, below).
  virtual bool cell_masses(double /*xa*/, double /*xb*/, Mass* /*p*/, Mass* /*q*/, Mass* /*own*/) const {
    return false;
  }
};

class GaussianPair final : public MonotonePair {
 public:
  explicit GaussianPair(double noise_multiplier);
  double loss(double x) const override;
  double x_of(double l) const override;
  Edge edge_p(double x) const override;
  Edge edge_q(double x) const override;
  double loss_inf() const override;
  double loss_sup() const override;
  double clamp_low(double log_tail) const override;
  double clamp_high(double log_tail) const override;
  double clamp_high_q(double log_tail) const override;
  bool cell_masses(double xa, double xb, Mass* p, Mass* q, Mass* own) const override;
  bool has_loss_error() const override { return true; }
  double loss_error(double x, double value) const override;

 private:
  double sigma_;
};

class LaplacePair final : public MonotonePair {
 public:
  explicit LaplacePair(double scale);
  double loss(double x) const override;
  double x_of(double l) const override;
  Edge edge_p(double x) const override;
  Edge edge_q(double x) const override;
  double loss_inf() const override { return -1.0 / scale_; }
  double loss_sup() const override { return 1.0 / scale_; }
  double clamp_low(double) const override;
  double clamp_high(double) const override;

 private:
  double scale_;
};

class MixtureGaussianPair final : public MonotonePair {
 public:
  // sensitivities c_i >= 0 (finite), probabilities w_i > 0 summing to 1 (within 1e-12).
  MixtureGaussianPair(double noise_multiplier, std::vector<double> sensitivities, std::vector<double> probabilities);
  double loss(double x) const override;
  double x_of(double l) const override;
  Edge edge_p(double x) const override;
  Edge edge_q(double x) const override;
  double loss_inf() const override;
  double loss_sup() const override;
  double clamp_low(double log_tail) const override;
  double clamp_high(double log_tail) const override;
  double clamp_high_q(double log_tail) const override;
  double extra_loss_error() const override;
  bool cell_masses(double xa, double xb, Mass* p, Mass* q, Mass* own) const override;

 private:
  double sigma_;
  std::vector<double> c_, log_w_;
  double c_min_ = 0.0, c_max_ = 0.0, log_w_zero_;  // log of the weight on c = 0 (-inf if none)
};

class Subsampled final : public MonotonePair {
 public:
  // `query_tail`: the log of the P'- and Q-mass a query lets each step cut off above
  // (-inf: the base pair's clamp points alone).
  Subsampled(std::shared_ptr<const MonotonePair> base, double sampling_probability,
             double query_tail = -std::numeric_limits<double>::infinity());
  double loss(double x) const override;
  double x_of(double l) const override;
  Edge edge_p(double x) const override;
  Edge edge_q(double x) const override { return base_->edge_q(x); }
  void edges(double x, Edge* p, Edge* q) const override;
  double loss_inf() const override;
  double loss_sup() const override;
  double clamp_low(double log_tail) const override { return base_->clamp_low(log_tail); }
  // The base pair's point, or, where a query allows each step to cut e^{query_tail} (constructor),
  // the nearer point where Q's tail and P's tail / q are each half of that: at tiny q a step then
  // ends where P' runs out, not where P does.
  double clamp_high(double log_tail) const override;
  double clamp_high_q(double log_tail) const override { return base_->clamp_high_q(log_tail); }
  double extra_loss_error() const override { return base_->extra_loss_error(); }
  bool cell_masses(double xa, double xb, Mass* p, Mass* q, Mass* own) const override;
  bool has_loss_error() const override { return base_->has_loss_error(); }
  double loss_error(double x, double value) const override;

 private:
  double lift(double base_loss) const;  // log(1 - q + q e^l)
  // lift(l) in `value`, and a bound on |value - log(1 - q + q e^{l*})| for any l* within e of l
  // (negative where none is known); `y` receives q expm1(l) where that was formed (l <= 700).
  double lift_bounded(double l, double e, double* value, double* y) const;
  Edge mix(const Edge& p, const Edge& q) const;
  std::shared_ptr<const MonotonePair> base_;
  double q_, log_q_, log_1mq_, query_tail_;
};

class Swapped final : public MonotonePair {
 public:
  explicit Swapped(std::shared_ptr<const MonotonePair> base) : base_(std::move(base)) {}
  double loss(double y) const override { return -base_->loss(-y); }
  double x_of(double l) const override { return -base_->x_of(-l); }
  Edge edge_p(double y) const override;
  Edge edge_q(double y) const override;
  void edges(double y, Edge* p, Edge* q) const override;
  double loss_inf() const override { return -base_->loss_sup(); }
  double loss_sup() const override { return -base_->loss_inf(); }
  double clamp_low(double log_tail) const override { return -base_->clamp_high(log_tail); }
  double clamp_high(double log_tail) const override { return -base_->clamp_low(log_tail); }
  double extra_loss_error() const override { return base_->extra_loss_error(); }
  bool has_loss_error() const override { return base_->has_loss_error(); }
  double loss_error(double y, double value) const override { return base_->loss_error(-y, -value); }
  // The cell (ya, yb] is [-yb, -ya) of the base pair (no atoms), with P and Q exchanged.
  bool cell_masses(double ya, double yb, Mass* p, Mass* q, Mass* own) const override {
    Mass base_own{};
    if (!base_->cell_masses(-yb, -ya, q, p, own != nullptr ? &base_own : nullptr)) return false;
    if (own != nullptr) *own = {-base_own.hi, -base_own.lo};  // log(Q / P) of the base cell
    return true;
  }

 private:
  std::shared_ptr<const MonotonePair> base_;
};

// Discretises one step of `pair` on the grid of width `discretization`
// (see step.hpp for what the two halves certify). Where the loss is
// unbounded, the P-mass beyond clamp_high(log_tail) goes to +inf (charged to
// the upper bound) and the mass below clamp_low(log_tail) moves up to the
// lowest grid point kept. Throws std::invalid_argument if one step would need
// more than `max_cells` cells (the message says to increase discretization).
// With `shared_labels`, also the shared labels of step.hpp where the own losses are sharp
// (grids finer than kSharpOwnBelow); they cost about a fifth more per cell.
StepPmf discretize(const MonotonePair& pair, double discretization, double log_tail, std::size_t max_cells,
                   bool shared_labels = false);
// The length of the log_upper that discretize() would return (its cells plus one), without
// discretising: what a caller needs to size a grid from the support alone.
std::size_t discretized_size(const MonotonePair& pair, double discretization, double log_tail);

// Where every discretisation of `pair` (discretize, discretize_split, discretize_one_rare) stops:
// the clamp points x_small < x_large, beyond which P and Q have at most e^{log_tail} each (+-inf
// where a side is kept whole), and the losses there. A side where the loss is unbounded stops at
// the pair's clamp point; a bounded side (with 0 inside the range) too where that point's loss is
// within half the bound, and is kept whole otherwise. (A Poisson-subsampled Gaussian's loss is
// bounded by log(1 - q) on one side, but at sigma = 1e4, q = 0.01 the e^-80 point's loss is
// -1.3e-5 there, against -0.01: kept whole, the empty cells down to -0.01 set the steps' widths
// from their range and left the spike of spread 1e-6 inside one coarse cell. Cut wherever the
// point lies inside, the steps at sigma = 2.47, q = 8e-8 lost a cell of 1e-9 near -q, and the
// compositions chosen from them took other, slower turns: 3 s -> 7 s for one delta query.)
// Throws std::domain_error where the losses there are not finite and ordered.
struct ClampRange {
  double x_small, x_large, loss_low, loss_high;
};
ClampRange clamp_range(const MonotonePair& pair, double log_tail);

// The loss_slack of a discretisation (see step.hpp), measured at its cell edges.
//
// The flat rule, 64 u (1 + largest |loss|) + extra_loss_error(), covers the closed-form
// inverses in general. Where the pair bounds the rounding of its computed loss
// (has_loss_error) and every loss of the part is small (|loss| <= 1), the slack is measured
// instead: at an edge x assigned the grid loss g = k D, the true loss is within
// |loss(x) - k * d| + loss_error(x) + the rounding of k * d of g. At tiny q the losses are
// ~q and that is a few ulps of q, where the flat rule charged 64 u per step: at sigma=9.88,
// q=2.3e-8, T=7.6e6 that was 1.1e-7 of an epsilon of 8.4e-6.
class SlackMeter {
 public:
  SlackMeter(const MonotonePair& pair, double largest_abs_loss);
  bool tight() const { return tight_; }
  // An edge x of the part at grid loss g (k * d as computed): side 0 for an edge between two
  // of its cells, -1 for its lowest edge (only true losses below g poke out), +1 for its
  // highest (only those above g). x may be +-inf where the loss is bounded.
  void edge(double x, double g, int side);
  // The measured slack; meaningful only while tight() (the caller charges the flat rule otherwise).
  double slack() const;

 private:
  const MonotonePair& pair_;
  bool tight_;
  double worst_ = 0.0;
  double last_x_ = 0.0, last_value_ = 0.0, last_error_ = 0.0;  // the previous edge's loss (edges are shared)
  bool have_last_ = false;
};

// Walks the cells of a partition from left to right and gives each cell's certified
// P- and Q-mass intervals: by the pair's cell_masses where those are within 2e-13
// (relative) on their own, else from the CDF differences at the cell's edges (the edge
// data computed only for such cells), intersected with cell_masses where it has them.
// The own losses are the pair's sharp ones for grids finer than kSharpOwnBelow, else
// those of the mass intervals (see discretize()).
class CellWalk {
 public:
  CellWalk(const MonotonePair& pair, double x_start, bool sharp_own = true)
      : pair_(pair), x_prev_(x_start), sharp_own_(sharp_own) {}
  // The cell (x_prev, x_next], x_next > x_prev (the previous call's x_next, or x_start);
  // `own` (if given) receives a certified interval for its own loss log(P / Q).
  void next(double x_next, Mass* pm, Mass* qm, Mass* own = nullptr);

 private:
  const MonotonePair& pair_;
  double x_prev_;
  bool sharp_own_;
  Edge p_prev_{}, q_prev_{};
  bool have_prev_ = false;
};

// The grid width below which a discretisation asks the pair for its sharp own losses. The
// split of a cell moves |own error| of loss per step, T |own error| in all, against a grid
// gap of at least ~0.01 T D^2 (the error model of dpacct.pld, k >= 0.04): with the mass
// intervals' ratio (~1e-13 wide, 1e-12 at most) that is <= 1e-10 / D^2 of the gap, 1 % at
// D = 1e-4, so coarser grids skip the sharper lift (two transcendentals per cell, 7 % of a
// 3 ms query).
inline constexpr double kSharpOwnBelow = 1e-4;

}  // namespace dpacct::pld

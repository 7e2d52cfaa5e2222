#include "dpacct/pld/split.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <complex>
#include <limits>
#include <memory>
#include <stdexcept>
#include <string>

#include "dpacct/check.hpp"
#include "dpacct/fft.hpp"
#include "dpacct/logmath.hpp"

namespace dpacct::pld {

namespace {

constexpr double kU = kUnit;
// The blocks' window tails when G is composed in stages: their aliasing is charged to every entry.
constexpr double kBlockWindowTail = -60.0;

long floor_div(long a, long b) { return a >= 0 ? a / b : -((-a + b - 1) / b); }

double log_total(const std::vector<double>& v) { return v.empty() ? kNegInf : logsumexp(v.data(), v.size()); }

// An empty step on grid d (no finite mass).
StepPmf empty_step(double d) {
  StepPmf s;
  s.discretization = d;
  s.log_upper.assign(1, kNegInf);
  s.label_low = -1;
  s.log_p.assign(3, kNegInf);
  s.log_q.assign(3, kNegInf);
  return s;
}

// One kind of sequence of M: the normalised small and rare parts, their log masses.
struct Part {
  const std::vector<double>* logs;
  long low;
  double log_mass;
};

// The rare part with its losses outside [low, high] sent to +inf: their upper masses join
// infinity_upper (which raises any delta by at most that mass, wherever they were) and their labels
// are dropped, P- and Q-mass together (post-processing: those outcomes become one that no threshold
// test counts). Any cut is certified; the caller cuts where the mass moved is far below the queried
// delta.
StepPmf cut_rare(const StepPmf& rare, double low, double high) {
  if (!(low > kNegInf || high < kInf) || rare.log_upper.empty() || !rare.log_q_mid.empty()) return rare;
  const double d = rare.discretization;
  const auto n = static_cast<long>(rare.log_upper.size());
  // Grid indices kept: [first, last] (at least one entry).
  const long lo_index = low > kNegInf ? static_cast<long>(std::ceil(low / d)) : rare.upper_low;
  const long hi_index = high < kInf ? static_cast<long>(std::floor(high / d)) : rare.upper_low + n - 1;
  const long first = std::clamp(lo_index - rare.upper_low, 0L, n - 1);
  const long last = std::clamp(hi_index - rare.upper_low, first, n - 1);
  if (first == 0 && last == n - 1) return rare;
  StepPmf out = rare;
  double moved = kNegInf, largest = 0.0;
  long terms = 0;
  for (long j = 0; j < n; ++j) {
    const double v = rare.log_upper[static_cast<std::size_t>(j)];
    if ((j < first || j > last) && v > kNegInf) {
      moved = log_add(moved, v);
      largest = std::max(largest, std::fabs(v));
      ++terms;
    }
  }
  out.upper_low = rare.upper_low + first;
  out.log_upper.assign(rare.log_upper.begin() + first, rare.log_upper.begin() + last + 1);
  if (moved > kNegInf) {
    // The running log-sum over `terms` entries of size at most `largest` errs by less than
    // 8 u (terms + 2 + largest) (as g_chernoff_'s sums): charged, rounded up.
    const double margin = 8.0 * kU * (static_cast<double>(terms) + 2.0 + largest);
    out.infinity_upper = std::min((rare.infinity_upper + std::exp(moved + margin)) * (1.0 + 8.0 * kU), 1.0);
  }
  // Labels: the same losses kept (label k at loss k d), at least one.
  const auto m = static_cast<long>(rare.log_p.size());
  const long l_first = std::clamp(rare.upper_low + first - rare.label_low, 0L, m - 1);
  const long l_last = std::clamp(rare.upper_low + last - rare.label_low, l_first, m - 1);
  out.label_low = rare.label_low + l_first;
  out.log_p.assign(rare.log_p.begin() + l_first, rare.log_p.begin() + l_last + 1);
  out.log_q.assign(rare.log_q.begin() + l_first, rare.log_q.begin() + l_last + 1);
  summarise(out);
  return out;
}

// The three sequences of M's two factors: upper masses, P-labels and Q-labels of the coarsened small
// part ([kind][0]) and of the rare part ([kind][1]).
using MParts = std::array<std::array<Part, 2>, 3>;
MParts m_parts(const StepPmf& coarse, const StepPmf& rare) {
  return {{{{{&coarse.log_upper, coarse.upper_low, log_total(coarse.log_upper)},
             {&rare.log_upper, rare.upper_low, log_total(rare.log_upper)}}},
           {{{&coarse.log_p, coarse.label_low, log_total(coarse.log_p)},
             {&rare.log_p, rare.label_low, log_total(rare.log_p)}}},
           {{{&coarse.log_q, coarse.label_low, log_total(coarse.log_q)},
             {&rare.log_q, rare.label_low, log_total(rare.log_q)}}}}};
}

}  // namespace

SplitStep discretize_split(const MonotonePair& pair, double d, long ratio, long tau_index, double log_tail,
                           std::size_t max_cells, long band_low) {
  require_positive_finite("discretization", d);
  if (ratio < 1 || tau_index < 1) throw std::invalid_argument("the split ratio and tau index must be >= 1");
  const double dc = d * static_cast<double>(ratio);
  const long t = tau_index;
  const long f = tau_index * ratio;  // tau in fine units
  const ClampRange range = clamp_range(pair, log_tail);
  const double x_small = range.x_small, x_large = range.x_large;
  const double loss_low = range.loss_low, loss_high = range.loss_high;
  const auto a_low = static_cast<long>(std::floor(loss_low / dc));
  const auto a_high = static_cast<long>(std::floor(loss_high / dc));
  const auto k_low = static_cast<long>(std::floor(loss_low / d));
  const auto k_high = static_cast<long>(std::floor(loss_high / d));
  // Cells in increasing loss order: rare below -tau (coarse), small in [-tau, tau] (fine), rare above (coarse).
  const long a1 = a_low, a2 = std::min(-t - 1, a_high);
  const bool band_only = band_low > 0;
  const long b1 = std::max(band_only ? -band_low : -f, k_low), b2 = std::min(f - 1, k_high);
  const long c1 = std::max(t, a_low), c2 = a_high;
  // (band_only: the small part alone, cut exactly at -band_low d and tau where the losses go beyond.)
  const long n_a = band_only ? 0 : std::max(a2 - a1 + 1, 0L), n_b = std::max(b2 - b1 + 1, 0L),
             n_c = band_only ? 0 : std::max(c2 - c1 + 1, 0L);
  if (static_cast<std::size_t>(n_a + n_b + n_c) + 2 > max_cells) {
    throw std::invalid_argument("discretization " + format_value(d) + " is too fine: one step would need " +
                                std::to_string(n_a + n_b + n_c + 2) + " loss cells (more than " +
                                std::to_string(max_cells) + "); increase discretization");
  }
  SplitStep out;
  out.small = n_b > 0 ? StepPmf{} : empty_step(d);
  out.rare = n_a + n_c > 0 ? StepPmf{} : empty_step(dc);
  StepPmf& sm = out.small;
  StepPmf& ra = out.rare;
  if (n_b > 0) {
    sm.discretization = d;
    sm.upper_low = b1;
    sm.log_upper.assign(static_cast<std::size_t>(b2 - b1 + 2), kNegInf);
    sm.label_low = b1 - 1;
    sm.log_p.assign(static_cast<std::size_t>(b2 - b1 + 3), kNegInf);
    sm.log_q.assign(sm.log_p.size(), kNegInf);
  }
  long r_lo = 0, r_hi = 0;
  if (n_a + n_c > 0) {
    r_lo = n_a > 0 ? a1 : c1;
    r_hi = n_c > 0 ? c2 + 1 : a2 + 1;
    ra.discretization = dc;
    ra.upper_low = r_lo;
    ra.log_upper.assign(static_cast<std::size_t>(r_hi - r_lo + 1), kNegInf);
    ra.label_low = r_lo - 1;
    ra.log_p.assign(static_cast<std::size_t>(r_hi - r_lo + 3), kNegInf);
    ra.log_q.assign(ra.log_p.size(), kNegInf);
  }
  const long total_cells = n_a + n_b + n_c;
  // The cell with overall position c: its grid (fine or coarse) and grid indices.
  auto cell = [&](long c, bool* rare, long* a) {
    if (c < n_a) {
      *rare = true;
      *a = a1 + c;
    } else if (c < n_a + n_b) {
      *rare = false;
      *a = b1 + (c - n_a);
    } else {
      *rare = true;
      *a = c1 + (c - n_a - n_b);
    }
  };
  auto edge_x = [&](long c) {  // x at the lower edge of cell c (c == total_cells: upper edge of the last)
    if (c <= 0) return band_only && b1 > k_low ? pair.x_of(static_cast<double>(b1) * d) : x_small;
    if (c >= total_cells) return band_only && b2 < k_high ? pair.x_of(static_cast<double>(b2 + 1) * d) : x_large;
    bool rare = false;
    long a = 0;
    cell(c, &rare, &a);
    return pair.x_of(static_cast<double>(a) * (rare ? dc : d));
  };
  CellWalk walk(pair, edge_x(0), d < kSharpOwnBelow);
  // Each part's loss_slack from its own cells' edges (SlackMeter): the small part's losses are
  // tiny at tiny q, the rare part's are not.
  const double small_largest = n_b > 0 ? std::max(std::fabs(static_cast<double>(b1) * d), std::fabs(static_cast<double>(b2 + 1) * d)) : 0.0;
  const double rare_largest = n_a + n_c > 0 ? std::max(std::fabs(static_cast<double>(r_lo) * dc), std::fabs(static_cast<double>(r_hi) * dc)) : 0.0;
  SlackMeter small_meter(pair, small_largest), rare_meter(pair, rare_largest);
  const bool first_clamped = !(band_only && b1 > k_low), last_clamped = !(band_only && b2 < k_high);
  double x_prev = edge_x(0);
  for (long c = 0; c < total_cells; ++c) {
    bool rare = false;
    long a = 0;
    cell(c, &rare, &a);
    StepPmf& part = rare ? ra : sm;
    const double grid = rare ? dc : d;
    const double x_next = edge_x(c + 1);
    SlackMeter& meter = rare ? rare_meter : small_meter;
    meter.edge(x_prev, static_cast<double>(a) * grid, c == 0 && first_clamped ? -1 : 0);
    meter.edge(x_next, static_cast<double>(a + 1) * grid, c + 1 == total_cells && last_clamped ? 1 : 0);
    x_prev = x_next;
    Mass pm{}, qm{}, own{};
    walk.next(x_next, &pm, &qm, &own);
    if (pm.lo > kNegInf && qm.hi > kNegInf) {
      const double ratio_loss = 0.5 * (own.lo + own.hi) / grid;
      const long first = part.label_low, last = part.label_low + static_cast<long>(part.log_p.size()) - 1;
      const long label =
          std::clamp(std::lround(std::isfinite(ratio_loss) ? ratio_loss : static_cast<double>(a)), first, last);
      const auto j = static_cast<std::size_t>(label - part.label_low);
      part.log_p[j] = log_add_directed(part.log_p[j], pm.lo, -1);  // (P low, Q high where cells share a label)
      part.log_q[j] = log_add_directed(part.log_q[j], qm.hi, +1);
    }
    split_cell_by_loss(pm, own, a, a + 1, grid, part.upper_low, part.log_upper);
  }
  // Clamped tails, as in discretize(): the smallest losses move up one grid point
  // of the part holding the lowest cell; the largest go to +inf (rare part). In band_only
  // mode every loss below the band moves up to its lowest grid point (upper masses only:
  // the labels drop that mass), and the largest belong to the caller's rare part.
  if (band_only && n_b > 0 && !std::isinf(edge_x(0))) {
    const double below = pair.edge_p(edge_x(0)).log_cdf;
    sm.log_upper[0] = log_add_directed(sm.log_upper[0], below + kLogError * (1.0 + std::fabs(below)), +1);
  }
  if (!band_only && !std::isinf(x_small)) {
    StepPmf& part = n_a > 0 || n_b == 0 ? ra : sm;  // never the empty stand-in: that mass must stay
    const double tail = pair.edge_p(x_small).log_cdf;
    if (part.log_upper.size() > 1) {
      part.log_upper[1] = log_add_directed(part.log_upper[1], tail + kLogError * (1.0 + std::fabs(tail)), +1);
    }
  }
  if (!band_only && !std::isinf(x_large)) {
    const double tail = pair.edge_p(x_large).log_sf;
    ra.infinity_upper = std::exp(tail + kLogError * (1.0 + std::fabs(tail)));
  }
  summarise(sm);
  summarise(ra);
  const double flat = 64.0 * kUnit * (1.0 + std::max(sm.max_abs_loss, ra.max_abs_loss)) + pair.extra_loss_error();
  sm.loss_slack = small_meter.tight() ? small_meter.slack() : flat;
  ra.loss_slack = rare_meter.tight() ? rare_meter.slack() : flat;
  return out;
}

namespace {

// Rounds a run's linear sum `sum` (relative to e^top) out to a certified log. In units of kU (an ulp at 1, two unit
// round-offs; exp and log within an ulp): each of its `count` terms e^{v - top} c (c in [0, 1]) is within
// 2.5 + |v - top| / 2 of exact (the exponent's rounding, exp, 1 - f and the product), at most 2.5 c e^{v - top} +
// 0.19 absolute (x e^{-x} <= 1/e); their sum of non-negative terms within (count - 1) / 2 more, and the bound
// below within 1.5 more: count / 2 + 4.5 relative and count / 5 absolute. Then the log (an ulp of log sum) and
// the shift by top (half an ulp of the value), and the correction's own rounding, one more ulp (nextafter).
// `side` +1 rounds up, -1 down.
double run_log(double top, double sum, double count, int side) {
  if (std::isnan(sum) || std::isnan(top)) return side > 0 ? std::numeric_limits<double>::quiet_NaN() : kNegInf;
  const double relative = kU * (0.5 * count + 4.5), absolute = 0.2 * kU * count;
  const double bound = side > 0 ? sum * (1.0 + relative) + absolute : sum * (1.0 - relative) - absolute;
  if (!(bound > 0.0)) return kNegInf;  // (nothing certainly there: dropping P-mass is allowed)
  const double log_sum = std::log(bound);
  const double value = top + log_sum;
  const double correction = kU * (std::fabs(log_sum) + 0.5 * std::fabs(value)) * (1.0 + 1e-6);
  return std::nextafter(value + side * correction, side * kInf);
}

}  // namespace

StepPmf coarsen(const StepPmf& fine, long ratio) {
  if (ratio < 1) throw std::invalid_argument("the coarsening ratio must be >= 1");
  const double d = fine.discretization;
  const double dc = d * static_cast<double>(ratio);
  StepPmf out;
  out.discretization = dc;
  out.has_upper = fine.has_upper;
  const long n_u = static_cast<long>(fine.log_upper.size());
  out.upper_low = floor_div(fine.upper_low, ratio);
  out.log_upper.assign(static_cast<std::size_t>(floor_div(fine.upper_low + n_u - 1, ratio) + 2 - out.upper_low), kNegInf);
  // Upper masses. The fine cells of one coarse interval [a dc, (a + 1) dc) are consecutive: each run is summed in
  // linear space relative to its largest log-mass, sum_k m_k f_k to a and sum_k m_k (1 - f_k) to a + 1 (a point mass
  // at loss k d spread to a dc and (a + 1) dc keeping E[e^{-L}], f_k at its certified lower end; an aligned cell all
  // to a), both rounded up (mass added only raises delta) by their rounding (run_log). Per cell that is an exp and
  // an expm1 where the log-space split and two log_adds had taken seven transcendentals (a fifth of a refined split
  // pass at 45,000 cells), and the log_add chains of up to `ratio` terms had been neither rounded up nor charged.
  for (long j = 0; j < n_u;) {
    const long a = floor_div(fine.upper_low + j, ratio);
    long end = j;
    double top = kNegInf;
    bool nan = false;  // (a NaN entry is passed on, as log_add did, never dropped)
    while (end < n_u && floor_div(fine.upper_low + end, ratio) == a) {
      const double v = fine.log_upper[static_cast<std::size_t>(end)];
      nan = nan || std::isnan(v);
      top = std::max(top, v);
      ++end;
    }
    if (nan) top = std::numeric_limits<double>::quiet_NaN();
    if (!(top == kNegInf)) {
      double to_a = 0.0, to_b = 0.0;
      for (long i = j; i < end; ++i) {
        const double v = fine.log_upper[static_cast<std::size_t>(i)];
        if (v == kNegInf) continue;
        const double m = std::exp(v - top);
        const long k = fine.upper_low + i;
        if (a * ratio == k) {
          to_a += m;
          continue;
        }
        const double kd = static_cast<double>(k) * d;
        const double err = 4.0 * kU * (2.0 + std::fabs(v) + std::fabs(kd));
        const double f = spread_fraction(Mass{kd - err, kd + err}, static_cast<double>(a) * dc, dc);
        to_a += m * f;
        to_b += m * (1.0 - f);
      }
      const double count = static_cast<double>(end - j);
      const auto ia = static_cast<std::size_t>(a - out.upper_low);
      out.log_upper[ia] = log_add_directed(out.log_upper[ia], run_log(top, to_a, count, +1), +1);
      out.log_upper[ia + 1] = log_add_directed(out.log_upper[ia + 1], run_log(top, to_b, count, +1), +1);
    }
    j = end;
  }
  // Labels: each fine label to the nearest coarse label (post-processing), a run of consecutive fine labels per
  // coarse label, summed as above: P rounded down, Q up.
  const long n_l = static_cast<long>(fine.log_p.size());
  out.label_low = floor_div(fine.label_low, ratio) - 1;
  out.log_p.assign(static_cast<std::size_t>(floor_div(fine.label_low + n_l - 1, ratio) + 3 - out.label_low), kNegInf);
  out.log_q.assign(out.log_p.size(), kNegInf);
  for (long j = 0; j < n_l;) {
    const long label = floor_div(2 * (fine.label_low + j) + ratio, 2 * ratio);  // nearest coarse label
    long end = j;
    double top_p = kNegInf, top_q = kNegInf;
    bool nan_q = false;
    while (end < n_l && floor_div(2 * (fine.label_low + end) + ratio, 2 * ratio) == label) {
      top_p = std::max(top_p, fine.log_p[static_cast<std::size_t>(end)]);
      top_q = std::max(top_q, fine.log_q[static_cast<std::size_t>(end)]);
      nan_q = nan_q || std::isnan(fine.log_q[static_cast<std::size_t>(end)]);
      ++end;
    }
    if (nan_q) top_q = std::numeric_limits<double>::quiet_NaN();
    double sum_p = 0.0, sum_q = 0.0;
    for (long i = j; i < end; ++i) {
      const double p = fine.log_p[static_cast<std::size_t>(i)], q = fine.log_q[static_cast<std::size_t>(i)];
      if (p > kNegInf) sum_p += std::exp(p - top_p);
      if (q > kNegInf) sum_q += std::exp(q - top_q);
    }
    const double count = static_cast<double>(end - j);
    const auto i = static_cast<std::size_t>(label - out.label_low);
    if (top_p > kNegInf) out.log_p[i] = run_log(top_p, sum_p, count, -1);  // (a NaN P-term drops the run's P)
    if (!(top_q == kNegInf)) out.log_q[i] = run_log(top_q, sum_q, count, +1);
    j = end;
  }
  out.infinity_upper = fine.infinity_upper;
  out.infinity_lower = fine.infinity_lower;
  summarise(out);
  // An aligned cell k = a ratio stays at a, whose loss a dc (dc = fl(ratio d)) may lie half an ulp of the loss below
  // k d, and upper masses may move up, never down: the slack the composer takes off epsilon grows by an ulp of the
  // largest loss represented (a review's finding; older than the linear sums above).
  const double reach = std::max(std::fabs(static_cast<double>(fine.upper_low) * d),
                                std::fabs(static_cast<double>(fine.upper_low + n_u) * d));
  out.loss_slack = fine.loss_slack + kU * reach * (1.0 + 1e-6);
  return out;
}

SplitComposedPld::SplitComposedPld(const SplitStep& split, double count, long rare_max, double tilt,
                                   double rare_tilt, std::size_t max_size, long block_steps, long g_ratio,
                                   const std::vector<double>& more_rare_tilts, double rare_cut_low,
                                   double rare_cut_high) {
  require_nonnegative_finite("rare_tilt", rare_tilt);
  for (const double t : more_rare_tilts) require_nonnegative_finite("more_rare_tilts", t);
  if (!(count >= 1.0 && count == std::floor(count) && count < 9.0e15)) fail("count", "an integer >= 1", count);
  require_nonnegative_finite("tilt", tilt);
  if (std::isnan(rare_cut_low)) fail("rare_cut_low", "a number", rare_cut_low);
  if (std::isnan(rare_cut_high)) fail("rare_cut_high", "a number", rare_cut_high);
  require_no_nan(split.small);
  require_no_nan(split.rare);
  const StepPmf& small = split.small;
  const StepPmf rare = cut_rare(split.rare, rare_cut_low, rare_cut_high);
  d_fine_ = small.discretization;
  d_coarse_ = rare.discretization;
  g_step_ = d_fine_;
  const long ratio = std::lround(d_coarse_ / d_fine_);
  if (ratio < 1 || std::fabs(static_cast<double>(ratio) * d_fine_ - d_coarse_) > 1e-9 * d_coarse_) {
    throw std::invalid_argument("the rare grid must be an integer multiple of the small grid");
  }
  rare_max_ = static_cast<long>(std::min(static_cast<double>(std::max(rare_max, 0L)), count));
  const double h_max = static_cast<double>(rare_max_);
  const double g_count = count - h_max;
  epsilon_slack_ = h_max * std::max(small.loss_slack, rare.loss_slack);

  // P(some step at +inf), rounded up and down.
  inf_upper_ = std::min(-std::expm1(count * std::log1p(-std::min(rare.infinity_upper, 1.0))) * (1.0 + 16.0 * kU), 1.0);
  inf_lower_ = std::max(-std::expm1(count * std::log1p(-std::min(rare.infinity_lower, 1.0))) * (1.0 - 16.0 * kU), 0.0);

  // G = small^(T - H), tilted and untilted; in two stages where asked (blocks of B steps).
  if (g_count >= 1.0) {
    const bool staged = block_steps > 1 && static_cast<double>(block_steps) <= g_count;
    if (staged && (g_ratio < 1 || ratio % g_ratio != 0)) {
      throw std::invalid_argument("the staged G's grid ratio must divide the rare grid's ratio");
    }
    // One block serves both (compose_block adds a flat composition where its window is wide).
    StepPmf block, rest;
    double blocks = 0.0;
    if (staged) {
      const double b = static_cast<double>(block_steps);
      blocks = std::floor(g_count / b);
      block = coarsen(compose_block(small, b, tilt, max_size, kBlockWindowTail), g_ratio);
      rest = coarsen(small, g_ratio);
    }
    auto compose_g = [&](double g_tilt) {
      if (!staged) {
        const std::vector<std::pair<const StepPmf*, double>> groups{{&small, g_count}};
        return std::make_unique<ComposedPld>(groups, g_tilt, max_size);
      }
      const double b = static_cast<double>(block_steps);
      const std::vector<std::pair<const StepPmf*, double>> groups{{&block, blocks}, {&rest, g_count - blocks * b}};
      return std::make_unique<ComposedPld>(groups, g_tilt, max_size);
    };
    g_tilted_ = compose_g(tilt);
    if (tilt > 0.0) g_flat_ = compose_g(0.0);
    g_step_ = g_tilted_->discretization();
    g_low_ = kInf;
    g_high_ = kNegInf;
    g_x_low_ = 0.0;
    for (const ComposedPld* g : {g_tilted_.get(), g_flat_.get()}) {
      if (g == nullptr) continue;
      if (g->has_finite_upper()) {
        g_low_ = std::min(g_low_, g->window_low());
        g_high_ = std::max(g_high_, g->window_high());
        const double lx = g->log_window_sum_lower();
        if (lx > kNegInf) g_x_low_ = std::max(g_x_low_, std::exp(lx));
      }
      if (g->has_cells()) {
        g_low_ = std::min(g_low_, g->cells_low());
        g_high_ = std::max(g_high_, g->cells_high());
      }
    }
    if (!(g_low_ < kInf)) g_low_ = g_high_ = 0.0;
    g_high_ += g_step_;
    g_low_ -= g_step_;
    g_mass_u_ = std::exp(g_tilted_->log_mass_upper()) * (1.0 + 8.0 * kU);
    // Chernoff: sum_K p_K (1 - e^{y - K D})_+ <= e^{-lambda y} (sum_j s_j e^{lambda j D})^(T - H)
    // for the exact composition of the small part's upper masses s_j (the quantity G's
    // upper_finite bounds, after the same loss_slack shift), at lambda = 2^(m/2). Each
    // log-sum-exp over n terms of size at most v errs by less than 8 u (n + 2 + v).
    g_slack_ = g_count * small.loss_slack;
    // The sums by Horner's rule (log_power_sum) on the masses relative to the largest, computed once for every
    // lambda: an exponential per cell and lambda had cost a tenth of a refined split pass (45,000 cells, 69
    // slopes: sigma=0.5, q=1e-7, T=1e7). Where some finite mass is below e^-700 of the largest (it would
    // underflow) or there is no finite mass, the exponentials one by one as before. The rounding: the Horner
    // chains' multiply-adds and r = e^{-lambda D} (within 2 u), raised to powers up to n, err by about 3.25 u n
    // whatever lambda D (measured up to 2,400 u at n = 20,000): that is what the log-sum-exp's 8 u (n + 2 + v),
    // kept here, now covers; on top of it, each mass e^{log_j - top} within u (1 + |log_j - top|), r's argument
    // lambda D within u of itself (raised to n: n lambda D), the log and the shifts within ulps of their sizes:
    // 4 u (n lambda D + 2 max |log_j| + |sum| + |lambda x_0| + 16); and products that go subnormal, each within
    // 2^-1075 against a sum of at least e^-700: (n + 4) 1e-19.
    const std::vector<double>& logs = small.log_upper;
    std::size_t first = 0, last = logs.size();
    while (first < last && logs[first] == kNegInf) ++first;
    while (last > first && logs[last - 1] == kNegInf) --last;
    double top = kNegInf, deepest = kInf, log_size = 0.0;
    for (std::size_t j = first; j < last; ++j) {
      if (logs[j] == kNegInf) continue;
      top = std::max(top, logs[j]);
      deepest = std::min(deepest, logs[j]);
      log_size = std::max(log_size, std::fabs(logs[j]));
    }
    const bool horner = last > first && std::isfinite(top) && top - deepest < 700.0;
    std::vector<double> masses;
    if (horner) {
      masses.resize(last - first);
      for (std::size_t j = first; j < last; ++j) masses[j - first] = logs[j] == kNegInf ? 0.0 : std::exp(logs[j] - top);
    }
    const double n_cells = static_cast<double>(last - first);
    const double x_first = static_cast<double>(small.upper_low + static_cast<long>(first)) * d_fine_;
    const double x_reach = std::max(std::fabs(x_first), std::fabs(x_first + (n_cells - 1.0) * d_fine_));
    std::vector<double> terms(horner ? 0 : logs.size());
    for (int m = -4; m <= 64; ++m) {
      const double lambda = std::pow(2.0, 0.5 * m);
      double log_mgf = kNegInf, margin = 0.0;
      if (horner) {
        const double step = lambda * d_fine_;
        const double sum = log_power_sum(masses.data(), masses.size(), step);
        log_mgf = top + lambda * x_first + sum;
        const double largest = log_size + lambda * x_reach;  // >= every |log_j + lambda x_j|
        margin = 8.0 * kU * (static_cast<double>(logs.size()) + 2.0 + largest) +
                 4.0 * kU * (n_cells * step + 2.0 * log_size + std::fabs(sum) + std::fabs(lambda * x_first) + 16.0) +
                 (n_cells + 4.0) * 1e-19;
      } else {
        double largest = 0.0;
        for (std::size_t j = 0; j < terms.size(); ++j) {
          terms[j] = logs[j] + lambda * static_cast<double>(small.upper_low + static_cast<long>(j)) * d_fine_;
          if (std::isfinite(terms[j])) largest = std::max(largest, std::fabs(terms[j]));
        }
        log_mgf = log_total(terms);
        margin = 8.0 * kU * (static_cast<double>(terms.size()) + 2.0 + largest);
      }
      if (!std::isfinite(log_mgf)) continue;
      g_chernoff_.push_back({lambda, g_count * (log_mgf + margin)});
    }
  } else {
    g_identity_ = true;
    g_low_ = -d_fine_;
    g_high_ = d_fine_;
    g_mass_u_ = 1.0;
    g_x_low_ = 1.0;
  }
  g_mass_p_low_ = g_p(g_low_ - g_step_);
  g_mass_q_ = g_q(g_low_ - g_step_);

  // M = sum_{h <= H} C(T, h) s'^(H - h) r^h on the coarse grid, for the three sequences.
  const StepPmf coarse = coarsen(small, ratio);
  const MParts supports = m_parts(coarse, rare);
  long lo = std::numeric_limits<long>::max(), hi = std::numeric_limits<long>::min();
  for (const auto& kind : supports) {
    for (const Part& p : kind) {
      lo = std::min(lo, rare_max_ * p.low);
      hi = std::max(hi, rare_max_ * (p.low + static_cast<long>(p.logs->size()) - 1));
    }
  }
  std::size_t size = 2;
  while (static_cast<long>(size) < hi - lo + 1 && size <= max_size) size <<= 1;
  if (size > max_size) {
    throw std::invalid_argument("the rare part needs an FFT larger than max_size " + std::to_string(max_size) +
                                " at discretization " + format_value(d_coarse_) + "; increase discretization");
  }
  size_ = size;
  m_start_ = lo;
  m_.push_back(build_m(coarse, rare, count, rare_tilt));
  // M once more at each tilt asked for, capped so that the weights e^{-tilt (k - k_ref)} across the middle
  // of upper_bound and threshold_value (G's window and a few rare cells) stay below e^600, where not within
  // 10 % of a tilt built.
  for (const double wanted : more_rare_tilts) {
    const double span = std::max(g_high_ - g_low_, 0.0) + 4.0 * d_coarse_;
    const double t = std::min(wanted, 600.0 / span);
    bool distinct = t > 0.0;
    for (const MSet& set : m_) distinct = distinct && (t > 1.1 * set.u.tilt || t < 0.9 * set.u.tilt);
    if (distinct) m_.push_back(build_m(coarse, rare, count, t));
  }
}

std::vector<double> SplitComposedPld::rare_tilts() const {
  std::vector<double> tilts;
  for (const MSet& set : m_) tilts.push_back(set.u.tilt);
  return tilts;
}

SplitComposedPld::MSet SplitComposedPld::build_m(const StepPmf& coarse, const StepPmf& rare, double count,
                                                 double rare_tilt) {
  const double h_max = static_cast<double>(rare_max_);
  const MParts parts = m_parts(coarse, rare);
  const std::shared_ptr<const fft::RealPlan> held_plan = fft::real_plan(size_);
  const fft::RealPlan& plan = *held_plan;
  const double eta = fft::error_bound(size_);
  const auto n_mod = static_cast<long>(size_);
  const double lgamma_t = std::lgamma(count + 1.0);
  MSet set;
  Tilted* outs[3] = {&set.u, &set.p, &set.q};
  double tails[3] = {0.0, 0.0, 0.0};
  double magnitude = 0.0;
  for (int kind = 0; kind < 3; ++kind) {
    Tilted& out = *outs[kind];
    out.tilt = rare_tilt + (kind == 2 ? 1.0 : 0.0);
    const double dc = d_coarse_;
    // Tilted, normalised sequences at their absolute index mod N.
    double log_norm[2], l2 = 0.0;
    std::vector<std::complex<double>> spec[2];
    for (int which = 0; which < 2; ++which) {
      const Part& p = parts[kind][which];
      std::vector<double> logs(p.logs->size());
      for (std::size_t j = 0; j < logs.size(); ++j) {
        logs[j] = (*p.logs)[j] + out.tilt * static_cast<double>(p.low + static_cast<long>(j)) * dc;
        if ((*p.logs)[j] > kNegInf) magnitude = std::max(magnitude, std::fabs((*p.logs)[j]) + std::fabs(logs[j]));
      }
      log_norm[which] = logs.empty() ? kNegInf : logsumexp(logs.data(), logs.size());
      std::vector<double> buffer(size_, 0.0);
      if (log_norm[which] > kNegInf) {
        double sq = 0.0;
        for (std::size_t j = 0; j < logs.size(); ++j) {
          long index = (p.low + static_cast<long>(j)) % n_mod;
          if (index < 0) index += n_mod;
          const double v = std::exp(logs[j] - log_norm[which]);
          buffer[static_cast<std::size_t>(index)] += v;
          sq += v * v;
        }
        l2 = std::max(l2, std::sqrt(sq));
      }
      spec[which] = plan.forward(buffer);
    }
    // Term weights a_h = C(T, h) |s~|^(H - h) |r~|^h (tilted norms), scaled by the largest;
    // the untilted total sum_h C(T, h) |s|^(H - h) |r|^h is kept exactly.
    std::vector<double> log_a(static_cast<std::size_t>(rare_max_ + 1), kNegInf);
    double log_max = kNegInf, log_untilted = kNegInf;
    const Part& sp = parts[kind][0];
    const Part& rp = parts[kind][1];
    for (long h = 0; h <= rare_max_; ++h) {
      const double hd = static_cast<double>(h);
      const double binom = lgamma_t - std::lgamma(hd + 1.0) - std::lgamma(count - hd + 1.0);
      auto power = [](double log_base, double n) { return n == 0.0 ? 0.0 : n * log_base; };
      const double v = binom + power(log_norm[0], h_max - hd) + power(log_norm[1], hd);
      const double u = binom + power(sp.log_mass, h_max - hd) + power(rp.log_mass, hd);
      log_a[static_cast<std::size_t>(h)] = std::isnan(v) ? kNegInf : v;
      log_max = std::max(log_max, log_a[static_cast<std::size_t>(h)]);
      if (!std::isnan(u)) log_untilted = log_add(log_untilted, u);
      magnitude = std::max(magnitude, std::isfinite(v) ? std::fabs(v) : 0.0);
    }
    out.log_total = log_untilted;
    // The h > H terms: mass <= |s + r|^T P(Binomial(T, p) > H), p = |r| / |s + r| (Chernoff).
    const double log_sr = log_add(sp.log_mass, rp.log_mass);
    if (rp.log_mass > kNegInf && rare_max_ < count) {
      const double p = std::exp(rp.log_mass - log_sr);
      const double k = h_max + 1.0;
      double log_tail = 0.0;
      if (k >= count) {
        log_tail = count * std::log(p);  // P(every step rare)
      } else if (k / count > p) {
        const double x = k / count;
        log_tail = -count * (x * std::log(x / p) + (1.0 - x) * (std::log1p(-x) - std::log1p(-p)));
      }
      tails[kind] = std::min(std::exp(count * log_sr + log_tail) * (1.0 + 1e-6), 1.0);
    }
    out.c.assign(size_, 0.0);
    if (log_max == kNegInf) {  // no mass at all
      out.log_total = kNegInf;
    } else {
      double weight_sum = 0.0;
      std::vector<double> a(static_cast<std::size_t>(rare_max_ + 1));
      for (long h = 0; h <= rare_max_; ++h) {
        a[static_cast<std::size_t>(h)] = std::exp(log_a[static_cast<std::size_t>(h)] - log_max);
        weight_sum += a[static_cast<std::size_t>(h)];
      }
      std::vector<std::complex<double>> total(size_ / 2 + 1);
      std::vector<std::complex<double>> s_pow(static_cast<std::size_t>(rare_max_ + 1));
      // The products written out (std::complex's operator* checks each for NaN, C99 Annex G);
      // the same operations and roundings.
      auto mul = [](std::complex<double> x, std::complex<double> y) {
        return std::complex<double>(x.real() * y.real() - x.imag() * y.imag(),
                                    x.real() * y.imag() + x.imag() * y.real());
      };
      for (std::size_t k = 0; k < total.size(); ++k) {
        s_pow[0] = 1.0;
        for (long j = 1; j <= rare_max_; ++j) {
          s_pow[static_cast<std::size_t>(j)] = mul(s_pow[static_cast<std::size_t>(j - 1)], spec[0][k]);
        }
        std::complex<double> r_pow = 1.0, acc = 0.0;
        for (long h = 0; h <= rare_max_; ++h) {
          if (h > 0) r_pow = mul(r_pow, spec[1][k]);
          acc += a[static_cast<std::size_t>(h)] * mul(s_pow[static_cast<std::size_t>(rare_max_ - h)], r_pow);
        }
        total[k] = acc;
      }
      const std::vector<double> circular = plan.inverse(total);
      const double inv_n = 1.0 / static_cast<double>(size_);
      for (std::size_t i = 0; i < size_; ++i) {
        long idx = (m_start_ + static_cast<long>(i)) % n_mod;
        if (idx < 0) idx += n_mod;
        out.c[i] = std::max(circular[static_cast<std::size_t>(idx)] * inv_n, 0.0);
      }
      // Round-off in the 2-norm: H + 2 transforms' worth on each term (|spectra| <= 1)
      // and the products and sums of the H + 1 terms.
      out.err = weight_sum * ((h_max + 3.0) * eta * std::max(l2, 1e-300) + (8.0 * h_max + 16.0) * kU);
      out.log_scale = log_max;
    }
    // Suffix sums with decaying weights (non-negative terms; their rounding is charged below).
    out.suffix.assign(size_ + 1, 0.0);
    const double r0 = std::exp(-out.tilt * dc);
    for (std::size_t i = size_; i-- > 0;) out.suffix[i] = out.c[i] + r0 * out.suffix[i + 1];
    double c_total = 0.0;
    for (const double v : out.c) c_total += v;
    out.c_total = c_total * (1.0 + 4.0 * kU * static_cast<double>(size_ + 8));
    // e^{tilt j D_R} for the middles of upper_bound and threshold_value, which span at most G's window and
    // two rare cells (longer ones take the exponentials one by one).
    const double cells = std::ceil(std::max(g_high_ - g_low_, 0.0) / dc) + 4.0;
    const std::size_t longest = std::min(size_, static_cast<std::size_t>(std::min(cells, 1e9))) + 1;
    out.weight.resize(longest);
    for (std::size_t j = 0; j < longest; ++j) out.weight[j] = std::exp(out.tilt * (static_cast<double>(j) * dc));
    if (kind == 0) {
      out.suffix1.assign(size_ + 1, 0.0);
      const double r1 = std::exp(-(out.tilt + 1.0) * dc);
      for (std::size_t i = size_; i-- > 0;) out.suffix1[i] = out.c[i] + r1 * out.suffix1[i + 1];
    }
  }
  // Relative rounding of the inputs (each log within ~4 u of its magnitude, H + 1 factors per term).
  set.rel = (h_max + 2.0) * 8.0 * kU * (2.0 + magnitude) + 4.0 * kU * static_cast<double>(size_ + 8);
  tail_u_ = tails[0];  // (the h > H terms do not depend on the tilt)
  tail_q_ = tails[2];
  return set;
}

std::size_t SplitComposedPld::fine_size() const {
  std::size_t s = 0;
  if (g_tilted_) s = std::max(s, g_tilted_->size());
  if (g_flat_) s = std::max(s, g_flat_->size());
  return s;
}

double SplitComposedPld::g_upper(double e) const {
  if (g_identity_) return e < 0.0 ? -std::expm1(e) * (1.0 + 4.0 * kU) : 0.0;
  double v = g_tilted_->upper_finite(e);
  if (g_flat_) v = std::min(v, g_flat_->upper_finite(e));
  return v;
}

double SplitComposedPld::g_chernoff(double y) const {
  double best = 1.0;
  const double shifted = y - g_slack_;
  for (const auto& [lambda, log_mgf] : g_chernoff_) {
    const double exponent = log_mgf - lambda * shifted;
    best = std::min(best, std::exp(exponent + 8.0 * kU * (std::fabs(lambda * shifted) + std::fabs(log_mgf))));
  }
  return best;
}

double SplitComposedPld::g_p(double y) const {
  if (g_identity_) return y <= 0.0 ? 1.0 : 0.0;
  double v = g_tilted_->tail_p_lower(y);
  if (g_flat_) v = std::max(v, g_flat_->tail_p_lower(y));
  return v;
}

double SplitComposedPld::g_q(double y) const {
  if (g_identity_) return y <= 0.0 ? 1.0 : 0.0;
  double v = g_tilted_->tail_q_upper(y);
  if (g_flat_) v = std::min(v, g_flat_->tail_q_upper(y));
  return v;
}

namespace {

// sqrt(sum_{j >= 0} e^{-2 tilt j D}) (the decaying weights of a suffix), or sqrt(n) without tilt.
double decay_norm(double tilt, double d, std::size_t n) {
  if (tilt > 0.0) return std::sqrt(1.0 / -std::expm1(-2.0 * tilt * d));
  return std::sqrt(static_cast<double>(n));
}

// The middle entries i in [max(i_a + 1, 0), min(i_b, n)) (see middle_range).
struct Range {
  long lo, ref;
};
Range middle_range(long i_a, long i_b, std::size_t n) { return {std::max(i_a + 1, 0L), std::min(i_b, static_cast<long>(n))}; }

// G's piece at each middle entry's loss k_i = (start + i) d: evaluated once per epsilon (or threshold) and
// shared by every set of M (each set had evaluated them again: three sets, six G tails an entry).
template <class F>
void middle_pieces(Range r, long start, double d, F piece, std::vector<double>& out) {
  out.resize(r.ref > r.lo ? static_cast<std::size_t>(r.ref - r.lo) : 0);
  for (long i = r.lo; i < r.ref; ++i) out[static_cast<std::size_t>(i - r.lo)] = piece(static_cast<double>(start + i) * d);
}

// The middle entries of a tilted M sequence, each times its piece:
// sum_i c_i w_i piece_i and sqrt(sum_i (w_i piece_i)^2) (for the round-off charge), with
// w_i = e^{-tilt (k_i - k_ref)} = e^{tilt (ref - i) d} relative to k_ref = the loss of entry ref (the table
// `weight`, e^{tilt j d}, where long enough); the untilted sum is e^{log_scale - tilt k_ref} times the first.
// `rounding`: the weights' relative error, 2 u (tilt (ref - lo) d + 2) (the product tilt j d rounds twice, its
// exponential once), to be charged with the sums' own.
struct Middle {
  double sum, norm, tilt_ref, rounding;  // tilt_ref = -tilt k_ref
};

Middle middle_sum(const std::vector<double>& c, const std::vector<double>& weight, double tilt, long start, double d,
                  Range r, const std::vector<double>& pieces) {
  const double k_ref = static_cast<double>(start + r.ref) * d;
  double sum = 0.0, norm2 = 0.0;
  for (long i = r.lo; i < r.ref; ++i) {
    const auto j = static_cast<std::size_t>(r.ref - i);
    const double f = pieces[static_cast<std::size_t>(i - r.lo)];
    const double w = j < weight.size() ? weight[j] : std::exp(tilt * (static_cast<double>(j) * d));
    sum += c[static_cast<std::size_t>(i)] * w * f;
    norm2 += w * w * f * f;
  }
  const double span = r.ref > r.lo ? tilt * static_cast<double>(r.ref - r.lo) * d : 0.0;
  return {sum, std::sqrt(norm2), -tilt * k_ref, 2.0 * kU * (span + 2.0) * (1.0 + 1e-6)};
}

}  // namespace

// sum_{i <= i_a} M_k U_G(eps - k D_R): every argument is >= g_high, where G's round-off
// floors U_G (about 1e-13 relative), so U_G(g_high) times M's total is one bound. Split
// instead at a loss y1 <= eps - g_high: below it U_G(eps - k D_R) <= U_G's Chernoff bound
// at eps - y1, times M's total; above it M_k = c_i e^{log_scale - tilt k D_R} with
// k D_R > y1 sums to at most e^{log_scale - tilt y1} (sum c + err sqrt(n)), times U_G(g_high).
double SplitComposedPld::edge_upper(const MSet& set, double eps, long i_a) const {
  const Tilted& m = set.u;
  const double total = std::exp(m.log_total);
  const double at_edge = g_upper(g_high_);
  double best = at_edge * total;
  if (g_identity_ || g_chernoff_.empty()) return best;
  const double top = std::min(eps - g_high_, static_cast<double>(m_start_ + i_a) * d_coarse_);
  const double c_sum = m.c_total + m.err * std::sqrt(static_cast<double>(size_));
  for (int j = 0; j <= 16; ++j) {
    const double y1 = top - static_cast<double>(j) * (std::fabs(top) + d_coarse_) / 8.0;
    const double below = total * g_chernoff(eps - y1);
    const double above = std::exp(m.log_scale - m.tilt * y1) * c_sum * at_edge;
    best = std::min(best, (below + above) * (1.0 + 8.0 * kU));
  }
  return best;
}

// delta_u(eps) = sum_k M_k U_G(eps - k D_R), k = m_start + i. G's pieces are at most
// U_G(g_high) where eps - k D_R >= g_high (i <= i_a: bounded with M's exact total),
// the closed form mass - e^{eps - k D_R} X below g_low (i >= i_b: tilted suffix sums),
// and evaluated one by one in between.
double SplitComposedPld::upper_bound(double epsilon_in) const {
  // Each set of M gives a certified bound: the smallest.
  const double eps = epsilon_in - epsilon_slack_;
  const long n = static_cast<long>(size_);
  const double dc = d_coarse_;
  const long i_a = std::min(static_cast<long>(std::floor((eps - g_high_) / dc)) - m_start_, n - 1);
  const long i_b = std::max(static_cast<long>(std::floor((eps - g_low_) / dc)) + 1 - m_start_, i_a + 1);
  thread_local std::vector<double> pieces;
  middle_pieces(middle_range(i_a, i_b, size_), m_start_, dc, [&](double k) { return g_upper(eps - k); }, pieces);
  double best = 1.0;
  for (const MSet& set : m_) best = std::min(best, upper_with(set, epsilon_in, i_a, i_b, pieces));
  return best;
}

double SplitComposedPld::upper_with(const MSet& set, double epsilon_in, long i_a, long i_b,
                                    const std::vector<double>& pieces) const {
  const double eps = epsilon_in - epsilon_slack_;
  const long n = static_cast<long>(size_);
  const double dc = d_coarse_;
  const Tilted& m = set.u;
  if (m.log_total == kNegInf) return std::max(std::min(tail_u_ + inf_upper_, 1.0), std::numeric_limits<double>::denorm_min());
  double value = 0.0;
  if (i_a >= 0) value += edge_upper(set, eps, i_a);
  const Middle mid = middle_sum(m.c, m.weight, m.tilt, m_start_, dc, middle_range(i_a, i_b, size_), pieces);
  // The weights e^{-tilt (k - k_ref)} overflow where tilt times the span of the middle exceeds
  // ~709 (then 0 * inf = NaN): no finite bound is known there, and 1 is the certified answer.
  // (sigma=1.06, q=3e-7, T=3.8e7 at tilt 1461 had returned 8e-20, the charged tail alone.)
  if (!(std::isfinite(mid.sum) && std::isfinite(mid.norm))) return 1.0;
  const double middle = mid.sum * (1.0 + 4.0 * kU * static_cast<double>(n + 8) + mid.rounding) +
                        m.err * mid.norm * (1.0 + mid.rounding);
  if (middle > 0.0) value += std::exp(m.log_scale + mid.tilt_ref + std::log(middle));
  if (i_b < n) {
    const auto b = static_cast<std::size_t>(std::max(i_b, 0L));
    const double kb = static_cast<double>(m_start_ + static_cast<long>(b)) * dc;
    // sum_{i >= b} M_i (g_mass - e^{eps - k_i} X): the computed entries' part, and M's round-off (err, the entries'
    // 2-norm error in tilted units) times the 2-norm of the weights e^{-tilt (k_i - k_b)} (g_mass - e^{eps - k_i} X)
    // (Cauchy-Schwarz). Near i_b those weights can be far below g_mass: charged at g_mass (and X's part again)
    // they had set the upper bound where a few hits at a tiny delta cap M's tilt (sigma=0.578, q=1.98e-8, T=8.5e6,
    // epsilon(1.94e-12): 0.006492 against 0.006240 with the weights).
    const double log_m = m.log_scale - m.tilt * kb;
    const double mass = m.suffix[b] > 0.0 ? std::exp(log_m + std::log(m.suffix[b])) : 0.0;
    const double with_x = m.suffix1[b] > 0.0 && g_x_low_ > 0.0
                              ? std::exp(std::log(g_x_low_) + log_m - kb + eps + std::log(m.suffix1[b]))
                              : 0.0;
    double part = std::max(g_mass_u_ * mass * (1.0 + 4.0 * kU * static_cast<double>(n + 8)) -
                               with_x * (1.0 - 4.0 * kU * static_cast<double>(n + 8)),
                           0.0);
    // The weights: g_mass - e^{eps - k_i} X <= max(0, alpha + beta j) (j = i - b, 1 - e^{-x} <= x) with
    // A = e^{eps - k_b} X / g_mass, alpha = g_mass (1 - A), beta = g_mass A D_R; their 2-norm against
    // e^{-tilt j D_R} in closed form (the sums of x^j, j x^j and j^2 x^j, x = e^{-2 tilt D_R}), or, where that
    // fails, the plain bound g_mass sqrt(sum x^j) + e^{eps - k_b} X sqrt(sum x'^j) taken before.
    const double plain = g_mass_u_ * decay_norm(m.tilt, dc, size_) +
                         (g_x_low_ > 0.0 ? std::exp(std::min(eps - kb, 700.0)) * g_x_low_ : 0.0) *
                             decay_norm(m.tilt + 1.0, dc, size_);
    double norm = plain;
    if (m.tilt > 0.0 && g_mass_u_ > 0.0) {
      const double a_b = std::min(std::exp(std::min(eps - kb, 700.0)) * g_x_low_ / g_mass_u_, 1e300);
      const double alpha = g_mass_u_ * std::max(1.0 - a_b, 0.0);
      const double beta = g_mass_u_ * a_b * dc;
      const double gap = -std::expm1(-2.0 * m.tilt * dc);  // 1 - x
      const double x = 1.0 - gap;
      const double sum = alpha * alpha / gap + 2.0 * alpha * beta * x / (gap * gap) +
                         beta * beta * x * (1.0 + x) / (gap * gap * gap);
      if (std::isfinite(sum) && gap > 0.0) norm = std::min(plain, std::sqrt(sum) * (1.0 + 16.0 * kU));
    }
    if (m.err > 0.0) part += std::exp(log_m + std::log(m.err * norm));
    value += part;
  }
  value *= std::exp(set.rel);
  if (std::isnan(value)) return 1.0;  // (inf - inf in the suffix part: nothing is known)
  return std::max(std::min(value + tail_u_ + inf_upper_, 1.0), std::numeric_limits<double>::denorm_min());
}

// A lower bound on P(Z >= z) for the statistic Z = K_M D_R + K_G D_S (labels) from one set
// of M: 0 above G's windows; explicit in the middle; a constant times a suffix below.
double SplitComposedPld::p_tail(const MSet& set, long i_a, long i_b, const std::vector<double>& pieces) const {
  const long n = static_cast<long>(size_);
  const double dc = d_coarse_;
  const double rel = 4.0 * kU * static_cast<double>(n + 8);
  const Tilted& mp = set.p;
  double p_value = 0.0;
  if (mp.log_total > kNegInf) {
    const Middle mid = middle_sum(mp.c, mp.weight, mp.tilt, m_start_, dc, middle_range(i_a, i_b, size_), pieces);
    // (Weights that overflowed, NaN or inf: this part is dropped, which only lowers P.)
    const bool finite = std::isfinite(mid.sum) && std::isfinite(mid.norm);
    const double part = finite ? mid.sum * (1.0 - rel - mid.rounding) - mp.err * mid.norm * (1.0 + mid.rounding) : 0.0;
    double total = part > 0.0 ? std::exp(mp.log_scale + mid.tilt_ref + std::log(part)) : 0.0;
    if (i_b < n) {
      const auto b = static_cast<std::size_t>(std::max(i_b, 0L));
      const double kb = static_cast<double>(m_start_ + static_cast<long>(b)) * dc;
      const double s = mp.suffix[b] * (1.0 - rel) - mp.err * decay_norm(mp.tilt, dc, size_);
      if (s > 0.0 && g_mass_p_low_ > 0.0) total += std::exp(std::log(g_mass_p_low_) + mp.log_scale - mp.tilt * kb + std::log(s));
    }
    p_value = total * std::exp(-set.rel);
  }
  p_value += inf_lower_;
  // (An overflowed scale proves nothing.)
  return p_value > 0.0 && !std::isinf(p_value) ? p_value : 0.0;
}

// An upper bound on Q(Z >= z) from one set of M (NaN where it proves nothing): M's exact
// total times Q_G(g_high) above; explicit; a suffix below.
double SplitComposedPld::q_tail(const MSet& set, long i_a, long i_b, const std::vector<double>& pieces) const {
  const long n = static_cast<long>(size_);
  const double dc = d_coarse_;
  const double rel = 4.0 * kU * static_cast<double>(n + 8);
  const Tilted& mq = set.q;
  double q_value = 0.0;
  if (mq.log_total > kNegInf) {
    double total = 0.0;
    if (i_a >= 0) total += g_q(g_high_) * std::exp(mq.log_total);
    const Middle mid = middle_sum(mq.c, mq.weight, mq.tilt, m_start_, dc, middle_range(i_a, i_b, size_), pieces);
    // Q is taken high: a middle whose weights overflowed (NaN or inf) leaves no test here.
    // (P's side may only drop mass: a non-finite P middle counts as 0 above.)
    if (!(std::isfinite(mid.sum) && std::isfinite(mid.norm))) return std::numeric_limits<double>::quiet_NaN();
    const double middle = mid.sum * (1.0 + rel + mid.rounding) + mq.err * mid.norm * (1.0 + mid.rounding);
    if (middle > 0.0) total += std::exp(mq.log_scale + mid.tilt_ref + std::log(middle));
    if (i_b < n) {
      const auto b = static_cast<std::size_t>(std::max(i_b, 0L));
      const double kb = static_cast<double>(m_start_ + static_cast<long>(b)) * dc;
      const double s = mq.suffix[b] * (1.0 + rel) + mq.err * decay_norm(mq.tilt, dc, size_);
      if (s > 0.0 && g_mass_q_ > 0.0) total += std::exp(std::log(g_mass_q_) + mq.log_scale - mq.tilt * kb + std::log(s));
    }
    q_value = total * std::exp(set.rel);
  }
  return q_value + tail_q_;
}

// P(Z >= z) - e^eps Q(Z >= z): P from the set that bounds it highest, Q from the one that bounds
// it lowest (each bound certified on its own).
double SplitComposedPld::threshold_value(double epsilon, double z) const {
  const long n = static_cast<long>(size_);
  const double dc = d_coarse_;
  const long i_a = std::min(static_cast<long>(std::floor((z - g_high_) / dc)) - m_start_, n - 1);
  const long i_b = std::max(static_cast<long>(std::floor((z - g_low_) / dc)) + 1 - m_start_, i_a + 1);
  const Range range = middle_range(i_a, i_b, size_);
  thread_local std::vector<double> pieces;
  middle_pieces(range, m_start_, dc, [&](double k) { return g_p(z - k); }, pieces);
  double p_value = 0.0;
  for (const MSet& set : m_) p_value = std::max(p_value, p_tail(set, i_a, i_b, pieces));
  if (!(p_value > 0.0)) return 0.0;
  middle_pieces(range, m_start_, dc, [&](double k) { return g_q(z - k); }, pieces);
  double q_value = std::numeric_limits<double>::infinity();
  for (const MSet& set : m_) {
    const double v = q_tail(set, i_a, i_b, pieces);
    if (!std::isnan(v)) q_value = std::min(q_value, v);
  }
  if (!std::isfinite(q_value)) return 0.0;
  const double log_p = std::log(p_value), log_q = epsilon + std::log(q_value);
  if (!(q_value > 0.0)) return p_value * (1.0 - 8.0 * kU);
  // P (1 - e^x), x = log_q - log_p: x errs by a few ulps of the magnitudes in it, and
  // 1 - e^x by that over 1 - e^x (relative): taken off (a test whose two sides agree to
  // more digits than the logs carry gives 0).
  const double x = log_q - log_p;
  if (!(x < 0.0)) return 0.0;
  const double shrink = 64.0 * kU * (std::fabs(log_p) + std::fabs(log_q) + std::fabs(epsilon) + 8.0) / -std::expm1(x);
  return std::exp(log_p + log1mexp(x)) * (1.0 - 8.0 * kU) * std::max(1.0 - shrink, 0.0);
}

double SplitComposedPld::lower_bound(double epsilon, double* offset) const {
  // Any threshold gives a valid bound. The label sums need not track the loss
  // exactly (rounding of many tiny losses biases them), so the best threshold is
  // searched over a span of G's windows around eps, then refined around the best.
  double best = 0.0, best_z = epsilon;
  const double width = std::max(g_high_ - g_low_, 4.0 * d_coarse_);
  const int points = 160;
  const double step = 3.0 * width / points;
  for (int j = 0; j <= points; ++j) {
    const double z = epsilon - width + static_cast<double>(j) * step;
    const double v = threshold_value(epsilon, z);
    if (v > best) {
      best = v;
      best_z = z;
    }
  }
  const double fine = std::max(step / 16.0, g_step_);
  const double centre = best_z;
  for (int j = -16; j <= 16; ++j) {
    const double z = centre + static_cast<double>(j) * fine;
    const double v = threshold_value(epsilon, z);
    if (v > best) {
      best = v;
      best_z = z;
    }
  }
  if (offset != nullptr) *offset = best_z - epsilon;
  return std::min(std::max(best, inf_lower_), 1.0);
}

double SplitComposedPld::lower_bound_near(double epsilon, double* offset) const {
  // The best threshold moves with eps (about z ~ eps + offset): a local search
  // around it, a fifth of lower_bound's tests, for the bisection over eps.
  const double width = std::max(g_high_ - g_low_, 4.0 * d_coarse_);
  const double step = 3.0 * width / 160.0;
  const double fine = std::max(step / 16.0, g_step_);
  const double centre = epsilon + *offset;
  double best = 0.0, best_z = centre;
  auto test = [&](double z) {
    const double v = threshold_value(epsilon, z);
    if (v > best) {
      best = v;
      best_z = z;
    }
  };
  for (int j = -4; j <= 4; ++j) test(centre + static_cast<double>(j) * step);
  for (int j = -16; j <= 16; ++j) test(centre + static_cast<double>(j) * fine);
  if (best > 0.0) *offset = best_z - epsilon;
  return std::min(std::max(best, inf_lower_), 1.0);
}

void SplitComposedPld::delta_bounds(double epsilon, double* lower, double* upper) const {
  if (std::isnan(epsilon)) fail("epsilon", "a number", epsilon);
  *upper = upper_bound(epsilon);
  *lower = std::min(lower_bound(epsilon, nullptr), *upper);
}

void SplitComposedPld::epsilon_bounds(double delta, double* lower, double* upper) const {
  if (!(delta > 0.0 && delta < 1.0)) fail("delta", "in (0, 1)", delta);
  auto up = [&](double e) { return upper_bound(e); };
  // The first positive lower bound comes from the full threshold search; the bisection
  // after it searches near that threshold only (every threshold gives a valid bound).
  double offset = 0.0;
  bool located = false;
  auto down = [&](double e) {
    double v;
    if (located) {
      v = lower_bound_near(e, &offset);
    } else {
      v = lower_bound(e, &offset);
      located = v > inf_lower_;
    }
    return std::min(v, upper_bound(e));
  };
  const double rare_top = static_cast<double>(m_start_ + static_cast<long>(size_)) * d_coarse_;  // past M's support
  const double stop = std::max(g_high_, 0.0) + std::max(rare_top, 0.0) + 1.0;
  // Each bound costs a threshold search or a sum over the rare part: the bisections stop at
  // 1e-7 of epsilon (far inside any accuracy target; 1e-10 took ten more evaluations each).
  detail::invert_delta(up, down, delta, stop, 1e-6, lower, upper, detail::kInversionWidth);
}

}  // namespace dpacct::pld

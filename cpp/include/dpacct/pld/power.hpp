// The FFT power of non-negative sequences on a lattice: the one place where
// distributions are convolved, shared by the PLD composer (compose.hpp) and by
// mechanisms whose own discretisation is a sum of independent parts (the
// balls-in-bins likelihood ratio, allocation.hpp). Each sequence is tilted by
// e^{slope k D} and normalised, placed at its absolute index mod N, raised to its
// count in the Fourier domain and transformed back on a window of N lattice
// points; the round-off is bounded along the composed spectrum.
#pragma once

#include <complex>
#include <cstddef>
#include <memory>
#include <vector>

#include "dpacct/cached.hpp"
#include "dpacct/fft.hpp"

namespace dpacct::pld {

// One tilted, normalised step sequence: p[j] at grid index low + j.
struct Tilted {
  long low = 0;
  CachedVector<double> p;
  double log_norm = 0.0;      // log of the normaliser (untilted mass = p e^{log_norm - slope K D})
  double l2 = 0.0;            // ||p||_2
  double max_rounding = 0.0;  // relative rounding of the entries at >= e^-50 of the total
  double absolute_rounding = 0.0;  // summed rounding error of the smaller ones (see tilt_sequence)
  // The entries' mean rounding: with p_j the exact entries (the smaller ones taken as exact, their error
  // being absolute_rounding) and p~_j the computed ones, log rho for rho = sum p~_j / sum p_j lies in
  // [log_mean_low, log_mean_high], and |p~_j / (rho p_j) - 1| <= spread for every j. Without a precise
  // mean (tilt_sequence's mean_count) the interval is [log(1 - r), log(1 + r)], r = max_rounding: the
  // composer's charge for T steps is then T r; with it, T times the interval's width (at most 1e-14 / T +
  // ~1e-23) and a deviation of order sqrt(T) spread (compose.cpp, ComposedPld's label charges).
  double log_mean_low = 0.0, log_mean_high = 0.0;
  double spread = 0.0;
  double log_total = 0.0;     // log sum_j p~_j, rounded up
  bool empty = false;         // no mass at all
};

// The tilted, normalised sequence of log-masses log_mass[j] at lattice index low + j
// (lattice spacing d): p[j] = e^{log_mass[j] + slope (low + j) d - log_norm}.
// With `extra` (same length), the log-masses are log_mass[j] + extra[j], the sum carried
// exactly like the rest of the exponent (the shared labels' P~ = Q~ e^{own}, step.hpp).
// With mean_count > 0 (the number of times the composer takes the sequence), the entries' mean rounding
// (Tilted::log_mean_low) is computed from double-double values of the exact entries (exp_double_double,
// ~46 ns each), over the largest entries until the others' mass is below 1e-14 / (mean_count r): those
// count at their worst, r each, which costs at most 1e-14 in the composed factor.
Tilted tilt_sequence(const std::vector<double>& log_mass, long low, double slope, double d,
                     const std::vector<double>* extra = nullptr, double mean_count = 0.0);

// e^{hi + lo} as an unevaluated sum *out_hi + *out_lo of two doubles (double-double arithmetic: Dekker
// 1971; Joldes, Muller and Popescu, "Tight and rigorous error bounds for basic building blocks of
// double-word arithmetic", ACM TOMS 44(2), 2017) for |hi| <= 600 and |lo| <= 1e-6, within
// kExpDoubleDoubleError of the exact value (relative): hi + lo = (256 e + j) log(2) / 256 + r, |r| <= 0.0014,
// e^{hi + lo} = 2^e 2^{j / 256} (1 + m), m = e^r - 1 by its Taylor series (r and r^2 / 2 in double-double,
// the terms r^3 / 6 ... r^7 / 5040 in double), and 2^{j / 256} from a table built once by a slower
// double-double exponential (its own error below 2e-30).
constexpr double kExpDoubleDoubleError = 1e-23;  // the analysis gives 3e-25 (power.cpp)
void exp_double_double(double hi, double lo, double* out_hi, double* out_lo);

// Chernoff window of a sum of independent steps (tilted PMFs): the losses
// [low, high] outside which the composed mass is <= e^{log_tail} per side,
// from P(S >= t) <= exp(K(s) - s t) and P(S <= t) <= exp(K(-s) + s t),
// K(s) = sum_g count_g log sum_j p_gj e^{s (low_g + j) D}, minimised over a
// geometric set of slopes around 1 / sd. Returns false if no slope gives a
// finite bound (overflowing cumulants).
bool chernoff_window(const std::vector<const Tilted*>& seqs, const std::vector<double>& counts, double d,
                     double log_tail, double* low, double* high);

// The whole composed support [sum count low, sum count high] of a kind of sequence, in grid units.
void full_support(const std::vector<const Tilted*>& seqs, const std::vector<double>& counts, double* low,
                  double* high);

// Vectors reused by successive power_window calls (fresh pages of large vectors cost
// about as much as a transform).
struct Workspace {
  std::vector<double> buffer, circular, bound_s, bound_p, rho;
  std::vector<std::complex<double>> spectrum, total, rest;
  std::vector<unsigned char> dead;
  std::vector<std::size_t> live;
  CachedVector<double> labels_p, labels_q;  // a composer's own use: the composed entries whose sums it keeps
  bool thorough = false;  // a larger budget of direct sums for the live frequencies (see below)
  // Twiddles exp(-2 pi i m / N) in long double for the direct sums, by the low and the high bits of m (power.cpp).
  std::vector<std::complex<long double>> twiddle_low, twiddle_high;
  std::size_t twiddle_size = 0;
  unsigned twiddle_shift = 0;
};

// A Workspace borrowed from a process-wide pool for one composition and handed back on
// destruction, so that successive queries reuse its vectors' pages (as dpacct/cached.hpp does
// for the vectors a composition keeps): fresh pages of large vectors are zero-filled by the
// kernel on first touch. A workspace whose vectors hold more than kPooledWorkspaceBytes (about
// 68.5 bytes per point: grids above 2^18 points) is freed instead, and the pool keeps at most
// kPooledWorkspaces of them.
// Thread-safe; release_workspaces() frees the pooled ones.
constexpr std::size_t kPooledWorkspaceBytes = std::size_t{32} << 20;
constexpr std::size_t kPooledWorkspaces = 2;
// While a query runs (dpacct::holding(), cached.hpp) one workspace of up to kPooledDuringQuery bytes is kept
// too (about 287 MB at 2^22 points); trim_workspaces() frees it after the query.
constexpr std::size_t kPooledDuringQuery = std::size_t{512} << 20;
void release_workspaces() noexcept;
void trim_workspaces() noexcept;
std::size_t pooled_workspace_bytes() noexcept;  // the bytes the pool holds now
class PooledWorkspace {
 public:
  PooledWorkspace();
  ~PooledWorkspace();
  PooledWorkspace(const PooledWorkspace&) = delete;
  PooledWorkspace& operator=(const PooledWorkspace&) = delete;
  Workspace& operator*() { return *ws_; }
  Workspace* operator->() { return ws_.get(); }

 private:
  std::unique_ptr<Workspace> ws_;
};
// The bytes a workspace's vectors hold (their capacities).
std::size_t workspace_bytes(const Workspace& ws);

// Composes the sequences, seqs[g] count[g] times each, on the lattice window
// [start, start + N), N = plan.size(), and returns the tilted composed entries
// (circular: mass outside the window is aliased in; clipped at 0). With
// single_size > 0 (one sequence, count 1) no transform is made: its own entries on
// [start, start + single_size), exactly.
//
// ROUND-OFF (returned in *error: a bound on the 2-norm of the error of the returned
// entries). Each forward transform of a normalised non-negative sequence errs by at
// most e = fft::error_bound(N) + 16 u in every component (each output is a depth-log2 N
// tree of butterflies over inputs of total modulus 1; Higham, "Accuracy and Stability of
// Numerical Algorithms", 2nd ed., Sec. 24.1, componentwise). With b_k = |z_k| + e >= the
// exact and the computed moduli, the product of powers errs by at most
// S_k = sum_g T_g e b_gk^{T_g - 1} prod_{g' != g} b_g'k^{T_g'} (mean value theorem), the
// powers and products by rho |Z_k| (rho ~ 8 u T: repeated squaring), and the inverse transform by
// error_bound(N) ||Z||; Parseval turns the spectrum's 2-norm into the entries'. Unlike a
// bound of T e ||p||_2 this follows the composed distribution: the spectrum of a spread
// composition decays, so far fewer than T e of error remain.
//
// LIVE FREQUENCIES. Where T is large only the few frequencies with b^T > e^-30 carry the
// error, and there both T e and rho ~ 8 u T grow with T (T = 1e8: 7e-6 and 2e-7 per
// frequency at N = 2^22). When those frequencies times the sequence's length are at most
// N / 8 (the extended-precision sums cost several times a transform's work per term;
// N log2(N) / 32 with Workspace::thorough, for queries whose answer is a small difference
// of large masses, such as delta(0)), they
// are recomputed as direct sums in extended precision (x87 long double, unit round-off
// u' = 2^-64; skipped where long double has no more digits than double, or the FPU does not
// round to them), with twiddles exp(-2 pi i m / N) from two tables of cosl/sinl (by the low and the high bits of
// m): each errs by at most 4 u' (n / 64 + 193) times the sequence's mass (n terms), and their powers
// (repeated squaring in long double) by 16 u' (T + log2 T + 2) plus 24 u for the return to
// double and the product over the groups.
//
// BULK AND REST. Where a sequence is longer than that budget / live - 80 entries (128 on plain grids; one step's long
// tail of rare losses beside a spike of common ones, at tiny q), its heaviest window of that
// many entries is summed directly and the rest enters through its own transform, whose error
// is e times the rest's mass: the error of a live frequency is then
// 4 u' (len / 64 + 193) m_bulk (1.01) + e m_rest instead of e (direct sums taken per block of 64).
// `stats`, when given, counts the frequencies recomputed directly and whether a bulk split was used.
struct PowerStats {
  std::size_t direct = 0;  // live frequencies recomputed directly, over all groups
  bool bulk_split = false; // some group's direct sums covered only its bulk
};
// `entry_error`, when given, receives (added) a bound on each entry's error on its own: the
// spectrum's error bounds summed (a 1-norm) over N, plus the inverse transform's 2-norm term.
// Where few frequencies carry the error it is far below the 2-norm bound.
void power_window(const std::vector<const Tilted*>& seqs, const std::vector<double>& counts,
                  const fft::RealPlan& plan, long start, std::size_t single_size, Workspace& ws,
                  CachedVector<double>& out, double* error, PowerStats* stats = nullptr,
                  double* entry_error = nullptr);

}  // namespace dpacct::pld

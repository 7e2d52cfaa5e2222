// The one place that knows how FFTs are done: an iterative radix-2 complex FFT
// for power-of-two sizes with precomputed twiddles (two stages fused per pass
// over memory, on split real and imaginary arrays).
#pragma once

#include <complex>
#include <cstddef>
#include <memory>
#include <vector>

namespace dpacct::fft {

// A reusable plan for transforms of size n (a power of two >= 1).
// Throws std::invalid_argument if n is not a power of two.
//
// The transform works on split arrays (real parts, imaginary parts): the butterflies of one
// stage then run over contiguous k, which the compiler vectorises (and, on x86-64 Linux with
// GCC, also builds for AVX2, chosen at run time). Every element still goes through the same
// multiplications and additions in the same order as in the textbook radix-2 transform, and
// no fused multiply-add is formed (-ffp-contract=off), so the result is the same to the bit on
// every machine and Higham's bound (error_bound) applies unchanged.
class Plan {
 public:
  explicit Plan(std::size_t n);
  std::size_t size() const { return n_; }
  // In-place forward transform X_k = sum_j x_j exp(-2 pi i jk/n) (inverse: +i, no 1/n).
  // Not thread-safe: the plan keeps one work buffer for the interleaved layout.
  void forward(std::vector<std::complex<double>>& data) const { transform(data, false); }
  void inverse(std::vector<std::complex<double>>& data) const { transform(data, true); }
  // The same on split arrays of length n that already hold the input in bit-reversed
  // order (entry j at position bit_reversed(j)); the result comes out in natural order.
  void transform_bit_reversed(double* re, double* im, bool inverse) const;
  std::size_t bit_reversed(std::size_t j) const { return bit_reversed_[j]; }
  const std::size_t* bit_reversed_table() const { return bit_reversed_.data(); }

 private:
  void transform(std::vector<std::complex<double>>& data, bool inverse) const;
  std::size_t n_;
  // Per stage len: exp(-2 pi i k / len), k < len/2, at offset len/2 - 1 (split in two tables).
  std::vector<double> stage_re_, stage_im_;
  std::vector<std::size_t> bit_reversed_;
  mutable std::vector<double> work_;  // split real and imaginary parts (split_buffers)
};

// Points *re and *im at two arrays of n doubles inside `work` (resized as needed).
void split_buffers(std::vector<double>& work, std::size_t n, double** re, double** im);

// Real-input transforms of size n (a power of two >= 2) through one complex
// transform of size n/2: the spectrum of a real sequence is Hermitian, so only
// its first n/2 + 1 entries are kept.
class RealPlan {
 public:
  explicit RealPlan(std::size_t n);
  std::size_t size() const { return n_; }
  // X_k = sum_j x_j exp(-2 pi i jk/n) for k = 0..n/2, from real x of length n.
  std::vector<std::complex<double>> forward(const std::vector<double>& x) const;
  // x_j = sum_k X_k exp(+2 pi i jk/n) (no 1/n) from the half spectrum X_0..X_{n/2}.
  std::vector<double> inverse(const std::vector<std::complex<double>>& spectrum) const;
  // The same into caller-owned vectors (resized as needed): repeated transforms of one
  // size then allocate nothing (fresh pages of large vectors cost as much as a transform).
  // Not thread-safe: the plan keeps its work vectors.
  void forward(const std::vector<double>& x, std::vector<std::complex<double>>& out) const;
  void inverse(const std::vector<std::complex<double>>& spectrum, std::vector<double>& out) const;

 private:
  std::size_t n_;
  Plan half_;
  std::vector<std::complex<double>> twiddles_;  // exp(-2 pi i k / n), k <= n/2
  mutable std::vector<double> work_;  // the half-size complex transform (split_buffers)
};

// A plan of size n for the calling thread (building its tables costs about as much as a
// transform). Plans up to kCachedPlanMax are kept for good (at most about 24 * 2 kCachedPlanMax
// bytes, 12 MB, per thread); a larger one only while a query scope is open (dpacct::holding(),
// cached.hpp), the last one built, about 24 n bytes (100 MB at 2^22 points): outside a scope
// it is built for the caller alone. The caller holds the pointer while it uses the plan.
constexpr std::size_t kCachedPlanMax = std::size_t{1} << 18;
std::shared_ptr<const RealPlan> real_plan(std::size_t n);
// Frees the calling thread's large plan kept for a query scope (see real_plan).
void release_large_plan() noexcept;

// Relative error bound (2-norm) of one transform of size n:
// ||fl(FFT x) - FFT x|| <= error_bound(n) * ||FFT x||, from Higham, "Accuracy and
// Stability of Numerical Algorithms", 2nd ed., Thm 24.2, with mu <= 4 ulps for
// precomputed twiddles; doubled for safety.
double error_bound(std::size_t n);

}  // namespace dpacct::fft

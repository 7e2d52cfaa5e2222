#include "dpacct/fft.hpp"

#include "dpacct/cached.hpp"

#include <algorithm>
#include <cfloat>
#include <map>
#include <memory>
#include <cmath>
#include <stdexcept>
#include <string>

namespace dpacct::fft {

Plan::Plan(std::size_t n) : n_(n) {
  if (n == 0 || (n & (n - 1)) != 0) {
    throw std::invalid_argument("fft size must be a power of two, got " + std::to_string(n));
  }
  // Twiddles exp(-2 pi i k / n), k < n/2, each from its own cos/sin (not by recurrence:
  // error <= 1 ulp each). Stage `len` uses exp(-2 pi i k / len) = entry k (n / len), k < len/2:
  // copied stage after stage (n - 1 entries in all), so that the reads of every stage are
  // sequential. The values are copies, so the error analysis is unchanged.
  std::vector<double> cos_table(n / 2), sin_table(n / 2);
  for (std::size_t k = 0; k < n / 2; ++k) {
    const double angle = -2.0 * M_PI * static_cast<double>(k) / static_cast<double>(n);
    cos_table[k] = std::cos(angle);
    sin_table[k] = std::sin(angle);
  }
  stage_re_.reserve(n);
  stage_im_.reserve(n);
  for (std::size_t len = 2; len <= n; len <<= 1) {
    const std::size_t stride = n / len;
    for (std::size_t k = 0; k < len / 2; ++k) {
      stage_re_.push_back(cos_table[k * stride]);
      stage_im_.push_back(sin_table[k * stride]);
    }
  }
  bit_reversed_.assign(n, 0);
  std::size_t bits = 0;
  while ((std::size_t{1} << bits) < n) ++bits;
  // rev(i) from rev(i/2): drop i's lowest bit and put it on top. O(n), not O(n log n).
  for (std::size_t i = 1; i < n; ++i) {
    bit_reversed_[i] = (bit_reversed_[i >> 1] >> 1) | ((i & 1U) << (bits - 1));
  }
}

namespace {

#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__) && defined(__linux__) && defined(__GLIBC__)
// Built twice, for AVX2 and for the baseline, and chosen at load time (an ifunc: glibc only). AVX2 adds no fused
// multiply-add (that is FMA's own flag) and -ffp-contract=off forms none: both builds round
// every operation alike, so their results are the same to the bit.
#define DPACCT_FFT_CLONES __attribute__((target_clones("avx2", "default")))
#else
#define DPACCT_FFT_CLONES
#endif

// Two consecutive radix-2 stages (len, 2 len) of the decimation-in-time transform on the
// block [start, start + 2 len), fused into one pass (radix 2^2): for each k < len/2 the four
// points k, k + len/2, k + len, k + 3 len/2 go through the two butterflies of stage len and
// then the two of stage 2 len, each (a, b) <- (a + w b, a - w b) with the product w b
// written out (tr = wr br - wi bi, ti = wr bi + wi br; std::complex's operator* adds NaN/inf
// recovery branches, C99 Annex G, that cost time and change nothing for finite data).
// `sign` is -1 for the inverse (conjugate twiddles: the negation is exact).
DPACCT_FFT_CLONES
void fused_stages(double* __restrict re, double* __restrict im, std::size_t n, std::size_t len,
                  const double* __restrict w1r, const double* __restrict w1i, const double* __restrict w2r,
                  const double* __restrict w2i, double sign) {
  const std::size_t half = len / 2;
  for (std::size_t start = 0; start < n; start += 2 * len) {
    double* __restrict r0 = re + start;
    double* __restrict i0 = im + start;
    for (std::size_t k = 0; k < half; ++k) {
      const double x0r = r0[k], x0i = i0[k];
      const double x1r = r0[k + half], x1i = i0[k + half];
      const double x2r = r0[k + len], x2i = i0[k + len];
      const double x3r = r0[k + len + half], x3i = i0[k + len + half];
      const double ar = w1r[k], ai = sign * w1i[k];
      // stage len: (x0, x1) and (x2, x3) with w1
      const double t1r = ar * x1r - ai * x1i, t1i = ar * x1i + ai * x1r;
      const double y0r = x0r + t1r, y0i = x0i + t1i, y1r = x0r - t1r, y1i = x0i - t1i;
      const double t3r = ar * x3r - ai * x3i, t3i = ar * x3i + ai * x3r;
      const double y2r = x2r + t3r, y2i = x2i + t3i, y3r = x2r - t3r, y3i = x2i - t3i;
      // stage 2 len: (y0, y2) with w2[k] and (y1, y3) with w2[k + half]
      const double br = w2r[k], bi = sign * w2i[k];
      const double u2r = br * y2r - bi * y2i, u2i = br * y2i + bi * y2r;
      const double cr = w2r[k + half], ci = sign * w2i[k + half];
      const double u3r = cr * y3r - ci * y3i, u3i = cr * y3i + ci * y3r;
      r0[k] = y0r + u2r;
      i0[k] = y0i + u2i;
      r0[k + len] = y0r - u2r;
      i0[k + len] = y0i - u2i;
      r0[k + half] = y1r + u3r;
      i0[k + half] = y1i + u3i;
      r0[k + len + half] = y1r - u3r;
      i0[k + len + half] = y1i - u3i;
    }
  }
}

// One plain radix-2 stage of length len (the last one, for an odd number of stages).
DPACCT_FFT_CLONES
void single_stage(double* __restrict re, double* __restrict im, std::size_t n, std::size_t len,
                  const double* __restrict wr, const double* __restrict wi, double sign) {
  const std::size_t half = len / 2;
  for (std::size_t start = 0; start < n; start += len) {
    double* __restrict r0 = re + start;
    double* __restrict i0 = im + start;
    for (std::size_t k = 0; k < half; ++k) {
      const double ar = wr[k], ai = sign * wi[k];
      const double br = r0[k + half], bi = i0[k + half];
      const double tr = ar * br - ai * bi, ti = ar * bi + ai * br;
      r0[k + half] = r0[k] - tr;
      i0[k + half] = i0[k] - ti;
      r0[k] += tr;
      i0[k] += ti;
    }
  }
}

}  // namespace

void split_buffers(std::vector<double>& work, std::size_t n, double** re, double** im) {
  // One buffer, the imaginary parts kPad doubles after the real ones: two arrays of a power-of-two
  // size apart would put the eight points of a fused butterfly in the same cache sets.
  constexpr std::size_t kPad = 24;
  work.resize(2 * n + kPad);
  *re = work.data();
  *im = work.data() + n + kPad;
}

namespace {

// Stages first_len, 2 first_len, ..., last_len of the transform (each of length len combines
// pairs of transforms of length len/2) on every block of last_len points in [0, size).
void run_stages(double* re, double* im, std::size_t size, std::size_t first_len, std::size_t last_len,
                const double* wr, const double* wi, double sign) {
  std::size_t len = first_len;
  if (len == 2 && last_len >= 4) {
    // Stages 2 and 4 on each block of four: the butterflies above with their twiddles
    // exact (1 and -i, or +i for the inverse; the table holds cos(-pi/2) = 6e-17 for 0),
    // so the products are exact and the twiddle error mu of the bound only shrinks.
    for (std::size_t s = 0; s < size; s += 4) {
      double* r = re + s;
      double* i = im + s;
      const double a0r = r[0] + r[1], a0i = i[0] + i[1];  // stage 2: (x0 + x1, x0 - x1)
      const double a1r = r[0] - r[1], a1i = i[0] - i[1];
      const double a2r = r[2] + r[3], a2i = i[2] + i[3];  // (x2 + x3, x2 - x3)
      const double a3r = r[2] - r[3], a3i = i[2] - i[3];
      // stage 4: (a0 +- a2), (a1 +- w a3) with w = -i (forward): w a3 = (a3i, -a3r); inverse +i: (-a3i, a3r)
      const double tr = sign * a3i, ti = -sign * a3r;
      r[0] = a0r + a2r;
      i[0] = a0i + a2i;
      r[2] = a0r - a2r;
      i[2] = a0i - a2i;
      r[1] = a1r + tr;
      i[1] = a1i + ti;
      r[3] = a1r - tr;
      i[3] = a1i - ti;
    }
    len = 8;
  }
  for (; 2 * len <= last_len; len <<= 2) {
    const std::size_t half = len / 2;
    fused_stages(re, im, size, len, wr + (half - 1), wi + (half - 1), wr + (len - 1), wi + (len - 1), sign);
  }
  if (len <= last_len) {  // an odd number of stages: one plain radix-2 stage remains
    const std::size_t half = len / 2;
    single_stage(re, im, size, len, wr + (half - 1), wi + (half - 1), sign);
  }
}

// out[j] = value(bit_reversed(j)) for every j < n (a power of two), as (real, imaginary) parts.
// In plain order the reads of value's inputs at bit_reversed(j) touch a new cache line at nearly every
// step once the arrays outgrow the caches (at 2^18 points a third of the real transform's time went
// to its permutation). In tiles: write j = (high, middle, low) in bits, so bit_reversed(j) = (rev low,
// rev middle, rev high); for one middle, the tile's 2^kTileBits x 2^kTileBits values are computed
// row by row at consecutive indices (rev low fixed, rev high running) into a small buffer, then
// written out row by row at consecutive positions (high fixed, low running). Each cache line is
// then used whole while it is loaded, even where the rows' power-of-two strides map them all to one
// cache set. Only the order of independent computations changes: the results are the same to the bit.
constexpr unsigned kTileBits = 5;

template <class Value>
void gather_bit_reversed(std::size_t n, const std::size_t* reversed, Value value, double* out_re, double* out_im) {
  unsigned bits = 0;
  while ((std::size_t{1} << bits) < n) ++bits;
  if (bits < 2 * kTileBits + 2) {
    for (std::size_t j = 0; j < n; ++j) value(reversed[j], &out_re[j], &out_im[j]);
    return;
  }
  constexpr std::size_t kTile = std::size_t{1} << kTileBits;
  const unsigned high_shift = bits - kTileBits;
  std::size_t rev_tile[kTile];  // reversal of kTileBits bits: bit_reversed(x << high_shift)
  for (std::size_t x = 0; x < kTile; ++x) rev_tile[x] = reversed[x << high_shift];
  double buf_re[kTile * kTile], buf_im[kTile * kTile];
  const std::size_t middles = std::size_t{1} << (bits - 2 * kTileBits);
  for (std::size_t middle = 0; middle < middles; ++middle) {
    const std::size_t rev_middle = reversed[middle << kTileBits];  // (0, rev middle, 0)
    for (std::size_t row = 0; row < kTile; ++row) {  // row = rev low, column = rev high
      const std::size_t base = (row << high_shift) | rev_middle;
      for (std::size_t column = 0; column < kTile; ++column) {
        value(base | column, &buf_re[row * kTile + column], &buf_im[row * kTile + column]);
      }
    }
    for (std::size_t high = 0; high < kTile; ++high) {
      const std::size_t base = (high << high_shift) | (middle << kTileBits);
      const std::size_t column = rev_tile[high];
      for (std::size_t low = 0; low < kTile; ++low) {
        out_re[base | low] = buf_re[rev_tile[low] * kTile + column];
        out_im[base | low] = buf_im[rev_tile[low] * kTile + column];
      }
    }
  }
}

// Points per block whose stages run to the end before the next block starts (2 x 128 KB of
// split data, inside the level-2 cache): only the stages longer than a block pass over the
// whole array. Each butterfly reads the same values as in the stage-by-stage order.
constexpr std::size_t kBlock = std::size_t{1} << 13;

}  // namespace

void Plan::transform_bit_reversed(double* re, double* im, bool inverse) const {
  const double sign = inverse ? -1.0 : 1.0;  // the inverse uses conjugate twiddles
  const double* wr = stage_re_.data();  // stage len starts at len/2 - 1
  const double* wi = stage_im_.data();
  if (n_ < 2) return;
  const std::size_t block = std::min(n_, kBlock);
  for (std::size_t b = 0; b < n_; b += block) run_stages(re + b, im + b, block, 2, block, wr, wi, sign);
  if (block < n_) run_stages(re, im, n_, 2 * block, n_, wr, wi, sign);
}

void Plan::transform(std::vector<std::complex<double>>& a, bool inverse) const {
  if (a.size() != n_) throw std::invalid_argument("fft data size does not match the plan");
  double* re = nullptr;
  double* im = nullptr;
  split_buffers(work_, n_, &re, &im);
  gather_bit_reversed(
      n_, bit_reversed_.data(),
      [&](std::size_t r, double* out_re, double* out_im) {
        *out_re = a[r].real();
        *out_im = a[r].imag();
      },
      re, im);
  transform_bit_reversed(re, im, inverse);
  for (std::size_t i = 0; i < n_; ++i) a[i] = {re[i], im[i]};
}

RealPlan::RealPlan(std::size_t n) : n_(n), half_(n >= 2 ? n / 2 : 1) {
  if (n < 2 || (n & (n - 1)) != 0) {
    throw std::invalid_argument("real fft size must be a power of two >= 2, got " + std::to_string(n));
  }
  twiddles_.resize(n / 2 + 1);
  for (std::size_t k = 0; k <= n / 2; ++k) {
    const double angle = -2.0 * M_PI * static_cast<double>(k) / static_cast<double>(n);
    twiddles_[k] = {std::cos(angle), std::sin(angle)};
  }
}

// Even and odd samples packed as z_j = x_{2j} + i x_{2j+1}; with Z = FFT_{n/2}(z),
// E_k = (Z_k + conj(Z_{m-k}))/2 and O_k = (Z_k - conj(Z_{m-k}))/(2i) are the
// transforms of the even and odd samples, and X_k = E_k + w^k O_k.
std::vector<std::complex<double>> RealPlan::forward(const std::vector<double>& x) const {
  std::vector<std::complex<double>> out;
  forward(x, out);
  return out;
}

void RealPlan::forward(const std::vector<double>& x, std::vector<std::complex<double>>& out) const {
  if (x.size() != n_) throw std::invalid_argument("real fft data size does not match the plan");
  const std::size_t m = n_ / 2;
  double* zr = nullptr;
  double* zi = nullptr;
  split_buffers(work_, m, &zr, &zi);
  gather_bit_reversed(  // z_j = x_2j + i x_2j+1, read in bit-reversed order
      m, half_.bit_reversed_table(),
      [&](std::size_t r, double* re, double* im) {
        *re = x[2 * r];
        *im = x[2 * r + 1];
      },
      zr, zi);
  half_.transform_bit_reversed(zr, zi, false);
  out.resize(m + 1);
  // even = (z_k + conj z_{m-k}) / 2, odd = (z_k - conj z_{m-k}) / (2i), X_k = even + w^k odd,
  // written out: std::complex's operator* checks every product for NaN (C99 Annex G), which
  // cost three times the arithmetic here. 1/(2i) (a + bi) = b/2 - (a/2) i is exact.
  auto entry = [&](std::size_t k, std::size_t k_mod, std::size_t mirror) {
    const double ar = zr[k_mod], ai = zi[k_mod];
    const double cr = zr[mirror], ci = -zi[mirror];
    const double er = 0.5 * (ar + cr), ei = 0.5 * (ai + ci);
    const double odr = 0.5 * (ai - ci), odi = -0.5 * (ar - cr);
    const double wr = twiddles_[k].real(), wi = twiddles_[k].imag();
    out[k] = {er + (wr * odr - wi * odi), ei + (wr * odi + wi * odr)};
  };
  entry(0, 0, 0);  // k = 0 and k = m wrap around: z_m is z_0
  for (std::size_t k = 1; k < m; ++k) entry(k, k, m - k);
  entry(m, 0, 0);
}

// Inverse of the above: E_k = (X_k + conj(X_{m-k}))/2, O_k = (X_k - conj(X_{m-k})) conj(w^k)/2,
// z = IFFT_{n/2}(E + i O) gives (n/2) (x_even + i x_odd); scaled by 2 to match the
// unnormalised length-n inverse.
std::vector<double> RealPlan::inverse(const std::vector<std::complex<double>>& spectrum) const {
  std::vector<double> out;
  inverse(spectrum, out);
  return out;
}

void RealPlan::inverse(const std::vector<std::complex<double>>& spectrum, std::vector<double>& out) const {
  const std::size_t m = n_ / 2;
  if (spectrum.size() != m + 1) throw std::invalid_argument("real fft spectrum size does not match the plan");
  double* zr = nullptr;
  double* zi = nullptr;
  split_buffers(work_, m, &zr, &zi);
  // even + i odd with even = (X_k + conj X_{m-k}) / 2, odd = ((X_k - conj X_{m-k}) / 2) conj(w^k),
  // written out as in forward (i (a + bi) = -b + ai is exact); z_k goes to its bit-reversed place.
  // (Bit reversal is an involution: z_k goes to position r where k = bit_reversed(r).)
  gather_bit_reversed(
      m, half_.bit_reversed_table(),
      [&](std::size_t k, double* re, double* im) {
        const double ar = spectrum[k].real(), ai = spectrum[k].imag();
        const double cr = spectrum[m - k].real(), ci = -spectrum[m - k].imag();
        const double er = 0.5 * (ar + cr), ei = 0.5 * (ai + ci);
        const double hr = 0.5 * (ar - cr), hi = 0.5 * (ai - ci);
        const double wr = twiddles_[k].real(), wi = -twiddles_[k].imag();
        const double odr = hr * wr - hi * wi, odi = hr * wi + hi * wr;
        *re = er - odi;
        *im = ei + odr;
      },
      zr, zi);
  half_.transform_bit_reversed(zr, zi, true);
  out.resize(n_);
  for (std::size_t j = 0; j < m; ++j) {
    out[2 * j] = 2.0 * zr[j];
    out[2 * j + 1] = 2.0 * zi[j];
  }
}

namespace {
// The calling thread's large plan kept for a query scope (real_plan).
std::shared_ptr<const RealPlan>& large_plan() {
  thread_local std::shared_ptr<const RealPlan> plan;
  return plan;
}
}  // namespace

std::shared_ptr<const RealPlan> real_plan(std::size_t n) {
  // Per thread: a plan's work vector must not be shared between threads.
  if (n <= kCachedPlanMax) {
    thread_local std::map<std::size_t, std::shared_ptr<const RealPlan>> plans;
    std::shared_ptr<const RealPlan>& slot = plans[n];
    if (!slot) slot = std::make_shared<const RealPlan>(n);
    return slot;
  }
  std::shared_ptr<const RealPlan>& large = large_plan();
  if (!holding()) {
    large.reset();
    return std::make_shared<const RealPlan>(n);
  }
  if (!large || large->size() != n) {
    large.reset();  // (first: a caller still holding the old one keeps it alive, and no one else does)
    large = std::make_shared<const RealPlan>(n);
  }
  return large;
}

void release_large_plan() noexcept { large_plan().reset(); }

double error_bound(std::size_t n) {
  double log2n = 0.0;
  while ((std::size_t{1} << static_cast<std::size_t>(log2n)) < n) log2n += 1.0;
  // Higham Thm 24.2: eta = mu + gamma_4 (sqrt2 + mu), bound = log2(n) eta / (1 - log2(n) eta),
  // with unit roundoff u = eps/2 and twiddle error mu <= 2u (cos/sin within one ulp).
  const double u = 0.5 * DBL_EPSILON;
  const double mu = 2.0 * u;
  const double gamma4 = 4.0 * u / (1.0 - 4.0 * u);
  const double eta = mu + gamma4 * (M_SQRT2 + mu);
  return 2.0 * log2n * eta / (1.0 - log2n * eta);
}

}  // namespace dpacct::fft

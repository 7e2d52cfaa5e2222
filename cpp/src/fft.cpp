#include "dpacct/fft.hpp"

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
  twiddles_.resize(n / 2);
  for (std::size_t k = 0; k < n / 2; ++k) {
    // Each twiddle from its own cos/sin (not by recurrence): error <= 1 ulp each.
    const double angle = -2.0 * M_PI * static_cast<double>(k) / static_cast<double>(n);
    twiddles_[k] = {std::cos(angle), std::sin(angle)};
  }
  // Stage tables: the butterflies of stage `len` use exp(-2 pi i k / len), k < len/2,
  // i.e. every (n/len)-th entry of twiddles_. Copying them next to each other (n - 1
  // entries over all stages) turns the strided reads of the large early-stage strides
  // into sequential ones. The values are copies, so the error analysis is unchanged.
  stage_twiddles_.reserve(n);
  for (std::size_t len = 2; len <= n; len <<= 1) {
    const std::size_t stride = n / len;
    for (std::size_t k = 0; k < len / 2; ++k) stage_twiddles_.push_back(twiddles_[k * stride]);
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

// One radix-2 butterfly (a, b) <- (a + w b, a - w b) on interleaved (re, im) pairs.
// The product is written out: std::complex's operator* adds NaN/inf recovery
// branches (C99 Annex G) that cost time and change nothing for finite data.
inline void butterfly(double* a, double* b, double wr, double wi) {
  const double tr = wr * b[0] - wi * b[1];
  const double ti = wr * b[1] + wi * b[0];
  b[0] = a[0] - tr;
  b[1] = a[1] - ti;
  a[0] += tr;
  a[1] += ti;
}

}  // namespace

void Plan::transform(std::vector<std::complex<double>>& a, bool inverse) const {
  if (a.size() != n_) throw std::invalid_argument("fft data size does not match the plan");
  for (std::size_t i = 0; i < n_; ++i) {
    const std::size_t r = bit_reversed_[i];
    if (i < r) std::swap(a[i], a[r]);
  }
  // std::complex<double> is layout-compatible with double[2] ([complex.numbers] p4).
  double* x = reinterpret_cast<double*>(a.data());
  const double sign = inverse ? -1.0 : 1.0;  // the inverse uses conjugate twiddles
  // Iterative Cooley-Tukey (decimation in time) after the bit reversal. Two
  // consecutive stages (len, 2 len) are fused into one pass over memory (radix 2^2):
  // the same butterflies with the same twiddles in the same order of operations per
  // element, so Higham's bound (error_bound) applies unchanged, with half the passes.
  const std::complex<double>* table = stage_twiddles_.data();  // stage len starts at len/2 - 1
  std::size_t len = 2;
  if (n_ >= 4) {
    // Stages 2 and 4 on each block of four: the butterflies above with their twiddles
    // exact (1 and -i, or +i for the inverse; the table holds cos(-pi/2) = 6e-17 for 0),
    // so the products are exact and the twiddle error mu of the bound only shrinks.
    for (std::size_t start = 0; start < n_; start += 4) {
      double* p = x + 2 * start;
      const double a0r = p[0] + p[2], a0i = p[1] + p[3];  // stage 2: (x0 + x1, x0 - x1)
      const double a1r = p[0] - p[2], a1i = p[1] - p[3];
      const double a2r = p[4] + p[6], a2i = p[5] + p[7];  // (x2 + x3, x2 - x3)
      const double a3r = p[4] - p[6], a3i = p[5] - p[7];
      // stage 4: (a0 +- a2), (a1 +- w a3) with w = -i (forward): w a3 = (a3i, -a3r); inverse +i: (-a3i, a3r)
      const double tr = sign * a3i, ti = -sign * a3r;
      p[0] = a0r + a2r;
      p[1] = a0i + a2i;
      p[4] = a0r - a2r;
      p[5] = a0i - a2i;
      p[2] = a1r + tr;
      p[3] = a1i + ti;
      p[6] = a1r - tr;
      p[7] = a1i - ti;
    }
    len = 8;
  }
  for (; 2 * len <= n_; len <<= 2) {
    const std::size_t half = len / 2;
    const std::complex<double>* w1 = table + (half - 1);  // stage len
    const std::complex<double>* w2 = table + (len - 1);   // stage 2 len
    for (std::size_t start = 0; start < n_; start += 2 * len) {
      for (std::size_t k = 0; k < half; ++k) {
        double* p0 = x + 2 * (start + k);
        double* p1 = p0 + 2 * half;
        double* p2 = p0 + 2 * len;
        double* p3 = p2 + 2 * half;
        const double ar = w1[k].real();
        const double ai = sign * w1[k].imag();
        butterfly(p0, p1, ar, ai);  // stage len, block [start, start + len)
        butterfly(p2, p3, ar, ai);  // stage len, block [start + len, start + 2 len)
        butterfly(p0, p2, w2[k].real(), sign * w2[k].imag());                // stage 2 len, k
        butterfly(p1, p3, w2[k + half].real(), sign * w2[k + half].imag());  // stage 2 len, k + half
      }
    }
  }
  if (len <= n_) {  // an odd number of stages: one plain radix-2 stage remains
    const std::size_t half = len / 2;
    const std::complex<double>* w1 = table + (half - 1);
    for (std::size_t start = 0; start < n_; start += len) {
      for (std::size_t k = 0; k < half; ++k) {
        butterfly(x + 2 * (start + k), x + 2 * (start + k + half), w1[k].real(), sign * w1[k].imag());
      }
    }
  }
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
  std::vector<std::complex<double>>& z = work_;
  z.resize(m);
  for (std::size_t j = 0; j < m; ++j) z[j] = {x[2 * j], x[2 * j + 1]};
  half_.forward(z);
  out.resize(m + 1);
  // even = (z_k + conj z_{m-k}) / 2, odd = (z_k - conj z_{m-k}) / (2i), X_k = even + w^k odd,
  // written out: std::complex's operator* checks every product for NaN (C99 Annex G), which
  // cost three times the arithmetic here. 1/(2i) (a + bi) = b/2 - (a/2) i is exact.
  auto entry = [&](std::size_t k, std::size_t k_mod, std::size_t mirror) {
    const double ar = z[k_mod].real(), ai = z[k_mod].imag();
    const double cr = z[mirror].real(), ci = -z[mirror].imag();
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
  std::vector<std::complex<double>>& z = work_;
  z.resize(m);
  // even + i odd with even = (X_k + conj X_{m-k}) / 2, odd = ((X_k - conj X_{m-k}) / 2) conj(w^k),
  // written out as in forward (i (a + bi) = -b + ai is exact).
  for (std::size_t k = 0; k < m; ++k) {
    const double ar = spectrum[k].real(), ai = spectrum[k].imag();
    const double cr = spectrum[m - k].real(), ci = -spectrum[m - k].imag();
    const double er = 0.5 * (ar + cr), ei = 0.5 * (ai + ci);
    const double hr = 0.5 * (ar - cr), hi = 0.5 * (ai - ci);
    const double wr = twiddles_[k].real(), wi = -twiddles_[k].imag();
    const double odr = hr * wr - hi * wi, odi = hr * wi + hi * wr;
    z[k] = {er - odi, ei + odr};
  }
  half_.inverse(z);
  out.resize(n_);
  for (std::size_t j = 0; j < m; ++j) {
    out[2 * j] = 2.0 * z[j].real();
    out[2 * j + 1] = 2.0 * z[j].imag();
  }
}

const RealPlan* cached_real_plan(std::size_t n) {
  if (n > kCachedPlanMax) return nullptr;
  // Per thread: a plan's work vector must not be shared between threads.
  thread_local std::map<std::size_t, std::unique_ptr<RealPlan>> plans;
  std::unique_ptr<RealPlan>& slot = plans[n];
  if (!slot) slot = std::make_unique<RealPlan>(n);
  return slot.get();
}

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

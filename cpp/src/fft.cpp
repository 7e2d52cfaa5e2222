#include "dpacct/fft.hpp"

#include <cfloat>
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
  bit_reversed_.resize(n);
  std::size_t bits = 0;
  while ((std::size_t{1} << bits) < n) ++bits;
  for (std::size_t i = 0; i < n; ++i) {
    std::size_t r = 0;
    for (std::size_t b = 0; b < bits; ++b) r |= ((i >> b) & 1U) << (bits - 1 - b);
    bit_reversed_[i] = r;
  }
}

void Plan::transform(std::vector<std::complex<double>>& a, bool inverse) const {
  if (a.size() != n_) throw std::invalid_argument("fft data size does not match the plan");
  for (std::size_t i = 0; i < n_; ++i) {
    const std::size_t r = bit_reversed_[i];
    if (i < r) std::swap(a[i], a[r]);
  }
  // Iterative Cooley-Tukey butterflies; stage `len` uses every (n/len)-th twiddle.
  for (std::size_t len = 2; len <= n_; len <<= 1) {
    const std::size_t half = len / 2;
    const std::size_t stride = n_ / len;
    for (std::size_t start = 0; start < n_; start += len) {
      for (std::size_t k = 0; k < half; ++k) {
        std::complex<double> w = twiddles_[k * stride];
        if (inverse) w = std::conj(w);
        const std::complex<double> t = w * a[start + k + half];
        a[start + k + half] = a[start + k] - t;
        a[start + k] += t;
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
  if (x.size() != n_) throw std::invalid_argument("real fft data size does not match the plan");
  const std::size_t m = n_ / 2;
  std::vector<std::complex<double>> z(m);
  for (std::size_t j = 0; j < m; ++j) z[j] = {x[2 * j], x[2 * j + 1]};
  half_.forward(z);
  std::vector<std::complex<double>> out(m + 1);
  const std::complex<double> half_i(0.0, -0.5);  // 1/(2i)
  for (std::size_t k = 0; k <= m; ++k) {
    const std::complex<double> zk = z[k % m];
    const std::complex<double> zc = std::conj(z[(m - k) % m]);
    const std::complex<double> even = 0.5 * (zk + zc);
    const std::complex<double> odd = half_i * (zk - zc);
    out[k] = even + twiddles_[k] * odd;
  }
  return out;
}

// Inverse of the above: E_k = (X_k + conj(X_{m-k}))/2, O_k = (X_k - conj(X_{m-k})) conj(w^k)/2,
// z = IFFT_{n/2}(E + i O) gives (n/2) (x_even + i x_odd); scaled by 2 to match the
// unnormalised length-n inverse.
std::vector<double> RealPlan::inverse(const std::vector<std::complex<double>>& spectrum) const {
  const std::size_t m = n_ / 2;
  if (spectrum.size() != m + 1) throw std::invalid_argument("real fft spectrum size does not match the plan");
  std::vector<std::complex<double>> z(m);
  const std::complex<double> i_unit(0.0, 1.0);
  for (std::size_t k = 0; k < m; ++k) {
    const std::complex<double> xk = spectrum[k];
    const std::complex<double> xc = std::conj(spectrum[m - k]);
    const std::complex<double> even = 0.5 * (xk + xc);
    const std::complex<double> odd = 0.5 * (xk - xc) * std::conj(twiddles_[k]);
    z[k] = even + i_unit * odd;
  }
  half_.inverse(z);
  std::vector<double> out(n_);
  for (std::size_t j = 0; j < m; ++j) {
    out[2 * j] = 2.0 * z[j].real();
    out[2 * j + 1] = 2.0 * z[j].imag();
  }
  return out;
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

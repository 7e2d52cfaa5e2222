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

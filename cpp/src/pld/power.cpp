#include "dpacct/pld/power.hpp"

#include <algorithm>
#include <cmath>
#include <complex>
#include <cstdlib>
#include <limits>
#include <memory>
#include <mutex>
#include <stdexcept>

#include "dpacct/logmath.hpp"
#include "dpacct/pld/step.hpp"

namespace dpacct::pld {

namespace {

constexpr double kU = kUnit;

// An upper bound on |z|: sqrt(re^2 + im^2) is within 3u of it where the squares neither
// underflow nor overflow (two products, a sum and a square root, each rounded once), so the
// factor 1 + 4u covers it; elsewhere std::abs (hypot, within one ulp), with 2u.
// (hypot had been 6 % of a composition's time.)
double magnitude_up(std::complex<double> z) {
  const double m = std::max(std::fabs(z.real()), std::fabs(z.imag()));
  if (!(m > 1e-150 && m < 1e150)) return std::abs(z) * (1.0 + 2.0 * kU);
  return std::sqrt(z.real() * z.real() + z.imag() * z.imag()) * (1.0 + 4.0 * kU);
}

// z^count by binary exponentiation (count >= 1). The products are written out:
// std::complex's operator* adds NaN/inf recovery branches (C99 Annex G) that
// cost time and change nothing for finite data.
std::complex<double> integer_power(std::complex<double> z, double count) {
  double rr = 1.0, ri = 0.0, zr = z.real(), zi = z.imag();
  auto n = static_cast<unsigned long long>(count);
  while (n > 0) {
    if (n & 1ULL) {
      const double t = rr * zr - ri * zi;
      ri = rr * zi + ri * zr;
      rr = t;
    }
    n >>= 1;
    if (n == 0) break;
    const double t = zr * zr - zi * zi;
    zi = 2.0 * zr * zi;
    zr = t;
  }
  return {rr, ri};
}

// The same in long double (the live frequencies of power_window).
std::complex<long double> integer_power_ld(std::complex<long double> z, double count) {
  long double rr = 1.0L, ri = 0.0L, zr = z.real(), zi = z.imag();
  auto n = static_cast<unsigned long long>(count);
  while (n > 0) {
    if (n & 1ULL) {
      const long double t = rr * zr - ri * zi;
      ri = rr * zi + ri * zr;
      rr = t;
    }
    n >>= 1;
    if (n == 0) break;
    const long double t = zr * zr - zi * zi;
    zi = 2.0L * zr * zi;
    zr = t;
  }
  return {rr, ri};
}

// Whether long double carries more digits than double (x87 extended: 64-bit significand), and
// whether the FPU actually rounds to them (a control word set to 53 bits would make the
// error bounds below wrong): checked once at run time.
constexpr bool kExtended = std::numeric_limits<long double>::digits == 64;
bool extended_rounding() {
  volatile long double one = 1.0L;
  volatile long double tiny = 1.0L / 1152921504606846976.0L;  // 2^-60: lost at 53 bits, kept at 64
  return one + tiny != one;
}
constexpr long double kUnitLd = std::numeric_limits<long double>::epsilon();  // 2 u' (generous)
constexpr double kLive = -30.0;  // a frequency with b^T above e^kLive is live (below: T e b^T < 1e-13 T e)

// The direct terms (frequencies times entries) one sequence may spend on its live frequencies:
// N / 8, about the work of the transforms they replace; N log2(N) / 32 when thorough (N / 8 had
// left the ~35 live frequencies of sigma=3.4, q=2.5e-8, T=33222 at N = 2^16 to the transform,
// whose round-off then held delta(0) 2.3 % wide; on the bench grid the larger budget bought
// nothing and doubled some queries' time).
std::size_t direct_budget(std::size_t n, bool thorough) {
  if (!thorough) return n / 8;
  return static_cast<std::size_t>(static_cast<double>(n) * std::log2(static_cast<double>(n)) / 32.0);
}

// exp(-2 pi i m / N) for an integer m reduced mod N (N a power of two: the division is exact).
std::complex<long double> twiddle_ld(unsigned long long m, unsigned long long n) {
  const long double two_pi = 6.28318530717958647692528676655900577L;
  const long double angle = two_pi * static_cast<long double>(m % n) / static_cast<long double>(n);
  return {std::cos(angle), -std::sin(angle)};
}

// exp(-2 pi i m / N) for any integer m, as the product of two entries of Workspace's tables (the low bits of m mod N
// and the high ones: about 2 sqrt(N) entries in all, built once per N from twiddle_ld): a complex product of two
// twiddles, each within a few u', instead of a cosl and a sinl (which had been most of a direct sum's cost).
class TwiddleTable {
 public:
  // (n = 0: no table, for a sequence without live frequencies; never called then.)
  TwiddleTable(Workspace& ws, std::size_t n) : ws_(ws) {
    if (n == 0) return;
    if (ws.twiddle_size != n) {
      ws.twiddle_size = 0;  // (until both tables are built: a failed resize leaves no stale size behind)
      unsigned bits = 0;
      while ((std::size_t{1} << bits) < n) ++bits;
      ws.twiddle_shift = bits / 2;
      const std::size_t low = std::size_t{1} << ws.twiddle_shift, high = n >> ws.twiddle_shift;
      ws.twiddle_low.resize(low);
      ws.twiddle_high.resize(high);
      for (std::size_t m = 0; m < low; ++m) ws.twiddle_low[m] = twiddle_ld(m, n);
      for (std::size_t m = 0; m < high; ++m) {
        ws.twiddle_high[m] = twiddle_ld(static_cast<unsigned long long>(m) << ws.twiddle_shift, n);
      }
      ws.twiddle_size = n;
    }
    mask_ = n - 1;
    low_mask_ = (std::size_t{1} << ws.twiddle_shift) - 1;
  }
  std::complex<long double> operator()(unsigned long long m) const {
    const std::size_t r = static_cast<std::size_t>(m) & mask_;
    const std::complex<long double>& a = ws_.twiddle_low[r & low_mask_];
    const std::complex<long double>& b = ws_.twiddle_high[r >> ws_.twiddle_shift];
    return {a.real() * b.real() - a.imag() * b.imag(), a.real() * b.imag() + a.imag() * b.real()};
  }

 private:
  const Workspace& ws_;
  std::size_t mask_ = 0, low_mask_ = 0;
};

// sum_j p_j exp(-2 pi i (low + j) k / N) over the `len` entries at p, directly, in long
// double: the terms' twiddles are products of two (j = 64 a + b), each from the tables, so each errs by
// a few tens of u' whatever j; the sum is taken per block of 64 terms, then over the blocks, so its
// rounding grows as 64 + len / 64, not as len (see kDirectTerms).
std::complex<long double> direct_frequency(const double* p, std::size_t len, long low, std::size_t k, std::size_t n,
                                           const TwiddleTable& twiddle) {
  constexpr std::size_t kBlock = 64;
  const auto nn = static_cast<unsigned long long>(n);
  const auto kk = static_cast<unsigned long long>(k);
  std::complex<long double> small[kBlock];
  for (std::size_t b = 0; b < kBlock; ++b) small[b] = twiddle(kk * b % nn);
  long double sr = 0.0L, si = 0.0L;
  for (std::size_t a = 0; a * kBlock < len; ++a) {
    const std::complex<long double> big = twiddle(kk * (static_cast<unsigned long long>(a * kBlock) % nn) % nn);
    const std::size_t end = std::min(len, (a + 1) * kBlock);
    long double br = 0.0L, bi = 0.0L;
    for (std::size_t j = a * kBlock; j < end; ++j) {
      const std::complex<long double>& w = small[j - a * kBlock];
      const long double wr = w.real() * big.real() - w.imag() * big.imag();
      const long double wi = w.real() * big.imag() + w.imag() * big.real();
      const long double x = p[j];
      br += x * wr;
      bi += x * wi;
    }
    sr += br;
    si += bi;
  }
  long r = low % static_cast<long>(n);
  if (r < 0) r += static_cast<long>(n);
  const std::complex<long double> phase = twiddle(static_cast<unsigned long long>(r) * kk % nn);
  return {sr * phase.real() - si * phase.imag(), sr * phase.imag() + si * phase.real()};
}

// The error of direct_frequency over `len` terms of total mass m is taken as
// 4 u' (len / 64 + 1 + kDirectTerms) m (kUnitLd = 2 u'), and 1 % more: the blocked sums
// (64 + len / 64 roundings per term in each of the real and imaginary parts: by Minkowski as much of the modulus),
// each term's twiddle and the phase (a table entry errs by at most 8 u' from its angle's rounding and 2 sqrt(2) u'
// from cosl and sinl; a product of two entries is within 33 u', small times big within 69 u', the phase 36 u'),
// with room to spare (772 u' + len / 16 u' charged against about 170 u' + len / 64 u').
constexpr double kDirectTerms = 192.0;
// A live frequency's twiddle products beside its bulk's terms (64 small ones, one per block, the phase).
constexpr std::size_t kPerFrequency = 80;
double direct_error(std::size_t len, double mass) {
  return static_cast<double>(2.0L * kUnitLd * (static_cast<long double>(len / 64 + 1) + kDirectTerms) *
                             static_cast<long double>(mass) * 1.01L);
}

// The window of at most `width` consecutive entries of p with the largest sum (its first index).
std::size_t heaviest_window(const CachedVector<double>& p, std::size_t width) {
  if (width >= p.size()) return 0;
  double sum = 0.0;
  for (std::size_t j = 0; j < width; ++j) sum += p[j];
  double best = sum;
  std::size_t at = 0;
  for (std::size_t j = width; j < p.size(); ++j) {
    sum += p[j] - p[j - width];
    if (sum > best) {
      best = sum;
      at = j - width + 1;
    }
  }
  return at;
}

}  // namespace

namespace {

// Error-free transformations (no fused multiply-add needed): a + b = s + e exactly (Knuth's
// TwoSum) and a b = p + e exactly (Dekker's product with Veltkamp's split), barring overflow
// and underflow (Dekker, "A floating-point technique for extending the available precision",
// Numer. Math. 18, 1971).
inline void two_sum(double a, double b, double* s, double* e) {
  *s = a + b;
  const double bb = *s - a;
  *e = (a - (*s - bb)) + (b - bb);
}

inline void split(double a, double* hi, double* lo) {
  constexpr double kSplitter = 134217729.0;  // 2^27 + 1
  const double c = kSplitter * a;
  *hi = c - (c - a);
  *lo = a - *hi;
}

inline void two_product(double a, double b, double* p, double* e) {
  *p = a * b;
  double ah = 0.0, al = 0.0, bh = 0.0, bl = 0.0;
  split(a, &ah, &al);
  split(b, &bh, &bl);
  *e = al * bl - (((*p - ah * bh) - al * bh) - ah * bl);
}

// log 2 = kLog2Hi + kLog2Mid + kLog2Lo, each the nearest double to the rest (within 1e-49).
constexpr double kLog2Hi = 6.93147180559945286227e-01;
constexpr double kLog2Mid = 2.31904681384629955842e-17;
constexpr double kLog2Lo = 5.70770843841621207588e-34;

// a + b = s + e exactly where |a| >= |b| or a = 0 (Dekker's Fast2Sum).
inline void fast_two_sum(double a, double b, double* s, double* e) {
  *s = a + b;
  *e = b - (*s - a);
}

// Double-double numbers hi + lo, |lo| <= ulp(hi) / 2, and the operations of Joldes, Muller and
// Popescu (2017): the sum (their Algorithm 6, relative error <= 3 u^2 + 13 u^3), the product
// (Algorithm 9 without a fused multiply-add, <= 7 u^2) and the quotient by a small integer (a
// remainder taken exactly, then one correction: <= 4 u^2).
struct DoubleDouble {
  double hi = 0.0, lo = 0.0;
};

inline DoubleDouble dd_add(DoubleDouble a, DoubleDouble b) {
  double s = 0.0, e = 0.0, t = 0.0, f = 0.0;
  two_sum(a.hi, b.hi, &s, &e);
  two_sum(a.lo, b.lo, &t, &f);
  e += t;
  fast_two_sum(s, e, &s, &e);
  e += f;
  fast_two_sum(s, e, &s, &e);
  return {s, e};
}

inline DoubleDouble dd_mul(DoubleDouble a, DoubleDouble b) {
  double p = 0.0, e = 0.0;
  two_product(a.hi, b.hi, &p, &e);
  e += a.hi * b.lo + a.lo * b.hi;
  fast_two_sum(p, e, &p, &e);
  return {p, e};
}

inline DoubleDouble dd_div(DoubleDouble a, double n) {
  const double q = a.hi / n;
  double p = 0.0, e = 0.0;
  two_product(q, n, &p, &e);  // q n = p + e exactly
  const double r = ((a.hi - p) - e + a.lo) / n;  // a.hi - p is exact (Sterbenz)
  DoubleDouble out;
  fast_two_sum(q, r, &out.hi, &out.lo);
  return out;
}

}  // namespace

namespace {

// e^x for |x| <= 1 in double-double, slowly (the table below). Error (relative, u = 2^-53): the
// reduced argument s = x / 1024 is exact; the Taylor polynomial's truncation is below s^9 / 9!
// (5e-34 of m); in its Horner steps each value is within 1e-3 of 1, so the products' and quotients'
// errors (7 u^2 and 4 u^2 of values below 1e-3) hardly count and each sum adds 3 u^2: m = s t within
// 13 u^2. Each doubling m (2 + m) adds at most 3 u^2 + 7 u^2 m / (2 + m) <= 6 u^2 and multiplies the
// error carried by 1 + m / (2 + m) (a product below 2.2 over the ten: m <= e - 1); 1 + m adds 3 u^2.
// In all below 160 u^2 = 2e-30.
DoubleDouble exp_small_slowly(double x) {
  const DoubleDouble s{std::ldexp(x, -10), 0.0};
  DoubleDouble t{1.0, 0.0};
  for (int n = 8; n >= 2; --n) t = dd_add({1.0, 0.0}, dd_div(dd_mul(s, t), static_cast<double>(n)));
  DoubleDouble m = dd_mul(s, t);  // e^s - 1
  for (int i = 0; i < 10; ++i) m = dd_add({2.0 * m.hi, 2.0 * m.lo}, dd_mul(m, m));
  return dd_add({1.0, 0.0}, m);
}

constexpr int kExpTable = 256;

// 2^{j / 256} = e^{j log(2) / 256}, j < 256, as e^a e^b: j log2_hi = a1 + a2 exactly (Dekker's product),
// a = a1 / 256 (exact, below 0.7), b = (a2 + j log2_mid + j log2_lo) / 256 (below 8e-17, within 1e-32
// absolutely) and e^b = 1 + b within 1e-32 more: e^a within 2e-30, the product within 7 u^2 more.
const std::vector<DoubleDouble>& exp_table() {
  static const std::vector<DoubleDouble> table = [] {
    std::vector<DoubleDouble> t(kExpTable);
    for (int j = 0; j < kExpTable; ++j) {
      double a1 = 0.0, a2 = 0.0;
      two_product(static_cast<double>(j), kLog2Hi, &a1, &a2);
      const double b = (a2 + (j * kLog2Mid + j * kLog2Lo)) / kExpTable;
      t[static_cast<std::size_t>(j)] = dd_mul(exp_small_slowly(a1 / kExpTable), {1.0, b});
    }
    return t;
  }();
  return table;
}

}  // namespace

// Error (relative, u = 2^-53): k = round(hi 256 / log 2) and the reduced r = hi + lo - k log(2) / 256 in
// double-double (k log2_hi / 256 and k log2_mid / 256 exact products, k log2_lo / 256 rounded by 1e-46,
// log 2's three parts within 1e-49 of it; three double-double sums of values below 0.0014 + 1e-6, 3 u^2 of
// that each, their addends made normalised pairs by TwoSum):
// r within 1e-34 absolutely, e^r within as much relatively. m = r + r^2 / 2 + p: r^2 / 2 from the exact
// square of r's high part and the cross term (rounded by u r^2 u); p = r_hi^3 (1/6 + ... + r_hi^4 / 5040)
// in double, within 5 u of p (|p| <= 4.2e-10: 2.3e-25), truncated below r^8 / 8! (3e-28), r_hi for r
// erring by 3 r^2 |r_lo| (below 1e-37); the two sums into m, 3 u^2 of 0.0014 each. The table entry
// (5e-30), the product T_j m (7 u^2 of 0.0014) and the sum T_j + T_j m (3 u^2) add below 1e-31; the
// scaling by 2^e is exact (normal results for |hi| <= 600). In all below 3e-25.
void exp_double_double(double hi, double lo, double* out_hi, double* out_lo) {
  if (!(std::fabs(hi) <= 600.0)) throw std::invalid_argument("exp_double_double: |hi| must be <= 600");
  if (!(std::fabs(lo) <= 1e-6)) throw std::invalid_argument("exp_double_double: |lo| must be <= 1e-6");
  const double k = std::nearbyint(hi * (kExpTable / kLog2Hi));
  double p1 = 0.0, e1 = 0.0, p2 = 0.0, e2 = 0.0;
  two_product(k, kLog2Hi / kExpTable, &p1, &e1);
  two_product(k, kLog2Mid / kExpTable, &p2, &e2);
  // (Each addend a normalised pair, as the sum's error bound asks: lo and -e1, -e2 and k log2_lo / 256 through
  // TwoSum.)
  DoubleDouble r, t1, t2;
  two_sum(hi, -p1, &r.hi, &r.lo);
  two_sum(lo, -e1, &t1.hi, &t1.lo);
  two_sum(-e2, -k * (kLog2Lo / kExpTable), &t2.hi, &t2.lo);
  r = dd_add(r, t1);
  r = dd_add(r, {-p2, 0.0});
  r = dd_add(r, t2);
  double sq = 0.0, sq_lo = 0.0;
  two_product(r.hi, r.hi, &sq, &sq_lo);
  DoubleDouble half_square;  // (a normalised pair: the cross term can exceed half an ulp of the square)
  fast_two_sum(0.5 * sq, 0.5 * sq_lo + r.hi * r.lo, &half_square.hi, &half_square.lo);
  const double x = r.hi;
  const double p = x * x * x * (1.0 / 6 + x * (1.0 / 24 + x * (1.0 / 120 + x * (1.0 / 720 + x * (1.0 / 5040)))));
  DoubleDouble m = dd_add(r, half_square);
  m = dd_add(m, {p, 0.0});
  const auto kk = static_cast<long>(k);
  const long j = ((kk % kExpTable) + kExpTable) % kExpTable;
  const int exponent = static_cast<int>((kk - j) / kExpTable);
  const DoubleDouble& t = exp_table()[static_cast<std::size_t>(j)];
  const DoubleDouble e = dd_add(t, dd_mul(t, m));
  *out_hi = std::ldexp(e.hi, exponent);
  *out_lo = std::ldexp(e.lo, exponent);
}

Tilted tilt_sequence(const std::vector<double>& log_mass, long low, double slope, double d,
                     const std::vector<double>* extra, double mean_count) {
  Tilted t;
  t.low = low;
  const std::size_t n = log_mass.size();
  if (extra != nullptr && extra->size() != n) throw std::invalid_argument("tilt_sequence: extra must match log_mass");
  auto added = [&](std::size_t j) { return extra != nullptr ? (*extra)[j] : 0.0; };
  std::vector<double> logs(n);
  for (std::size_t j = 0; j < n; ++j) {
    const double kd = static_cast<double>(low + static_cast<long>(j)) * d;
    logs[j] = log_mass[j] + added(j) + slope * kd;
  }
  t.log_norm = n == 0 ? kNegInf : logsumexp(logs.data(), n);
  if (t.log_norm == kNegInf) {
    t.empty = true;
    t.log_norm = 0.0;
    t.p.assign(std::max<std::size_t>(n, 1), 0.0);
    return t;
  }
  t.p.resize(n);
  double l2 = 0.0;
  // The exponent x = log m + slope k D - log norm is carried exactly as hi + lo (the
  // error-free transformations above; k D and slope k D as exact products), and the entry is
  // e^hi (1 + lo): its relative error is that of exp (1 ulp) and of the product and sum, lo's
  // own rounding and lo^2 / 2 (|lo| <= u S), within 4 u + 4 u^2 (S + S^2) for
  // S = |log m| + |slope k D| + |log norm| + 4.
  // Rounded directly, x erred by (|log m| + |slope k D| + |log norm| + 4) u, that much relative
  // error in the entry (about 100 u for masses near e^-50), and the composer multiplies the
  // relative rounding by T: at T = 8.5e7 it had cost delta(0) ~ 1e-4 (sigma=3.77,
  // q=1.05e-7), a difference of two masses near 1/2, 1.8 % of its width.
  // The largest relative error over the entries at >= e^-50 of the total is the sequence's
  // relative rounding; the entries below count with their own error times their size, an
  // absolute error (at most denorm_min each where they underflow). Far tails at log-masses of
  // -1e4 had set the relative rounding of every entry: at sigma=8.39, q=2.5e-8, T=25 it came
  // to 1.3e-10, which the lower bound of delta(0) lost 2 % to.
  constexpr double kSmall = -50.0;
  double largest = 0.0, absolute = 0.0, total = 0.0;  // (total: the entries' sum, for log_total)
  // For the mean rounding (Tilted::log_mean_low): each large entry's exponent r_hi + lo and size S,
  // and the large entries' mass by depth below the total (unit bins of log), the small entries' mass.
  const bool precise = mean_count > 0.0 && n > 0;
  std::vector<double> ex_hi, ex_lo, ex_size;
  std::vector<double> bins(precise ? 51 : 0, 0.0);
  double small_sum = 0.0;
  if (precise) {
    ex_hi.assign(n, 0.0);
    ex_lo.assign(n, 0.0);
    ex_size.assign(n, 0.0);
  }
  // slope D = c_hi + c_lo exactly, and c_hi = c1 + c2 with 26 significant bits each, so that
  // k c1 and k c2 are exact for |k| < 2^26: slope k D = k c1 + k c2 + k c_lo (the last rounds
  // by u^2 |slope k D|). Longer sequences take Dekker's product per entry.
  double c_hi = 0.0, c_lo = 0.0, c1 = 0.0, c2 = 0.0;
  two_product(slope, d, &c_hi, &c_lo);
  split(c_hi, &c1, &c2);
  constexpr long kExact = 1L << 26;
  const bool short_lattice = std::labs(low) < kExact && std::labs(low + static_cast<long>(n)) < kExact;
  for (std::size_t j = 0; j < n; ++j) {
    if (log_mass[j] == kNegInf) {
      t.p[j] = 0.0;
      continue;
    }
    const auto k = static_cast<double>(low + static_cast<long>(j));
    double s_hi = 0.0, e1 = 0.0, e2 = 0.0, r_hi = 0.0, e3 = 0.0, lo = 0.0;
    // (log_mass + extra) exactly as m_hi + m_lo.
    double m_hi = log_mass[j], m_lo = 0.0;
    if (extra != nullptr) two_sum(log_mass[j], (*extra)[j], &m_hi, &m_lo);
    if (short_lattice) {
      two_sum(m_hi, k * c1, &s_hi, &e1);
      two_sum(s_hi, k * c2, &s_hi, &e2);
      two_sum(s_hi, -t.log_norm, &r_hi, &e3);
      lo = ((e1 + e2) + e3) + (k * c_lo + m_lo);
    } else {
      double kd_hi = 0.0, kd_lo = 0.0, t_hi = 0.0, t_err = 0.0;
      two_product(k, d, &kd_hi, &kd_lo);
      two_product(slope, kd_hi, &t_hi, &t_err);
      two_sum(m_hi, t_hi, &s_hi, &e1);
      two_sum(s_hi, -t.log_norm, &r_hi, &e3);
      lo = (e1 + e3) + (t_err + slope * kd_lo + m_lo);
    }
    const double e = std::exp(r_hi);
    t.p[j] = e + e * lo;
    l2 += t.p[j] * t.p[j];
    total += t.p[j];
    const double kd = static_cast<double>(low + static_cast<long>(j)) * d;
    const double own = std::fabs(log_mass[j]) + std::fabs(added(j)) + std::fabs(slope * kd);
    if (logs[j] - t.log_norm >= kSmall) {
      largest = std::max(largest, own);
      if (precise) {
        ex_hi[j] = r_hi;
        ex_lo[j] = lo;
        ex_size[j] = own + std::fabs(t.log_norm) + 4.0;
        bins[static_cast<std::size_t>(std::clamp(std::floor(t.log_norm - logs[j]), 0.0, 50.0))] += t.p[j];
      }
    } else {
      small_sum += t.p[j];
      const double rounding = 2.0 * kU * (own + std::fabs(t.log_norm) + 4.0);
      absolute += std::max(t.p[j], std::numeric_limits<double>::denorm_min()) * rounding * 2.0;
    }
  }
  t.l2 = std::sqrt(l2);
  const double size = largest + std::fabs(t.log_norm) + 4.0;
  t.max_rounding = 4.0 * kU + 4.0 * kU * kU * size * (1.0 + size);
  t.absolute_rounding = absolute * (1.0 + 1e-6);
  const double r = t.max_rounding;
  t.log_mean_low = std::log1p(-r) * (1.0 + 4.0 * kU);
  t.log_mean_high = std::log1p(r) * (1.0 + 4.0 * kU);
  t.spread = 2.0 * r / (1.0 - r) * (1.0 + 8.0 * kU);
  const double total_up = total * (1.0 + static_cast<double>(n + 2) * kU) + t.absolute_rounding;
  t.log_total = std::log(total_up) + 4.0 * kU * (1.0 + std::fabs(std::log(total_up)));
  if (precise) {
    // rho - 1 = D / Z, D = sum_large (p~_j - p_j), Z = sum_j p_j. The large entries down to a depth
    // whose deeper ones hold at most 1e-14 / (mean_count r) of the mass are taken exactly: e^{r_hi + lo}
    // by exp_double_double (the exponent within 6 u^2 S of the true one: lo's own roundings), and the
    // computed entry's excess over it. The deeper ones count at their worst, r of their mass each. The
    // computed D errs by the exact entries' errors, each excess's rounding (u of it), the recursive
    // sum's (count u of the moduli) and the deeper ones; Z = exact + deeper + small within the exact
    // entries' errors, the deeper ones' rounding, the sums' roundings (n u) and the small entries'
    // absolute rounding.
    const double allowed = 1e-14 / (mean_count * r) * total;
    std::size_t depth = bins.size();
    double deeper = 0.0;
    while (depth > 0 && deeper + bins[depth - 1] <= allowed) deeper += bins[--depth];
    double excess_sum = 0.0, excess_abs = 0.0, exact_sum = 0.0, exact_error = 0.0;
    std::size_t exact_count = 0;
    bool inside = true;  // (exp_double_double's domain; outside it the interval stays log(1 -+ r))
    for (std::size_t j = 0; j < n && depth > 0 && inside; ++j) {
      if (log_mass[j] == kNegInf || logs[j] - t.log_norm < kSmall) continue;
      if (std::floor(t.log_norm - logs[j]) >= static_cast<double>(depth)) continue;
      inside = std::fabs(ex_hi[j]) <= 600.0 && std::fabs(ex_lo[j]) <= 1e-6;
      if (!inside) break;
      DoubleDouble x;
      exp_double_double(ex_hi[j], ex_lo[j], &x.hi, &x.lo);
      const double excess = (t.p[j] - x.hi) - x.lo;  // (t.p[j] - x.hi is exact: Sterbenz)
      excess_sum += excess;
      excess_abs += std::fabs(excess);
      exact_sum += x.hi;
      exact_error += (kExpDoubleDoubleError + 16.0 * kU * kU * (1.0 + ex_size[j])) * x.hi;
      ++exact_count;
    }
    const double count = static_cast<double>(exact_count);
    const double worst = r / (1.0 - r) * deeper * 1.01;
    const double d_error = exact_error * 1.01 + (count + 2.0) * kU * excess_abs * 1.01 + worst;
    const double z = exact_sum + deeper + small_sum;
    const double z_error = exact_error * 1.01 + worst + (static_cast<double>(n) + 2.0) * kU * z + t.absolute_rounding;
    if (inside && exact_count > 0 && z - z_error > 0.5 * z) {
      const double x = excess_sum / z;
      const double w = (d_error + std::fabs(excess_sum) * z_error / z) / (z - z_error) + 4.0 * kU * std::fabs(x);
      const double margin = 2.0 * kU * (std::fabs(x) + w);
      const double y_low = x - w - margin, y_high = x + w + margin;
      // log(1 + y) <= y, and >= y - y^2 for y >= -1/2; the last sum's rounding within 4 u |y|.
      if (y_low > -0.5) {
        t.log_mean_low = std::max(t.log_mean_low, y_low - y_low * y_low - 4.0 * kU * std::fabs(y_low));
        t.log_mean_high = std::min(t.log_mean_high, y_high);
      }
    }
  }
  return t;
}

namespace {

// sum_j p_j r^j over j < n (reversed: sum_j p_{n-1-j} r^j) for p_j >= 0 and r >= 1, by
// Horner's rule in four interleaved chains (j = 4i + c, each in R = r^4), then
// sum_c r^c chain_c: four independent chains instead of one dependent product per entry.
// Rounding, with r itself within 2u (one ulp) of e^{sD}: term j carries at most
// (1 + u)^(13 i + 13) <= (1 + u)^(3.25 n + 13) (R within 11u of r^4, two roundings per
// step, the r^c and the final sum), within the 4 (n + 2) u charged for n >= 8; shorter
// sequences take the plain Horner rule (2 roundings and r's error per step: 4 n u).
double horner_powers(const double* p, std::size_t n, double r, bool reversed) {
  auto at = [&](std::size_t j) { return reversed ? p[n - 1 - j] : p[j]; };
  if (n < 8) {
    double acc = 0.0;
    for (std::size_t j = n; j-- > 0;) acc = acc * r + at(j);
    return acc;
  }
  const double r2 = r * r;
  const double big = r2 * r2;
  double c0 = 0.0, c1 = 0.0, c2 = 0.0, c3 = 0.0;
  const std::size_t rows = (n + 3) / 4;
  std::size_t i = rows;
  if (4 * rows > n) {  // the top row is partly past the end: its missing entries are 0
    --i;
    const std::size_t j = 4 * i;
    c0 = at(j);
    c1 = j + 1 < n ? at(j + 1) : 0.0;
    c2 = j + 2 < n ? at(j + 2) : 0.0;
    c3 = 0.0;  // j + 3 >= n here
  }
  if (reversed) {
    while (i-- > 0) {
      const double* q = p + (n - 1 - 4 * i);  // at(4i + c) = q[-c]
      c0 = c0 * big + q[0];
      c1 = c1 * big + q[-1];
      c2 = c2 * big + q[-2];
      c3 = c3 * big + q[-3];
    }
  } else {
    while (i-- > 0) {
      const double* q = p + 4 * i;
      c0 = c0 * big + q[0];
      c1 = c1 * big + q[1];
      c2 = c2 * big + q[2];
      c3 = c3 * big + q[3];
    }
  }
  return ((c0 + r * c1) + r2 * c2) + (r2 * r) * c3;
}

}  // namespace

bool chernoff_window(const std::vector<const Tilted*>& seqs, const std::vector<double>& counts, double d,
                     double log_tail, double* low, double* high) {
  double variance = 0.0;
  for (std::size_t g = 0; g < seqs.size(); ++g) {
    double m1 = 0.0, m2 = 0.0;
    const Tilted& t = *seqs[g];
    for (std::size_t j = 0; j < t.p.size(); ++j) {
      const double loss = static_cast<double>(t.low + static_cast<long>(j)) * d;
      m1 += t.p[j] * loss;
      m2 += t.p[j] * loss * loss;
    }
    variance += counts[g] * std::max(m2 - m1 * m1, 0.0);
  }
  const double sd = std::sqrt(variance) + d;
  // K(s) as an upper bound, by Horner's rule in r = e^{s D} (no exp per entry):
  // every term is >= 0, so the computed sum is within 4 (n + 2) u (relative) of the
  // exact one (see horner_powers); an overflow gives +inf, which only makes that slope useless.
  auto cumulant = [&](double s) {
    double k = 0.0;
    for (std::size_t g = 0; g < seqs.size(); ++g) {
      const Tilted& t = *seqs[g];
      const std::size_t n = t.p.size();
      const bool up = s > 0.0;  // sum from the end whose powers are smallest
      const double r = std::exp((up ? 1.0 : -1.0) * s * d);
      // up: sum_j p_j r^j; down: sum_j p_j r^(n-1-j)
      const double acc = horner_powers(t.p.data(), n, r, !up);
      const double first = static_cast<double>(t.low) * d;
      const double last = static_cast<double>(t.low + static_cast<long>(n) - 1) * d;
      const double log_sum = std::log(acc * (1.0 + 4.0 * kU * static_cast<double>(n + 2))) + s * (up ? first : last);
      k += counts[g] * log_sum;
    }
    return k;
  };
  // Slopes from 1/(256 sd) to 32/sd: heavy-tailed tilted steps need the small ones.
  double hi = kInf, lo = kNegInf;
  for (double scale = 1.0 / 256.0; scale <= 32.0; scale *= 2.0) {
    const double s = scale / sd;
    hi = std::min(hi, (cumulant(s) - log_tail) / s);
    lo = std::max(lo, (cumulant(-s) - log_tail) / -s);
  }
  if (!(std::isfinite(hi) && std::isfinite(lo) && hi > lo)) return false;  // the caller uses the full support
  *low = std::min(*low, lo);
  *high = std::max(*high, hi);
  return true;
}

void full_support(const std::vector<const Tilted*>& seqs, const std::vector<double>& counts, double* low,
                  double* high) {
  *low = *high = 0.0;
  for (std::size_t g = 0; g < seqs.size(); ++g) {
    *low += counts[g] * static_cast<double>(seqs[g]->low);
    *high += counts[g] * static_cast<double>(seqs[g]->low + static_cast<long>(seqs[g]->p.size()) - 1);
  }
}


namespace {
struct WorkspacePool {
  std::mutex mutex;
  std::vector<std::unique_ptr<Workspace>> kept;
};
WorkspacePool& workspace_pool() {
  static WorkspacePool* const pool = new WorkspacePool();  // never destroyed: workspaces may return during exit
  return *pool;
}
}  // namespace

std::size_t workspace_bytes(const Workspace& ws) {
  return sizeof(double) * (ws.buffer.capacity() + ws.circular.capacity() + ws.bound_s.capacity() +
                           ws.bound_p.capacity() + ws.rho.capacity() + ws.labels_p.capacity() +
                           ws.labels_q.capacity()) +
         sizeof(std::complex<double>) * (ws.spectrum.capacity() + ws.total.capacity() + ws.rest.capacity()) +
         ws.dead.capacity() + sizeof(std::size_t) * ws.live.capacity() +
         sizeof(std::complex<long double>) * (ws.twiddle_low.capacity() + ws.twiddle_high.capacity());
}

void release_workspaces() noexcept {
  WorkspacePool& pool = workspace_pool();
  std::lock_guard<std::mutex> lock(pool.mutex);
  pool.kept.clear();
}

void trim_workspaces() noexcept {
  WorkspacePool& pool = workspace_pool();
  std::vector<std::unique_ptr<Workspace>> dropped;  // freed outside the lock (their label vectors return to the cache)
  {
    std::lock_guard<std::mutex> lock(pool.mutex);
    for (auto& ws : pool.kept) {
      if (workspace_bytes(*ws) > kPooledWorkspaceBytes) dropped.push_back(std::move(ws));
    }
    pool.kept.erase(std::remove(pool.kept.begin(), pool.kept.end(), nullptr), pool.kept.end());
  }
}

std::size_t pooled_workspace_bytes() noexcept {
  WorkspacePool& pool = workspace_pool();
  std::lock_guard<std::mutex> lock(pool.mutex);
  std::size_t bytes = 0;
  for (const auto& ws : pool.kept) bytes += workspace_bytes(*ws);
  return bytes;
}

PooledWorkspace::PooledWorkspace() {
  WorkspacePool& pool = workspace_pool();
  {
    std::lock_guard<std::mutex> lock(pool.mutex);
    if (!pool.kept.empty()) {
      ws_ = std::move(pool.kept.back());
      pool.kept.pop_back();
    }
  }
  if (!ws_) ws_ = std::make_unique<Workspace>();
  ws_->thorough = false;
}

PooledWorkspace::~PooledWorkspace() {
  const std::size_t most = holding() ? kPooledDuringQuery : kPooledWorkspaceBytes;
  if (!ws_) return;
  const std::size_t bytes = workspace_bytes(*ws_);
  if (bytes > most) return;  // (freed by ws_)
  WorkspacePool& pool = workspace_pool();
  std::lock_guard<std::mutex> lock(pool.mutex);
  if (bytes > kPooledWorkspaceBytes) {
    // Within a query at most one workspace above the between-query size: two compositions that held one each
    // at once (a split composition's parts) would otherwise keep the second idle under every later one.
    for (const auto& kept : pool.kept) {
      if (workspace_bytes(*kept) > kPooledWorkspaceBytes) return;
    }
  }
  if (pool.kept.size() < kPooledWorkspaces) {
    try {
      pool.kept.push_back(std::move(ws_));
    } catch (...) {  // no room to note it: ws_ frees it
    }
  }
}

void power_window(const std::vector<const Tilted*>& seqs, const std::vector<double>& counts, const fft::RealPlan& plan,
             long start, std::size_t single_size, Workspace& ws, CachedVector<double>& out, double* error,
             PowerStats* stats, double* entry_error) {
  // Exact but for underflow: a tilted entry (or a suffix-sum term) below the double range
  // is lost, at most denorm_min each; under a strong tilt the scale e^{log_shift - tilt K D}
  // can make even that matter, so it is charged like round-off.
  *error = 4.0 * static_cast<double>(std::max(single_size, plan.size()) + 2) * std::numeric_limits<double>::denorm_min();
  if (entry_error != nullptr) *entry_error = *error;
  if (single_size > 0) {  // one step, count 1: its own entries, exactly
    out.assign(single_size, 0.0);
    const Tilted& t = *seqs[0];
    for (std::size_t j = 0; j < t.p.size(); ++j) {
      const long i = t.low + static_cast<long>(j) - start;
      if (i >= 0 && i < static_cast<long>(single_size)) out[static_cast<std::size_t>(i)] = t.p[j];
    }
    return;
  }
  const std::size_t size = plan.size();
  const auto n_mod = static_cast<long>(size);
  std::vector<std::complex<double>>& total = ws.total;
  total.assign(size / 2 + 1, {1.0, 0.0});
  std::vector<double>& buffer = ws.buffer;
  buffer.resize(size);
  const double eta = fft::error_bound(size);
  const double e = (eta + 16.0 * kU) * (1.0 + 1e-6);  // the inputs sum to 1 up to their rounding
  std::vector<double>& bound_s = ws.bound_s;  // S_k and prod b^T so far
  std::vector<double>& bound_p = ws.bound_p;
  bound_s.assign(total.size(), 0.0);
  bound_p.assign(total.size(), 1.0);
  // A frequency whose bound prod b^T is below e^kDead, times the most the later groups can
  // multiply it by (b <= 1 + 2e each: the inputs sum to 1), is set to 0 and skipped from then
  // on: its exact value is below e^-800 (and so are its S_k terms, c e b^(c-1) <= c b^c), far
  // below what the Parseval sum below can register; it is charged as e^-690 anyway.
  constexpr double kDead = -800.0;
  double growth = 0.0;  // log of the largest factor all groups together can apply
  for (const double count : counts) growth += count * std::log1p(2.0 * e);
  std::vector<unsigned char>& dead = ws.dead;
  dead.assign(total.size(), 0);
  std::size_t n_dead = 0;
  std::vector<double>& rho = ws.rho;  // per frequency: the relative rounding of its powers and products
  rho.assign(total.size(), 0.0);
  std::vector<std::size_t>& live = ws.live;
  for (std::size_t g = 0; g < seqs.size(); ++g) {
    std::fill(buffer.begin(), buffer.end(), 0.0);
    const Tilted& t = *seqs[g];
    for (std::size_t j = 0; j < t.p.size(); ++j) {
      long index = (t.low + static_cast<long>(j)) % n_mod;
      if (index < 0) index += n_mod;
      buffer[static_cast<std::size_t>(index)] += t.p[j];
    }
    std::vector<std::complex<double>>& spectrum = ws.spectrum;
    plan.forward(buffer, spectrum);
    const double count = counts[g];
    // The live frequencies (see power.hpp), recomputed directly where that costs at most direct_budget(N, thorough)
    // terms in all: their error then no longer grows with log N, nor their powers' with the
    // double round-off. Where the sequence is longer than that budget allows, only its heaviest
    // window (the bulk) is summed directly and the rest comes from a transform of the rest
    // alone, whose error scales with the rest's mass (a spike of no-hit losses and a long
    // tail of rare ones: the rest holds ~q of the mass).
    live.clear();
    std::size_t bulk_lo = 0, bulk_len = t.p.size();
    bool partial = false;
    double e_live = e;
    static const bool extended = kExtended && extended_rounding();
    if (extended && count > 1.0) {
      const std::size_t terms = direct_budget(size, ws.thorough);
      // Each live frequency costs its bulk's terms and about kPerFrequency twiddle products (its 64 small twiddles,
      // one per block of 64 terms, the phase). Thorough, at least 64 terms each. Plain grids keep the older rule (128
      // for the overhead and at least 192 terms): the sums also cost the rest's own transform where the bulk is
      // partial, and admitting more frequencies there made the bench grid's sigma=1.1, q=0.00427, T=1e5 14 % slower
      // for a lower bound 1e-7 higher.
      const std::size_t overhead = ws.thorough ? kPerFrequency : 128;
      const std::size_t most = terms / (overhead + (ws.thorough ? 64 : 192));
      for (std::size_t k = 0; k < total.size() && live.size() <= most; ++k) {
        if (!dead[k] && count * std::log(magnitude_up(spectrum[k]) + e) > kLive) live.push_back(k);
      }
      const std::size_t budget = live.empty() || live.size() > most ? 0 : terms / live.size();
      if (budget > overhead) bulk_len = std::min(t.p.size(), budget - overhead);
      if (budget > overhead && bulk_len >= std::min<std::size_t>(t.p.size(), 64)) {
        partial = bulk_len < t.p.size();
        bulk_lo = heaviest_window(t.p, bulk_len);
        // Masses of the bulk and the rest, summed apart (non-negative terms: relative error <= n u).
        double bulk_mass = 0.0, rest_mass = 0.0;
        for (std::size_t j = 0; j < t.p.size(); ++j) (j >= bulk_lo && j < bulk_lo + bulk_len ? bulk_mass : rest_mass) += t.p[j];
        const double sum_error = 1.0 + 2.0 * kU * static_cast<double>(t.p.size() + 2);
        // (The sum of the two parts rounds once more in long double: 2 u' of the mass.)
        e_live = direct_error(bulk_len, bulk_mass * sum_error) + e * rest_mass * sum_error +
                 static_cast<double>(2.0L * kUnitLd) * (bulk_mass + rest_mass) * sum_error;
      }
      if (!(e_live < 0.5 * e)) {
        live.clear();
        partial = false;
        e_live = e;
      }
    }
    const TwiddleTable twiddle(ws, live.empty() ? 0 : size);
    if (stats != nullptr) {
      stats->direct += live.size();
      stats->bulk_split = stats->bulk_split || partial;
    }
    std::vector<std::complex<double>>& rest = ws.rest;
    if (partial) {  // the rest's own transform
      std::fill(buffer.begin(), buffer.end(), 0.0);
      for (std::size_t j = 0; j < t.p.size(); ++j) {
        if (j >= bulk_lo && j < bulk_lo + bulk_len) continue;
        long index = (t.low + static_cast<long>(j)) % n_mod;
        if (index < 0) index += n_mod;
        buffer[static_cast<std::size_t>(index)] += t.p[j];
      }
      plan.forward(buffer, rest);
    }
    const double rho_live = static_cast<double>(8.0L * kUnitLd * static_cast<long double>(count + std::log2(count + 1.0) + 2.0)) +
                            8.0 * kU * 3.0;
    const double rho_group = 8.0 * kU * (count + std::log2(count + 1.0) + 2.0);
    std::size_t next_live = 0;
    // b below this makes a frequency dead when nothing before it shrank its bound (bound_p = 1).
    const double b_dead = std::exp((kDead - growth) / count);
    for (std::size_t k = 0; k < total.size(); ++k) {
      if (dead[k]) continue;
      if (next_live < live.size() && live[next_live] == k) {
        ++next_live;
        std::complex<long double> zd =
            direct_frequency(t.p.data() + bulk_lo, bulk_len, t.low + static_cast<long>(bulk_lo), k, size, twiddle);
        if (partial) zd += std::complex<long double>(rest[k].real(), rest[k].imag());
        const std::complex<long double> zt = integer_power_ld(zd, count);
        const std::complex<double> z{static_cast<double>(zt.real()), static_cast<double>(zt.imag())};
        const double re = total[k].real() * z.real() - total[k].imag() * z.imag();
        const double im = total[k].real() * z.imag() + total[k].imag() * z.real();
        total[k] = {re, im};
        const double b = static_cast<double>(std::abs(zd)) * (1.0 + 4.0 * kU) + e_live;
        const double b_t = std::exp(count * std::log(b));
        bound_s[k] = bound_s[k] * b_t + bound_p[k] * count * e_live * (b_t / b);
        bound_p[k] *= b_t;
        rho[k] += rho_live;
        continue;
      }
      const double b = magnitude_up(spectrum[k]) + e;
      const bool gone = bound_p[k] == 1.0 ? b < b_dead
                                          : std::log(bound_p[k]) + count * std::log(b) + growth < kDead;
      if (gone) {
        dead[k] = 1;
        ++n_dead;
        total[k] = {0.0, 0.0};
        bound_s[k] = bound_p[k] = 0.0;
        continue;
      }
      const std::complex<double> z = integer_power(spectrum[k], count);
      const double re = total[k].real() * z.real() - total[k].imag() * z.imag();
      const double im = total[k].real() * z.imag() + total[k].imag() * z.real();
      total[k] = {re, im};
      const double b_t = std::exp(count * std::log(b));
      // b^(T-1) as b^T / b: two more roundings, covered by the (1 + 1e-10) below.
      bound_s[k] = bound_s[k] * b_t + bound_p[k] * count * e * (b_t / b);
      bound_p[k] *= b_t;
      // Repeated squaring raises each rounding to the power of the exponent still to come:
      // the computed power errs by <= (1 + 3u)^(2 count + log2 count) - 1 relative (complex
      // products within 3u; Higham Lemma 3.5), the products over the groups by 3u each.
      rho[k] += rho_group;
    }
  }
  // Parseval over the full spectrum (k and N - k alike, except 0 and N/2).
  double spec2 = 0.0, err2 = 0.0, err1 = 0.0;
  for (std::size_t k = 0; k < total.size(); ++k) {
    const double w = (k == 0 || k + 1 == total.size()) ? 1.0 : 2.0;
    const double a = magnitude_up(total[k]);
    const double d = bound_s[k] * (1.0 + 1e-10) + rho[k] * a;
    spec2 += w * a * a;
    err2 += w * d * d;
    err1 += w * d;
  }
  err2 += 2.0 * static_cast<double>(n_dead) * 1e-300;  // (e^-690)^2 per dead frequency, both halves
  err1 += 2.0 * static_cast<double>(n_dead) * 1e-299;  // e^-690 < 1e-299 per dead frequency, both halves
  const double inverse = eta * std::sqrt(spec2) / std::sqrt(static_cast<double>(size));
  const double floor = 8.0 * kU * static_cast<double>(seqs.size()) / static_cast<double>(size);
  *error += (std::sqrt(err2) / std::sqrt(static_cast<double>(size)) + inverse) * (1.0 + 1e-10) + floor;
  // Every entry: the spectrum's error enters it as (1/N) sum_k err_k e^{2 pi i j k / N}, at most
  // the 1-norm over N, and the inverse transform's own rounding at most the 2-norm bound.
  if (entry_error != nullptr) {
    *entry_error += (err1 / static_cast<double>(size) + inverse) * (1.0 + 1e-10) + floor;
  }
  std::vector<double>& circular = ws.circular;
  plan.inverse(total, circular);
  out.resize(size);
  const double inv_n = 1.0 / static_cast<double>(size);
  long r = start % n_mod;
  if (r < 0) r += n_mod;
  for (std::size_t i = 0; i < size; ++i) {
    out[i] = std::max(circular[static_cast<std::size_t>(r)] * inv_n, 0.0);  // FFT noise below 0 -> 0
    if (++r == n_mod) r = 0;
  }
}

}  // namespace dpacct::pld

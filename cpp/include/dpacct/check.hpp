// Input validation shared by every kernel.
//
// Each helper throws std::invalid_argument (pybind11 turns it into ValueError)
// with the message format used across dpacct: the parameter's name, the
// constraint, and the value received, e.g.
//   "noise_multiplier must be finite and > 0, got -1"
// The comparisons are written so that NaN fails every check.
#pragma once

#include <charconv>
#include <cmath>
#include <cstddef>
#include <stdexcept>
#include <string>

namespace dpacct {

// Shortest round-trip text of a double ("1e-05", "0.5", "nan", "inf"), so the
// message shows the value the user typed rather than 17 noisy digits.
inline std::string format_value(double value) {
  if (std::isnan(value)) return "nan";
  if (std::isinf(value)) return value > 0 ? "inf" : "-inf";
  char buffer[64];
  auto result = std::to_chars(buffer, buffer + sizeof(buffer), value);
  return std::string(buffer, result.ptr);
}

[[noreturn]] inline void fail(const char* name, const char* constraint, double value) {
  throw std::invalid_argument(std::string(name) + " must be " + constraint + ", got " +
                              format_value(value));
}

inline void require_positive_finite(const char* name, double value) {
  if (!(value > 0.0 && std::isfinite(value))) fail(name, "finite and > 0", value);
}

inline void require_nonnegative_finite(const char* name, double value) {
  if (!(value >= 0.0 && std::isfinite(value))) fail(name, "finite and >= 0", value);
}

inline void require_probability(const char* name, double value) {
  if (!(value >= 0.0 && value <= 1.0)) fail(name, "in [0, 1]", value);
}

inline void require_open_unit(const char* name, double value) {
  if (!(value > 0.0 && value < 1.0)) fail(name, "in (0, 1)", value);
}

// Orders of Renyi divergence: > 1; +inf is allowed and means the max-divergence.
inline void require_orders(const double* orders, std::size_t n) {
  for (std::size_t i = 0; i < n; ++i) {
    if (!(orders[i] > 1.0)) {
      throw std::invalid_argument("orders must all be > 1, got " + format_value(orders[i]) +
                                  " at index " + std::to_string(i));
    }
  }
}

}  // namespace dpacct

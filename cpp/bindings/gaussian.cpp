// Bindings of the Gaussian mechanism's exact curve: convert, release the GIL, call the kernel. No maths here.
#include "bindings/gaussian.hpp"

#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <cstddef>
#include <cstdint>
#include <string>

#include "bindings/common.hpp"
#include "dpacct/gaussian.hpp"

namespace dpacct::bindings {

using namespace pybind11::literals;

void bind_gaussian(pybind11::module_& m) {
  auto gaussian = m.def_submodule("gaussian", "Gaussian mechanism kernels (see dpacct.gaussian).");
  gaussian.def(
      "log_delta",
      [](double noise_multiplier, const Array& epsilon) {
        return map_array(epsilon, [&](double e) { return dpacct::gaussian::log_delta(noise_multiplier, e); });
      },
      "noise_multiplier"_a, "epsilon"_a, "log delta(epsilon) of the Gaussian mechanism; see dpacct.gaussian.");
  gaussian.def(
      "epsilon",
      [](double noise_multiplier, const Array& delta) {
        return map_array(delta, [&](double d) { return dpacct::gaussian::epsilon(noise_multiplier, d); });
      },
      "noise_multiplier"_a, "delta"_a, "epsilon(delta) of the Gaussian mechanism; see dpacct.gaussian.");
}

}  // namespace dpacct::bindings

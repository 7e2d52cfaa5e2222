// dpacct._core.fdp: the weighted mixture of discretised PLD steps used by the
// DP-SGD-JL accountant (cpp/include/dpacct/pld/mixture.hpp). Converts and
// releases the GIL; no maths here.
#include "bindings/fdp.hpp"

#include <pybind11/stl.h>

#include <vector>

#include "dpacct/pld/mixture.hpp"
#include "dpacct/pld/step.hpp"

namespace py = pybind11;
using namespace py::literals;

namespace dpacct::bindings {

void bind_fdp(py::module_& m) {
  auto fdp = m.def_submodule("fdp", "f-DP kernels (see dpacct.fdp).");
  fdp.def(
      "mix_steps",
      [](const std::vector<const dpacct::pld::StepPmf*>& upper_steps, const std::vector<double>& upper_weights,
         double extra_infinity, long extra_index, double extra_mass, double upper_shift,
         const std::vector<const dpacct::pld::StepPmf*>& lower_steps, const std::vector<double>& lower_weights) {
        py::gil_scoped_release release;
        return dpacct::pld::mix_steps(upper_steps, upper_weights, extra_infinity, extra_index, extra_mass,
                                      upper_shift, lower_steps, lower_weights);
      },
      "upper_steps"_a, "upper_weights"_a, "extra_infinity"_a, "extra_index"_a, "extra_mass"_a, "upper_shift"_a,
      "lower_steps"_a, "lower_weights"_a, "Weighted mixture of PLD steps; see dpacct.fdp.jl.");
}

}  // namespace dpacct::bindings

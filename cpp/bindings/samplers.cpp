// Bindings of the shuffled-batch lower bound: convert, release the GIL, call the kernel. No maths here.
#include "bindings/samplers.hpp"

#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <cstddef>
#include <cstdint>
#include <string>

#include "bindings/common.hpp"
#include "dpacct/samplers/shuffle.hpp"

namespace dpacct::bindings {

using namespace pybind11::literals;

void bind_samplers(pybind11::module_& m) {
  auto samplers = m.def_submodule("samplers", "Shuffled-batch (ABLQ) kernels (see dpacct.samplers).");
  samplers.def(
      "log_event",
      [](double noise_multiplier, double steps, const Array& threshold) {
        dpacct::samplers::log_event(noise_multiplier, steps, 0.0);  // validate before releasing the GIL
        Array log_p(threshold.request().shape);
        Array log_q(threshold.request().shape);
        const double* c = threshold.data();
        double* p = log_p.mutable_data();
        double* q = log_q.mutable_data();
        const auto n = static_cast<std::size_t>(threshold.size());
        for (std::size_t i = 0; i < n; ++i) {
          const auto event = dpacct::samplers::log_event(noise_multiplier, steps, c[i]);
          p[i] = event.log_p;
          q[i] = event.log_q;
        }
        return py::make_tuple(log_p, log_q);
      },
      "noise_multiplier"_a, "steps"_a, "threshold"_a, "(log P_S(E_C), log Q_S(E_C)); see dpacct.samplers.");
  samplers.def(
      "log_delta_lower",
      [](double noise_multiplier, double steps, const Array& epsilon) {
        Array thresholds(epsilon.request().shape);
        double* c = thresholds.mutable_data();
        std::size_t i = 0;
        Array out = map_array(epsilon, [&](double e) {
          const auto best = dpacct::samplers::log_delta_lower(noise_multiplier, steps, e);
          c[i++] = best.threshold;
          return best.value;
        });
        return py::make_tuple(out, thresholds);
      },
      "noise_multiplier"_a, "steps"_a, "epsilon"_a,
      "(log delta lower bound, maximising C) per epsilon; see dpacct.samplers.delta_shuffle_lower.");
  samplers.def(
      "epsilon_lower",
      [](double noise_multiplier, double steps, const Array& delta) {
        Array thresholds(delta.request().shape);
        double* c = thresholds.mutable_data();
        std::size_t i = 0;
        Array out = map_array(delta, [&](double d) {
          const auto best = dpacct::samplers::epsilon_lower(noise_multiplier, steps, d);
          c[i++] = best.threshold;
          return best.value;
        });
        return py::make_tuple(out, thresholds);
      },
      "noise_multiplier"_a, "steps"_a, "delta"_a,
      "(epsilon lower bound, maximising C) per delta; see dpacct.samplers.epsilon_shuffle_lower.");
}

}  // namespace dpacct::bindings

// The pybind11 module: with the files under bindings/ the only code that includes
// pybind11. It converts arrays, releases the GIL,
// calls the pure C++ kernels and wraps their results. No maths here.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/complex.h>
#include <pybind11/stl.h>

#include <cstdint>
#include <optional>
#include <string>
#include <tuple>

#include "dpacct/ablq.hpp"
#include "dpacct/fft.hpp"
#include "dpacct/gaussian.hpp"
#include "bindings/pld.hpp"
#include "bindings/fdp.hpp"
#include "dpacct/rdp.hpp"

namespace py = pybind11;
using namespace py::literals;
using Array = py::array_t<double, py::array::c_style | py::array::forcecast>;
using IndexArray = py::array_t<std::int64_t>;

namespace {

// Applies f to each element of `values`, with the GIL released.
template <class F>
Array map_array(const Array& values, F f) {
  Array out(values.request().shape);
  const double* in = values.data();
  double* result = out.mutable_data();
  const auto n = static_cast<std::size_t>(values.size());
  {
    py::gil_scoped_release release;
    for (std::size_t i = 0; i < n; ++i) result[i] = f(in[i]);
  }
  return out;
}

// Evaluates an RDP conversion for each target in `targets`.
template <class F>
py::tuple convert_rdp(const Array& orders, const Array& rdp, const Array& targets,
                      const std::string& conversion, F convert) {
  if (orders.ndim() != 1 || rdp.ndim() != 1 || orders.size() != rdp.size()) {
    throw std::invalid_argument("orders and rdp must be 1-d arrays of the same length");
  }
  const auto kind = dpacct::rdp::parse_conversion(conversion);
  Array values(targets.request().shape);
  IndexArray indices(targets.request().shape);
  const auto n = static_cast<std::size_t>(orders.size());
  const auto m = static_cast<std::size_t>(targets.size());
  const double* o = orders.data();
  const double* r = rdp.data();
  const double* t = targets.data();
  double* v = values.mutable_data();
  std::int64_t* idx = indices.mutable_data();
  {
    py::gil_scoped_release release;
    for (std::size_t i = 0; i < m; ++i) {
      const auto best = convert(o, r, n, t[i], kind);
      v[i] = best.value;
      idx[i] = static_cast<std::int64_t>(best.index);
    }
  }
  return py::make_tuple(values, indices);
}

}  // namespace

PYBIND11_MODULE(_core, m) {
  m.doc() = "dpacct numeric core (C++). Use the Python API in dpacct instead.";

  auto ablq = m.def_submodule("ablq", "Shuffled-batch ABLQ kernels (see dpacct.ablq).");
  ablq.def(
      "log_event",
      [](double noise_multiplier, double steps, const Array& threshold) {
        dpacct::ablq::log_event(noise_multiplier, steps, 0.0);  // validate before releasing the GIL
        Array log_p(threshold.request().shape);
        Array log_q(threshold.request().shape);
        const double* c = threshold.data();
        double* p = log_p.mutable_data();
        double* q = log_q.mutable_data();
        const auto n = static_cast<std::size_t>(threshold.size());
        for (std::size_t i = 0; i < n; ++i) {
          const auto event = dpacct::ablq::log_event(noise_multiplier, steps, c[i]);
          p[i] = event.log_p;
          q[i] = event.log_q;
        }
        return py::make_tuple(log_p, log_q);
      },
      "noise_multiplier"_a, "steps"_a, "threshold"_a, "(log P_S(E_C), log Q_S(E_C)); see dpacct.ablq.");
  ablq.def(
      "log_delta_lower",
      [](double noise_multiplier, double steps, const Array& epsilon) {
        Array thresholds(epsilon.request().shape);
        double* c = thresholds.mutable_data();
        std::size_t i = 0;
        Array out = map_array(epsilon, [&](double e) {
          const auto best = dpacct::ablq::log_delta_lower(noise_multiplier, steps, e);
          c[i++] = best.threshold;
          return best.value;
        });
        return py::make_tuple(out, thresholds);
      },
      "noise_multiplier"_a, "steps"_a, "epsilon"_a,
      "(log delta lower bound, maximising C) per epsilon; see dpacct.ablq.delta_shuffle_lower.");
  ablq.def(
      "epsilon_lower",
      [](double noise_multiplier, double steps, const Array& delta) {
        Array thresholds(delta.request().shape);
        double* c = thresholds.mutable_data();
        std::size_t i = 0;
        Array out = map_array(delta, [&](double d) {
          const auto best = dpacct::ablq::epsilon_lower(noise_multiplier, steps, d);
          c[i++] = best.threshold;
          return best.value;
        });
        return py::make_tuple(out, thresholds);
      },
      "noise_multiplier"_a, "steps"_a, "delta"_a,
      "(epsilon lower bound, maximising C) per delta; see dpacct.ablq.epsilon_shuffle_lower.");

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

  auto rdp = m.def_submodule("rdp", "Renyi DP kernels (see dpacct.rdp).");
  rdp.def(
      "subsampled_gaussian",
      [](double sampling_probability, double noise_multiplier, const Array& orders) {
        Array out(orders.request().shape);
        const auto n = static_cast<std::size_t>(orders.size());
        const double* in = orders.data();
        double* result = out.mutable_data();
        {
          py::gil_scoped_release release;
          dpacct::rdp::subsampled_gaussian(sampling_probability, noise_multiplier, in, n, result);
        }
        return out;
      },
      "sampling_probability"_a, "noise_multiplier"_a, "orders"_a,
      "RDP of the Poisson-subsampled Gaussian; see dpacct.rdp.subsampled_gaussian_rdp.");
  rdp.def(
      "epsilon_from_rdp",
      [](const Array& orders, const Array& rdp_values, const Array& delta, const std::string& conversion) {
        return convert_rdp(orders, rdp_values, delta, conversion, dpacct::rdp::epsilon_from_rdp);
      },
      "orders"_a, "rdp"_a, "delta"_a, "conversion"_a,
      "(epsilon, order index) per delta; see dpacct.rdp.epsilon_from_rdp.");
  rdp.def(
      "delta_from_rdp",
      [](const Array& orders, const Array& rdp_values, const Array& epsilon, const std::string& conversion) {
        return convert_rdp(orders, rdp_values, epsilon, conversion, dpacct::rdp::delta_from_rdp);
      },
      "orders"_a, "rdp"_a, "epsilon"_a, "conversion"_a,
      "(delta, order index) per epsilon; see dpacct.rdp.delta_from_rdp.");

  dpacct::bindings::bind_pld(m);
  dpacct::bindings::bind_fdp(m);
}

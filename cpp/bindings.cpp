// The only file that includes pybind11: it converts arrays, releases the GIL,
// calls the pure C++ kernels and wraps their results. No maths here.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/complex.h>
#include <pybind11/stl.h>

#include <cstdint>
#include <string>

#include "dpacct/fft.hpp"
#include "dpacct/gaussian.hpp"
#include "dpacct/pld.hpp"
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

  auto pld = m.def_submodule("pld", "Privacy loss distribution kernels (see dpacct.pld).");
  py::class_<dpacct::pld::ComposedPld>(pld, "ComposedPld", "A composed, tilted PLD of one direction; see dpacct.pld.")
      .def(py::init([](const Array& groups, const std::string& direction, double discretization, double tilt,
                       std::size_t max_size) {
             if (groups.ndim() != 2 || groups.shape(1) != 3) {
               throw std::invalid_argument("groups must have shape (n, 3): sampling_probability, noise_multiplier, count");
             }
             if (direction != "remove" && direction != "add") {
               throw std::invalid_argument("direction must be 'remove' or 'add', got '" + direction + "'");
             }
             std::vector<dpacct::pld::StepGroup> g;
             const double* data = groups.data();
             for (py::ssize_t i = 0; i < groups.shape(0); ++i) g.push_back({data[3 * i], data[3 * i + 1], data[3 * i + 2]});
             const auto dir = direction == "remove" ? dpacct::pld::Direction::remove : dpacct::pld::Direction::add;
             py::gil_scoped_release release;
             return new dpacct::pld::ComposedPld(g, dir, discretization, tilt, max_size);
           }),
           "groups"_a, "direction"_a, "discretization"_a, "tilt"_a, "max_size"_a)
      .def(
          "delta_bounds",
          [](const dpacct::pld::ComposedPld& self, const Array& epsilon, double beta) {
            Array lower(epsilon.request().shape);
            Array upper(epsilon.request().shape);
            const double* e = epsilon.data();
            double* lo = lower.mutable_data();
            double* up = upper.mutable_data();
            const auto n = static_cast<std::size_t>(epsilon.size());
            {
              py::gil_scoped_release release;
              for (std::size_t i = 0; i < n; ++i) self.delta_bounds(e[i], beta, &lo[i], &up[i]);
            }
            return py::make_tuple(lower, upper);
          },
          "epsilon"_a, "beta"_a, "(lower, upper) bounds on delta(epsilon) for this direction.")
      .def("hoeffding_width", &dpacct::pld::ComposedPld::hoeffding_width, "beta"_a)
      .def_property_readonly("window_low", &dpacct::pld::ComposedPld::window_low)
      .def_property_readonly("window_high", &dpacct::pld::ComposedPld::window_high)
      .def_property_readonly("mean_shift", &dpacct::pld::ComposedPld::mean_shift)
      .def_property_readonly("size", &dpacct::pld::ComposedPld::size);
  pld.def(
      "fft",
      [](py::array_t<std::complex<double>, py::array::c_style | py::array::forcecast> values, bool inverse) {
        std::vector<std::complex<double>> data(values.data(), values.data() + values.size());
        {
          py::gil_scoped_release release;
          const dpacct::fft::Plan plan(data.size());
          if (inverse) {
            plan.inverse(data);
          } else {
            plan.forward(data);
          }
        }
        return py::array_t<std::complex<double>>(static_cast<py::ssize_t>(data.size()), data.data());
      },
      "values"_a, "inverse"_a = false, "Unnormalised radix-2 FFT (test hook for dpacct's own FFT).");
  pld.def(
      "rfft",
      [](const Array& values) {
        std::vector<double> data(values.data(), values.data() + values.size());
        std::vector<std::complex<double>> out;
        {
          py::gil_scoped_release release;
          out = dpacct::fft::RealPlan(data.size()).forward(data);
        }
        return py::array_t<std::complex<double>>(static_cast<py::ssize_t>(out.size()), out.data());
      },
      "values"_a, "Half spectrum of a real sequence (test hook for dpacct's real FFT).");
  pld.def(
      "irfft",
      [](py::array_t<std::complex<double>, py::array::c_style | py::array::forcecast> spectrum) {
        std::vector<std::complex<double>> data(spectrum.data(), spectrum.data() + spectrum.size());
        std::vector<double> out;
        {
          py::gil_scoped_release release;
          out = dpacct::fft::RealPlan(2 * (data.size() - 1)).inverse(data);
        }
        return Array(static_cast<py::ssize_t>(out.size()), out.data());
      },
      "spectrum"_a, "Unnormalised inverse of rfft (test hook).");
  pld.def("fft_error_bound", &dpacct::fft::error_bound, "size"_a, "Relative 2-norm error bound of one FFT.");
}

// Bindings of the Renyi DP kernels: convert, release the GIL, call the kernel. No maths here.
#include "bindings/rdp.hpp"

#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <cstddef>
#include <cstdint>
#include <string>

#include "bindings/common.hpp"
#include "dpacct/rdp.hpp"

namespace dpacct::bindings {

using namespace pybind11::literals;

namespace {

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

void bind_rdp(pybind11::module_& m) {
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
}

}  // namespace dpacct::bindings

// Shared by the binding files: array types and the element-wise map that releases the GIL.
#pragma once

#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>

#include <cstddef>
#include <cstdint>

namespace dpacct::bindings {

namespace py = pybind11;
using Array = py::array_t<double, py::array::c_style | py::array::forcecast>;
using IndexArray = py::array_t<std::int64_t>;

// Applies f to each element of `values`, with the GIL released.
template <class F>
inline Array map_array(const Array& values, F f) {
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

}  // namespace dpacct::bindings

// Bindings of the shuffled-batch lower bound (dpacct._core.samplers); see bindings/samplers.cpp.
#pragma once

#include <pybind11/pybind11.h>

namespace dpacct::bindings {

void bind_samplers(pybind11::module_& m);

}  // namespace dpacct::bindings

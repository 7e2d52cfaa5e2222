// Bindings of the Gaussian mechanism's exact curve (dpacct._core.gaussian); see bindings/gaussian.cpp.
#pragma once

#include <pybind11/pybind11.h>

namespace dpacct::bindings {

void bind_gaussian(pybind11::module_& m);

}  // namespace dpacct::bindings

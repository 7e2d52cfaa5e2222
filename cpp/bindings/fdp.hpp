// Bindings of the f-DP helpers (dpacct._core.fdp); see bindings/fdp.cpp.
#pragma once

#include <pybind11/pybind11.h>

namespace dpacct::bindings {

void bind_fdp(pybind11::module_& m);

}  // namespace dpacct::bindings

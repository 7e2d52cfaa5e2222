// Bindings of the Renyi DP kernels (dpacct._core.rdp); see bindings/rdp.cpp.
#pragma once

#include <pybind11/pybind11.h>

namespace dpacct::bindings {

void bind_rdp(pybind11::module_& m);

}  // namespace dpacct::bindings

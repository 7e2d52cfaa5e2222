// Bindings of the PLD engine (dpacct._core.pld); see bindings/pld.cpp.
#pragma once

#include <pybind11/pybind11.h>

namespace dpacct::bindings {

void bind_pld(pybind11::module_& m);

}  // namespace dpacct::bindings

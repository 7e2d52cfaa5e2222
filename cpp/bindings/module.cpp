// The pybind11 module dpacct._core: one submodule per family, each bound in its own file
// under bindings/ (the only code that includes pybind11). No maths here.
#include <pybind11/pybind11.h>

#include "bindings/fdp.hpp"
#include "bindings/gaussian.hpp"
#include "bindings/pld.hpp"
#include "bindings/rdp.hpp"
#include "bindings/samplers.hpp"

PYBIND11_MODULE(_core, m) {
  m.doc() = "dpacct numeric core (C++). Use the Python API in dpacct instead.";
  dpacct::bindings::bind_samplers(m);
  dpacct::bindings::bind_gaussian(m);
  dpacct::bindings::bind_rdp(m);
  dpacct::bindings::bind_pld(m);
  dpacct::bindings::bind_fdp(m);
}

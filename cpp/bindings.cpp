// The only file that includes pybind11: it converts arrays, releases the GIL,
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
#include "dpacct/pld.hpp"
#include "dpacct/pld_discrete.hpp"
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
          [](const dpacct::pld::ComposedPld& self, const Array& epsilon) {
            Array lower(epsilon.request().shape);
            Array upper(epsilon.request().shape);
            const double* e = epsilon.data();
            double* lo = lower.mutable_data();
            double* up = upper.mutable_data();
            const auto n = static_cast<std::size_t>(epsilon.size());
            {
              py::gil_scoped_release release;
              for (std::size_t i = 0; i < n; ++i) self.delta_bounds(e[i], &lo[i], &up[i]);
            }
            return py::make_tuple(lower, upper);
          },
          "epsilon"_a, "(lower, upper) bounds on delta(epsilon) for this direction.")
      .def_property_readonly("window_low", &dpacct::pld::ComposedPld::window_low)
      .def_property_readonly("window_high", &dpacct::pld::ComposedPld::window_high)
      .def_property_readonly("discretization", &dpacct::pld::ComposedPld::discretization)
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

  auto pld_discrete = m.def_submodule("pld_discrete", "Generic discrete PLD kernels (see dpacct.pld_discrete).");
  pld_discrete.def(
      "from_cells",
      [](const Array& log_p, const Array& log_q, const std::optional<Array>& log_ratio_at_edges,
         double discretization, bool pessimistic, std::size_t max_size) {
        if (log_p.ndim() != 1 || log_q.ndim() != 1 || log_p.size() != log_q.size()) {
          throw std::invalid_argument("log_p and log_q must be 1-d arrays of the same length");
        }
        const auto n = static_cast<std::size_t>(log_p.size());
        const double* ratio = nullptr;
        if (log_ratio_at_edges) {
          if (log_ratio_at_edges->ndim() != 1 || static_cast<std::size_t>(log_ratio_at_edges->size()) + 1 != n) {
            throw std::invalid_argument("log_ratio_at_edges must be a 1-d array with one entry fewer than log_p");
          }
          ratio = log_ratio_at_edges->data();
        }
        dpacct::pld_discrete::Pmf pmf;
        {
          py::gil_scoped_release release;
          pmf = dpacct::pld_discrete::from_cells(log_p.data(), log_q.data(), n, ratio, discretization, pessimistic,
                                                 max_size);
        }
        return py::make_tuple(pmf.offset, Array(static_cast<py::ssize_t>(pmf.mass.size()), pmf.mass.data()),
                              pmf.infinity_mass);
      },
      "log_p"_a, "log_q"_a, "log_ratio_at_edges"_a, "discretization"_a, "pessimistic"_a, "max_size"_a,
      "(offset, mass, infinity_mass) of one step; see dpacct.pld_discrete.DiscretePLD.from_cells.");
  py::class_<dpacct::pld_discrete::Composed>(pld_discrete, "Composed",
                                             "A composed discrete PLD; see dpacct.pld_discrete.DiscretePLD.")
      .def(py::init([](const std::vector<std::tuple<long, Array, double, double>>& groups, double discretization,
                       bool pessimistic, std::size_t max_size) {
             std::vector<dpacct::pld_discrete::Group> g;
             for (const auto& [offset, mass, infinity_mass, count] : groups) {
               if (mass.ndim() != 1) throw std::invalid_argument("each group's mass must be a 1-d array");
               dpacct::pld_discrete::Pmf pmf{offset, std::vector<double>(mass.data(), mass.data() + mass.size()),
                                             infinity_mass};
               g.push_back({std::move(pmf), count});
             }
             py::gil_scoped_release release;
             return new dpacct::pld_discrete::Composed(g, discretization, pessimistic, max_size);
           }),
           "groups"_a, "discretization"_a, "pessimistic"_a, "max_size"_a)
      .def(
          "delta",
          [](const dpacct::pld_discrete::Composed& self, const Array& epsilon) {
            return map_array(epsilon, [&](double e) { return self.delta(e); });
          },
          "epsilon"_a, "Certified bound on delta(epsilon); see dpacct.pld_discrete.DiscretePLD.get_delta.")
      .def(
          "epsilon",
          [](const dpacct::pld_discrete::Composed& self, const Array& delta) {
            return map_array(delta, [&](double d) { return self.epsilon(d); });
          },
          "delta"_a, "Certified bound on epsilon(delta); see dpacct.pld_discrete.DiscretePLD.get_epsilon.")
      .def_property_readonly("offset", &dpacct::pld_discrete::Composed::offset)
      .def_property_readonly("mass",
                             [](const dpacct::pld_discrete::Composed& self) {
                               return Array(static_cast<py::ssize_t>(self.mass().size()), self.mass().data());
                             })
      .def_property_readonly("infinity_mass", &dpacct::pld_discrete::Composed::infinity_mass)
      .def_property_readonly("error_l2", &dpacct::pld_discrete::Composed::error_l2)
      .def_property_readonly("fft_size", &dpacct::pld_discrete::Composed::fft_size)
      .def_property_readonly("tail_low", &dpacct::pld_discrete::Composed::tail_low)
      .def_property_readonly("tail_high", &dpacct::pld_discrete::Composed::tail_high);
}

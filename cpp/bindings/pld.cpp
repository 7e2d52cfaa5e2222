// dpacct._core.pld: converts arrays, releases the GIL, calls the PLD kernels
// (cpp/include/dpacct/pld/) and wraps their results. No maths here.
#include "bindings/pld.hpp"

#include <pybind11/complex.h>
#include <pybind11/numpy.h>
#include <pybind11/stl.h>

#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <utility>
#include <limits>
#include <vector>

#include "dpacct/cached.hpp"
#include "dpacct/fft.hpp"
#include "dpacct/logmath.hpp"
#include "dpacct/pld/allocation.hpp"
#include "dpacct/pld/compose.hpp"
#include "dpacct/pld/finite.hpp"
#include "dpacct/pld/monotone.hpp"
#include "dpacct/pld/one_rare.hpp"
#include "dpacct/pld/split.hpp"
#include "dpacct/pld/symmetric.hpp"

namespace py = pybind11;
using namespace py::literals;
using Array = py::array_t<double, py::array::c_style | py::array::forcecast>;

namespace dpacct::bindings {

namespace {

using dpacct::pld::MonotonePair;
using dpacct::pld::StepPmf;

bool parse_direction(const std::string& direction) {
  if (direction != "remove" && direction != "add") {
    throw std::invalid_argument("direction must be 'remove' or 'add', got '" + direction + "'");
  }
  return direction == "add";
}

// One direction of the Poisson-subsampled base pair, discretised whole or, when
// split_ratio > 0, cut into its small and rare parts (pld/split.hpp), or, when
// rare_growth > 0, into its band (split_ratio fine cells below 0, split_tau
// above) and the geometric rare cells above it (pld/one_rare.hpp).
py::object monotone_step(std::shared_ptr<const MonotonePair> base, double sampling_probability,
                         const std::string& direction, double discretization, double log_tail, std::size_t max_cells,
                         long split_ratio, long split_tau, double rare_growth, bool size_only, bool shared_labels,
                         double query_tail) {
  const bool add = parse_direction(direction);
  std::shared_ptr<const MonotonePair> pair =
      std::make_shared<dpacct::pld::Subsampled>(std::move(base), sampling_probability, query_tail);
  if (add) pair = std::make_shared<dpacct::pld::Swapped>(pair);
  if (size_only) return py::int_(dpacct::pld::discretized_size(*pair, discretization, log_tail));
  if (rare_growth > 0.0) {
    dpacct::pld::OneRareStep step;
    {
      py::gil_scoped_release release;
      step = dpacct::pld::discretize_one_rare(*pair, discretization, split_ratio, split_tau, rare_growth, log_tail,
                                              max_cells);
    }
    return py::make_tuple(std::move(step.band), std::move(step.rare));
  }
  if (split_ratio > 0) {  // (rare_growth == 0 here)
    dpacct::pld::SplitStep split;
    {
      py::gil_scoped_release release;
      split = dpacct::pld::discretize_split(*pair, discretization, split_ratio, split_tau, log_tail, max_cells);
    }
    return py::make_tuple(std::move(split.small), std::move(split.rare));
  }
  StepPmf step;
  {
    py::gil_scoped_release release;
    step = dpacct::pld::discretize(*pair, discretization, log_tail, max_cells, shared_labels);
  }
  return py::cast(std::move(step));
}

std::vector<double> to_vector(const Array& a, const char* name) {
  if (a.ndim() != 1) throw std::invalid_argument(std::string(name) + " must be a 1-d array");
  return {a.data(), a.data() + a.size()};
}

template <class Vector>
Array to_array(const Vector& v) {
  return Array(static_cast<py::ssize_t>(v.size()), v.data());
}

// Per-entry certified ends of a balls-in-bins lattice law.
Array ends(const dpacct::pld::AllocationLaws::Law& law, bool high) {
  std::vector<double> v(law.low.size());
  for (std::size_t i = 0; i < v.size(); ++i) v[i] = high ? law.high_end(i) : law.low_end(i);
  return to_array(v);
}

// (lower, upper) arrays of delta bounds at an array of epsilons, for either composer.
template <class Composed>
py::tuple delta_bounds_of(const Composed& self, const Array& epsilon) {
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
}

}  // namespace

void bind_pld(py::module_& m) {
  auto pld = m.def_submodule("pld", "Privacy loss distribution kernels (see dpacct.pld).");
  py::class_<StepPmf>(pld, "Step", "One discretised step of a dominating pair; see dpacct.pld.")
      .def_readonly("discretization", &StepPmf::discretization)
      .def_readonly("has_upper", &StepPmf::has_upper)
      .def_readonly("upper_low", &StepPmf::upper_low)
      .def_readonly("label_low", &StepPmf::label_low)
      .def_property_readonly("log_upper", [](const StepPmf& s) { return to_array(s.log_upper); })
      .def_property_readonly("log_p", [](const StepPmf& s) { return to_array(s.log_p); })
      .def_property_readonly("log_q", [](const StepPmf& s) { return to_array(s.log_q); })
      .def_readonly("infinity_upper", &StepPmf::infinity_upper)
      .def_readonly("infinity_lower", &StepPmf::infinity_lower)
      .def_readonly("loss_slack", &StepPmf::loss_slack)
      .def_property_readonly("log_q_mid", [](const StepPmf& s) { return to_array(s.log_q_mid); })
      .def_property_readonly("own_mid", [](const StepPmf& s) { return to_array(s.own_mid); })
      .def_readonly("mid_error", &StepPmf::mid_error)
      .def_readonly("own_error", &StepPmf::own_error)
      .def_property_readonly("mid_weights", [](const StepPmf& s) { return to_array(s.mid_weights); })
      .def_property_readonly("mid_eta", [](const StepPmf& s) { return to_array(s.mid_eta); })
      .def_property_readonly("mid_nu", [](const StepPmf& s) { return to_array(s.mid_nu); })
      .def_property_readonly("mid_drift", [](const StepPmf& s) { return to_array(s.mid_drift); })
      .def_readonly("mean_abs_loss", &StepPmf::mean_abs_loss)
      .def_readonly("loss_sd", &StepPmf::loss_sd)
      .def_readonly("max_abs_loss", &StepPmf::max_abs_loss);

  pld.def(
      "gaussian_step",
      [](double noise_multiplier, double sampling_probability, const std::string& direction, double discretization,
         double log_tail, std::size_t max_cells, long split_ratio, long split_tau, double rare_growth, bool size_only,
         bool shared_labels, double query_tail) {
        return monotone_step(std::make_shared<dpacct::pld::GaussianPair>(noise_multiplier), sampling_probability,
                             direction, discretization, log_tail, max_cells, split_ratio, split_tau, rare_growth,
                             size_only, shared_labels, query_tail);
      },
      "noise_multiplier"_a, "sampling_probability"_a, "direction"_a, "discretization"_a, "log_tail"_a, "max_cells"_a,
      "split_ratio"_a = 0, "split_tau"_a = 0, "rare_growth"_a = 0.0, "size_only"_a = false, "shared_labels"_a = false,
      "query_tail"_a = -std::numeric_limits<double>::infinity(),
      "One step of the Poisson-subsampled Gaussian; see dpacct.pld.");
  pld.def(
      "laplace_step",
      [](double noise_multiplier, double sampling_probability, const std::string& direction, double discretization,
         double log_tail, std::size_t max_cells, long split_ratio, long split_tau, double rare_growth, bool size_only,
         bool shared_labels, double query_tail) {
        return monotone_step(std::make_shared<dpacct::pld::LaplacePair>(noise_multiplier), sampling_probability,
                             direction, discretization, log_tail, max_cells, split_ratio, split_tau, rare_growth,
                             size_only, shared_labels, query_tail);
      },
      "noise_multiplier"_a, "sampling_probability"_a, "direction"_a, "discretization"_a, "log_tail"_a, "max_cells"_a,
      "split_ratio"_a = 0, "split_tau"_a = 0, "rare_growth"_a = 0.0, "size_only"_a = false, "shared_labels"_a = false,
      "query_tail"_a = -std::numeric_limits<double>::infinity(),
      "One step of the Poisson-subsampled Laplace mechanism; see dpacct.pld.");
  pld.def(
      "mixture_gaussian_step",
      [](double noise_multiplier, const Array& sensitivities, const Array& probabilities, double sampling_probability,
         const std::string& direction, double discretization, double log_tail, std::size_t max_cells,
         long split_ratio, long split_tau, double rare_growth, bool size_only, bool shared_labels,
         double query_tail) {
        auto base = std::make_shared<dpacct::pld::MixtureGaussianPair>(
            noise_multiplier, to_vector(sensitivities, "sensitivities"), to_vector(probabilities, "probabilities"));
        return monotone_step(std::move(base), sampling_probability, direction, discretization, log_tail, max_cells,
                             split_ratio, split_tau, rare_growth, size_only, shared_labels, query_tail);
      },
      "noise_multiplier"_a, "sensitivities"_a, "probabilities"_a, "sampling_probability"_a, "direction"_a,
      "discretization"_a, "log_tail"_a, "max_cells"_a, "split_ratio"_a = 0, "split_tau"_a = 0, "rare_growth"_a = 0.0,
      "size_only"_a = false, "shared_labels"_a = false,
      "query_tail"_a = -std::numeric_limits<double>::infinity(),
      "One step of the Poisson-subsampled mixture-of-Gaussians mechanism; see dpacct.pld.");
  pld.def(
      "finite_step",
      [](const Array& log_p, const Array& log_q, double sampling_probability, const std::string& direction,
         double discretization, std::size_t max_cells) {
        if (log_p.ndim() != 1 || log_q.ndim() != 1 || log_p.size() != log_q.size()) {
          throw std::invalid_argument("log_p and log_q must be 1-d arrays of the same length");
        }
        const bool add = parse_direction(direction);
        py::gil_scoped_release release;
        return dpacct::pld::finite_step(log_p.data(), log_q.data(), static_cast<std::size_t>(log_p.size()),
                                        sampling_probability, add, discretization, max_cells);
      },
      "log_p"_a, "log_q"_a, "sampling_probability"_a, "direction"_a, "discretization"_a, "max_cells"_a,
      "One step of a finite pair, Poisson-subsampled; see dpacct.pld.");
  pld.def(
      "symmetrised_step",
      [](const dpacct::pld::StepPmf& a, const dpacct::pld::StepPmf& b, const dpacct::pld::StepPmf& lower) {
        py::gil_scoped_release release;
        return dpacct::pld::symmetrised_step(a, b, lower);
      },
      "a"_a, "b"_a, "lower"_a,
      "The symmetrised step of a replace-one mechanism (upper half from a and b, labels from lower); "
      "see dpacct.samplers.fixed_size.");
  pld.def(
      "cells_step",
      [](const Array& log_p, const Array& log_q, const std::optional<Array>& loss_at_edges, double discretization,
         std::size_t max_cells) {
        if (log_p.ndim() != 1 || log_q.ndim() != 1 || log_p.size() != log_q.size()) {
          throw std::invalid_argument("log_p and log_q must be 1-d arrays of the same length");
        }
        const double* edges = nullptr;
        if (loss_at_edges) {
          if (loss_at_edges->ndim() != 1 || loss_at_edges->size() + 1 != log_p.size()) {
            throw std::invalid_argument("log_ratio_at_edges must have one entry fewer than log_p");
          }
          edges = loss_at_edges->data();
        }
        py::gil_scoped_release release;
        return dpacct::pld::cells_step(log_p.data(), log_q.data(), static_cast<std::size_t>(log_p.size()), edges,
                                       discretization, max_cells);
      },
      "log_p"_a, "log_q"_a, "loss_at_edges"_a, "discretization"_a, "max_cells"_a,
      "One step from the cells of a partition; see dpacct.pld_discrete.");

  using dpacct::pld::AllocationLaws;
  py::class_<AllocationLaws, std::shared_ptr<AllocationLaws>>(
      pld, "AllocationLaws", "The lattice laws of one balls-in-bins epoch; see dpacct.samplers.allocation.")
      .def_readonly("noise_multiplier", &AllocationLaws::noise_multiplier)
      .def_readonly("steps", &AllocationLaws::steps)
      .def_readonly("lattice", &AllocationLaws::lattice)
      .def_readonly("cut", &AllocationLaws::cut)
      .def_readonly("start", &AllocationLaws::start)
      .def_readonly("window_end", &AllocationLaws::window_end)
      .def_readonly("error_norm", &AllocationLaws::error_norm)
      .def_readonly("truncation", &AllocationLaws::truncation)
      .def_readonly("tail_above", &AllocationLaws::tail_above)
      .def_readonly("tail_below", &AllocationLaws::tail_below)
      .def_readonly("fft_size", &AllocationLaws::fft_size)
      .def_property_readonly("sum", [](const AllocationLaws& s) { return to_array(s.sum); })
      .def_property_readonly("null_low", [](const AllocationLaws& s) { return ends(s.null, false); })
      .def_property_readonly("null_high", [](const AllocationLaws& s) { return ends(s.null, true); })
      .def_property_readonly("record_low", [](const AllocationLaws& s) { return ends(s.record, false); })
      .def_property_readonly("record_high", [](const AllocationLaws& s) { return ends(s.record, true); });
  pld.def(
      "allocation_laws",
      [](double noise_multiplier, long steps, double resolution, double log_truncation, double log_tail,
         std::size_t max_cells) {
        py::gil_scoped_release release;
        return std::make_shared<AllocationLaws>(dpacct::pld::allocation_laws(noise_multiplier, steps, resolution,
                                                                             log_truncation, log_tail, max_cells));
      },
      "noise_multiplier"_a, "steps"_a, "resolution"_a, "log_truncation"_a, "log_tail"_a, "max_cells"_a,
      "The lattice laws of one balls-in-bins epoch; see dpacct.samplers.allocation.");
  pld.def(
      "allocation_step",
      [](const AllocationLaws& laws, const std::string& direction, double discretization, std::size_t max_cells) {
        const bool add = parse_direction(direction);
        py::gil_scoped_release release;
        return dpacct::pld::allocation_step(laws, add, discretization, max_cells);
      },
      "laws"_a, "direction"_a, "discretization"_a, "max_cells"_a,
      "One balls-in-bins epoch as a PLD step of one direction; see dpacct.samplers.allocation.");

  pld.def(
      "compose_block",
      [](const StepPmf& step, double count, double tilt, std::size_t max_size, double log_window_tail) {
        py::gil_scoped_release release;
        return dpacct::pld::compose_block(step, count, tilt, max_size, log_window_tail);
      },
      "step"_a, "count"_a, "tilt"_a, "max_size"_a, "log_window_tail"_a,
      "count copies of step composed into one step on the same grid, certified entry by entry; see dpacct.pld.");
  pld.def(
      "coarsen",
      [](const StepPmf& step, long ratio) {
        py::gil_scoped_release release;
        return dpacct::pld::coarsen(step, ratio);
      },
      "step"_a, "ratio"_a, "step re-spread onto the grid ratio times as wide (still certified); see dpacct.pld.");

  py::class_<dpacct::pld::ComposedPld>(pld, "ComposedPld", "A composed, tilted PLD of one direction; see dpacct.pld.")
      .def(py::init([](const std::vector<const StepPmf*>& steps, const std::vector<double>& counts, double tilt,
                       std::size_t max_size, double log_window_tail, bool thorough, bool lower, bool shared) {
             if (steps.size() != counts.size()) throw std::invalid_argument("steps and counts must have the same length");
             std::vector<std::pair<const StepPmf*, double>> groups;
             for (std::size_t i = 0; i < steps.size(); ++i) groups.emplace_back(steps[i], counts[i]);
             py::gil_scoped_release release;
             return new dpacct::pld::ComposedPld(groups, tilt, max_size, log_window_tail, thorough, lower, shared);
           }),
           "steps"_a, "counts"_a, "tilt"_a, "max_size"_a, "log_window_tail"_a = -25.0, "thorough"_a = false,
           "lower"_a = true, "shared"_a = false)
      .def_property_readonly("shared_labels", &dpacct::pld::ComposedPld::shared_labels)
      .def_property_readonly(
          "concentration",
          [](const dpacct::pld::ComposedPld& c) {
            const dpacct::pld::Concentration& k = c.concentration();
            return py::make_tuple(k.ok, k.factor_p, k.charge_p, k.factor_q, k.charge_q, k.charge_a);
          },
          "(ok, factor_p, charge_p, factor_q, charge_q, charge_a) of the shared labels' concentration bound: "
          "P(A) >= factor_p (P~(A) - charge_p), Q(A) <= factor_q Q~(A) + charge_q, less charge_a")
      .def(
          "delta_bounds",
          &delta_bounds_of<dpacct::pld::ComposedPld>,
          "epsilon"_a, "(lower, upper) bounds on delta(epsilon) for this direction.")
      .def(
          "epsilon_bounds",
          [](const dpacct::pld::ComposedPld& self, double delta) {
            double lower = 0.0, upper = 0.0;
            bool below = false;
            {
              py::gil_scoped_release release;
              self.epsilon_bounds(delta, &lower, &upper, &below);
            }
            return py::make_tuple(lower, upper, below);
          },
          "delta"_a, "(lower, upper, below_window) bounds on epsilon(delta) for this direction.")
      .def("upper_finite", &dpacct::pld::ComposedPld::upper_finite, "epsilon"_a,
           "Certified upper bound on the finite part's delta(epsilon) (no +inf terms).")
      .def("tail_p_lower", &dpacct::pld::ComposedPld::tail_p_lower, "y"_a, "Certified lower bound on P(K D >= y).")
      .def("tail_q_upper", &dpacct::pld::ComposedPld::tail_q_upper, "y"_a, "Certified upper bound on Q(K D >= y).")
      .def_property_readonly("cells_low", &dpacct::pld::ComposedPld::cells_low)
      .def_property_readonly("cells_high", &dpacct::pld::ComposedPld::cells_high)
      .def_property_readonly("window_low", &dpacct::pld::ComposedPld::window_low)
      .def_property_readonly("window_high", &dpacct::pld::ComposedPld::window_high)
      .def_property_readonly("discretization", &dpacct::pld::ComposedPld::discretization)
      .def_property_readonly("size", &dpacct::pld::ComposedPld::size)
      .def_property_readonly("memory_bytes", &dpacct::pld::ComposedPld::memory_bytes)
      .def_property_readonly("held_bytes", &dpacct::pld::ComposedPld::held_bytes)
      .def_property_readonly("direct_frequencies", &dpacct::pld::ComposedPld::direct_frequencies)
      .def_property_readonly("bulk_split", &dpacct::pld::ComposedPld::bulk_split);

  py::class_<dpacct::pld::SplitComposedPld>(
      pld, "SplitComposedPld", "A composition by the number of rare steps, one direction; see dpacct.pld.")
      .def(py::init([](const StepPmf& small, const StepPmf& rare, double count, long rare_max, double tilt,
                       double rare_tilt, std::size_t max_size, long block_steps, long g_ratio,
                       const std::vector<double>& more_rare_tilts, double rare_cut_low, double rare_cut_high) {
             dpacct::pld::SplitStep split{small, rare};
             py::gil_scoped_release release;
             return new dpacct::pld::SplitComposedPld(split, count, rare_max, tilt, rare_tilt, max_size, block_steps,
                                                      g_ratio, more_rare_tilts, rare_cut_low, rare_cut_high);
           }),
           "small"_a, "rare"_a, "count"_a, "rare_max"_a, "tilt"_a, "rare_tilt"_a, "max_size"_a, "block_steps"_a = 0,
           "g_ratio"_a = 1, "more_rare_tilts"_a = std::vector<double>{},
           "rare_cut_low"_a = -std::numeric_limits<double>::infinity(),
           "rare_cut_high"_a = std::numeric_limits<double>::infinity())
      .def(
          "delta_bounds",
          &delta_bounds_of<dpacct::pld::SplitComposedPld>,
          "epsilon"_a, "(lower, upper) bounds on delta(epsilon) for this direction.")
      .def(
          "epsilon_bounds",
          [](const dpacct::pld::SplitComposedPld& self, double delta) {
            double lower = 0.0, upper = 0.0;
            {
              py::gil_scoped_release release;
              self.epsilon_bounds(delta, &lower, &upper);
            }
            return py::make_tuple(lower, upper, false);
          },
          "delta"_a, "(lower, upper, below_window) bounds on epsilon(delta) for this direction.")
      .def_property_readonly("size", &dpacct::pld::SplitComposedPld::size)
      .def_property_readonly("fine_size", &dpacct::pld::SplitComposedPld::fine_size)
      .def_property_readonly("charged_tail", &dpacct::pld::SplitComposedPld::charged_tail)
      .def_property_readonly("rare_discretization", &dpacct::pld::SplitComposedPld::rare_discretization)
      .def_property_readonly("rare_tilts", &dpacct::pld::SplitComposedPld::rare_tilts)
      .def_property_readonly("chernoff_table", &dpacct::pld::SplitComposedPld::chernoff_table,
                             "(lambda, bound on log E[e^{lambda L}] of G's steps, rounded up) pairs (split.hpp).");

  py::class_<dpacct::pld::RareCells>(pld, "RareCells", "The rare cells of one step (pld/one_rare.hpp).")
      .def_property_readonly("loss", [](const dpacct::pld::RareCells& r) { return to_array(r.loss); })
      .def_property_readonly("log_upper", [](const dpacct::pld::RareCells& r) { return to_array(r.log_upper); })
      .def_property_readonly("label", [](const dpacct::pld::RareCells& r) { return to_array(r.label); })
      .def_property_readonly("log_p", [](const dpacct::pld::RareCells& r) { return to_array(r.log_p); })
      .def_property_readonly("log_q", [](const dpacct::pld::RareCells& r) { return to_array(r.log_q); })
      .def_readonly("infinity_upper", &dpacct::pld::RareCells::infinity_upper)
      .def_readonly("log_mass_upper", &dpacct::pld::RareCells::log_mass_upper)
      .def_readonly("loss_slack", &dpacct::pld::RareCells::loss_slack);

  py::class_<dpacct::pld::OneRareComposedPld>(
      pld, "OneRareComposedPld", "A composition with at most one rare step, one direction; see dpacct.pld.")
      .def(py::init([](const StepPmf& band, const dpacct::pld::RareCells& rare, double count, double tilt,
                       std::size_t max_size) {
             dpacct::pld::OneRareStep step{band, rare};
             py::gil_scoped_release release;
             return new dpacct::pld::OneRareComposedPld(step, count, tilt, max_size);
           }),
           "band"_a, "rare"_a, "count"_a, "tilt"_a, "max_size"_a)
      .def("delta_bounds", &delta_bounds_of<dpacct::pld::OneRareComposedPld>, "epsilon"_a,
           "(lower, upper) bounds on delta(epsilon) for this direction.")
      .def(
          "epsilon_bounds",
          [](const dpacct::pld::OneRareComposedPld& self, double delta) {
            double lower = 0.0, upper = 0.0;
            {
              py::gil_scoped_release release;
              self.epsilon_bounds(delta, &lower, &upper);
            }
            return py::make_tuple(lower, upper, false);
          },
          "delta"_a, "(lower, upper, below_window) bounds on epsilon(delta) for this direction.")
      .def_property_readonly("fine_size", &dpacct::pld::OneRareComposedPld::fine_size)
      .def_property_readonly("atoms", &dpacct::pld::OneRareComposedPld::atoms)
      .def_property_readonly("charged_tail", &dpacct::pld::OneRareComposedPld::charged_tail);

  pld.def(
      "fft",
      [](py::array_t<std::complex<double>, py::array::c_style | py::array::forcecast> values, bool inverse,
         int repeats) {
        if (repeats < 1) throw std::invalid_argument("repeats must be >= 1, got " + std::to_string(repeats));
        const std::vector<std::complex<double>> input(values.data(), values.data() + values.size());
        std::vector<std::complex<double>> data;
        {
          py::gil_scoped_release release;
          const dpacct::fft::Plan plan(input.size());
          for (int r = 0; r < repeats; ++r) {  // (timing: one plan, the same input each time)
            data = input;
            if (inverse) {
              plan.inverse(data);
            } else {
              plan.forward(data);
            }
          }
        }
        return py::array_t<std::complex<double>>(static_cast<py::ssize_t>(data.size()), data.data());
      },
      "values"_a, "inverse"_a = false, "repeats"_a = 1,
      "Unnormalised radix-2 FFT (test hook for dpacct's own FFT; `repeats` transforms with one plan, for timing).");
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
  pld.def(
      "suffix_sums",
      [](const Array& values, double slope, double discretization) {
        const std::vector<double> c = to_vector(values, "values");
        dpacct::CachedVector<double> sums;
        {
          py::gil_scoped_release release;
          sums = dpacct::pld::detail::suffix_sums(c, slope, discretization);
        }
        return py::make_tuple(to_array(sums), dpacct::pld::detail::suffix_relative_error(c.size()));
      },
      "values"_a, "slope"_a, "discretization"_a,
      "Test hook: (s, bound) with s[i] = sum_{j >= i} values[j] e^{-slope (j - i) discretization} as the composer "
      "computes it, and the relative error bound of each.");
  pld.def(
      "kept_memory", []() { return dpacct::cached_bytes() + dpacct::pld::pooled_workspace_bytes(); },
      "Bytes of grid-sized blocks kept between queries (dpacct/cached.hpp, the pooled workspaces).");
  pld.def(
      "hold_memory",
      [](bool hold) {
        if (hold) {
          dpacct::hold_begin();
        } else if (dpacct::hold_end()) {
          dpacct::fft::release_large_plan();
          dpacct::pld::trim_workspaces();  // first: their label vectors return to the cache
          dpacct::trim_cached();
        }
      },
      "hold"_a,
      "Opens (True) or closes (False) a query scope: within one, grid-sized blocks (up to 512 MiB), one larger FFT "
      "workspace and the calling thread's last large FFT plan are kept for the query's next compositions; closing the "
      "outermost trims them to the between-query limits (an end without its begin changes nothing).");
  pld.def(
      "release_memory",
      []() {
        dpacct::pld::release_workspaces();  // first: their vectors return to the cache
        dpacct::release_cached();
      },
      "Frees the grid-sized blocks kept between queries.");
  pld.def(
      "gaussian_cell",
      [](double noise_multiplier, double sampling_probability, const std::string& direction, double xa,
         double xb) -> py::tuple {
        std::shared_ptr<const MonotonePair> pair = std::make_shared<dpacct::pld::Subsampled>(
            std::make_shared<dpacct::pld::GaussianPair>(noise_multiplier), sampling_probability);
        if (parse_direction(direction)) pair = std::make_shared<dpacct::pld::Swapped>(pair);
        const double loss = pair->loss(xb);
        const double error = pair->has_loss_error() ? pair->loss_error(xb, loss) : -1.0;
        dpacct::pld::Mass p{}, q{}, own{};
        if (!pair->cell_masses(xa, xb, &p, &q, &own)) return py::make_tuple(loss, error, py::none(), py::none(), py::none());
        return py::make_tuple(loss, error, py::make_tuple(p.lo, p.hi), py::make_tuple(q.lo, q.hi),
                              py::make_tuple(own.lo, own.hi));
      },
      "noise_multiplier"_a, "sampling_probability"_a, "direction"_a, "xa"_a, "xb"_a,
      "Test hook: for the Poisson-subsampled Gaussian pair of one direction, (loss(xb), its error bound, and the "
      "cell (xa, xb]'s certified log P-mass, log Q-mass and own-loss intervals, or None where the quadrature "
      "does not apply).");
  pld.def(
      "spread_fraction",
      [](double own_low, double own_high, double a, double span) {
        return dpacct::pld::spread_fraction(dpacct::pld::Mass{own_low, own_high}, a, span);
      },
      "own_low"_a, "own_high"_a, "a"_a, "span"_a,
      "Test hook: the certified lower end of a connect-the-dots cell's fraction at its lower loss a.");
  pld.def(
      "tilt_sequence",
      [](const Array& log_mass, long low, double slope, double discretization, double mean_count) {
        const dpacct::pld::Tilted t = dpacct::pld::tilt_sequence(to_vector(log_mass, "log_mass"), low, slope,
                                                                 discretization, nullptr, mean_count);
        return py::make_tuple(to_array(t.p), t.log_norm, t.max_rounding, t.absolute_rounding, t.log_mean_low,
                              t.log_mean_high, t.spread, t.log_total);
      },
      "log_mass"_a, "low"_a, "slope"_a, "discretization"_a, "mean_count"_a = 0.0,
      "Test hook: the composer's tilted, normalised entries (entries, log normaliser, relative rounding of the "
      "entries at >= e^-50 of the total, summed absolute rounding of the others, the interval of the log mean "
      "rounding, the spread about it and the log total; with mean_count > 0 the mean from double-double entries "
      "as for a step composed that many times).");
  pld.def(
      "exp_double_double",
      [](double hi, double lo) {
        double out_hi = 0.0, out_lo = 0.0;
        dpacct::pld::exp_double_double(hi, lo, &out_hi, &out_lo);
        return py::make_tuple(out_hi, out_lo);
      },
      "hi"_a, "lo"_a = 0.0, "Test hook: e^{hi + lo} as a double-double, |hi| <= 600, |lo| <= 1e-6.");
  pld.def(
      "log_power_sum",
      [](const Array& mass, const Array& slope_steps) {
        if (mass.ndim() != 1 || mass.size() == 0) throw std::invalid_argument("mass must be a non-empty 1-d array");
        const double* m = mass.data();
        const auto n = static_cast<std::size_t>(mass.size());
        if (!(m[n - 1] > 0.0)) throw std::invalid_argument("the last mass must be positive");
        Array out(slope_steps.request().shape);
        const double* s = slope_steps.data();
        double* o = out.mutable_data();
        const auto count = static_cast<std::size_t>(slope_steps.size());
        for (std::size_t i = 0; i < count; ++i) {
          if (!(s[i] >= 0.0)) throw std::invalid_argument("slope steps must be >= 0");
        }
        {
          py::gil_scoped_release release;
          for (std::size_t i = 0; i < count; ++i) o[i] = dpacct::log_power_sum(m, n, s[i]);
        }
        return out;
      },
      "mass"_a, "slope_steps"_a,
      "log sum_j mass_j e^{s j} for each s >= 0 (an estimate; see dpacct.pld's Chernoff guides).");
}

}  // namespace dpacct::bindings

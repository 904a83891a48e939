#include "tessera/methods.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <string>

#include "tessera/dipole.h"
#include "tessera/error.h"

namespace tessera {

namespace {

// Methods in the order they are listed; each one's parameters follow in kOptions.
const MethodInfo kMethods[] = {
    {Method::Tkd, "tkd", "TKD", false, "Shmueli et al. 2009 MRM; Wharton et al. 2010 MRM (threshold 0.19)"},
};

const OptionSpec kOptions[] = {
    {"tkd.threshold", "", 0.19, "", 0, 2.0 / 3.0, true, false,
     "k-space values with |D| below this are truncated to ±threshold (Wharton et al. 2010: 0.19)"},
};

std::string known_methods() {
  std::string s;
  for (const MethodInfo& m : kMethods) s += (s.empty() ? "" : ", ") + std::string(m.name);
  return s;
}

size_t option_index(std::string_view name) {
  for (size_t i = 0; i < std::size(kOptions); ++i) {
    if (kOptions[i].name == name) return i;
  }
  throw Error(ErrorCode::Internal, "no method option '" + std::string(name) + "'");
}

void check_inputs(const MethodInfo& info, const Geometry& g, std::span<const float> field, std::span<const uint8_t> mask,
                  std::span<const float> magnitude) {
  validate_geometry(g);
  validate_volume_sizes(g, field.size(), mask.size());
  validate_finite(g, field);
  validate_mask_not_empty(g, mask);
  if (info.needs_magnitude && magnitude.empty()) {
    throw Error(ErrorCode::InvalidArgument, std::string(info.title) + " needs the magnitude image (its edge prior comes from "
                                                                      "it): give magnitude, or choose another method");
  }
  if (!magnitude.empty() && magnitude.size() != g.voxel_count()) {
    throw Error(ErrorCode::InvalidArgument, "the magnitude holds " + std::to_string(magnitude.size()) + " values but the volume " +
                                                dims_text(g.dims) + " has " + std::to_string(g.voxel_count()) +
                                                ": give one magnitude volume of the field's dims");
  }
}

// A closed-form method: one step computes χ.
class ClosedForm : public MethodComputation {
 public:
  using Body = std::function<std::vector<float>()>;
  ClosedForm(std::string name, Body body) : name_(std::move(name)), body_(std::move(body)) {}
  uint32_t total_steps() const override { return 1; }
  uint32_t steps_done() const override { return done_ ? 1 : 0; }
  bool finished() const override { return done_; }
  void step() override {
    chi_ = body_();
    done_ = true;
  }
  std::string name() const override { return name_; }
  std::vector<float> take_result() override { return std::move(chi_); }

 private:
  std::string name_;
  Body body_;
  std::vector<float> chi_;
  bool done_ = false;
};

}  // namespace

std::span<const MethodInfo> methods() { return kMethods; }

const MethodInfo& method_info(std::string_view name) {
  for (const MethodInfo& m : kMethods) {
    if (m.name == name) return m;
  }
  throw Error(ErrorCode::InvalidArgument, "unknown method '" + std::string(name) + "' (known: " + known_methods() + ")");
}

const MethodInfo& method_info(Method method) {
  for (const MethodInfo& m : kMethods) {
    if (m.method == method) return m;
  }
  throw Error(ErrorCode::Internal, "method not built");
}

std::span<const OptionSpec> method_options() { return kOptions; }

MethodParams::MethodParams() {
  values.resize(std::size(kOptions));
  for (size_t i = 0; i < std::size(kOptions); ++i) values[i] = kOptions[i].default_value;
}

double MethodParams::get(std::string_view name) const { return values.at(option_index(name)); }

void MethodParams::set(std::string_view name, double value) { values.at(option_index(name)) = checked_option(name, value); }

void MethodParams::set_choice(std::string_view name, std::string_view choice) {
  const OptionSpec& o = kOptions[option_index(name)];
  std::string_view rest = o.choices;
  for (double index = 0; !rest.empty(); ++index) {
    const size_t bar = rest.find('|');
    if (rest.substr(0, bar) == choice) {
      values.at(option_index(name)) = index;
      return;
    }
    rest = bar == std::string_view::npos ? std::string_view{} : rest.substr(bar + 1);
  }
  throw Error(ErrorCode::InvalidArgument, std::string(name) + " must be one of " + std::string(o.choices) + ", got '" +
                                              std::string(choice) + "'");
}

std::unique_ptr<MethodComputation> start_method(Method method, const Geometry& g, std::span<const float> field,
                                                std::span<const uint8_t> mask, std::span<const float> magnitude,
                                                const MethodParams& p, unsigned threads) {
  const MethodInfo& info = method_info(method);
  check_inputs(info, g, field, mask, magnitude);
  switch (method) {
    case Method::Tkd: {
      const float threshold = static_cast<float>(p.get("tkd.threshold"));
      return std::make_unique<ClosedForm>("TKD", [=] { return tkd(g, field, mask, threshold, 1, threads); });
    }
    default: break;
  }
  throw Error(ErrorCode::Internal, "method '" + std::string(info.name) + "' is listed but not dispatched");
}

std::vector<float> run_method(Method method, const Geometry& g, std::span<const float> field, std::span<const uint8_t> mask,
                              std::span<const float> magnitude, const MethodParams& params, unsigned threads,
                              const std::function<void(uint64_t, uint64_t)>& progress, const std::atomic<bool>* cancel) {
  auto c = start_method(method, g, field, mask, magnitude, params, threads);
  run_to_end(*c, progress, cancel);
  return c->take_result();
}

uint32_t method_steps(Method method, const MethodParams&) {
  switch (method) {
    case Method::Tkd: return 1;
    default: break;
  }
  throw Error(ErrorCode::Internal, "method '" + std::string(method_info(method).name) + "' has no step count");
}

uint64_t method_workspace_bytes(Method method, const Geometry& g, const MethodParams&, unsigned threads) {
  switch (method) {
    case Method::Tkd: return dipole_workspace_bytes(g, 1, threads);
    default: break;
  }
  throw Error(ErrorCode::Internal, "method '" + std::string(method_info(method).name) + "' has no memory model");
}

MethodPlan plan_method(Method method, const Geometry& g, const MethodParams& params, unsigned threads, uint32_t magnitude_echoes,
                       Target target) {
  validate_geometry(g);
  const MethodInfo& info = method_info(method);
  MethodPlan p;
  p.method = std::string(info.name);
  p.title = std::string(info.title);
  p.threads = std::max(1u, threads);
  p.steps = method_steps(method, params);
  const uint64_t n = g.voxel_count();
  // field (f32), mask (u8), χ (f32), magnitude (f32 per echo)
  const uint64_t per_voxel_inputs = 2 * sizeof(float) + sizeof(uint8_t) + uint64_t{magnitude_echoes} * sizeof(float);
  p.input_bytes = saturating_mul(n, per_voxel_inputs);
  p.workspace_bytes = method_workspace_bytes(method, g, params, p.threads);
  const uint64_t need = saturating_add(saturating_add(WASM_MODULE_BASELINE_BYTES, p.input_bytes), p.workspace_bytes);
  p.module_heap_bytes = saturating_add(need, wasm_heap_growth_slack(need));
  p.peak_bytes = p.module_heap_bytes;
  // The largest volume of this shape that fits: memory grows linearly with the voxel count.
  const double per_voxel = static_cast<double>(p.module_heap_bytes - WASM_MODULE_BASELINE_BYTES) / static_cast<double>(n);
  p.largest_voxels = static_cast<uint64_t>(static_cast<double>(WASM_COMPUTE_HEAP_LIMIT_BYTES - WASM_MODULE_BASELINE_BYTES) / per_voxel);
  p.feasible = target == Target::Native || p.module_heap_bytes <= WASM_COMPUTE_HEAP_LIMIT_BYTES;
  if (!p.feasible) {
    const double scale = std::cbrt(static_cast<double>(p.largest_voxels) / static_cast<double>(n));
    Dims3 fit{};
    for (int a = 0; a < 3; ++a) fit[a] = std::max<int64_t>(1, static_cast<int64_t>(static_cast<double>(g.dims[a]) * scale));
    p.message = p.title + " on " + dims_text(g.dims) + " needs " + format_gb(p.module_heap_bytes) + " of the module's heap, over the " +
                format_gb(WASM_COMPUTE_HEAP_LIMIT_BYTES) + " a browser heap can safely hold: the largest volume that fits holds " +
                std::to_string(p.largest_voxels) + " voxels (about " + dims_text(fit) +
                "); crop the volume to the mask's bounding box, or choose a method with less memory (tkd, tikhonov)";
  }
  return p;
}

}  // namespace tessera

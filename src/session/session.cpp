#include "tessera/session/session.h"

#include <algorithm>

#include "tessera/common/error.h"
#include "tessera/common/morphology.h"
#include "tessera/common/schema.h"

namespace tessera {

namespace {

std::string triple_words(const std::array<double, 3>& v) {
  return number_text(v[0]) + "×" + number_text(v[1]) + "×" + number_text(v[2]);
}

// What a registered or custom network computes with: its id, or a spec's grid and normalisation.
std::string network_words(const InversionRequest& r) {
  if (r.model) return std::string(r.model->id);
  const FieldNetwork& n = r.custom;
  return "spec (divisor " + std::to_string(n.cost.divisor) + ", inputMean " + number_text(n.norm.input_mean) + ", inputStd " +
         number_text(n.norm.input_std) + ", outputMean " + number_text(n.norm.output_offset) + ", outputStd " +
         number_text(n.norm.output_scale) + (n.masked_input ? ", maskedInput" : "") + ")";
}

std::string geometry_words(const Geometry& g) {
  return dims_text(g.dims) + " at " + triple_words(g.voxel_mm) + " mm, B0 along [" + number_text(g.b0_dir[0]) + ", " +
         number_text(g.b0_dir[1]) + ", " + number_text(g.b0_dir[2]) + "]";
}

std::string mask_words(const VolumeKey& k) {
  if (k.inside == 0) return "no voxel";
  return std::to_string(k.inside) + " voxels in x " + std::to_string(k.lo[0]) + "–" + std::to_string(k.hi[0] - 1) + ", y " +
         std::to_string(k.lo[1]) + "–" + std::to_string(k.hi[1] - 1) + ", z " + std::to_string(k.lo[2]) + "–" +
         std::to_string(k.hi[2] - 1);
}

void check_geometry(const Geometry& want, const Geometry& g) {
  if (g.dims != want.dims || g.voxel_mm != want.voxel_mm || g.b0_dir != want.b0_dir) {
    throw Error(ErrorCode::InvalidArgument, "the plan was made for a volume of " + geometry_words(want) + "; this one is " +
                                                geometry_words(g) + ": call plan() with this volume");
  }
}

// Refuses a mask (by its key) other than the one the plan was made for, naming both.
void check_mask(const VolumeKey& want, const VolumeKey& got) {
  if (got.hash == want.hash && got.inside == want.inside && got.lo == want.lo && got.hi == want.hi) return;
  const bool alike = got.inside == want.inside && got.lo == want.lo && got.hi == want.hi;
  throw Error(ErrorCode::InvalidArgument, "the plan was made for another mask: " + mask_words(want) + (alike ? " (other voxels)" : "") +
                                              "; this mask holds " + mask_words(got) + ": call plan() with this mask");
}

// mask itself (moved, not copied), or all ones when empty; refused when of another size.
std::vector<uint8_t> mask_or_ones(const Geometry& g, std::vector<uint8_t> mask) {
  if (mask.empty()) return std::vector<uint8_t>(g.voxel_count(), 1);
  if (mask.size() != g.voxel_count()) {
    throw Error(ErrorCode::InvalidArgument, "the mask holds " + std::to_string(mask.size()) + " values but the volume " +
                                                dims_text(g.dims) + " has " + std::to_string(g.voxel_count()) +
                                                ": field and mask must have the same dims");
  }
  return mask;
}

// The network plan of r over mask (field: none, or the crop box's support where the network reads it unmasked).
TilePlan network_plan(const InversionRequest& r, std::span<const uint8_t> mask, std::span<const float> field) {
  if (!field.empty() && field.size() != r.geometry.voxel_count()) {
    throw Error(ErrorCode::InvalidArgument, "the field holds " + std::to_string(field.size()) + " values but the volume " +
                                                dims_text(r.geometry.dims) + " has " + std::to_string(r.geometry.voxel_count()) +
                                                ": field and mask must have the same dims");
  }
  return plan_inversion(r, mask, Target::Wasm, field);
}

// The plan of r over m (every voxel's value; the volume's size) and field.
PlanHandle plan_over(Request r, std::span<const uint8_t> m, std::span<const float> field) {
  auto held = std::make_shared<Plan>();
  held->volume = volume_key(r.geometry, m);
  switch (r.kind()) {
    case Request::Kind::Network: held->tiles = network_plan(r.network(), m, field); break;
    case Request::Kind::Method:
      held->method_plan = plan_method(r.method().method, r.geometry, r.method().params, r.method().threads, r.magnitude_echoes, Target::Wasm);
      break;
    case Request::Kind::Pipeline:
      held->pipeline_plan = plan_pipeline(r.geometry, r.pipeline(), r.mask_given, r.magnitude_echoes > 0, Target::Wasm);
      break;
  }
  held->request = std::move(r);
  return held;
}

}  // namespace

const char* request_kind_words(Request::Kind k) {
  switch (k) {
    case Request::Kind::Network: return "a network's run (model or spec)";
    case Request::Kind::Method: return "a classical method's run (method)";
    case Request::Kind::Pipeline: return "a pipeline (pipeline: true)";
  }
  return "";
}

void method_identity(Method method, const MethodParams& params, RequestIdentity& out) {
  const MethodInfo& info = method_info(method);
  out.emplace_back("method", std::string(info.name));
  const std::string prefix = std::string(info.name) + ".";
  for (const OptionSpec& o : method_options()) {
    if (o.name.substr(0, prefix.size()) != prefix) continue;
    const double v = params.get(o.name);
    // A worded parameter holds its choice's index.
    const std::vector<std::string_view> choices = option_choices(o);
    const size_t index = static_cast<size_t>(v);
    out.emplace_back(std::string(o.name), choices.empty() ? number_text(v) : std::string(choices.at(std::min(index, choices.size() - 1))));
  }
}

void network_identity(const InversionRequest& r, RequestIdentity& out) {
  out.emplace_back("network", network_words(r));
  if (is_phase_network(r)) {
    out.emplace_back("te", numbers_text(r.phase.te_s));
    out.emplace_back("b0", number_text(r.phase.b0_tesla));
    out.emplace_back("erodeRadius", std::to_string(r.phase.erode_radius));
    out.emplace_back("phaseSign", number_text(r.phase.phase_sign));
  } else {
    out.emplace_back("b0Align", std::string(b0_align_mode_name(r.b0_align)));
  }
}

VolumeKey volume_key(const Geometry& g, std::span<const uint8_t> mask) {
  VolumeKey k;
  k.geometry = g;
  uint64_t h = 1469598103934665603ull;  // FNV-1a
  for (uint8_t v : mask) h = (h ^ (v ? 1u : 0u)) * 1099511628211ull;
  k.hash = h;
  const MaskBox box = mask_box(g, mask);
  k.inside = box.voxels;
  if (!box.empty()) {
    k.lo = box.lo;
    k.hi = box.hi;
  }
  return k;
}

bool Plan::feasible() const {
  switch (request.kind()) {
    case Request::Kind::Network: return tiles.feasible;
    case Request::Kind::Method: return method_plan.feasible;
    case Request::Kind::Pipeline: return pipeline_plan.feasible;
  }
  return false;
}

const std::string& Plan::message() const {
  switch (request.kind()) {
    case Request::Kind::Method: return method_plan.message;
    case Request::Kind::Pipeline: return pipeline_plan.message;
    default: return tiles.message;
  }
}

ErrorCode Plan::refusal() const {
  return request.kind() == Request::Kind::Method ? method_plan.refusal : ErrorCode::BudgetExceeded;
}

bool plan_reads_field(const Request& r) {
  if (r.kind() != Request::Kind::Network) return false;
  const InversionRequest& n = r.network();
  return n.crop && n.auto_tile && !n.whole_volume && !request_network(n).masked_input;
}

PlanHandle make_plan(Request r, std::vector<uint8_t> mask, std::span<const float> field) {
  const std::vector<uint8_t> m = mask_or_ones(r.geometry, std::move(mask));
  const bool reads = plan_reads_field(r);
  return plan_over(std::move(r), m, reads ? field : std::span<const float>{});
}

PlanHandle replan(const Plan& held, Request r, std::vector<uint8_t> mask, std::span<const float> field) {
  if (held.request.kind() != Request::Kind::Network || r.kind() != Request::Kind::Network) {
    throw Error(ErrorCode::InvalidArgument, "a measured speed plans a network's run; this plan is " +
                                                std::string(request_kind_words(held.request.kind())));
  }
  const std::vector<uint8_t> m = mask_or_ones(r.geometry, std::move(mask));
  check_mask(held.volume, volume_key(r.geometry, m));
  const bool reads = plan_reads_field(r);
  return plan_over(std::move(r), m, reads ? field : std::span<const float>{});
}

void check_volume(const Plan& held, const Geometry& g, std::span<const uint8_t> mask) {
  validate_mask_not_empty(g, mask);  // a run on an all-zero mask would write an all-zero χ
  const VolumeKey& want = held.volume;
  check_geometry(want.geometry, g);
  check_mask(want, volume_key(g, mask));
  if (!held.feasible()) throw Error(held.refusal(), held.message().empty() ? "the plan is not feasible" : held.message());
}

void check_request(const Plan& held, const Request& r) {
  if (r.kind() != held.request.kind()) {
    throw Error(ErrorCode::InvalidArgument, std::string("the plan was made for ") + request_kind_words(held.request.kind()) +
                                                "; this request is " + request_kind_words(r.kind()) + ": call plan() with this request");
  }
  check_geometry(held.volume.geometry, r.geometry);
  const auto& want = held.request.identity;
  for (size_t i = 0; i < std::max(want.size(), r.identity.size()); ++i) {
    const bool both = i < want.size() && i < r.identity.size();
    if (both && want[i] == r.identity[i]) continue;
    const std::string name = i < want.size() ? want[i].first : r.identity[i].first;
    const std::string planned = i < want.size() ? want[i].first + " " + want[i].second : "no " + name;
    const std::string given = i < r.identity.size() ? r.identity[i].first + " " + r.identity[i].second : "no " + name;
    throw Error(ErrorCode::InvalidArgument, "the plan was made for " + planned + "; this request gives " + given +
                                                ": call plan() with this request");
  }
}

PlanHandle plan_on_grid(const Plan& held, const Geometry& geometry, const TilePlan& plan, const VolumeKey& key) {
  auto on = std::make_shared<Plan>();
  on->request = held.request;
  on->request.geometry = geometry;
  on->request.network().geometry = geometry;
  on->volume = key;
  on->tiles = plan;
  return on;
}

void check_echoes(const InversionRequest& r, const VolumeData& v) {
  const bool phase = r.model && r.model->kind == ModelKind::WholeVolumeOnly;
  if (!phase && (v.echoes != 1 || !v.magnitude.empty())) {
    throw Error(ErrorCode::InvalidArgument, "several echoes and a magnitude are only taken by the phase networks (iQSM family)");
  }
  if (phase && !r.phase.te_s.empty() && r.phase.te_s.size() != v.echoes) {
    throw Error(ErrorCode::InvalidArgument, "the phase holds " + std::to_string(v.echoes) + " echo(es) but te gives " +
                                                std::to_string(r.phase.te_s.size()) + " echo time(s): give one TE per echo");
  }
}

PreparedRun prepare_run(const Plan& held, const VolumeData& volume) {
  if (held.request.kind() != Request::Kind::Network) throw Error(ErrorCode::Internal, "prepare_run runs a network's plan");
  check_volume(held, volume.geometry, volume.mask);
  PreparedRun p;
  p.request = held.request.network();
  check_echoes(p.request, volume);
  p.plan = held.tiles;
  p.warning = inversion_warning(p.request);
  p.request.auto_tile = false;
  p.request.tile = p.plan.tile;
  p.request.whole_volume = p.plan.whole_volume;
  p.request.workers = p.plan.tiles_in_flight;
  return p;
}

}  // namespace tessera

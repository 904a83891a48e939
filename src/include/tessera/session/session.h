// The application layer: a run's request (a network's, a method's or a pipeline's), its plan on a volume, and the
// checks that hold a run to the plan it was made for. Every caller — the Embind module, native programs, the tests —
// plans and runs through these; the request's kind is switched on here and nowhere else in C++.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include "tessera/common/geometry.h"
#include "tessera/engine/plan.h"
#include "tessera/inversion/methods.h"
#include "tessera/networks/inversion.h"
#include "tessera/pipeline/pipeline.h"

namespace tessera {

// What a request's result depends on besides the volume, as (name, value in words) in a fixed order.
using RequestIdentity = std::vector<std::pair<std::string, std::string>>;

// What a mask identifies a volume by: its voxels inside, their bounding box [lo, hi) and a hash of every value.
struct VolumeKey {
  Geometry geometry;
  uint64_t inside = 0;
  Dims3 lo{0, 0, 0}, hi{0, 0, 0};
  uint64_t hash = 0;
};

// mask holds geometry.voxel_count() values.
VolumeKey volume_key(const Geometry& geometry, std::span<const uint8_t> mask);

// A run's request, of one of three kinds, with its geometry.
struct Request {
  enum class Kind { Network = 0, Method = 1, Pipeline = 2 };
  Geometry geometry;
  std::variant<InversionRequest, MethodRequest, PipelineRequest> what;
  uint32_t magnitude_echoes = 0;  // Method, Pipeline: a magnitude of this many echoes is given
  bool mask_given = false;        // Pipeline: the volume's mask is the brain mask (else made from the magnitude)
  bool field_units_given = false; // Method, field network: the caller stated the field is ppm (no plausibility refusal of its range)
  unsigned run_threads = 1;       // the threads the run's own loops and FFTs use
  // The network or method and every parameter of it (defaults filled in): two requests of the same kind run alike when
  // these agree.
  RequestIdentity identity;

  Kind kind() const { return static_cast<Kind>(what.index()); }
  // The request of its kind; kind() is that kind (else std::bad_variant_access).
  const InversionRequest& network() const { return std::get<InversionRequest>(what); }
  InversionRequest& network() { return std::get<InversionRequest>(what); }
  const MethodRequest& method() const { return std::get<MethodRequest>(what); }
  const PipelineRequest& pipeline() const { return std::get<PipelineRequest>(what); }
};

// The kind in words ("a classical method's run (method)").
const char* request_kind_words(Request::Kind kind);

// Appends a network's identity (its id or spec; the phase networks' acquisition, else b0Align) to out.
void network_identity(const InversionRequest& request, RequestIdentity& out);
// Appends a method's identity (its name and every parameter, defaults filled in, worded ones by their choice) to out.
void method_identity(Method method, const MethodParams& params, RequestIdentity& out);

// A request's plan on a volume: what identifies the volume and the plan of the request's kind.
struct Plan {
  Request request;
  VolumeKey volume;
  TilePlan tiles;              // Network
  MethodPlan method_plan;      // Method
  PipelinePlan pipeline_plan;  // Pipeline
  bool feasible() const;
  const std::string& message() const;  // the refusal with advice; empty when feasible
  ErrorCode refusal() const;           // the refusal's code: BudgetExceeded, or InvalidArgument for a missing input
};

using PlanHandle = std::shared_ptr<Plan>;  // a plan is never changed once made

// Whether a request's plan reads the field (a network's automatic crop over a field it reads unmasked).
bool plan_reads_field(const Request& request);

// The plan of request over mask (empty: every voxel; moved in, not copied: the wasm heap never shrinks) and field
// (empty, or the volume's where plan_reads_field).
// Throws Error(InvalidArgument) for a mask or field of another size.
PlanHandle make_plan(Request request, std::vector<uint8_t> mask, std::span<const float> field);

// request — held's own, with this machine's measured speed written in — planned again on held's mask.
// held is a network's plan (else Error InvalidArgument naming its kind); mask is the one held was made for (else Error
// InvalidArgument naming both).
PlanHandle replan(const Plan& held, Request request, std::vector<uint8_t> mask, std::span<const float> field);

// Refuses (Error InvalidArgument naming the mismatch, or the plan's own refusal as BudgetExceeded) running held on a
// volume it was not made for: an empty mask, another geometry or mask, a plan that is not feasible.
void check_volume(const Plan& held, const Geometry& geometry, std::span<const uint8_t> mask);

// Refuses (Error InvalidArgument naming the first difference) a request handed back with held that asks for another
// kind of run, geometry, network, method or parameter than held was made for.
void check_request(const Plan& held, const Request& request);

// held's network run on another grid: the B0-aligned one, or the self-check's box; plan is the run's plan there and
// key its volume's. held is a network's plan.
PlanHandle plan_on_grid(const Plan& held, const Geometry& geometry, const TilePlan& plan, const VolumeKey& key);

// A held network plan ready to run on a volume.
struct PreparedRun {
  InversionRequest request;  // with the plan's choice written in (tile, workers, whole volume; never automatic)
  TilePlan plan;
  std::string warning;
};

// The volume a run reads: the field (or every echo of a wrapped phase, echo after echo), the mask and the magnitude
// (empty, or as many values as the field).
struct VolumeData {
  Geometry geometry;
  uint32_t echoes = 1;
  std::span<const float> field;
  std::span<const uint8_t> mask;
  std::span<const float> magnitude;
};

// Throws Error(InvalidArgument) when the volume's echoes (and magnitude) do not suit a network's request.
void check_echoes(const InversionRequest& request, const VolumeData& volume);

// held — a network's plan — on this volume: its request with the plan's choice written in, and the plan.
// Throws Error(InvalidArgument) for a plan made for another volume or mask (check_volume), Error(BudgetExceeded) for a
// plan that does not fit.
PreparedRun prepare_run(const Plan& held, const VolumeData& volume);

}  // namespace tessera

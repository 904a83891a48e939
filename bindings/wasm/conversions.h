// Conversions between JavaScript values and Tessera's C++ types: the one place numbers cross the
// C++/JS boundary. bindings.cpp only registers.
#pragma once

#include <emscripten/val.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "internal/job.h"
#include "tessera/budget.h"
#include "tessera/error.h"
#include "tessera/geometry.h"
#include "tessera/inversion.h"
#include "tessera/plan.h"
#include "tessera/registry.h"

namespace tessera::js {

using emscripten::val;

// Runs f; a C++ exception becomes a thrown JS Error with .code and .name = "TesseraError".
template <class F>
auto guarded(F&& f) -> decltype(f()) {
  try {
    return f();
  } catch (const Error& e) {
    val err = val::global("Error").new_(std::string(e.what()));
    err.set("name", std::string("TesseraError"));
    err.set("code", std::string(error_code_name(e.code())));
    err.throw_();
  } catch (const std::exception& e) {
    val err = val::global("Error").new_(std::string(e.what()));
    err.set("name", std::string("TesseraError"));
    err.set("code", std::string("Internal"));
    err.throw_();
  }
}

Geometry geometry_from(const val& v);
TileConfig tile_from(const val& v);
TileCost cost_from(const val& v);
FieldNetwork custom_network_from(const val& v);
InversionRequest request_from(const val& v);

val to_val(const ModelSpec& m);
val to_val(const PatchFit& f);
val to_val(const TilePlan& p);
val to_val(const RunReport& r);

// A copy of a C++ vector as a standalone JS typed array (not a heap view).
val copy_out(std::span<const float> v);
val copy_out(std::span<const uint8_t> v);

class Volume;
// Throws Error(InvalidArgument) when the volume's echoes (and magnitude) do not suit the request.
void check_echoes(const InversionRequest& request, const Volume& volume);

// {chi, field, mask} of the numerical head phantom; options {seed, noise, threads}.
val phantom_to_val(const val& geometry, const val& options);

// A volume in the module heap: field (f32; for phase networks the wrapped phase of every echo, echo after
// echo), mask (u8) and an optional magnitude (same size as the field), filled by JavaScript through views.
class Volume {
 public:
  // echoes >= 1 (more than 1 only for the phase networks' multi-echo data).
  Volume(const val& geometry, uint32_t echoes);
  val geometry() const;
  // Views on the heap: valid until the next call that may allocate. Fill them at once.
  val field_view();
  val mask_view();
  // Allocates the magnitude (zeros) on the first call, then views it.
  val magnitude_view();
  uint32_t voxel_count() const { return static_cast<uint32_t>(mask_.size()); }
  uint32_t echoes() const { return echoes_; }
  const Geometry& geo() const { return geometry_; }
  std::span<const float> field() const { return field_; }
  std::span<const uint8_t> mask() const { return mask_; }
  std::span<const float> magnitude() const { return magnitude_; }

 private:
  Geometry geometry_;
  uint32_t echoes_ = 1;
  std::vector<float> field_;
  std::vector<uint8_t> mask_;
  std::vector<float> magnitude_;
};

// An inversion running on a driver thread; JavaScript polls it and serves its network requests.
class InversionJob {
 public:
  InversionJob(std::shared_ptr<Volume> volume, const val& request, uint32_t threads);
  // {state, done, total, inFlight, requests: [{id, network, dims, input}]}; inputs are heap views.
  val poll();
  void respond(double id, const val& output);
  void fail(double id, const std::string& message);
  void cancel();
  // The report; throws the run's error as a TesseraError.
  val report();
  // View on chi (valid until the next allocating call); only after success.
  val result_view();
  std::string warning() const { return warning_; }
  uint32_t network_count() const { return networks_; }

 private:
  std::shared_ptr<Volume> volume_;  // kept alive while the driver thread reads it
  InversionRequest request_;
  std::vector<float> chi_;
  std::string warning_;
  uint32_t networks_ = 1;
  std::unique_ptr<Job> job_;
};

}  // namespace tessera::js

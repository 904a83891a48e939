// The classical dipole inversions by name (tkd, tsvd, tikhonov, tv, rts, ilsqr, ndi, medi, tfi): what each takes, its
// parameters (the request schema's "<method>.<param>" options, defaults from each method's paper), the memory it
// needs, and a computation that runs it one step (iteration) at a time on the step engine.
// Volumes are x-fastest; the field is the local field in ppm (the total field for a method marked total_field);
// χ comes out in ppm, zero outside the mask.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "tessera/common/budget.h"
#include "tessera/common/geometry.h"
#include "tessera/common/iterative.h"
#include "tessera/common/citation.h"
#include "tessera/common/error.h"
#include "tessera/common/schema.h"

namespace tessera {

enum class Method { Tkd, Tsvd, Tikhonov, Tv, Rts, Ilsqr, Ndi, Medi, Tfi };

struct MethodInfo {
  Method method;
  std::string_view name;      // as requests spell it: "tv"
  std::string_view title;     // as people read it: "TV-ADMM"
  bool needs_magnitude;       // MEDI: its edge prior comes from the magnitude
  std::string_view citation;  // the paper its defaults come from
  // TFI: it inverts the TOTAL field (ppm) on the mask as given, fitting the background's sources outside the mask
  // itself; a pipeline runs no background removal before it. false: it inverts a local field.
  bool total_field = false;
  // The papers of the method, as a methods text cites them (the first is the method's own).
  std::span<const Citation> papers = {};
};

// Every method Tessera runs, in a stable order.
std::span<const MethodInfo> methods();

// The method with this name.
// name is one of methods()' names (else Error InvalidArgument listing them).
const MethodInfo& method_info(std::string_view name);
const MethodInfo& method_info(Method method);

// Every method's parameters, by the schema's name ("tv.lambda" = the lambda of method tv). Defaults come from the
// methods' own headers; set() checks the schema's range.
struct MethodParams {
  std::vector<double> values;  // by method_options() index; the defaults unless set
  MethodParams();
  // The value of option name ("tkd.threshold"); name is a method option (else Error Internal).
  double get(std::string_view name) const;
  // Sets option name after checked_option (Error InvalidArgument naming the option, unit and range). A worded
  // option takes its choice's index (set_choice).
  void set(std::string_view name, double value);
  void set_choice(std::string_view name, std::string_view choice);
};

// The schema entries of every method parameter ("<method>.<param>"), in methods() order.
std::span<const OptionSpec> method_options();

// A request for a method: which, its parameters, the threads its loops and FFTs use.
struct MethodRequest {
  Method method = Method::Tkd;
  MethodParams params;
  unsigned threads = 1;
};

// A method running on one volume, one step at a time; result() once finished.
class MethodComputation : public Iterative {
 public:
  // χ in ppm, zero outside the mask; finished() is true. Moves the result out (call once).
  virtual std::vector<float> take_result() = 0;
};

// Starts method on a volume: validates everything up front (one clear line each) and allocates its buffers.
// geometry valid; field.size() == mask.size() == voxel_count; field finite; the mask holds a voxel;
// magnitude empty or voxel_count values (MEDI needs it: else Error InvalidArgument saying so).
// field, mask and magnitude outlive the computation. threads: FFT and loop threads (0 = hardware); the result does not
// depend on it.
std::unique_ptr<MethodComputation> start_method(Method method, const Geometry& geometry, std::span<const float> field,
                                                std::span<const uint8_t> mask, std::span<const float> magnitude,
                                                const MethodParams& params, unsigned threads = 1);

// Runs a method to the end (progress and cancel between steps, as run_to_end).
std::vector<float> run_method(Method method, const Geometry& geometry, std::span<const float> field,
                              std::span<const uint8_t> mask, std::span<const float> magnitude, const MethodParams& params,
                              unsigned threads = 1, const std::function<void(uint64_t, uint64_t)>& progress = {},
                              const std::atomic<bool>* cancel = nullptr);

// Steps the method plans (an upper bound: its iterations; 1 for a closed form).
uint32_t method_steps(Method method, const MethodParams& params);

// Heap bytes the method allocates at its peak beyond its inputs and χ (an upper bound).
// geometry valid.
uint64_t method_workspace_bytes(Method method, const Geometry& geometry, const MethodParams& params, unsigned threads = 1);

// The plan of a method run: its memory against the wasm heap, or the refusal with the largest volume that fits.
struct MethodPlan {
  bool feasible = false;
  std::string method;          // its name
  std::string title;
  uint32_t steps = 0;          // steps planned (an upper bound: iterative methods may converge early)
  unsigned threads = 1;        // loop and FFT threads
  uint64_t input_bytes = 0;    // field, mask, magnitude and χ in the module
  uint64_t workspace_bytes = 0;
  uint64_t module_heap_bytes = 0;  // the module's heap at the peak: baseline + inputs + workspace + growth slack
  uint64_t peak_bytes = 0;         // = module_heap_bytes (no network workers)
  uint64_t largest_voxels = 0;     // the most voxels a volume of this shape may hold and fit (wasm)
  Dims3 largest_dims{};            // the volume's dims scaled alike to hold at most largest_voxels: the largest crop
  std::string message;             // the refusal with advice; empty when feasible
  ErrorCode refusal = ErrorCode::BudgetExceeded;  // why it is not feasible: over the heap, or an input missing
};

// The module heap a computation of the C++ core needs on a volume: its inputs and workspace on the baseline and its
// threads' stacks, with Emscripten's growth slack; whether that fits the wasm limit and the most voxels a volume of
// this shape may hold.
struct HeapFit {
  uint64_t module_heap_bytes = 0;
  uint64_t largest_voxels = 0;
  Dims3 largest_dims{};  // the volume's dims scaled alike (each at least 1) to hold at most largest_voxels
  bool fits = false;  // natively always
};
// The volume's dims from start (a crop of geometry's shape), shrunk alike until fits(the crop's geometry) holds.
// start within geometry's dims; fits true for some crop (else the smallest tried, about 13 % of start per axis).
Dims3 largest_fitting_crop(const Geometry& geometry, Dims3 start, const std::function<bool(const Geometry&)>& fits);

// geometry valid.
// threads: the threads the computation runs on, the calling one included.
HeapFit fit_heap(const Geometry& geometry, uint64_t input_bytes, uint64_t workspace_bytes, unsigned threads, Target target);

// Plans method on a volume of geometry (magnitude_echoes volumes of magnitude kept beside it).
// geometry valid.
MethodPlan plan_method(Method method, const Geometry& geometry, const MethodParams& params, unsigned threads,
                       uint32_t magnitude_echoes = 0, Target target = kBuildTarget);

}  // namespace tessera

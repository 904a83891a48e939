#include "conversions.h"

#include <emscripten/bind.h>
#include <emscripten/val.h>

#include <cmath>
#include <string>
#include <string_view>
#include <type_traits>
#include <typeindex>
#include <typeinfo>
#include <vector>

#include "tessera/engine/calibration.h"
#include "tessera/common/dipole.h"
#include "tessera/quality/fidelity.h"
#include "tessera/sim/phantom.h"
#include "tessera/session/request.h"
#include "tessera/engine/verify.h"
#include "val_fields.h"
#include "value_types.h"

namespace tessera::js {

// What C++ reports, as Embind value types: 64-bit figures become Numbers (the module is built with WASM_BIGINT=0),
// optional members null, vectors JS arrays (val getters: Embind's register_vector would give a class handle).

namespace {

template <class T, class M>
T object_of(M T::*);
template <class T, class M>
M type_of(M T::*);
template <auto member>
using Object = decltype(object_of(member));
template <auto member>
using Type = decltype(type_of(member));

// Embind wants a setter beside every getter. These types only go from C++ to JavaScript (what JavaScript sends is read
// by the readers above); a field with no member behind it (static text, a derived figure) cannot be written back.
template <class T, class V>
void read_only(T&, V) {
  throw Error(ErrorCode::Internal, "a value Tessera reports cannot be converted back from JavaScript: read it with the request readers");
}

// A 64-bit count or byte figure as a Number (the module is built with WASM_BIGINT=0; exact below 2^53).
template <auto member>
double as_number(const Object<member>& o) {
  return static_cast<double>(o.*member);
}
template <auto member>
void from_number(Object<member>& o, double v) {
  o.*member = static_cast<Type<member>>(v);
}

// Static text (a string_view into the registry or the schema) as a string.
template <auto member>
std::string as_text(const Object<member>& o) {
  return std::string(o.*member);
}

// The record of every registered value type as TypeScript sees it (valueTypes(): scripts/value-types.js writes
// bindings/js/value-types.d.ts from it): its JS name, doc and fields, each with its type and doc.
struct FieldRecord {
  std::string name;
  std::string (*derived)() = nullptr;  // the type from the C++ type; nullptr: given
  std::string given;                   // the type the registration gives (a val getter's, a closed set of words)
  std::string doc;
};
struct TypeRecord {
  std::string name;
  std::string doc;
  std::type_index type;
  bool tuple;  // a value_array: fields are its elements, unnamed
  std::vector<FieldRecord> fields;
};
std::vector<TypeRecord>& records() {
  static std::vector<TypeRecord> r;
  return r;
}

// The JS name of the registered value type of C++ type t.
// Throws Error(Internal) when t is not registered (Embind could not convert it either).
std::string registered_name(std::type_index t) {
  for (const TypeRecord& r : records()) {
    if (r.type == t) return r.name;
  }
  throw Error(ErrorCode::Internal, std::string("a value type's field has a C++ type that is not a registered value type (") + t.name() + ")");
}

template <class M>
constexpr bool is_text = std::is_same_v<M, std::string> || std::is_same_v<M, std::string_view>;

// The TypeScript type of what Embind gives for a C++ M: bool boolean, arithmetic number, strings string, a registered
// value type its name (looked up when the record is read, so registration order does not matter).
template <class M>
std::string ts_type() {
  if constexpr (std::is_same_v<M, bool>) {
    return "boolean";
  } else if constexpr (std::is_arithmetic_v<M>) {
    return "number";
  } else if constexpr (is_text<M>) {
    return "string";
  } else {
    return registered_name(typeid(M));
  }
}

// value_object<T> with the three kinds of field above, each also recorded (one list drives both).
// A field whose value is a val, or a string from a closed set of words, is given its TypeScript type (words as
// "'a' | 'b'", or an alias index.d.ts defines and checks: Blend, B0Align, ModelKind).
template <class T>
class Fields {
 public:
  Fields(const char* name, const char* doc) : object_(name), at_(records().size()) {
    records().push_back({name, doc, typeid(T), false, {}});
  }
  // A member Embind converts as it is: bool, 32-bit integers, double, std::string, a registered value type.
  template <class M>
  Fields& field(const char* name, M T::*member) {
    object_.field(name, member);
    return add(name, &ts_type<M>, "");
  }
  // A string member holding one of the words ts names.
  template <class M>
  Fields& field(const char* name, M T::*member, const char* ts) {
    static_assert(is_text<M>, "only a string member is given a narrower TypeScript type");
    object_.field(name, member);
    return add(name, nullptr, ts);
  }
  // A field computed from the struct.
  template <class R>
  Fields& field(const char* name, R (*get)(const T&)) {
    static_assert(!std::is_same_v<R, val>, "a val getter's TypeScript type is given: field(name, get, ts)");
    object_.field(name, get, &read_only<T, R>);
    return add(name, &ts_type<R>, "");
  }
  // A field computed from the struct, of TypeScript type ts (a val, or a string of the words ts names).
  template <class R>
  Fields& field(const char* name, R (*get)(const T&), const char* ts) {
    static_assert(std::is_same_v<R, val> || is_text<R>, "only a val or a string getter is given its TypeScript type");
    object_.field(name, get, &read_only<T, R>);
    return add(name, nullptr, ts);
  }
  template <auto member>
  Fields& number(const char* name) {
    object_.field(name, &as_number<member>, &from_number<member>);
    return add(name, &ts_type<double>, "");
  }
  // Static text; ts: the words it holds (default any string).
  template <auto member>
  Fields& text(const char* name, const char* ts = "") {
    object_.field(name, &as_text<member>, &read_only<T, std::string>);
    return *ts ? add(name, nullptr, ts) : add(name, &ts_type<std::string>, "");
  }
  // The doc comment of the field registered last (what users see in value-types.d.ts).
  Fields& doc(const char* text) {
    records()[at_].fields.back().doc = text;
    return *this;
  }

 private:
  Fields& add(const char* name, std::string (*derived)(), const char* given) {
    records()[at_].fields.push_back({name, derived, given, ""});
    return *this;
  }
  emscripten::value_object<T> object_;
  size_t at_;
};

template <class A, size_t i>
double element(const A& a) {
  return static_cast<double>(a[i]);
}
template <class A, size_t i>
void set_element(A& a, double v) {
  a[i] = static_cast<typename A::value_type>(v);
}
// A std::array of 3 numbers as [x, y, z], recorded as a tuple of three numbers.
template <class A>
void register_triple(const char* name, const char* doc) {
  emscripten::value_array<A>(name)
      .element(&element<A, 0>, &set_element<A, 0>)
      .element(&element<A, 1>, &set_element<A, 1>)
      .element(&element<A, 2>, &set_element<A, 2>);
  TypeRecord r{name, doc, typeid(A), true, {}};
  for (int i = 0; i < 3; ++i) r.fields.push_back({"", &ts_type<double>, "", ""});
  records().push_back(std::move(r));
}

// An optional member: its object, or null.
template <class T>
val or_null(bool present, const T& x) {
  return present ? val(x) : val::null();
}

// The TypeScript type of kind_names(): "Array<'network' | 'method' | 'pipeline'>".
const char* kind_names_type() {
  static const std::string t = [] {
    std::string words;
    for (std::string_view k : request_kind_names()) words += (words.empty() ? "'" : " | '") + std::string(k) + "'";
    return "Array<" + words + ">";
  }();
  return t.c_str();
}

// The kinds of request a RequestKindBits mask holds, by name (["network", "pipeline"]).
val kind_names(uint8_t kinds) {
  val out = val::array();
  for (size_t bit = 0; bit < request_kind_names().size(); ++bit) {
    if (kinds & (1u << bit)) out.call<void>("push", std::string(request_kind_names()[bit]));
  }
  return out;
}

}  // namespace

void register_value_types() {
  register_triple<Dims3>("Dims3", "Three voxel counts or indices, x, y, z.");
  register_triple<std::array<uint64_t, 3>>("Extent3", "Three counts, x, y, z.");
  register_triple<Vec3>("Vec3", "Three reals, x, y, z.");

  Fields<Geometry>("VolumeGeometry", "Where a volume lies, as C++ holds it.")
      .field("dims", &Geometry::dims).doc("voxels per axis (x fastest in storage)")
      .field("voxelMm", &Geometry::voxel_mm).doc("mm")
      .field("b0Dir", &Geometry::b0_dir).doc("the B0 direction in the voxel axes");

  Fields<CalibrationFit>("CalibrationFit", "A calibration's fit of the measured heaps, made safe.")
      .number<&CalibrationFit::fixed_bytes>("fixedBytes")
      .doc("safe: every measured heap lies under fixedBytes + bytesPerVoxel · voxels")
      .number<&CalibrationFit::bytes_per_voxel>("bytesPerVoxel")
      .field("fittedFixedBytes", &CalibrationFit::fitted_fixed_bytes).doc("least squares over the points whose patch grew the heap")
      .field("fittedBytesPerVoxel", &CalibrationFit::fitted_bytes_per_voxel)
      .field("r2", &CalibrationFit::r2)
      .field("slopeBound", &CalibrationFit::slope_bound).doc("the steepest slope the growth-stepped heaps allow (>= the fitted slope)")
      .field("slopeMargin", &CalibrationFit::slope_margin).doc("the fraction the line is raised by (Emscripten's 20 % growth step)")
      .field("pointsFitted", &CalibrationFit::points_fitted)
      .field("slopeMeasured", &CalibrationFit::slope_measured)
      .doc("false: the heap did not grow with the patch at two sizes; bytesPerVoxel is assumed (1100)")
      .number<&CalibrationFit::raised_bytes>("raisedBytes")
      .field("note", &CalibrationFit::note);

  Fields<PatchFit>("PatchFit", "A tile config judged against the single-patch limit.")
      .field("fits", &PatchFit::fits)
      .number<&PatchFit::patch_edge>("patchEdge").doc("the patch this config asks for")
      .number<&PatchFit::bytes>("bytes").doc("its activation bytes")
      .number<&PatchFit::largest_edge>("largestEdge").doc("the largest patch edge that fits, rounded down to the divisor")
      .number<&PatchFit::largest_core>("largestCore").doc("at this halo; 0 when the halo alone leaves no room")
      .field("message", &PatchFit::message).doc("empty when it fits");

  Fields<TileConfig>("PlanTileConfig", "The tile config a plan runs.")
      .field("core", &TileConfig::core)
      .field("halo", &TileConfig::halo)
      .field("stride", +[](const TileConfig& c) { return c.step(); })
      .doc("cores start every stride voxels; shorter than the core, overlapping cores are blended")
      .field("blend", +[](const TileConfig& c) { return std::string(blend_name(c.blend)); }, "Blend")
      .doc("how overlapping cores combine (crop: equal weights)");

  Fields<Tile>("PlanTile", "One tile of a plan's grid.")
      .number<&Tile::index>("index").doc("grid index: x fastest, then y, then z")
      .field("coreLo", &Tile::core_lo).doc("the output core [coreLo, coreHi), voxels")
      .field("coreHi", &Tile::core_hi)
      .field("patchLo", &Tile::patch_lo).doc("the patch's first voxel (coreLo - halo; may be negative: zeros outside the volume)")
      .field("patchDims", &Tile::patch_dims)
      .doc("this tile's patch, cut to the mask voxels its core serves (plus the halo); [0, 0, 0]: the plan's patchDims")
      .field("skipped", &Tile::skipped).doc("the core holds no mask voxel: not run");

  Fields<TileGrid>("PlanGrid", "The tiles a run goes through.")
      .field("counts", &TileGrid::counts)
      .number<&TileGrid::patch_edge>("patchEdge")
      .field("stride", +[](const TileGrid& g) { return g.config.step(); })
      .field("blend", +[](const TileGrid& g) { return std::string(blend_name(g.config.blend)); }, "Blend")
      .number<&TileGrid::misaligned>("misaligned")
      .doc("active tiles whose patch is off the whole volume's pooling grid (their max-poolings alias)")
      .field("tiles", +[](const TileGrid& g) { return array_of(g.tiles); }, "PlanTile[]");

  Fields<FidelityPrediction>("PredictedFidelity",
                             "Predicted agreement of a plan's result with the whole-volume run (a whole-volume plan: r 1, nrmse 0).")
      .field("r", &FidelityPrediction::r)
      .field("nrmse", &FidelityPrediction::nrmse)
      .field("deficit", &FidelityPrediction::deficit)
      .field("beyondFit", &FidelityPrediction::beyond_fit)
      .doc("the network reaches further than the fidelity model was fitted on: nrmse carries the caution for that");

  Fields<ContextProfile>("PlanContext", "How far the network looks, as the planner took it.")
      .field("radius", &ContextProfile::radius).doc("the theoretical receptive radius it came from (voxels; 0 when only measured)")
      .field("measured", &ContextProfile::measured).doc("from a probe of the network (receptiveField({probe: true}))")
      .field("assumed", &ContextProfile::assumed).doc("unknown: the planner assumed a reach")
      .field("radius90", +[](const ContextProfile& c) { return context_radius_holding(c, 0.90); })
      .doc("the smallest radius holding 90 % / 99 % of the dependence (voxels)")
      .field("radius99", +[](const ContextProfile& c) { return context_radius_holding(c, 0.99); });

  Fields<VerifyRegion>("PlannedVerification", "A plan's self-check (planned with verify: true).")
      .field("possible", &VerifyRegion::possible)
      .field("message", &VerifyRegion::message).doc("why the check is not possible; empty when it is")
      .field("lo", &VerifyRegion::lo).doc("the box run whole [lo, hi) (voxels)")
      .field("hi", &VerifyRegion::hi)
      .field("compareLo", &VerifyRegion::compare_lo).doc("where the box's result is compared with the tiled one [compareLo, compareHi)")
      .field("compareHi", &VerifyRegion::compare_hi)
      .field("margin", &VerifyRegion::margin).doc("voxels kept away from the box's inner faces")
      .field("plan", +[](const VerifyRegion& v) { return or_null(v.possible, v.plan); }, "TilePlan | null")
      .doc("the box's own (whole-volume) plan, as the planner made it; null when not possible");

  Fields<B0Plan>("PlannedB0Alignment", "What a plan does about B0 (networks that assume it along the volume's third axis).")
      .field("tiltDegrees", &B0Plan::tilt_degrees).doc("the angle between B0 and the volume's third axis, 0–90°")
      .field("assumesZ", &B0Plan::assumes_z)
      .doc("the network assumes B0 along the third axis (field → χ networks, native patching)")
      .field("resampled", &B0Plan::resampled)
      .doc("the run resamples the field to a B0-aligned grid and χ back (then grid, tiles and memory are that grid's)")
      .field("mode", +[](const B0Plan& b) { return std::string(b0_align_mode_name(b.mode)); }, "B0Align")
      .field("thresholdDegrees", &B0Plan::threshold_degrees).doc("auto resamples above this angle")
      .field("warnDegrees", &B0Plan::warn_degrees).doc("a warning above this angle")
      .field("alignedDims", +[](const B0Plan& b) { return or_null(b.resampled, b.aligned_dims); }, "Dims3 | null")
      .doc("the aligned grid's dims when resampled, else null")
      .number<&B0Plan::extra_module_bytes>("extraModuleBytes")
      .doc("module-heap bytes the resampling adds beside the aligned run's own volumes")
      .field("summary", &B0Plan::summary).doc("one sentence: the tilt and what the run does about it")
      .field("warning", &B0Plan::warning).doc("above the threshold: the angle and what Tessera did (also in plan.warning); else empty");

  Fields<BoxSplit>("BoxSplit", "How a crop box over the single-patch limit runs as slabs.")
      .field("axis", &BoxSplit::axis).doc("the axis the slabs are cut along (0 x, 1 y, 2 z)")
      .field("pieces", &BoxSplit::pieces).doc("1: one patch; more: the box runs as this many slabs")
      .field("halo", &BoxSplit::halo).doc("voxels of context past each slab's core on the cut faces");

  Fields<CropBox>("CropBox",
                  "The box a whole-volume plan runs: voxels [lo, hi) written, the patch from patchLo (on the pooling grid) of patchDims.")
      .field("lo", &CropBox::lo)
      .field("hi", &CropBox::hi)
      .field("patchLo", &CropBox::patch_lo)
      .field("patchDims", &CropBox::patch_dims)
      .field("margin", &CropBox::margin).doc("voxels kept around the mask before rounding out to the grid (0 also for the whole field of view: lo 0, hi the dims)")
      .field("split", &CropBox::split)
      .doc("pieces > 1: the box is over the single-patch limit and runs as slabs (then wholeVolume is false and the grid holds the slabs)");

  Fields<TrainingGridPlan>("PlannedTrainingGrid",
                           "A run resampled to the voxel grid its network was trained on (k-space, and χ back).")
      .field("resampled", &TrainingGridPlan::resampled)
      .field("dims", &TrainingGridPlan::dims).doc("the training grid's dims (the plan's grid, tiles and memory are its)")
      .field("voxelMm", &TrainingGridPlan::voxel_mm).doc("its voxel edges (mm): the field of view kept")
      .number<&TrainingGridPlan::extra_module_bytes>("extraModuleBytes")
      .doc("module-heap bytes the resampling adds beside the run on the training grid")
      .field("warning", &TrainingGridPlan::warning).doc("the source and resampled grids and the rule (also in plan.warning)");

  Fields<TilePlan>("TilePlan", "A plan as the planner makes it (plan() returns it with what the runtime adds: Plan).")
      .field("feasible", &TilePlan::feasible)
      .field("tile", &TilePlan::tile).doc("the tile config planned (the auto-planner's choice for tile \"auto\")")
      .field("workers", &TilePlan::workers)
      .field("threadsPerWorker", &TilePlan::threads_per_worker).doc("chosen by the auto-planner; 0 = the runtime's setting")
      .field("estimatedSeconds", &TilePlan::estimated_seconds).doc("the auto-planner's estimate (s), 0 when not estimated")
      .field("estimateSource", &TilePlan::estimate_source, "'measured' | 'registry' | 'graph' | 'default' | ''")
      .doc("whose speed the estimate used: this machine's (measureSpeed), the registry's, the default; \"\" when not estimated")
      .field("explanation", &TilePlan::explanation).doc("the auto-planner's one-sentence reason (with the predicted fidelity)")
      .field("fidelityWarning", &TilePlan::fidelity_warning)
      .doc("non-empty when nothing within the memory budget reaches the quality target (the most faithful config runs)")
      .field("message", &TilePlan::message).doc("the planner's refusal with advice; empty when feasible")
      .field("wholeVolume", &TilePlan::whole_volume)
      .field("crop", +[](const TilePlan& p) { return or_null(p.crop.cropped, p.crop); }, "CropBox | null")
      .doc("a plan cut to the mask's bounding box (+ margin, on the pooling grid): one patch, or slabs (crop.split); or the whole field of view (lo 0, hi the dims) cut into slabs; null: the whole volume")
      .number<&TilePlan::patch_edge>("patchEdge")
      .field("patchDims", &TilePlan::patch_dims)
      .number<&TilePlan::bytes_per_tile>("bytesPerTile")
      .field("tilesInFlight", &TilePlan::tiles_in_flight)
      .number<&TilePlan::tiles_total>("tilesTotal")
      .number<&TilePlan::tiles_active>("tilesActive")
      .number<&TilePlan::tiles_skipped>("tilesSkipped")
      .field("voxelsRun", +[](const TilePlan& p) { return static_cast<double>(voxels_run(p)); })
      .doc("the patch voxels the run computes: every active tile's patch, each cut to its mask")
      .number<&TilePlan::activation_bytes>("activationBytes")
      .number<&TilePlan::module_heap_bytes>("moduleHeapBytes")
      .number<&TilePlan::peak_bytes>("peakBytes")
      .field("grid", &TilePlan::grid).doc("the tiles the run goes through (a whole-volume plan: one tile covering the volume)")
      // Optional members are null when absent (the API's documented shape), hence val getters.
      .field("verify", +[](const TilePlan& p) { return p.verify ? val(*p.verify) : val::null(); }, "PlannedVerification | null")
      .doc("the self-check, when planned with verify: true; else null")
      .field("context", +[](const TilePlan& p) { return or_null(!p.context.within.empty(), p.context); }, "PlanContext | null")
      .doc("how far the network looks, as the prediction took it; null when unknown")
      .field("predictedFidelity", +[](const TilePlan& p) { return or_null(p.fidelity_known, p.fidelity); }, "PredictedFidelity | null")
      .doc("predicted agreement with the whole-volume run; null when the network's reach is unknown")
      .field("trainingGrid", +[](const TilePlan& p) { return or_null(p.training_grid.resampled, p.training_grid); },
             "PlannedTrainingGrid | null")
      .doc("the network's training grid the run is resampled to (registry trainingVoxelMm); null: it runs on the input's grid");

  Fields<RunReport>("TileRunReport", "What the C++ driver counted of a tiled run (invert()'s report adds the rest: RunReport).")
      .number<&RunReport::tiles_total>("tilesTotal").doc("tiles in the grid")
      .number<&RunReport::tiles_run>("tilesRun").doc("tiles whose network ran")
      .number<&RunReport::tiles_skipped>("tilesSkipped").doc("tiles whose core holds no mask voxel")
      .field("concurrency", &RunReport::concurrency).doc("the cap on tiles in flight")
      .field("maxInFlight", &RunReport::max_in_flight).doc("the most that were in flight at once")
      .number<&RunReport::patch_edge>("patchEdge")
      .number<&RunReport::bytes_per_tile>("bytesPerTile").doc("activation estimate of one patch")
      .field("driverSeconds", &RunReport::wall_seconds)
      .field("tileSeconds", +[](const RunReport& r) { return array_of(r.tile_seconds); }, "number[]")
      .doc("per tile run, in job order");

  Fields<WasmLimits>("Limits", "The memory limits every wasm plan obeys, in bytes.")
      .number<&WasmLimits::tile_activation_budget>("tileActivationBudget").doc("activations of all tiles in flight together")
      .number<&WasmLimits::max_patch_activation_bytes>("maxPatchActivationBytes")
      .doc("one patch over this is refused up front (near the heap ceiling a run stalls instead of failing)")
      .number<&WasmLimits::heap_ceiling_bytes>("heapCeilingBytes").doc("the 32-bit wasm heap's ceiling (4 GiB)")
      .number<&WasmLimits::worker_heap_guard_bytes>("workerHeapGuardBytes")
      .doc("an ONNX Runtime worker whose heap would pass this fails its tile (MemoryCeiling) instead of stalling near the ceiling")
      .number<&WasmLimits::compute_heap_limit_bytes>("computeHeapLimitBytes")
      .doc("a classical method's or the pipeline's module heap over this is refused by its plan");

  Fields<Agreement>("Agreement", "How a map agrees with a reference inside a mask.")
      .number<&Agreement::voxels>("voxels").doc("voxels compared")
      .field("r", &Agreement::r).doc("Pearson correlation")
      .field("nrmse", &Agreement::nrmse).doc("‖test − reference‖ / ‖reference‖")
      .field("maxAbs", &Agreement::max_abs).doc("max |test − reference| (ppm)")
      .field("hfen", &Agreement::hfen).doc("high-frequency error norm (LoG, σ = 1.5 voxels); 0 when not asked");

  Fields<OptionSpec>("RequestOption", "One request option of the schema, as the C++ core enforces it.")
      .text<&OptionSpec::name>("name").doc("as a request spells it: \"b0\", \"spec.bytesPerVoxel\", \"tile.halo\"")
      .text<&OptionSpec::unit>("unit")
      .field("default", +[](const OptionSpec& o) { return o.default_text.empty() ? val(o.default_value) : val(std::string(o.default_text)); },
             "number | string")
      .doc("a number, or words for a default that is not one (\"auto\")")
      .field("defaultValue", &OptionSpec::default_value)
      .doc("the numeric default behind a worded one (tile.halo: 4, a custom network's), else = default")
      .field("min", &OptionSpec::min)
      .field("max", &OptionSpec::max)
      .field("minExclusive", &OptionSpec::min_exclusive)
      .field("maxExclusive", &OptionSpec::max_exclusive)
      .field("range", +[](const OptionSpec& o) { return range_text(o); }, "string")
      .doc("the range in words as C++ checks it (\"in (0, 2/3)\", \"a whole number in [1, 64]\", \"≥ 0\"); empty for a worded option")
      .field("integer", &OptionSpec::integer)
      .text<&OptionSpec::help>("help")
      .field("choices", +[](const OptionSpec& o) {
        val out = val::array();  // "faithful|balanced|fast" -> ["faithful", "balanced", "fast"]; "" -> []
        for (std::string_view c : option_choices(o)) out.call<void>("push", std::string(c));
        return out;
      }, "string[]")
      .doc("a worded option's values (\"quality\": faithful, balanced, fast); empty for a number")
      .field("kinds", +[](const OptionSpec& o) { return kind_names(request_option_kinds(o)); }, kind_names_type())
      .doc("the kinds of request that take it")
      .field("requiredIn", +[](const OptionSpec& o) { return kind_names(request_option_required(o)); }, kind_names_type())
      .doc("the kinds of request that cannot go without it (method: a method's; te: swi()'s and r2star()'s)")
      .field("type", +[](const OptionSpec& o) { return request_option_type(o); }, "string")
      .doc("its TypeScript type in a request (TileOptions: the interface of the tile.* options)");

  Fields<RequestKey>("RequestKey", "A request key that is no schema option (a volume, the network's weights, a plan handed back, a run control).")
      .text<&RequestKey::name>("name").doc("as a request spells it; a dotted name (\"spec.maskedInput\") is a field of an option group")
      .field("kinds", +[](const RequestKey& k) { return kind_names(k.kinds); }, kind_names_type())
      .doc("the kinds of request that take it")
      .text<&RequestKey::type>("type").doc("TypeScript")
      .text<&RequestKey::doc>("doc")
      .field("presence", +[](const RequestKey& k) {
        return std::string(k.presence == KeyPresence::RequiredToRun ? "run" : k.presence == KeyPresence::PlanOnly ? "plan" : "optional");
      }, "'optional' | 'run' | 'plan'")
      .doc("optional; run: a run needs it (plan() does not); plan: only plan()'s request takes it, and needs it")
      .field("planType", +[](const RequestKey& k) { return std::string(k.plan_type.empty() ? k.type : k.plan_type); }, "string")
      .doc("its TypeScript type in plan()'s request");

  Fields<NamedInput>("NamedInput", "A further named input of a patch (a phase network's mask, TE, B0 ...).")
      .field("role", &NamedInput::role)
      .field("dims", +[](const NamedInput& e) {
        val out = val::array();
        for (uint64_t k : e.dims) out.call<void>("push", static_cast<double>(k));
        return out;
      }, "number[]")
      .field("input", +[](const NamedInput& e) { return val(emscripten::typed_memory_view(e.data.size(), e.data.data())); }, "Float32Array")
      .doc("a view on the run's buffer, valid until the patch is answered");

  Fields<Normalization>("Normalization", "network input = (field − inputMean)/inputStd, χ = outputStd·output + outputMean.")
      .field("inputMean", &Normalization::input_mean)
      .field("inputStd", &Normalization::input_std)
      .field("outputStd", &Normalization::output_scale)
      .field("outputMean", &Normalization::output_offset);

  Fields<WeightsFile>("WeightsFile", "One weights file of a registry network.")
      .text<&WeightsFile::file>("file")
      .field("url", +[](const WeightsFile& w) {
        return w.bundled.empty() ? std::string(kOfficialWeightsBase) + std::string(w.file) : std::string(w.bundled);
      })
      .field("bundled", +[](const WeightsFile& w) { return !w.bundled.empty(); })
      .doc("shipped with the package: url is relative to the package root")
      .number<&WeightsFile::bytes>("bytes").doc("0 when not recorded")
      .text<&WeightsFile::sha256>("sha256").doc("empty when not recorded");

  Fields<CostHost>("CostHost", "Where a memory cost was measured: one runtime host at one thread count.")
      .text<&CostHost::host>("host", "'node' | 'Chromium'")
      .field("threads", &CostHost::threads).doc("ONNX Runtime threads per worker")
      .field("minEdge", &CostHost::min_edge).doc("the smallest cube edge run (voxels)")
      .field("maxEdge", &CostHost::max_edge).doc("the largest cube edge run (voxels)");

  Fields<NetworkHeap>("NetworkHeap", "One network's worker heap as measured.")
      .text<&NetworkHeap::network>("network").doc("which of the model's networks; empty when it runs one")
      .text<&NetworkHeap::parameters>("parameters").doc("the measured graph's size")
      .number<&NetworkHeap::after_session_bytes>("afterSessionBytes")
      .doc("the largest heap right after session creation, over every host and thread count")
      .field("flatToEdge", &NetworkHeap::flat_to_edge)
      .doc("patches up to this edge ran in the heap session creation freed; 0: none did")
      .field("slope", &NetworkHeap::slope).doc("heap growth per patch voxel (B) between slopeFromEdge and slopeToEdge")
      .field("slopeFromEdge", &NetworkHeap::slope_from_edge)
      .field("slopeToEdge", &NetworkHeap::slope_to_edge)
      .number<&NetworkHeap::fit_fixed_bytes>("fitFixedBytes").doc("the least-squares line's intercept; 0: no line fitted")
      .field("fitR2", &NetworkHeap::fit_r2).doc("that line's r²");

  Fields<CostMeasurement>("CostMeasurement", "What a registry network's memory cost was measured from (the budget "
                                             "itself is the network's fixedBytes and bytesPerVoxel).")
      .text<&CostMeasurement::engine>("engine")
      .text<&CostMeasurement::engine_version>("engineVersion")
      .text<&CostMeasurement::backend>("backend")
      .text<&CostMeasurement::subject>("subject").doc("what ran: a stand-in, or the shipped weights")
      .text<&CostMeasurement::script>("script").doc("the stand-in's builder; empty: no stand-in")
      .field("hosts", +[](const CostMeasurement& c) {
        val out = val::array();
        for (const CostHost& h : c.hosts) out.call<void>("push", val(h));
        return out;
      }, "CostHost[]")
      .text<&CostMeasurement::date>("date")
      .field("networks", +[](const CostMeasurement& c) {
        val out = val::array();
        for (const NetworkHeap& h : c.networks) out.call<void>("push", val(h));
        return out;
      }, "NetworkHeap[]")
      .doc("one per network a tile holds at once: their heaps add up")
      .field("rule", +[](const CostMeasurement& c) { return std::string(budget_rule_name(c.rule)); },
             "'points-under-line' | 'points-margin-under-line'")
      .doc("how fixedBytes and bytesPerVoxel follow from the measurement")
      .field("margin", &CostMeasurement::margin)
      .text<&CostMeasurement::evidence>("evidence").doc("the files with the points and the derivation")
      .text<&CostMeasurement::note>("note").doc("facts the fields above do not hold");

  Fields<ModelSpec>("ModelInfo", "A network of the registry (registry(), model()).")
      .text<&ModelSpec::id>("id")
      .text<&ModelSpec::name>("name")
      .field("kind", +[](const ModelSpec& m) { return std::string(model_kind_name(m.kind)); }, "ModelKind")
      .field("tileable", +[](const ModelSpec& m) { return m.tileable(); })
      .field("divisor", &ModelSpec::divisor)
      .number<&ModelSpec::bytes_per_voxel>("bytesPerVoxel")
      .number<&ModelSpec::fixed_bytes>("fixedBytes")
      .field("maskedInput", &ModelSpec::masked_input)
      .field("costProvisional", &ModelSpec::cost_provisional)
      .text<&ModelSpec::cost_source>("costSource")
      .field("cost", +[](const ModelSpec& m) { return m.cost_measurement ? val(*m.cost_measurement) : val::null(); },
             "CostMeasurement | null")
      .doc("what fixedBytes and bytesPerVoxel were measured from; null: provisional")
      .field("inputChannels", &ModelSpec::input_channels)
      .field("outputChannels", &ModelSpec::output_channels)
      .text<&ModelSpec::input>("input")
      .text<&ModelSpec::output>("output")
      .field("trainingVoxelMm", +[](const ModelSpec& m) { return or_null(m.training_voxel_mm[0] > 0.0, m.training_voxel_mm); },
             "Vec3 | null")
      .doc("the voxel (mm) it was trained on: other grids are resampled there in k-space and χ back; null: none declared")
      .text<&ModelSpec::quantity>("quantity", "'chi' | 'local-field'")
      .doc("what the output is (both ppm): chi, or the local field (iQFM)")
      .field("inputs", +[](const ModelSpec& m) {
        val out = val::array();
        for (InputRole role : m.inputs) out.call<void>("push", std::string(input_role_name(role)));
        return out;
      }, "string[]")
      .doc("multi-input networks (the iQSM family): input roles in the reference order; empty for one input")
      .field("cropMargin", &ModelSpec::crop_margin)
      .doc("phase networks: crop to the eroded mask's bounding box + this margin (0: no crop)")
      .field("normalization", &ModelSpec::norm)
      .field("pad", +[](const ModelSpec& m) { return std::string(m.pad == PadRule::SmallerHalfLow ? "smaller-half-low" : "larger-half-low"); },
             "'smaller-half-low' | 'larger-half-low'")
      .field("weights", +[](const ModelSpec& m) {
        val out = val::array();  // the files recorded (unused entries have no file)
        for (const WeightsFile& w : m.weights) {
          if (!w.file.empty()) out.call<void>("push", val(w));
        }
        return out;
      }, "WeightsFile[]")
      .text<&ModelSpec::licence>("licence")
      .text<&ModelSpec::citation>("citation")
      .text<&ModelSpec::notes>("notes")
      .field("defaultHalo", &ModelSpec::default_halo)
      .field("macsPerVoxel", &ModelSpec::macs_per_voxel)
      .doc("its convolutions' multiply-accumulates per input voxel (graph-cost.js; 0 when unknown): its time estimate")
      .field("wasmConvTransposeRewrite", &ModelSpec::wasm_conv_transpose_rewrite)
      .doc("the wasm backend runs it with its 3D ConvTranspose rewritten (webgpu-graph.js): measured faster and lighter")
      .field("receptiveRadius", &ModelSpec::receptive_radius)
      .doc("how far an output voxel depends on inputs (voxels; 0 when unknown) and where that figure comes from")
      .text<&ModelSpec::receptive_source>("receptiveSource")
      .field("measuredContext", +[](const ModelSpec& m) { return m.measured_context.empty() ? val::null() : array_of(m.measured_context); },
             "number[] | null")
      .doc("a probe's profile of the registry's weights (within[ρ]), or null");
}

val value_types_record() {
  return guarded([] {
    val out = val::array();
    for (const TypeRecord& t : records()) {
      val fields = val::array();
      for (const FieldRecord& f : t.fields) {
        val x = val::object();
        x.set("name", f.name);
        x.set("type", f.derived ? f.derived() : f.given);
        x.set("doc", f.doc);
        fields.call<void>("push", x);
      }
      val o = val::object();
      o.set("name", t.name);
      o.set("doc", t.doc);
      o.set("tuple", t.tuple);
      o.set("fields", fields);
      out.call<void>("push", o);
    }
    return out;
  });
}

}  // namespace tessera::js

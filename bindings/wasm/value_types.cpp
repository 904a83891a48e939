#include "conversions.h"

#include <emscripten/bind.h>
#include <emscripten/val.h>

#include <cmath>

#include "tessera/calibration.h"
#include "tessera/dipole.h"
#include "tessera/fidelity.h"
#include "tessera/phantom.h"
#include "tessera/request.h"
#include "tessera/verify.h"
#include "val_fields.h"

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

// value_object<T> with the three kinds of field above.
template <class T>
class Fields {
 public:
  explicit Fields(const char* name) : object_(name) {}
  // A member Embind converts as it is: bool, 32-bit integers, double, std::string, a registered value type.
  template <class M>
  Fields& field(const char* name, M T::*member) {
    object_.field(name, member);
    return *this;
  }
  // A field computed from the struct.
  template <class R>
  Fields& field(const char* name, R (*get)(const T&)) {
    object_.field(name, get, &read_only<T, R>);
    return *this;
  }
  template <auto member>
  Fields& number(const char* name) {
    object_.field(name, &as_number<member>, &from_number<member>);
    return *this;
  }
  template <auto member>
  Fields& text(const char* name) {
    object_.field(name, &as_text<member>, &read_only<T, std::string>);
    return *this;
  }

 private:
  emscripten::value_object<T> object_;
};

template <class A, size_t i>
double element(const A& a) {
  return static_cast<double>(a[i]);
}
template <class A, size_t i>
void set_element(A& a, double v) {
  a[i] = static_cast<typename A::value_type>(v);
}
// A std::array of 3 numbers as [x, y, z].
template <class A>
void register_triple(const char* name) {
  emscripten::value_array<A>(name)
      .element(&element<A, 0>, &set_element<A, 0>)
      .element(&element<A, 1>, &set_element<A, 1>)
      .element(&element<A, 2>, &set_element<A, 2>);
}

// An optional member: its object, or null.
template <class T>
val or_null(bool present, const T& x) {
  return present ? val(x) : val::null();
}

// dims [1, channels, x, y, z] of a network call's main input.

}  // namespace

void register_value_types() {
  register_triple<Dims3>("Dims3");
  register_triple<std::array<uint64_t, 3>>("Extent3");
  register_triple<Vec3>("Vec3");

  Fields<Geometry>("Geometry").field("dims", &Geometry::dims).field("voxelMm", &Geometry::voxel_mm).field("b0Dir", &Geometry::b0_dir);

  Fields<CalibrationFit>("CalibrationFit")
      .number<&CalibrationFit::fixed_bytes>("fixedBytes")
      .number<&CalibrationFit::bytes_per_voxel>("bytesPerVoxel")
      .field("fittedFixedBytes", &CalibrationFit::fitted_fixed_bytes)
      .field("fittedBytesPerVoxel", &CalibrationFit::fitted_bytes_per_voxel)
      .field("r2", &CalibrationFit::r2)
      .field("slopeBound", &CalibrationFit::slope_bound)
      .field("slopeMargin", &CalibrationFit::slope_margin)
      .field("pointsFitted", &CalibrationFit::points_fitted)
      .field("slopeMeasured", &CalibrationFit::slope_measured)
      .number<&CalibrationFit::raised_bytes>("raisedBytes")
      .field("note", &CalibrationFit::note);

  Fields<PatchFit>("PatchFit")
      .field("fits", &PatchFit::fits)
      .number<&PatchFit::patch_edge>("patchEdge")
      .number<&PatchFit::bytes>("bytes")
      .number<&PatchFit::largest_edge>("largestEdge")
      .number<&PatchFit::largest_core>("largestCore")
      .field("message", &PatchFit::message);

  Fields<TileConfig>("TileConfig")
      .field("core", &TileConfig::core)
      .field("halo", &TileConfig::halo)
      .field("stride", +[](const TileConfig& c) { return c.step(); })
      .field("blend", +[](const TileConfig& c) { return std::string(blend_name(c.blend)); });

  Fields<Tile>("Tile")
      .number<&Tile::index>("index")
      .field("coreLo", &Tile::core_lo)
      .field("coreHi", &Tile::core_hi)
      .field("patchLo", &Tile::patch_lo)
      .field("skipped", &Tile::skipped);

  Fields<TileGrid>("TileGrid")
      .field("counts", &TileGrid::counts)
      .number<&TileGrid::patch_edge>("patchEdge")
      .field("stride", +[](const TileGrid& g) { return g.config.step(); })
      .field("blend", +[](const TileGrid& g) { return std::string(blend_name(g.config.blend)); })
      .number<&TileGrid::misaligned>("misaligned")  // active tiles off the whole volume's pooling grid
      .field("tiles", +[](const TileGrid& g) { return array_of(g.tiles); });

  Fields<FidelityPrediction>("FidelityPrediction")
      .field("r", &FidelityPrediction::r)
      .field("nrmse", &FidelityPrediction::nrmse)
      .field("deficit", &FidelityPrediction::deficit);

  Fields<ContextProfile>("ContextProfile")
      .field("radius", &ContextProfile::radius)
      .field("measured", &ContextProfile::measured)
      .field("assumed", &ContextProfile::assumed)
      .field("radius90", +[](const ContextProfile& c) { return context_radius_holding(c, 0.90); })
      .field("radius99", +[](const ContextProfile& c) { return context_radius_holding(c, 0.99); });

  Fields<VerifyRegion>("VerifyRegion")
      .field("possible", &VerifyRegion::possible)
      .field("message", &VerifyRegion::message)
      .field("lo", &VerifyRegion::lo)
      .field("hi", &VerifyRegion::hi)
      .field("compareLo", &VerifyRegion::compare_lo)
      .field("compareHi", &VerifyRegion::compare_hi)
      .field("margin", &VerifyRegion::margin)
      .field("plan", +[](const VerifyRegion& v) { return or_null(v.possible, v.plan); });

  Fields<B0Plan>("B0Plan")
      .field("tiltDegrees", &B0Plan::tilt_degrees)
      .field("assumesZ", &B0Plan::assumes_z)
      .field("resampled", &B0Plan::resampled)
      .field("mode", +[](const B0Plan& b) { return std::string(b0_align_mode_name(b.mode)); })
      .field("thresholdDegrees", &B0Plan::threshold_degrees)
      .field("warnDegrees", &B0Plan::warn_degrees)
      .field("alignedDims", +[](const B0Plan& b) { return or_null(b.resampled, b.aligned_dims); })
      .number<&B0Plan::extra_module_bytes>("extraModuleBytes")
      .field("summary", &B0Plan::summary)
      .field("warning", &B0Plan::warning);

  Fields<BoxSplit>("BoxSplit")
      .field("axis", &BoxSplit::axis)
      .field("pieces", &BoxSplit::pieces)
      .field("halo", &BoxSplit::halo);

  Fields<CropBox>("CropBox")
      .field("lo", &CropBox::lo)
      .field("hi", &CropBox::hi)
      .field("patchLo", &CropBox::patch_lo)
      .field("patchDims", &CropBox::patch_dims)
      .field("margin", &CropBox::margin)
      .field("split", &CropBox::split);

  Fields<TilePlan>("TilePlan")
      .field("feasible", &TilePlan::feasible)
      .field("tile", &TilePlan::tile)
      .field("workers", &TilePlan::workers)
      .field("threadsPerWorker", &TilePlan::threads_per_worker)
      .field("estimatedSeconds", &TilePlan::estimated_seconds)
      .field("estimateSource", &TilePlan::estimate_source)
      .field("explanation", &TilePlan::explanation)
      .field("fidelityWarning", &TilePlan::fidelity_warning)
      .field("message", &TilePlan::message)
      .field("wholeVolume", &TilePlan::whole_volume)
      .field("crop", +[](const TilePlan& p) { return or_null(p.crop.cropped, p.crop); })
      .number<&TilePlan::patch_edge>("patchEdge")
      .field("patchDims", &TilePlan::patch_dims)
      .number<&TilePlan::bytes_per_tile>("bytesPerTile")
      .field("tilesInFlight", &TilePlan::tiles_in_flight)
      .number<&TilePlan::tiles_total>("tilesTotal")
      .number<&TilePlan::tiles_active>("tilesActive")
      .number<&TilePlan::tiles_skipped>("tilesSkipped")
      .number<&TilePlan::activation_bytes>("activationBytes")
      .number<&TilePlan::module_heap_bytes>("moduleHeapBytes")
      .number<&TilePlan::peak_bytes>("peakBytes")
      .field("grid", &TilePlan::grid)
      // Optional members are null when absent (the API's documented shape), hence val getters.
      .field("verify", +[](const TilePlan& p) { return p.verify ? val(*p.verify) : val::null(); })
      .field("context", +[](const TilePlan& p) { return or_null(!p.context.within.empty(), p.context); })
      .field("predictedFidelity", +[](const TilePlan& p) { return or_null(p.fidelity_known, p.fidelity); });

  Fields<RunReport>("RunReport")
      .number<&RunReport::tiles_total>("tilesTotal")
      .number<&RunReport::tiles_run>("tilesRun")
      .number<&RunReport::tiles_skipped>("tilesSkipped")
      .field("concurrency", &RunReport::concurrency)
      .field("maxInFlight", &RunReport::max_in_flight)
      .number<&RunReport::patch_edge>("patchEdge")
      .number<&RunReport::bytes_per_tile>("bytesPerTile")
      .field("driverSeconds", &RunReport::wall_seconds)
      .field("tileSeconds", +[](const RunReport& r) { return array_of(r.tile_seconds); });

  Fields<Agreement>("Agreement")
      .number<&Agreement::voxels>("voxels")
      .field("r", &Agreement::r)
      .field("nrmse", &Agreement::nrmse)
      .field("maxAbs", &Agreement::max_abs)
      .field("hfen", &Agreement::hfen);

  Fields<OptionSpec>("OptionSpec")
      .text<&OptionSpec::name>("name")
      .text<&OptionSpec::unit>("unit")
      .field("default", +[](const OptionSpec& o) { return o.default_text.empty() ? val(o.default_value) : val(std::string(o.default_text)); })
      .field("defaultValue", &OptionSpec::default_value)
      .field("min", &OptionSpec::min)
      .field("max", &OptionSpec::max)
      .field("minExclusive", &OptionSpec::min_exclusive)
      .field("integer", &OptionSpec::integer)
      .text<&OptionSpec::help>("help")
      .field("choices", +[](const OptionSpec& o) {
        val out = val::array();  // "faithful|balanced|fast" -> ["faithful", "balanced", "fast"]; "" -> []
        for (std::string_view c : option_choices(o)) out.call<void>("push", std::string(c));
        return out;
      });

  // A further named input of a patch (a phase network's mask, TE, B0 ...): a view on the run's buffer, valid until the
  // patch is answered.
  Fields<NamedInput>("NamedInput")
      .field("role", &NamedInput::role)
      .field("dims", +[](const NamedInput& e) {
        val out = val::array();
        for (uint64_t k : e.dims) out.call<void>("push", static_cast<double>(k));
        return out;
      })
      .field("input", +[](const NamedInput& e) { return val(emscripten::typed_memory_view(e.data.size(), e.data.data())); });

  Fields<Normalization>("Normalization")
      .field("inputMean", &Normalization::input_mean)
      .field("inputStd", &Normalization::input_std)
      .field("outputStd", &Normalization::output_scale)
      .field("outputMean", &Normalization::output_offset);

  Fields<WeightsFile>("WeightsFile")
      .text<&WeightsFile::file>("file")
      .field("url", +[](const WeightsFile& w) {
        return w.bundled.empty() ? std::string(kOfficialWeightsBase) + std::string(w.file) : std::string(w.bundled);
      })
      .field("bundled", +[](const WeightsFile& w) { return !w.bundled.empty(); })
      .number<&WeightsFile::bytes>("bytes")
      .text<&WeightsFile::sha256>("sha256");

  Fields<ModelSpec>("ModelSpec")
      .text<&ModelSpec::id>("id")
      .text<&ModelSpec::name>("name")
      .field("kind", +[](const ModelSpec& m) { return std::string(model_kind_name(m.kind)); })
      .field("tileable", +[](const ModelSpec& m) { return m.tileable(); })
      .field("divisor", &ModelSpec::divisor)
      .number<&ModelSpec::bytes_per_voxel>("bytesPerVoxel")
      .number<&ModelSpec::fixed_bytes>("fixedBytes")
      .field("maskedInput", &ModelSpec::masked_input)
      .field("costProvisional", &ModelSpec::cost_provisional)
      .text<&ModelSpec::cost_source>("costSource")
      .field("inputChannels", &ModelSpec::input_channels)
      .field("outputChannels", &ModelSpec::output_channels)
      .text<&ModelSpec::input>("input")
      .text<&ModelSpec::output>("output")
      .text<&ModelSpec::quantity>("quantity")
      .field("inputs", +[](const ModelSpec& m) {
        val out = val::array();
        for (InputRole role : m.inputs) out.call<void>("push", std::string(input_role_name(role)));
        return out;
      })
      .field("cropMargin", &ModelSpec::crop_margin)
      .field("normalization", &ModelSpec::norm)
      .field("pad", +[](const ModelSpec& m) { return std::string(m.pad == PadRule::SmallerHalfLow ? "smaller-half-low" : "larger-half-low"); })
      .field("weights", +[](const ModelSpec& m) {
        val out = val::array();  // the files recorded (unused entries have no file)
        for (const WeightsFile& w : m.weights) {
          if (!w.file.empty()) out.call<void>("push", val(w));
        }
        return out;
      })
      .text<&ModelSpec::licence>("licence")
      .text<&ModelSpec::citation>("citation")
      .text<&ModelSpec::notes>("notes")
      .field("defaultHalo", &ModelSpec::default_halo)
      .field("receptiveRadius", &ModelSpec::receptive_radius)
      .text<&ModelSpec::receptive_source>("receptiveSource")
      .field("measuredContext", +[](const ModelSpec& m) { return m.measured_context.empty() ? val::null() : array_of(m.measured_context); });
}

}  // namespace tessera::js

#include "tessera/session/request.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <set>
#include <string>
#include <vector>

#include "tessera/engine/autoplan.h"
#include "tessera/common/budget.h"
#include "tessera/common/error.h"
#include "tessera/inversion/methods.h"
#include "tessera/networks/phase_networks.h"
#include "tessera/background/options.h"
#include "tessera/phase/options.h"
#include "tessera/pipeline/pipeline.h"
#include "tessera/registry/registry.h"

using namespace tessera;

namespace {
std::string option_refusal(std::string_view name, double value) {
  try {
    checked_option(name, value);
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::InvalidArgument);
    return e.what();
  }
  ADD_FAILURE() << name << " = " << value << " accepted";
  return "";
}
}  // namespace

TEST(Request, EveryOptionIsNamedOnceWithASaneRangeAndDefault) {
  std::set<std::string> names;
  for (const OptionSpec& o : request_options()) {
    EXPECT_TRUE(names.insert(std::string(o.name)).second) << o.name;
    EXPECT_LE(o.min, o.max) << o.name;
    EXPECT_FALSE(o.help.empty()) << o.name;
    if (o.default_text.empty()) EXPECT_EQ(checked_option(o.name, o.default_value), o.default_value) << o.name;
  }
  EXPECT_THROW(request_option("nope"), Error);
}

// A default written as a float and widened to the schema's double reads as noise in the CLI's help, the page and a
// report (0.19f is 0.1899999976158142): each default that is a float's value reads as that float's shortest decimal.
TEST(Request, NoDefaultIsAFloatWidened) {
  for (const OptionSpec& o : request_options()) {
    const double d = o.default_value;
    const float f = static_cast<float>(d);
    if (!std::isfinite(d) || static_cast<double>(f) != d) continue;
    // The float's shortest decimal (std::to_chars of a float is missing from Emscripten's libc++).
    char text[32];
    for (int digits = 1; digits <= 9; ++digits) {
      std::snprintf(text, sizeof text, "%.*g", digits, static_cast<double>(f));
      if (std::strtof(text, nullptr) == f) break;
    }
    EXPECT_EQ(std::strtod(text, nullptr), d) << o.name << " defaults to " << d << ", the float " << text << " widened";
  }
}

TEST(Request, TheStructsDefaultToTheSchema) {
  const PhaseSettings s;
  EXPECT_EQ(s.b0_tesla, request_option("b0").default_value);
  EXPECT_EQ(s.erode_radius, request_option("erodeRadius").default_value);
  EXPECT_EQ(s.phase_sign, request_option("phaseSign").default_value);
  EXPECT_EQ(TileCost{}.bytes_per_voxel, request_option("spec.bytesPerVoxel").default_value);
  EXPECT_EQ(TileCost{}.divisor, request_option("spec.divisor").default_value);
  EXPECT_EQ(request_option("tile").default_text, "auto");
}

// A worded option lists its values (the page's selects read them): each is what the core accepts, the default among them.
TEST(Request, WordedOptionsListTheValuesTheCoreAccepts) {
  const auto values = [](std::string_view choices) {
    std::vector<std::string> out;
    for (size_t at = 0; at <= choices.size();) {
      const size_t bar = std::min(choices.find('|', at), choices.size());
      out.emplace_back(choices.substr(at, bar - at));
      at = bar + 1;
    }
    return out;
  };
  const OptionSpec& quality = request_option("quality");
  EXPECT_EQ(values(quality.choices), (std::vector<std::string>{"faithful", "balanced", "fast"}));
  for (const std::string& q : values(quality.choices)) EXPECT_EQ(quality_name(quality_from_name(q)), q);
  EXPECT_EQ(quality.default_text, "faithful");
  const OptionSpec& blend = request_option("tile.blend");
  for (const std::string& b : values(blend.choices)) EXPECT_EQ(blend_name(blend_from_name(b)), b);
  EXPECT_EQ(values(blend.choices).front(), blend.default_text);
  EXPECT_TRUE(request_option("b0").choices.empty());
}

TEST(Request, RefusalsNameTheOptionRangeAndUnit) {
  EXPECT_EQ(option_refusal("b0", 0), "b0 must be in (0, 30] T, got 0 (field strength in tesla)");
  EXPECT_EQ(option_refusal("te", 20), "te must be in (0, 1] s, got 20: give TE in seconds (20 ms = 0.02)");
  EXPECT_NE(option_refusal("te", -0.01).find("te must be in (0, 1] s, got -0.01"), std::string::npos);
  EXPECT_NE(option_refusal("phaseSign", 2).find("phaseSign must be +1 or -1"), std::string::npos);
  EXPECT_NE(option_refusal("erodeRadius", 2.5).find("erodeRadius must be a whole number in [0, 255] voxels"), std::string::npos);
  EXPECT_NE(option_refusal("spec.inputStd", 0).find("spec.inputStd must be in (0, ∞) ppm"), std::string::npos);
  EXPECT_NE(option_refusal("spec.divisor", 0).find("spec.divisor must be a whole number in [1, 1024] voxels"), std::string::npos);
  EXPECT_NE(option_refusal("spec.outputMean", std::numeric_limits<double>::infinity()).find("a finite number"), std::string::npos);
  EXPECT_EQ(checked_option("te", 0.02), 0.02);
  EXPECT_EQ(checked_option("phaseSign", 1), 1);
}

TEST(Request, MoDLIsPlannedAtTheEvenSizeItsNetworkSees) {
  EXPECT_EQ(model_spec("modl-qsm").divisor, 2u);
}

TEST(Request, FixedTilesRunHalfTheCoresInWorkersOneToFour) {
  EXPECT_EQ(defaults::workers_for(0), 1u);
  EXPECT_EQ(defaults::workers_for(1), 1u);
  EXPECT_EQ(defaults::workers_for(2), 1u);
  EXPECT_EQ(defaults::workers_for(5), 2u);
  EXPECT_EQ(defaults::workers_for(8), 4u);
  EXPECT_EQ(defaults::workers_for(64), 4u);
}

namespace {
// Whether table holds an option of this name.
bool holds(std::span<const OptionSpec> table, std::string_view name) {
  return std::any_of(table.begin(), table.end(), [&](const OptionSpec& o) { return o.name == name; });
}
std::string_view top_of(std::string_view name) { return name.substr(0, name.find('.')); }
}  // namespace

TEST(RequestSurface, EachOptionBelongsToTheKindsOfItsLayersTable) {
  const uint8_t both_runs = kNetworkRequest | kPipelineRequest;
  for (const OptionSpec& o : request_options()) {
    const uint8_t k = request_option_kinds(o);
    EXPECT_NE(k, 0) << o.name;
    if (holds(method_options(), o.name) || o.name == "method") {
      EXPECT_EQ(k, kMethodRequest | kPipelineRequest) << o.name;
    } else if (holds(phase_options(), o.name) && (o.name == "unwrap" || top_of(o.name) == "brainMask")) {
      EXPECT_EQ(k, kPipelineRequest | kSwiRequest) << o.name;  // swi() unwraps and masks as the pipeline does
    } else if (top_of(o.name) == "swi") {
      EXPECT_EQ(k, kPipelineRequest | kSwiRequest) << o.name;
    } else if (top_of(o.name) == "r2star") {
      EXPECT_EQ(k, kPipelineRequest | kR2starRequest) << o.name;
    } else if (holds(pipeline_options(), o.name) || o.name == "also") {
      EXPECT_EQ(k, kPipelineRequest) << o.name;
    } else if (o.name == "te") {
      EXPECT_EQ(k, both_runs | kSwiRequest | kR2starRequest) << o.name;
    } else if (holds(acquisition_options(), o.name) || top_of(o.name) == "spec") {
      EXPECT_EQ(k, both_runs) << o.name;
    } else {
      EXPECT_EQ(k, kNetworkRequest) << o.name;  // the run's options, the phase networks'
    }
    const uint8_t required = o.name == "method" ? kMethodRequest : o.name == "te" ? kSwiRequest | kR2starRequest : 0;
    EXPECT_EQ(request_option_required(o), required) << o.name;
  }
  // The phase stage's and the background removals' tables are joined into the pipeline's in their order.
  const std::span<const OptionSpec> stages = pipeline_options();
  ASSERT_GE(stages.size(), phase_options().size() + background_options().size() + 1);
  const std::vector<std::string_view> head = {"unwrap", "fitOffset", "fitOffsetSigma", "fitResidualLimit", "background"};
  for (size_t i = 0; i < head.size(); ++i) EXPECT_EQ(stages[i].name, head[i]) << i;
  for (size_t i = 0; i < background_options().size(); ++i) EXPECT_EQ(stages[head.size() + i].name, background_options()[i].name) << i;
  EXPECT_EQ(stages[stages.size() - 2].name, "brainMask.erosion");
  EXPECT_EQ(stages.back().name, "brainMask.threshold");
  EXPECT_EQ(stages.size(), phase_options().size() + background_options().size() + 1);
  // Every option of a group (tile.*, vsharp.*) goes to the kinds of the group's first.
  for (const OptionSpec& a : request_options()) {
    for (const OptionSpec& b : request_options()) {
      if (top_of(a.name) == top_of(b.name)) EXPECT_EQ(request_option_kinds(a), request_option_kinds(b)) << a.name << " " << b.name;
    }
  }
  EXPECT_EQ(request_kind_names().size(), 5u);
  EXPECT_EQ(request_kind_names()[0], "network");
  EXPECT_EQ(request_kind_names()[2], "pipeline");
  EXPECT_EQ(request_kind_names()[3], "swi");
  EXPECT_EQ(request_kind_names()[4], "r2star");
}

TEST(RequestSurface, OptionTypesFollowTheirSpec) {
  for (const OptionSpec& o : request_options()) {
    const std::string t = request_option_type(o);
    for (std::string_view c : option_choices(o)) EXPECT_NE(t.find("'" + std::string(c) + "'"), std::string::npos) << o.name << ": " << t;
    if (option_choices(o).empty() && o.name != "tile" && o.name != "tile.core" && o.name != "te") {
      EXPECT_TRUE(t == "number" || t == "boolean") << o.name << ": " << t;
    }
  }
  EXPECT_EQ(request_option_type(request_option("whole")), "boolean");
  EXPECT_EQ(request_option_type(request_option("b0")), "number");
  EXPECT_EQ(request_option_type(request_option("quality")), "'faithful' | 'balanced' | 'fast'");
  EXPECT_EQ(request_option_type(request_option("also")), "'swi' | 'r2star' | Array<'swi' | 'r2star'>");
  const OptionSpec stranger{"stranger", "", 0, "", 0, 1};
  EXPECT_THROW(request_option_kinds(stranger), Error);
}

TEST(RequestSurface, KeysAreNoOptionsAndEachKindNamesAKeyOnce) {
  std::set<std::string_view> tops;
  for (const OptionSpec& o : request_options()) tops.insert(top_of(o.name));
  std::set<std::pair<std::string_view, int>> seen;
  for (const RequestKey& k : request_keys()) {
    EXPECT_FALSE(k.type.empty()) << k.name;
    EXPECT_FALSE(k.doc.empty()) << k.name;
    EXPECT_EQ(k.doc.find("*/"), std::string_view::npos) << k.name;
    EXPECT_NE(k.kinds, 0) << k.name;
    if (k.name.find('.') != std::string_view::npos) {
      // A group's field that is no option: the group is an option group, of the same kinds.
      EXPECT_TRUE(tops.count(top_of(k.name))) << k.name;
      EXPECT_FALSE(std::any_of(request_options().begin(), request_options().end(), [&](const OptionSpec& o) { return o.name == k.name; })) << k.name;
    } else {
      EXPECT_FALSE(tops.count(k.name)) << k.name << " is a schema option: the schema gives it";
    }
    for (int bit = 0; bit < static_cast<int>(request_kind_names().size()); ++bit) {
      if (k.kinds & (1 << bit)) EXPECT_TRUE(seen.insert({k.name, bit}).second) << k.name << " twice for " << request_kind_names()[bit];
    }
  }
  // What a run cannot go without: a method's field, a network's weights (plan() needs neither), swi()'s phase and
  // magnitude, r2star()'s magnitude.
  for (const RequestKey& k : request_keys()) {
    const bool needed = (k.name == "field" && k.kinds == kMethodRequest) || (k.name == "weights" && k.kinds == kNetworkRequest) ||
                        ((k.name == "phase" || k.name == "magnitude") && k.kinds == kSwiRequest) ||
                        (k.name == "magnitude" && k.kinds == kR2starRequest);
    EXPECT_EQ(k.presence == KeyPresence::RequiredToRun, needed) << k.name;
  }
}

// The pipeline's optional outputs (also_swi, also_r2star) against the standalone SWI and R2* runs, their memory plan,
// and the methods text of a pipeline request.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "support.h"
#include "tessera/pipeline/methods_text.h"
#include "tessera/pipeline/pipeline.h"
#include "tessera/pipeline/swi_from_phase.h"
#include "tessera/sim/phantom.h"

namespace tessera {
namespace {

using test::head;

Geometry also_geometry() { return head(48, 48, 36, 4.0); }

const PhantomAcquisition& also_scan() {
  static const PhantomAcquisition a = [] {
    AcquisitionOptions o;
    o.te_s = {0.004, 0.008, 0.012};
    o.snr = 100;
    return make_acquisition(also_geometry(), o);
  }();
  return a;
}

PipelineResult also_run(PipelineRequest r) {
  const PhantomAcquisition& a = also_scan();
  r.te_s = a.te_s;
  r.b0_tesla = a.b0_tesla;
  Pipeline p(also_geometry(), a.phase, a.magnitude, {}, r);
  uint32_t steps = 0;
  while (!p.finished()) {
    p.step();
    ++steps;
  }
  EXPECT_LE(steps, p.total_steps());
  return p.take_result();
}

TEST(PipelineAlso, SwiAndR2starEqualTheStandaloneRunsOnThePipelinesMask) {
  PipelineRequest r;
  r.method = Method::Tkd;
  r.also_swi = true;
  r.also_r2star = true;
  const PipelineResult out = also_run(r);
  const PhantomAcquisition& a = also_scan();
  SwiRequest s;
  s.te_s = a.te_s;
  SwiFromPhase alone(also_geometry(), a.phase, a.magnitude, {}, s);
  run_to_end(alone);
  const SwiRunResult want = alone.take_result();
  EXPECT_EQ(want.mask, out.mask);
  EXPECT_EQ(want.swi.swi, out.swi.swi);
  EXPECT_EQ(want.min_ip, out.min_ip);
  const R2starResult fit = r2star(also_geometry(), a.magnitude, a.te_s, out.mask);
  EXPECT_EQ(fit.r2star, out.r2star.r2star);
  EXPECT_EQ(fit.t2star, out.r2star.t2star);
  // χ is the run's without also.
  PipelineRequest plain;
  plain.method = Method::Tkd;
  EXPECT_EQ(also_run(plain).chi, out.chi);
}

TEST(PipelineAlso, PlannedAndRefusedUpFront) {
  const Geometry g = also_geometry();
  PipelineRequest r;
  r.te_s = {0.004, 0.008, 0.012};
  r.method = Method::Tkd;
  const uint64_t without = pipeline_workspace_bytes(g, r, false);
  r.also_swi = r.also_r2star = true;
  // Stages run one after another: SWI and R2* add their own peak (what the earlier stages kept, χ and their workspace)
  // and their maps to what is kept, so the plan grows unless an earlier stage's peak is higher (the heap test in
  // pipeline-also.test.js measures the run against it).
  const uint64_t with = pipeline_workspace_bytes(g, r, false);
  EXPECT_GE(with, without);
  EXPECT_GE(with, swi_workspace_bytes(g, r.swi, r.threads));
  const PipelinePlan p = plan_pipeline(g, r, false, true);
  EXPECT_EQ(p.stages, (std::vector<std::string>{"brain mask", "echo fit", std::string(background_title(kDefaultBackground)), "TKD", "SWI",
                                                "minIP", "R2*"}));
  const PhantomAcquisition& a = also_scan();
  r.te_s = a.te_s;
  EXPECT_THROW(Pipeline(g, a.phase, {}, a.brain_mask, r), Error);  // no magnitude
  r.te_s = {0.004, 0.008, 0.013};
  EXPECT_THROW(Pipeline(g, a.phase, a.magnitude, {}, r), Error);  // ARLO's unequal spacing
}

TEST(PipelineAlso, MethodsTextNamesEveryStepItsParametersAndPapers) {
  PipelineRequest r;
  r.te_s = {0.004, 0.008, 0.012};
  r.background = BackgroundRemoval::Pdf;
  r.pdf.max_iterations = 20;
  r.method = Method::Tkd;
  r.also_swi = r.also_r2star = true;
  const MethodsText m = pipeline_methods_text(r, false);
  std::vector<std::string> stages;
  for (const MethodsStep& s : m.steps) stages.push_back(s.stage);
  EXPECT_EQ(stages, (std::vector<std::string>{"acquisition", "brain mask", "unwrapping", "echo fit", "background removal", "inversion",
                                              "SWI", "minIP", "R2*"}));
  // References numbered by first citation: every [n] in the text is in the list, in order.
  size_t next = 1;
  for (size_t at = m.text.find('['); at != std::string::npos; at = m.text.find('[', at + 1)) {
    const size_t n = std::stoul(m.text.substr(at + 1));
    EXPECT_LE(n, next);
    next = std::max(next, n + 1);
  }
  EXPECT_EQ(next - 1, m.references.size());
  for (const char* author : {"Otsu N", "Dymerska B", "Liu T", "Shmueli K", "Haacke EM", "Eckstein K", "Pei M"}) {
    EXPECT_TRUE(std::any_of(m.references.begin(), m.references.end(), [&](const std::string& x) { return x.rfind(author, 0) == 0; })) << author;
  }
  const MethodsStep& pdf = m.steps[4];
  EXPECT_EQ(pdf.title, "PDF");
  EXPECT_EQ(pdf.parameters.front(), (std::pair<std::string, std::string>{"pdf.maxIterations", "20"}));
  EXPECT_NE(m.text.find(pdf.sentence), std::string::npos);
}

}  // namespace
}  // namespace tessera

// The session layer natively: a request of each kind planned, its run held to the plan it was made for, and the run's
// χ equal to the method's own.
#include "tessera/session/session.h"

#include <gtest/gtest.h>

#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "session/run.h"
#include "support.h"
#include "tessera/common/error.h"
#include "tessera/inversion/closed_form.h"
#include "tessera/quality/fidelity.h"
#include "tessera/sim/phantom.h"

using namespace tessera;
using tessera::test::head;

namespace {

Request tkd_request(const Geometry& g, double threshold) {
  Request r;
  r.geometry = g;
  MethodRequest m;
  m.method = Method::Tkd;
  m.params.set("tkd.threshold", threshold);
  m.threads = 2;
  method_identity(m.method, m.params, r.identity);
  r.run_threads = m.threads;
  r.what = m;
  return r;
}

std::string refusal(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  ADD_FAILURE() << "accepted";
  return "";
}

}  // namespace

TEST(Session, AMethodsPlanRunsToTheMethodsOwnChiBitForBit) {
  const Geometry g = head(48, 48, 40, 4.0);
  const Phantom ph = make_phantom(g);
  const PlanHandle plan = make_plan(tkd_request(g, 0.2), ph.mask, {});
  ASSERT_EQ(plan->request.kind(), Request::Kind::Method);
  EXPECT_TRUE(plan->feasible()) << plan->message();
  EXPECT_EQ(plan->method_plan.method, "tkd");
  tessera::Run run(plan, VolumeData{g, 1, ph.field, ph.mask, {}});
  while (run.steps().step()) {
  }
  EXPECT_THROW(run.chi(), Error);  // not before the report confirms the run
  run.report();
  const std::vector<float> direct = tkd(g, ph.field, ph.mask, 0.2f, 1, 1);
  ASSERT_EQ(run.chi().size(), direct.size());
  EXPECT_EQ(std::memcmp(direct.data(), run.chi().data(), direct.size() * sizeof(float)), 0);
  EXPECT_FALSE(run.is_pipeline());
}

TEST(Session, ARunIsHeldToThePlansVolumeAndRequest) {
  const Geometry g = head(32, 32, 24, 4.0);
  const Phantom ph = make_phantom(g);
  const PlanHandle plan = make_plan(tkd_request(g, 0.2), ph.mask, {});
  std::vector<uint8_t> other = ph.mask;
  for (size_t i = 0; i < other.size(); ++i) {
    if (other[i]) {
      other[i] = 0;
      break;
    }
  }
  const std::string mask = refusal([&] { tessera::Run(plan, VolumeData{g, 1, ph.field, other, {}}); });
  EXPECT_NE(mask.find("the plan was made for another mask"), std::string::npos) << mask;
  Geometry moved = g;
  moved.voxel_mm = {1.0, 1.0, 2.0};
  const std::string geometry = refusal([&] { check_volume(*plan, moved, ph.mask); });
  EXPECT_NE(geometry.find("the plan was made for a volume of"), std::string::npos) << geometry;
  const std::string parameter = refusal([&] { check_request(*plan, tkd_request(g, 0.3)); });
  EXPECT_NE(parameter.find("tkd.threshold 0.2; this request gives tkd.threshold 0.3"), std::string::npos) << parameter;
  EXPECT_NO_THROW(check_request(*plan, tkd_request(g, 0.2)));
  const std::string magnitude = refusal([&] { tessera::Run(plan, VolumeData{g, 1, ph.field, ph.mask, ph.field}); });
  EXPECT_NE(magnitude.find("without a magnitude"), std::string::npos) << magnitude;
  // A measured speed plans a network's run only.
  const std::string speed = refusal([&] { replan(*plan, plan->request, ph.mask, {}); });
  EXPECT_NE(speed.find("a classical method's run"), std::string::npos) << speed;
}

TEST(Session, APipelinePlanRunsItsStagesAndKeepsTheirOutputs) {
  const Geometry g = head(40, 40, 32, 4.0);
  AcquisitionOptions o;
  o.te_s = {0.004, 0.008, 0.012};
  const PhantomAcquisition a = make_acquisition(g, o);
  Request r;
  r.geometry = g;
  PipelineRequest p;
  p.te_s = o.te_s;
  r.mask_given = true;
  r.magnitude_echoes = 3;
  r.what = p;
  const PlanHandle plan = make_plan(r, a.brain_mask, {});
  ASSERT_EQ(plan->request.kind(), Request::Kind::Pipeline);
  EXPECT_TRUE(plan->feasible()) << plan->message();
  tessera::Run run(plan, VolumeData{g, 3, a.phase, a.brain_mask, a.magnitude});
  while (run.steps().step()) {
  }
  run.report();
  ASSERT_TRUE(run.is_pipeline());
  EXPECT_EQ(run.outputs().local_ppm.size(), g.voxel_count());
  EXPECT_TRUE(run.outputs().chi.empty());  // no method: the pipeline ends at the local field
}

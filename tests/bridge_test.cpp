#include "internal/bridge.h"

#include <gtest/gtest.h>

#include <set>
#include <thread>

#include "internal/job.h"
#include "support.h"
#include "tessera/error.h"
#include "tessera/inversion.h"

using namespace tessera;
using namespace tessera::test;
using namespace std::chrono_literals;

namespace {

// Plays the JavaScript side: takes requests and answers them with f(input) until the job ends.
template <class F>
void serve(Job& job, F f, int max_iterations = 200000) {
  for (int i = 0; i < max_iterations && job.state() == Job::State::Running; ++i) {
    for (const Bridge::Request& r : job.bridge().take()) {
      std::vector<float> in(r.input.begin(), r.input.end());
      job.bridge().respond(r.id, f(in, r));
    }
    std::this_thread::sleep_for(100us);
  }
  job.join();
}

}  // namespace

TEST(Bridge, CallsAreAnsweredByTheExecutorThread) {
  Bridge bridge;
  std::vector<float> input{1, 2, 3, 4, 5, 6, 7, 8};
  std::vector<float> got;
  std::thread caller([&] { got = bridge.call(0, input, TensorShape{1, {2, 2, 2}}); });
  std::vector<Bridge::Request> taken;
  while (taken.empty()) {
    taken = bridge.take();
    std::this_thread::sleep_for(100us);
  }
  ASSERT_EQ(taken.size(), 1u);
  EXPECT_EQ(taken[0].shape.dims, (std::array<uint64_t, 3>{2, 2, 2}));
  EXPECT_EQ(bridge.open_requests(), 1u);
  std::vector<float> out(taken[0].input.begin(), taken[0].input.end());
  for (float& v : out) v *= 2;
  bridge.respond(taken[0].id, out);
  caller.join();
  EXPECT_EQ(got, (std::vector<float>{2, 4, 6, 8, 10, 12, 14, 16}));
  EXPECT_EQ(bridge.open_requests(), 0u);
}

TEST(Bridge, NamedInputsCrossWithTheRequest) {
  Bridge bridge;
  BridgeRunner runner(bridge, 0);
  std::vector<float> input{1, 2, 3, 4, 5, 6, 7, 8}, te{0.02f};
  const std::vector<tessera::NamedInput> extras{{"te", {1}, te}};
  std::vector<float> got;
  std::thread caller([&] { got = runner.run_named(input, TensorShape{1, {2, 2, 2}}, extras); });
  std::vector<Bridge::Request> taken;
  while (taken.empty()) {
    taken = bridge.take();
    std::this_thread::sleep_for(100us);
  }
  ASSERT_EQ(taken[0].extras.size(), 1u);
  EXPECT_EQ(taken[0].extras[0].role, "te");
  EXPECT_EQ(taken[0].extras[0].dims, (std::vector<uint64_t>{1}));
  EXPECT_EQ(taken[0].extras[0].data[0], 0.02f);
  std::vector<float> out(taken[0].input.begin(), taken[0].input.end());
  for (float& v : out) v *= taken[0].extras[0].data[0];
  bridge.respond(taken[0].id, out);
  caller.join();
  EXPECT_FLOAT_EQ(got[7], 0.16f);
}

TEST(Bridge, FailureAndCloseUnblockCallers) {
  Bridge bridge;
  std::vector<float> input(8, 1.0f);
  std::string first, second;
  ErrorCode c1 = ErrorCode::Internal, c2 = ErrorCode::Internal;
  std::thread a([&] {
    try {
      bridge.call(0, input, TensorShape{1, {2, 2, 2}});
    } catch (const Error& e) {
      c1 = e.code();
      first = e.what();
    }
  });
  std::vector<Bridge::Request> taken;
  while (taken.empty()) taken = bridge.take();
  bridge.fail(taken[0].id, "worker died twice on tile 3");
  a.join();
  EXPECT_EQ(c1, ErrorCode::RunnerFailed);
  EXPECT_EQ(first, "worker died twice on tile 3");

  std::thread b([&] {
    try {
      bridge.call(0, input, TensorShape{1, {2, 2, 2}});
    } catch (const Error& e) {
      c2 = e.code();
      second = e.what();
    }
  });
  while (bridge.open_requests() == 0) std::this_thread::sleep_for(100us);
  bridge.close("cancelled by the user");
  b.join();
  EXPECT_EQ(c2, ErrorCode::Cancelled);
  EXPECT_EQ(second, "cancelled by the user");
  EXPECT_THROW(bridge.call(0, input, TensorShape{1, {2, 2, 2}}), Error);  // closed for good
}

TEST(Job, TiledRunThroughTheBridgeMatchesADirectRun) {
  const Geometry g = geometry(30, 26, 21);
  const std::vector<float> field = random_field(g, 21);
  const std::vector<uint8_t> mask = ellipsoid_mask(g);
  const FieldNetwork net{TileCost{8, 1100}, {}, PadRule::SmallerHalfLow};
  ReferenceConvRunner conv(1);
  std::vector<float> direct(g.voxel_count());
  tiled_field_inversion(g, field, mask, net, {8, 1}, conv, RunOptions{}, direct);

  std::vector<float> chi(g.voxel_count());
  RunOptions o;
  o.threads = 3;
  Job job(
      [&](const RunOptions& opts, Bridge& bridge) {
        BridgeRunner runner(bridge, 0);
        return tiled_field_inversion(g, field, mask, net, {8, 1}, runner, opts, chi);
      },
      o);
  uint64_t last_done = 0;
  std::set<int64_t> tiles_seen;
  serve(job, [&](std::vector<float>& in, const Bridge::Request& r) {
    tiles_seen.insert(r.tile);
    EXPECT_GE(job.done(), last_done);
    last_done = job.done();
    EXPECT_LE(job.bridge().open_requests(), 3u);
    return conv.run(in, r.shape);
  });
  ASSERT_EQ(job.state(), Job::State::Succeeded) << job.error_message();
  EXPECT_EQ(direct, chi);
  EXPECT_EQ(job.done(), job.total());
  EXPECT_EQ(job.report().tiles_run, job.total());
  EXPECT_LE(job.bridge().max_open_requests(), 3u);
  EXPECT_GE(job.bridge().max_open_requests(), 2u);
  // Every request names its tile: exactly the grid's active tiles.
  const TileGrid grid = make_tile_grid(g, mask, {8, 1}, 8);
  std::set<int64_t> active;
  for (const Tile& t : grid.tiles)
    if (!t.skipped) active.insert(static_cast<int64_t>(t.index));
  EXPECT_EQ(tiles_seen, active);
  EXPECT_EQ(current_tile(), -1);
}

TEST(Job, CancelMidRunFailsWithCancelledAndJoins) {
  const Geometry g = geometry(40, 40, 40);
  const std::vector<float> field = random_field(g, 22);
  const std::vector<uint8_t> mask(g.voxel_count(), 1);
  const FieldNetwork net{TileCost{1, 1100}, {}, PadRule::SmallerHalfLow};
  std::vector<float> chi(g.voxel_count());
  RunOptions o;
  o.threads = 2;
  Job job(
      [&](const RunOptions& opts, Bridge& bridge) {
        BridgeRunner runner(bridge, 0);
        return tiled_field_inversion(g, field, mask, net, {5, 1}, runner, opts, chi);
      },
      o);
  int answered = 0;
  for (int i = 0; i < 100000 && job.state() == Job::State::Running; ++i) {
    for (const Bridge::Request& r : job.bridge().take()) {
      if (answered == 5) {
        job.cancel();  // the executor's "abort": requests in flight are never answered
        break;
      }
      job.bridge().respond(r.id, std::vector<float>(r.input.begin(), r.input.end()));
      ++answered;
    }
    std::this_thread::sleep_for(100us);
  }
  job.join();
  ASSERT_EQ(job.state(), Job::State::Failed);
  EXPECT_EQ(job.error_code(), ErrorCode::Cancelled) << job.error_message();
  EXPECT_LT(job.done(), job.total());
}

TEST(Inversion, DispatchesByKindAndRunsPhaseNetworksWhole) {
  const Geometry g = geometry(24, 20, 16);
  const std::vector<float> field = random_field(g, 23);
  const std::vector<uint8_t> mask = ellipsoid_mask(g);
  std::vector<float> chi(g.voxel_count());
  IdentityRunner id;
  PatchRunner* nets[] = {&id};

  InversionRequest custom;
  custom.geometry = g;
  custom.custom = FieldNetwork{TileCost{8, 1100}, {}, PadRule::SmallerHalfLow};
  custom.tile = {8, 2};
  custom.workers = 2;
  run_inversion(custom, field, mask, nets, RunOptions{}, chi);
  for (uint64_t i = 0; i < chi.size(); ++i) ASSERT_EQ(chi[i], mask[i] ? field[i] : 0.0f);
  EXPECT_TRUE(inversion_warning(custom).empty());
  custom.whole_volume = true;
  EXPECT_TRUE(plan_inversion(custom, mask, Target::Wasm).whole_volume);

  InversionRequest lp = custom;
  lp.model = &model_spec("lpcnn");
  lp.whole_volume = false;
  EXPECT_NE(inversion_warning(lp).find("off-design"), std::string::npos);
  IdentityRunner loop_net;
  PatchRunner* loop_nets[] = {&loop_net};
  const RunReport r = run_inversion(lp, field, mask, loop_nets, RunOptions{}, chi);
  EXPECT_GT(r.tiles_run, 1u);
  EXPECT_EQ(loop_net.calls.load(), 3 * static_cast<int>(r.tiles_run)) << "LPCNN runs its net 3 times per patch";

  InversionRequest nx = custom;
  nx.model = &model_spec("nextqsm");
  EXPECT_EQ(network_count(nx), 2u);
  EXPECT_THROW(run_inversion(nx, field, mask, nets, RunOptions{}, chi), Error);  // needs two networks

  InversionRequest iq = custom;
  iq.model = &model_spec("iqsm");
  try {  // phase networks need their echo times
    plan_inversion(iq, mask, Target::Wasm);
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::InvalidArgument);
    EXPECT_NE(std::string(e.what()).find("echo time"), std::string::npos) << e.what();
  }
  iq.phase.te_s = {0.02};
  EXPECT_TRUE(plan_inversion(iq, mask, Target::Wasm).whole_volume);
  try {  // a single-input runner cannot serve a multi-input network
    run_inversion(iq, field, mask, nets, RunOptions{}, chi);
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::RunnerFailed);
    EXPECT_NE(std::string(e.what()).find("takes one input"), std::string::npos) << e.what();
  }
}

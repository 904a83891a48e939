#include "tessera/runner.h"

#include "tessera/error.h"

namespace tessera {

namespace {
thread_local int64_t t_current_tile = -1;
}  // namespace

int64_t current_tile() { return t_current_tile; }
TileScope::TileScope(int64_t tile) : previous_(t_current_tile) { t_current_tile = tile; }
TileScope::~TileScope() { t_current_tile = previous_; }

std::vector<float> run_checked(PatchRunner& net, std::span<const float> input, const TensorShape& in_shape,
                               const TensorShape& out_shape, const std::string& where) {
  std::vector<float> out;
  try {
    out = net.run(input, in_shape);
  } catch (const Error& e) {
    throw Error(e.code(), where + ": " + e.what());
  } catch (const std::exception& e) {
    throw Error(ErrorCode::RunnerFailed, where + ": the network failed: " + e.what());
  }
  if (out.size() != out_shape.size()) {
    throw Error(ErrorCode::RunnerFailed, where + ": the network returned " + std::to_string(out.size()) +
                                             " values, expected " + std::to_string(out_shape.size()) + " ([1, " +
                                             std::to_string(out_shape.channels) + ", " + std::to_string(out_shape.dims[0]) +
                                             "×" + std::to_string(out_shape.dims[1]) + "×" +
                                             std::to_string(out_shape.dims[2]) + "])");
  }
  return out;
}

}  // namespace tessera

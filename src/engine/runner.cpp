#include "tessera/engine/runner.h"

#include "tessera/common/error.h"

namespace tessera {

namespace {
thread_local int64_t t_current_tile = -1;
}  // namespace

int64_t current_tile() { return t_current_tile; }
TileScope::TileScope(int64_t tile) : previous_(t_current_tile) { t_current_tile = tile; }
TileScope::~TileScope() { t_current_tile = previous_; }

std::vector<float> PatchRunner::run_named(std::span<const float> input, const TensorShape& shape,
                                          std::span<const NamedInput> extras) {
  if (!extras.empty()) {
    throw Error(ErrorCode::RunnerFailed, "this network runner takes one input, the model needs " +
                                             std::to_string(extras.size() + 1));
  }
  return run(input, shape);
}

std::vector<float> run_checked(PatchRunner& net, std::span<const float> input, const TensorShape& in_shape,
                               const TensorShape& out_shape, const std::string& where,
                               std::span<const NamedInput> extras) {
  std::vector<float> out;
  try {
    out = extras.empty() ? net.run(input, in_shape) : net.run_named(input, in_shape, extras);
  } catch (const Error& e) {
    throw Error(e.code(), where + ": " + e.what());
  } catch (const std::exception& e) {
    throw Error(ErrorCode::RunnerFailed, where + ": the network failed: " + e.what());
  }
  check_output_size(out.size(), out_shape, where);
  return out;
}

void check_output_size(uint64_t got, const TensorShape& out_shape, const std::string& where) {
  if (got == out_shape.size()) return;
  throw Error(ErrorCode::RunnerFailed, where + ": the network returned " + std::to_string(got) + " values, expected " +
                                           std::to_string(out_shape.size()) + " ([1, " + std::to_string(out_shape.channels) +
                                           ", " + std::to_string(out_shape.dims[0]) + "×" +
                                           std::to_string(out_shape.dims[1]) + "×" + std::to_string(out_shape.dims[2]) + "])");
}

}  // namespace tessera

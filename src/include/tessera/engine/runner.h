// The patch-runner interface: run a network on one [1, C, X, Y, Z] input.
// Natively a C++ runner; in the browser the JavaScript worker pool stands behind it.
#pragma once

#include <array>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

namespace tessera {

// Shape of one network tensor [1, channels, dims[0], dims[1], dims[2]], row-major (last axis fastest).
// dims[0] is the volume's x axis: converting host (x-fastest) to network layout is a reorder of
// memory, never a permutation of axes.
struct TensorShape {
  uint32_t channels = 1;
  std::array<uint64_t, 3> dims{0, 0, 0};

  uint64_t spatial() const { return dims[0] * dims[1] * dims[2]; }
  uint64_t size() const { return spatial() * channels; }
};

// One more input of a multi-input network (the iQSM family: mask, TE, B0, border shell, B0 direction),
// named by its role in the registry's input list. data is row-major over dims, valid during the call.
struct NamedInput {
  std::string role;
  std::vector<uint64_t> dims;
  std::span<const float> data;
};

class PatchRunner {
 public:
  virtual ~PatchRunner() = default;

  // Runs the network on one input tensor and returns its output, [1, out_channels, dims...].
  // input.size() == shape.size().
  // May be called from several threads at once (up to the driver's concurrency): must be thread-safe.
  // The driver checks the returned length and refuses a wrong one with ErrorCode::RunnerFailed.
  virtual std::vector<float> run(std::span<const float> input, const TensorShape& shape) = 0;

  // Runs a multi-input network: input (its first input, shape) and the further named inputs.
  // Thread-safety as run(). The default takes single-input networks only.
  virtual std::vector<float> run_named(std::span<const float> input, const TensorShape& shape,
                                       std::span<const NamedInput> extras);

  // Number of output channels the network produces (1 for field -> chi networks).
  virtual uint32_t output_channels() const { return 1; }
};

// The grid index of the tile the calling thread is working on, or -1 outside a tile (set by the tiled
// drivers, read by runners that report which tile a network call belongs to).
int64_t current_tile();

// Marks the calling thread as working on `tile` for the scope's lifetime.
class TileScope {
 public:
  explicit TileScope(int64_t tile);
  ~TileScope();
  TileScope(const TileScope&) = delete;
  TileScope& operator=(const TileScope&) = delete;

 private:
  int64_t previous_;
};

// Throws Error(RunnerFailed) naming `where` when a network output of `got` values does not hold out_shape.
void check_output_size(uint64_t got, const TensorShape& out_shape, const std::string& where);

// Runs net on input and checks the output holds out_shape.size() values.
// where names the call in messages ("tile 3 (core ...)", "LPCNN: network (call 2)").
// A tessera::Error from the runner keeps its code (prefixed with where); any other exception, or a
// wrong output length, becomes Error(RunnerFailed).
// extras are further named inputs (multi-input networks), passed through run_named.
std::vector<float> run_checked(PatchRunner& net, std::span<const float> input, const TensorShape& in_shape,
                               const TensorShape& out_shape, const std::string& where,
                               std::span<const NamedInput> extras = {});

}  // namespace tessera

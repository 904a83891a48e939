// Physics-loop QSM networks run on the whole volume: each network's published unrolled algorithm around a
// network behind tessera::PatchRunner (LPCNN, MoDL-QSM, NeXtQSM). Volumes are host layout (x-fastest,
// index x + nx*(y + ny*z)); the runner sees network layout [1, C, X, Y, Z] row-major, z fastest
// (index ((x*ny)+y)*nz + z), produced by a reorder of memory, never a permutation of axes.
// Each volume is zero padded to the network divisor (smaller half of the padding on the low side),
// the loop runs on the padded volume (kernel of the padded grid), and the result is cropped back.
#pragma once

#include <cstdint>
#include <span>
#include <string_view>
#include <vector>

#include "tessera/common/geometry.h"
#include "tessera/engine/runner.h"

namespace tessera {

namespace lpcnn_constants {
constexpr double alpha = 3.718820571899414;
constexpr double mu = -2.4724603240382513e-4;
constexpr double sigma = 0.028365555003933052;
constexpr int iterations = 3;
}  // namespace lpcnn_constants

namespace modl_constants {
constexpr double alpha = 1.101906418800354;
constexpr double mean[2] = {-0.0022565326653420925, -0.0004852914426010102};
constexpr double std_dev[2] = {0.026074999943375587, 0.004082275088876486};
constexpr int iterations = 3;
}  // namespace modl_constants

namespace nextqsm_constants {
constexpr double lambdas[6] = {15.141516, 15.005543, 16.733437, 14.574243, 7.072418, 0.7588475};
constexpr double data_weight = 100.0;  // g_D = 100/(|bf| |u|) D(dx - bf)
}  // namespace nextqsm_constants

// Copies one host-layout (x-fastest) volume into network layout (z fastest, [X, Y, Z] row-major).
// host.size() == network.size() == dims[0]*dims[1]*dims[2]; every dims[a] >= 1 (else Error InvalidArgument).
void host_to_network(const Dims3& dims, std::span<const float> host, std::span<float> network);

// Copies one network-layout volume back to host layout (inverse of host_to_network).
// host.size() == network.size() == dims[0]*dims[1]*dims[2]; every dims[a] >= 1 (else Error InvalidArgument).
void network_to_host(const Dims3& dims, std::span<const float> network, std::span<float> host);

// Each axis rounded up to a multiple of divisor (the grid a whole-volume run uses).
// every dims[a] >= 1 and divisor >= 1 (else Error InvalidArgument).
Dims3 pad_to_divisor(const Dims3& dims, int64_t divisor);

// Module heap a physics loop holds per voxel of its padded grid while it runs (its volumes, the dipole convolution's
// complex volume and the network call's input and output): the planner's FieldNetwork::module_bytes_per_patch_voxel.
// model: a registry id (lpcnn, modl-qsm); any other gets FieldNetwork's default.
uint64_t physics_loop_module_bytes_per_voxel(std::string_view model);

// LPCNN (3 iterations, divisor 8): p0 = a D(y); p_i = den + a D(y) - a D(D(den)); net on ((p - mu)/sigma) m;
// den = (out sigma + mu) m. Returns den, cropped, masked. Three runner calls, [1,1,X,Y,Z] each.
// geometry valid; field.size() == mask.size() == voxel_count (else Error InvalidArgument).
// field finite (else Error NonFiniteInput); mask nonzero = inside.
// net returns spatial() values per call (else Error RunnerFailed); a runner exception becomes Error RunnerFailed.
// threads: FFT threads (0 = hardware concurrency).
std::vector<float> lpcnn_invert(const Geometry& geometry, std::span<const float> field, std::span<const uint8_t> mask,
                                PatchRunner& net, unsigned threads = 1);

// MoDL-QSM (3 iterations, 2 channels, planes contiguous): y = a A^H(phi) with A^H(f) = [D f, f], A(x) = D x0 + x1;
// L0 = y, L_i = x - a A^H(A(x)) + y; net on ((L_c - MEAN_c)/STD_c) m; x_c = (out_c m) STD_c + MEAN_c.
// Returns x0 m, cropped. Three runner calls, [1,2,X,Y,Z] each.
// geometry valid and on the network's 1 mm training grid (needs_training_grid false: tessera/networks/training_grid.h;
// else Error InvalidArgument). run_inversion resamples other grids there.
// odd dims are zero padded by one plane on the high side (the network needs even dims).
// field.size() == mask.size() == voxel_count (else Error InvalidArgument); field finite (else Error NonFiniteInput).
// net returns 2 * spatial() values per call (else Error RunnerFailed).
// threads: FFT threads (0 = hardware concurrency).
std::vector<float> modl_qsm_invert(const Geometry& geometry, std::span<const float> field,
                                   std::span<const uint8_t> mask, PatchRunner& net, unsigned threads = 1);

// NeXtQSM (divisor 64, total field): bf = BF(field m) m, x = bf; for each of the six lambdas: dx = D(x),
// u = bf - dx, g_D = 100/(|bf| |u|) D(dx - bf) (0 when |bf| |u| = 0), g_R = VJP(x)/N (N = padded voxel count),
// x = (x - lambda g_D - g_R) m. D uses the NeXtQSM kernel convention. Seven runner calls (1 BF + 6 VJP), [1,1,X,Y,Z].
// geometry valid; field.size() == mask.size() == voxel_count (else Error InvalidArgument); field finite.
// bf and vjp return spatial() values per call (else Error RunnerFailed).
// threads: FFT threads (0 = hardware concurrency).
std::vector<float> nextqsm_invert(const Geometry& geometry, std::span<const float> field,
                                  std::span<const uint8_t> mask, PatchRunner& bf, PatchRunner& vjp,
                                  unsigned threads = 1);

}  // namespace tessera

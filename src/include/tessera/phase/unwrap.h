// Spatial phase unwrapping of one wrapped phase volume (radians): Laplacian (Schofield & Zhu 2003, path-independent,
// closed form) and quality-guided region growing (in the spirit of ROMEO, Dymerska et al. 2021). Both return a phase
// that differs from the input by integer multiples of 2π in every voxel of the mask, and 0 outside it.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "tessera/common/citation.h"
#include "tessera/common/geometry.h"

namespace tessera {

inline constexpr Citation kLaplacianUnwrapCitation{
    "Schofield & Zhu 2003",
    "Schofield MA, Zhu Y. Fast phase unwrapping algorithm for interferometric applications. Opt Lett 2003;28:1194-1196."};
inline constexpr Citation kRomeoCitation{
    "Dymerska et al. 2021",
    "Dymerska B, Eckstein K, Bachrata B, et al. Phase unwrapping with a rapid opensource minimum spanning tree algorithm "
    "(ROMEO). Magn Reson Med 2021;85:2294-2308."};

// Throws Error(InvalidArgument) unless every value is a finite wrapped phase in radians, [−π − 1e-3, π + 1e-3]; the
// message names what the values look like (NaN, raw scanner units, degrees, [0, 2π), already unwrapped).
// what: the caller's name for the volume in the message ("unwrap_laplacian: wrapped phase").
void validate_wrapped_phase(std::span<const float> phase, const std::string& what);

// Laplacian unwrapping (Schofield & Zhu 2003, Opt Lett 28:1194): the Laplacian of the true phase is computed from
// the wrapped one and inverted by FFT, then each voxel is made congruent with the input:
//   u = ∇⁻² L(φ_w),   result = φ_w + 2π·round((u + c − φ_w) / 2π),
// where L is the 7-point Laplacian of wrapped neighbour differences, Σ_axes (W(φ[i+1] − φ[i]) − W(φ[i] − φ[i−1]))/h²
// with W = wrap to [−π, π). Schofield & Zhu's cos φ ∇² sin φ − sin φ ∇² cos φ with this stencil is exactly
// Σ sin(Δφ)/h²; W(Δφ) is its argument without the sine's underestimate, equal to the true Δφ wherever neighbours
// differ by less than π. The Poisson equation is solved on the whole array with a Neumann boundary (the array is
// mirrored to 2n per axis, so the FFT solve is the DCT solve of QSM.jl's `:dct`): the mask selects the output only,
// it does not cut the Laplacian (a masked Laplacian would also remove the background field). c is the circular mean
// of φ_w − u over the mask. Where the true phase differs from u + c by less than π the result is the true phase up to
// one global 2π·k; on noiseless data with |Δφ| < π everywhere in the array that is every voxel.
// geometry valid; wrapped.size() == mask.size() == voxel_count(); mask not all 0 (else Error InvalidArgument).
// wrapped: radians in [−π, π] (validate_wrapped_phase); every voxel of the array is used, inside the mask or not.
// threads: FFT and voxel-loop threads (0 = hardware); the result is bit-identical for any count.
std::vector<float> unwrap_laplacian(const Geometry& geometry, std::span<const float> wrapped,
                                    std::span<const uint8_t> mask, unsigned threads = 1);

// Heap bytes unwrap_laplacian allocates at its peak beyond its inputs: the mirrored complex volume (8·N complex), the
// Laplacian and the result (N floats each), FFT scratch for the mirrored dims.
// geometry valid (else Error InvalidArgument).
uint64_t unwrap_laplacian_workspace_bytes(const Geometry& geometry, unsigned threads = 1);

// Quality-guided region growing (ROMEO, Dymerska et al. 2021 MRM 85:2294): every edge between 6-neighbours of the
// mask gets a weight in 1..255, the product of (0.1 + 0.9·q) over the qualities q of ROMEO's default set: phase
// coherence 1 − |W(Δφ)|/π, phase linearity (the second differences either side of the edge) and, with a
// magnitude, magnitude coherence (min/max)². From a seed (the voxel of highest summed edge weight) the voxels are
// unwrapped in order of the best edge joining them to the unwrapped region (a 256-bucket priority queue, last in
// first out within a bucket), each relative to the neighbour across that edge: φ = φ_w − 2π·round((φ_w − φ_ref)/2π).
// Each 6-connected component of the mask grows from its own seed. Deterministic (no threads in the growth); exact
// (the true phase up to one 2π·k per component) when the true phase differs by less than π between neighbours.
// geometry valid; wrapped.size() == mask.size() == voxel_count(); mask not all 0 (else Error InvalidArgument).
// magnitude: empty (no magnitude coherence) or voxel_count() finite values (else Error InvalidArgument).
// wrapped: radians in [−π, π] (validate_wrapped_phase).
// threads: threads for the edge weights (0 = hardware); the result is the same for any count.
std::vector<float> unwrap_region_growing(const Geometry& geometry, std::span<const float> wrapped,
                                         std::span<const float> magnitude, std::span<const uint8_t> mask,
                                         unsigned threads = 1);

// Heap bytes unwrap_region_growing allocates at its peak beyond its inputs: edge weights (3·N bytes), visited flags
// (N), seed order (8·N and the 1531 bucket counts), the queue (at most 6 pushes per voxel of 8 bytes, twice that for
// vector growth: 96·N) and the result (4·N): 112·N + 13 KB. An upper bound; a real queue holds only the front.
// geometry valid (else Error InvalidArgument).
uint64_t unwrap_region_growing_workspace_bytes(const Geometry& geometry);

}  // namespace tessera

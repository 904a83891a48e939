// A deterministic numerical head phantom for QSM: susceptibility truth (ppm), local field (ppm) by the
// forward model, brain mask. Shapes are defined in millimetres, so any dims and voxel size render the
// same anatomy (uniformly shrunk when the field of view is too small for a real head).
// Everything random comes from a splitmix64 generator and IEEE basic operations only, so chi and mask
// are bit-identical natively and in wasm for a given seed; the field goes through an FFT (libm
// twiddles) and is not guaranteed to (measured identical natively and under Emscripten 3.1.6 here).
// HeadVariation (drawn from a seed by head_variation, or set field by field) changes the head's size, shape, skull and
// cavities; its defaults render the reference head bit for bit. The anatomy stays on the volume's axes whatever
// geometry.b0_dir is (an oblique slab): the forward models use b0_dir.
// make_acquisition puts that brain in a head (scalp, skull, air cavities) in air and simulates a multi-echo
// gradient-echo scan of it: total / local / background fields and magnitude and phase per echo. Its anatomy and
// signal model use IEEE basic operations only (exp and atan2 by series, noise from splitmix64), so only its two FFT
// forward models stand between it and bit-identity across platforms (all outputs measured identical natively and
// under Emscripten 3.1.6 with the same FFT).
#pragma once

#include <cstdint>
#include <iterator>
#include <vector>

#include "tessera/common/geometry.h"
#include "tessera/common/physics.h"

namespace tessera {

// Compartment susceptibilities in ppm (every masked voxel holds exactly one of these, veins one of vein_values).
namespace phantom_chi {
constexpr float white_matter = -0.03f;
constexpr float grey_matter = 0.02f;  // cortical ribbon
constexpr float csf = 0.0f;           // lateral ventricles
constexpr float caudate = 0.06f;
constexpr float putamen = 0.05f;
constexpr float globus_pallidus = 0.15f;
constexpr float red_nucleus = 0.12f;
constexpr float substantia_nigra = 0.14f;
constexpr float calcification = -0.1f;
constexpr float vein_values[4] = {0.30f, 0.35f, 0.40f, 0.45f};  // each vein draws one
}  // namespace phantom_chi

// How one head differs from the reference head: every default renders the reference head bit for bit. Lengths are in
// millimetres before the uniform shrink that fits the head in a small field of view; x runs left to right, y posterior
// to anterior, z inferior to superior (the volume's axes).
struct HeadVariation {
  double size = 1.0;             // every length of the head, [0.7, 1.3]
  Vec3 shape{1.0, 1.0, 1.0};     // per axis, the brain's semi-axes and the positions inside it, each [0.7, 1.3]
  double asymmetry = 0.0;        // right half's x semi-axis × (1 + a), left half's × (1 − a), a in [-0.15, 0.15]
  double skull_mm = 5.0;         // skull thickness, mm, [1, 15] (the scalp keeps at least 1.5 mm)
  double frontal_sinus = 1.0;    // frontal sinus semi-axes × this, [0, 3]; 0: no frontal sinus
  Vec3 frontal_sinus_shift_mm{0.0, 0.0, 0.0};  // its centre moved, mm, each in [-20, 20]
  double sphenoid_sinus = 1.0;   // sphenoid sinus semi-axes × this, [0, 3]; 0: none
  Vec3 sphenoid_sinus_shift_mm{0.0, 0.0, 0.0};
  double mastoid = 1.0;          // both mastoid air cells' semi-axes × this, [0, 3]; 0: none
  Vec3 mastoid_shift_mm{0.0, 0.0, 0.0};  // x mirrored: positive x moves both outwards
  double ear_canal_radius_mm = 3.5;      // both ear canals, mm, [0, 8]; 0: no ear canals
  Vec3 ear_canal_shift_mm{0.0, 0.0, 0.0};  // both canals moved in y and z (x is ignored), mm
};

// Throws Error(InvalidArgument) naming the field, its range and unit.
void validate(const HeadVariation& head);

// A plausible adult head drawn from seed (splitmix64, the same on every platform); seed 0 gives the reference head
// (HeadVariation{}). Ranges: size 0.92-1.06, shape 0.95-1.05 per axis, asymmetry ±0.03, skull 4-8 mm, sinuses and
// mastoids 0.5-1.5 × (no frontal sinus in one head of ten), their centres ±4 mm, ear canals 2.5-4.5 mm wide, ±4 mm.
HeadVariation head_variation(uint64_t seed);

struct PhantomOptions {
  uint64_t seed = 1;          // same seed, same phantom (positions, sizes, veins, noise)
  double noise_sigma = 0.0;   // Gaussian noise (ppm) added to the field inside the mask; 0 = none
  int pad_factor = 2;         // zero padding of the forward model (see forward_field)
  unsigned threads = 1;       // FFT threads (0 = hardware concurrency)
  HeadVariation head;         // the brain's size, shape and asymmetry (the rest of the head: make_acquisition)
};

struct Phantom {
  std::vector<float> chi;     // susceptibility truth, ppm, zero outside the brain mask
  std::vector<float> field;   // local field, ppm, forward model of chi, multiplied by the mask (+ noise inside)
  std::vector<uint8_t> mask;  // brain mask, 0 or 1
};

// Builds the phantom for geometry (B0 direction from geometry.b0_dir), x-fastest volumes.
// geometry valid (validate_geometry; else Error InvalidArgument).
// options.noise_sigma finite and >= 0; options.pad_factor in [1, 4] (else Error InvalidArgument).
Phantom make_phantom(const Geometry& geometry, const PhantomOptions& options = {});

// Susceptibility truth and mask only (no forward model, no FFT): the first half of make_phantom.
// geometry valid; head valid (validate; else Error InvalidArgument).
Phantom make_phantom_chi(const Geometry& geometry, uint64_t seed = 1, const HeadVariation& head = {});

// Every value a masked voxel of make_phantom_chi can hold (the compartments above and the vein values).
std::vector<float> phantom_values();

// Susceptibilities (ppm, relative to water like the brain's) of the head outside the brain.
namespace head_chi {
// Scalp and the meninges' CSF layer: water-like soft tissue, the reference of every brain value.
inline constexpr float soft_tissue = 0.0f;
// Cortical bone of the skull: about -2 ppm relative to water (Hopkins & Wehrli 1997 MRM 37:494, bone mineral;
// Buch et al. 2015 MRM 73:2185, skull bone and air mapped in the head at 3 T).
inline constexpr float bone = -2.0f;
// Air: +0.36 ppm (SI volume susceptibility) minus water's -9.05 ppm (Schenck 1996 Med Phys 23:815, table 1) = +9.41.
inline constexpr float air = 9.41f;
}  // namespace head_chi

// What each voxel of an acquisition is, for its signal (M0, T2*); the values are stable (stored as uint8).
enum class Tissue : uint8_t {
  Air = 0,          // outside the head, sinuses, ear canals, mastoid air cells
  Bone = 1,         // skull
  SoftTissue = 2,   // scalp
  Csf = 3,          // the CSF layer between brain and skull, and the ventricles
  WhiteMatter = 4,
  GreyMatter = 5,
  Caudate = 6,
  Putamen = 7,
  GlobusPallidus = 8,
  RedNucleus = 9,
  SubstantiaNigra = 10,
  Calcification = 11,
  Vein = 12,
};
inline constexpr int kTissueCount = 13;

// Proton density (water = 1) and T2* (seconds) of a tissue at 3 T.
struct TissueSignal {
  double m0;
  double t2star_s;
};

// The 3 T values of tissue (see the table in phantom.cpp for their sources); Air has m0 0.
TissueSignal tissue_signal(Tissue tissue);

namespace acquisition_defaults {
// Five echoes, 4 to 20 ms, uniform spacing: a multi-echo 3D GRE as the ISMRM QSM consensus recommends at 3 T
// (QSM Consensus Organization Committee 2024 MRM 91:1834: several echoes, first TE short, last TE of the order of
// grey matter's T2*).
inline constexpr double kEchoTimesS[5] = {0.004, 0.008, 0.012, 0.016, 0.020};
// Clinical field strength, tesla.
inline constexpr double kB0Tesla = 3.0;
}  // namespace acquisition_defaults

struct AcquisitionOptions {
  uint64_t seed = 1;  // same seed, same head, brain, receive phase and noise
  // Echo times in seconds, each in (0, 1] (4 ms is 0.004), at most 64 of them.
  std::vector<double> te_s{std::begin(acquisition_defaults::kEchoTimesS), std::end(acquisition_defaults::kEchoTimesS)};
  double b0_tesla = acquisition_defaults::kB0Tesla;  // (0, 20]
  // M0 of water (1) over the noise sigma of each of the real and imaginary parts; 0 = no noise.
  double snr = 0.0;
  bool receive_phase = true;  // add the smooth receive phase offset phi0 (false: phi0 = 0)
  int pad_factor = 2;         // zero padding of both forward models, [1, 4] (see forward_field)
  unsigned threads = 1;       // FFT and signal threads (0 = hardware concurrency); results do not depend on it
  HeadVariation head;  // the head's size, shape, skull and cavities (default: the reference head)
  // A slab acquisition: the field of view cuts through the head along z (the volume's third axis) instead of the head
  // shrinking to fit it, as in a real slab; only the x and y fields of view shrink the head. The slab's centre lies
  // slab_centre_mm above the brain's centre (negative: below), in [-100, 100] mm. total_field and background_field are
  // those of the whole head (tissue and air outside the slab shape the field inside it); local_field is the forward
  // model of the brain inside the slab (the brain's field from outside the slab is background there).
  bool slab = false;
  double slab_centre_mm = 0.0;
};

// Throws Error(InvalidArgument) naming the option, its range and unit.
void validate(const AcquisitionOptions& options);

struct PhantomAcquisition {
  std::vector<float> chi;               // whole head and its air, ppm relative to water (head_chi, brain values)
  std::vector<float> brain_chi;         // make_phantom_chi's chi: the brain truth, 0 outside the brain
  std::vector<uint8_t> brain_mask;      // make_phantom_chi's mask
  std::vector<uint8_t> head_mask;       // 1 where the voxel is tissue (bone included), 0 in air
  std::vector<uint8_t> tissue;          // a Tissue per voxel
  std::vector<float> total_field;       // ppm: local_field + background_field (the head in air)
  std::vector<float> local_field;       // ppm: forward model of brain_chi (make_phantom's field before its mask)
  std::vector<float> background_field;  // ppm: forward_field_band_limited of the head with a water brain, relative
                                        // to air (chi - head_chi::air outside the brain, -head_chi::air in it)
  std::vector<float> phase_offset;      // phi0, radians: smooth receive phase (a quadratic in x, y, z), not wrapped
  std::vector<float> magnitude;         // echo after echo, te_s.size() volumes
  std::vector<float> phase;             // radians in [-pi, pi], echo after echo
  std::vector<double> te_s;             // the echo times, seconds
  double b0_tesla = 0.0;
  double noise_sigma = 0.0;             // per real and imaginary part (1 / snr; 0 = none)
};

// Simulates a multi-echo GRE scan of the phantom brain inside a head (or, with options.slab, of a slab through it: the
// whole head is simulated on a volume tall enough to hold it and the slab's slices are kept). Per voxel and echo e:
//   magnitude = M0 * exp(-TE_e / T2*)  (tissue_signal),
//   phase = wrap(phi0 + 2 pi * gamma_bar * B0 * TE_e * total_field * 1e-6),
// then complex Gaussian noise of sigma 1 / snr added to magnitude * exp(i phase).
// geometry valid (else Error InvalidArgument); the B0 direction is geometry.b0_dir.
// options valid (validate; else Error InvalidArgument).
PhantomAcquisition make_acquisition(const Geometry& geometry, const AcquisitionOptions& options = {});

// Upper bound of the heap bytes make_acquisition allocates at its peak: its outputs, the shifted chi and one forward
// model's workspace (dipole_workspace_bytes).
// geometry and options valid (else Error InvalidArgument).
uint64_t acquisition_workspace_bytes(const Geometry& geometry, const AcquisitionOptions& options);

}  // namespace tessera

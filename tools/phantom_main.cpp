// tessera_phantom: writes the numerical head phantom (tessera/phantom.h) as NIfTI-1 single files, and a
// simulated multi-echo GRE scan of it (make_acquisition).
//
//   tessera_phantom --dims NX NY NZ [--voxel VX VY VZ] [--b0 BX BY BZ] [--seed S] [--noise SIGMA] [--threads T]
//                   [--variation V] [--head-size F] [--head-shape SX SY SZ] [--asymmetry A] [--skull-mm T]
//                   [--frontal-sinus F] [--sphenoid-sinus F] [--mastoid F] [--ear-canal-mm R]
//                   [--field-out field.nii] [--chi-out chi.nii] [--mask-out mask.nii]
//                   [--te-ms T1,T2,...] [--b0-tesla B] [--snr SNR] [--no-receive-phase]
//                   [--magnitude-out mag.nii] [--phase-out phase.nii] [--total-out total.nii]
//                   [--local-out local.nii] [--background-out bg.nii] [--head-chi-out chi_head.nii]
//                   [--head-mask-out head_mask.nii] [--tissue-out tissue.nii] [--phase-offset-out phi0.nii]
//                   [--json-out scan.json]
//
// field / chi / mask: make_phantom (brain only; --noise adds Gaussian noise to the field inside the mask).
// The others: make_acquisition (default TEs 4-20 ms, 3 T, no noise): magnitude and phase (radians) are 4D, one
// volume per echo; fields in ppm; tissue uint8 (tessera::Tissue); the JSON sidecar holds the echo times in seconds
// (BIDS EchoTime), MagneticFieldStrength (T), the head variation and the rest of the scan's settings.
// The head: --variation V draws a plausible adult head from V (tessera::head_variation: size, shape, asymmetry, skull
// thickness, sinuses, mastoids and ear canals; 0, the default, is the reference head); the flags after it set one
// property each, whatever their order on the line: --head-size (every length x F), --head-shape (the brain's
// semi-axes x SX, SY, SZ), --asymmetry (right half x (1 + A), left x (1 - A)), --skull-mm, --frontal-sinus,
// --sphenoid-sinus and --mastoid (their size x F, 0 = none), --ear-canal-mm (canal radius, 0 = none). The head is
// the same for the brain outputs and the scan. --b0 gives B0 in the volume's axes (the anatomy stays on them: an
// oblique slab).
// Floats are float32, masks uint8; 348-byte header + 4 zero extension bytes, vox_offset 352, pixdim = voxel size
// (mm); qform and sform (code 1, scanner) the rotation that takes --b0 to the scanner's z axis (the smallest one,
// tessera::b0_rotation; the identity when B0 is along z) times the voxel size, the volume's centre at the origin, so
// a reader's B0 (the scanner z in voxel axes) is --b0 again. A name ending in .gz is written gzip-compressed.
// Exit code 0 on success, 2 on bad arguments, 1 on any other failure.
#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <fstream>
#include <iostream>
#include <stdexcept>
#include <string>
#include <functional>
#include <vector>

#if TESSERA_PHANTOM_ZLIB
#include <zlib.h>
#endif

#include "tessera/common/b0_align.h"
#include "tessera/common/error.h"
#include "tessera/common/geometry.h"
#include "tessera/sim/phantom.h"

namespace {

#pragma pack(push, 1)
struct Nifti1Header {
  int32_t sizeof_hdr;
  char data_type[10];
  char db_name[18];
  int32_t extents;
  int16_t session_error;
  char regular;
  char dim_info;
  int16_t dim[8];
  float intent_p1, intent_p2, intent_p3;
  int16_t intent_code;
  int16_t datatype;
  int16_t bitpix;
  int16_t slice_start;
  float pixdim[8];
  float vox_offset;
  float scl_slope;
  float scl_inter;
  int16_t slice_end;
  char slice_code;
  char xyzt_units;
  float cal_max, cal_min;
  float slice_duration;
  float toffset;
  int32_t glmax, glmin;
  char descrip[80];
  char aux_file[24];
  int16_t qform_code;
  int16_t sform_code;
  float quatern_b, quatern_c, quatern_d;
  float qoffset_x, qoffset_y, qoffset_z;
  float srow_x[4];
  float srow_y[4];
  float srow_z[4];
  char intent_name[16];
  char magic[4];
};
#pragma pack(pop)
static_assert(sizeof(Nifti1Header) == 348, "NIfTI-1 header must be 348 bytes");

bool ends_with_gz(const std::string& path) {
  return path.size() >= 3 && path.compare(path.size() - 3, 3, ".gz") == 0;
}

#if !TESSERA_PHANTOM_ZLIB
// CRC-32 (IEEE 802.3, reflected 0xEDB88320), as gzip's trailer needs.
uint32_t crc32_update(uint32_t crc, const unsigned char* p, size_t n) {
  static uint32_t table[256];
  static bool ready = false;
  if (!ready) {
    for (uint32_t i = 0; i < 256; ++i) {
      uint32_t c = i;
      for (int k = 0; k < 8; ++k) c = (c & 1) ? 0xEDB88320u ^ (c >> 1) : c >> 1;
      table[i] = c;
    }
    ready = true;
  }
  crc = ~crc;
  for (size_t i = 0; i < n; ++i) crc = table[(crc ^ p[i]) & 0xFF] ^ (crc >> 8);
  return ~crc;
}
#endif

// Writes bytes to path, plain or (a name ending in .gz) gzip: zlib's deflate when built with zlib, else deflate's
// stored blocks (a valid gzip member, uncompressed).
class FileSink {
 public:
  explicit FileSink(const std::string& path) : path_(path), gz_(ends_with_gz(path)) {
#if TESSERA_PHANTOM_ZLIB
    if (gz_) {
      gzf_ = gzopen(path.c_str(), "wb6");
      if (!gzf_) throw std::runtime_error("cannot open " + path + " for writing");
      return;
    }
#endif
    out_.open(path, std::ios::binary);
    if (!out_) throw std::runtime_error("cannot open " + path + " for writing");
#if !TESSERA_PHANTOM_ZLIB
    if (gz_) {
      const unsigned char header[10] = {0x1f, 0x8b, 8, 0, 0, 0, 0, 0, 0, 0xff};
      out_.write(reinterpret_cast<const char*>(header), 10);
    }
#endif
  }
  void write(const void* data, uint64_t bytes) {
    const auto* p = static_cast<const unsigned char*>(data);
#if TESSERA_PHANTOM_ZLIB
    if (gz_) {
      while (bytes > 0) {
        const unsigned chunk = static_cast<unsigned>(std::min<uint64_t>(bytes, 1u << 30));
        if (gzwrite(gzf_, p, chunk) != static_cast<int>(chunk)) throw std::runtime_error("failed writing " + path_);
        p += chunk;
        bytes -= chunk;
      }
      return;
    }
#else
    if (gz_) {
      crc_ = crc32_update(crc_, p, static_cast<size_t>(bytes));
      size_ += static_cast<uint32_t>(bytes);
      pending_.insert(pending_.end(), p, p + bytes);
      while (pending_.size() > 65535) flush_block(false);
      return;
    }
#endif
    out_.write(reinterpret_cast<const char*>(p), static_cast<std::streamsize>(bytes));
    if (!out_) throw std::runtime_error("failed writing " + path_);
  }
  void close() {
#if TESSERA_PHANTOM_ZLIB
    if (gz_) {
      const int rc = gzclose(gzf_);
      gzf_ = nullptr;
      if (rc != Z_OK) throw std::runtime_error("failed writing " + path_);
      return;
    }
#else
    if (gz_) {
      flush_block(true);
      const unsigned char trailer[8] = {static_cast<unsigned char>(crc_), static_cast<unsigned char>(crc_ >> 8),
                                        static_cast<unsigned char>(crc_ >> 16), static_cast<unsigned char>(crc_ >> 24),
                                        static_cast<unsigned char>(size_), static_cast<unsigned char>(size_ >> 8),
                                        static_cast<unsigned char>(size_ >> 16), static_cast<unsigned char>(size_ >> 24)};
      out_.write(reinterpret_cast<const char*>(trailer), 8);
    }
#endif
    out_.close();
    if (!out_) throw std::runtime_error("failed writing " + path_);
  }
  ~FileSink() {
#if TESSERA_PHANTOM_ZLIB
    if (gzf_) gzclose(gzf_);
#endif
  }

 private:
#if !TESSERA_PHANTOM_ZLIB
  // One stored block of up to 65535 pending bytes (the last one has BFINAL set).
  void flush_block(bool last) {
    const size_t n = std::min<size_t>(pending_.size(), 65535);
    const bool final_block = last && n == pending_.size();
    const unsigned char head[5] = {static_cast<unsigned char>(final_block ? 1 : 0), static_cast<unsigned char>(n),
                                   static_cast<unsigned char>(n >> 8), static_cast<unsigned char>(~n),
                                   static_cast<unsigned char>((~n) >> 8)};
    out_.write(reinterpret_cast<const char*>(head), 5);
    out_.write(reinterpret_cast<const char*>(pending_.data()), static_cast<std::streamsize>(n));
    pending_.erase(pending_.begin(), pending_.begin() + static_cast<std::ptrdiff_t>(n));
    if (last && !final_block) flush_block(true);
  }
  uint32_t crc_ = 0;
  uint32_t size_ = 0;
  std::vector<unsigned char> pending_;
#else
  gzFile gzf_ = nullptr;
#endif
  std::string path_;
  bool gz_;
  std::ofstream out_;
};

// volumes > 1 writes a 4D image (dim[4] = volumes, one after the other).
void write_nifti(const std::string& path, const tessera::Geometry& g, int16_t datatype, int16_t bitpix,
                 const void* data, uint64_t bytes, int volumes = 1) {
  Nifti1Header h;
  std::memset(&h, 0, sizeof(h));
  h.sizeof_hdr = 348;
  h.regular = 'r';
  h.dim[0] = volumes > 1 ? 4 : 3;
  for (int a = 0; a < 3; ++a) h.dim[a + 1] = static_cast<int16_t>(g.dims[a]);
  for (int a = 4; a < 8; ++a) h.dim[a] = 1;
  h.dim[4] = static_cast<int16_t>(volumes);
  h.datatype = datatype;
  h.bitpix = bitpix;
  h.pixdim[0] = 1.0f;  // qfac
  for (int a = 0; a < 3; ++a) h.pixdim[a + 1] = static_cast<float>(g.voxel_mm[a]);
  for (int a = 4; a < 8; ++a) h.pixdim[a] = 1.0f;
  h.vox_offset = 352.0f;
  h.scl_slope = 1.0f;
  h.scl_inter = 0.0f;
  h.xyzt_units = 2;  // mm
  std::strncpy(h.descrip, "tessera numerical head phantom", sizeof(h.descrip) - 1);
  // Voxel axes -> scanner: R takes B0 (in voxel axes) to the scanner's z; the volume's centre sits at the origin.
  const std::array<double, 9> r = tessera::b0_rotation(g.b0_dir);
  float* srow[3] = {h.srow_x, h.srow_y, h.srow_z};
  for (int row = 0; row < 3; ++row) {
    double offset = 0.0;
    for (int col = 0; col < 3; ++col) {
      const double m = r[row * 3 + col] * g.voxel_mm[col];
      srow[row][col] = static_cast<float>(m);
      offset -= m * 0.5 * static_cast<double>(g.dims[col] - 1);
    }
    srow[row][3] = static_cast<float>(offset);
  }
  // The qform's quaternion of the proper rotation R (its angle is at most 90 degrees, so a = sqrt(1 + trace) / 2 >= 1/2).
  const double qa = 0.5 * std::sqrt(1.0 + r[0] + r[4] + r[8]);
  h.quatern_b = static_cast<float>((r[7] - r[5]) / (4.0 * qa));
  h.quatern_c = static_cast<float>((r[2] - r[6]) / (4.0 * qa));
  h.quatern_d = static_cast<float>((r[3] - r[1]) / (4.0 * qa));
  h.qoffset_x = h.srow_x[3];
  h.qoffset_y = h.srow_y[3];
  h.qoffset_z = h.srow_z[3];
  h.qform_code = 1;
  h.sform_code = 1;
  std::memcpy(h.magic, "n+1\0", 4);
  FileSink out(path);
  out.write(&h, sizeof(h));
  const char extension[4] = {0, 0, 0, 0};
  out.write(extension, 4);
  out.write(data, bytes);
  out.close();
}

[[noreturn]] void usage(const std::string& problem) {
  std::cerr << "tessera_phantom: " << problem << "\n"
            << "usage: tessera_phantom --dims NX NY NZ [--voxel VX VY VZ] [--b0 BX BY BZ] [--seed S] [--noise SIGMA]\n"
            << "                       [--threads T] [--field-out field.nii] [--chi-out chi.nii] [--mask-out mask.nii]\n"
            << "                       [--te-ms T1,T2,...] [--b0-tesla B] [--snr SNR] [--no-receive-phase]\n"
            << "                       [--magnitude-out F] [--phase-out F] [--total-out F] [--local-out F]\n"
            << "                       [--background-out F] [--head-chi-out F] [--head-mask-out F] [--tissue-out F]\n"
            << "                       [--phase-offset-out F] [--json-out scan.json]\n"
            << "                       [--variation V] [--head-size F] [--head-shape SX SY SZ] [--asymmetry A]\n"
            << "                       [--skull-mm T] [--frontal-sinus F] [--sphenoid-sinus F] [--mastoid F]\n"
            << "                       [--ear-canal-mm R]\n";
  std::exit(2);
}

double number(const char* flag, const char* text) {
  char* end = nullptr;
  const double v = std::strtod(text, &end);
  if (end == text || *end != '\0') usage(std::string("bad number for ") + flag + ": " + text);
  return v;
}

// Comma-separated numbers ("4,8,12").
std::vector<double> number_list(const char* flag, const std::string& text) {
  std::vector<double> v;
  size_t start = 0;
  while (true) {
    const size_t comma = text.find(',', start);
    const std::string item = text.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
    v.push_back(number(flag, item.c_str()));
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return v;
}

void write_json(const std::string& path, const tessera::Geometry& g, const tessera::AcquisitionOptions& o,
                const tessera::PhantomAcquisition& acq) {
  std::ofstream out(path);
  if (!out) throw std::runtime_error("cannot open " + path + " for writing");
  char buf[64];
  auto num = [&](double v) {
    std::snprintf(buf, sizeof(buf), "%.10g", v);
    return std::string(buf);
  };
  out << "{\n  \"EchoTime\": [";
  for (size_t e = 0; e < acq.te_s.size(); ++e) out << (e ? ", " : "") << num(acq.te_s[e]);
  out << "],\n  \"MagneticFieldStrength\": " << num(acq.b0_tesla) << ",\n  \"B0Direction\": [" << num(g.b0_dir[0])
      << ", " << num(g.b0_dir[1]) << ", " << num(g.b0_dir[2]) << "],\n  \"VoxelSizeMm\": [" << num(g.voxel_mm[0])
      << ", " << num(g.voxel_mm[1]) << ", " << num(g.voxel_mm[2]) << "],\n  \"Seed\": " << o.seed
      << ",\n  \"SNR\": " << num(o.snr) << ",\n  \"NoiseSigma\": " << num(acq.noise_sigma)
      << ",\n  \"ReceivePhase\": " << (o.receive_phase ? "true" : "false")
      << ",\n  \"GyromagneticRatioMHzPerT\": " << num(tessera::kGammaBarMHzPerT);
  const tessera::HeadVariation& v = o.head;
  auto vec = [&](const tessera::Vec3& x) { return "[" + num(x[0]) + ", " + num(x[1]) + ", " + num(x[2]) + "]"; };
  out << ",\n  \"HeadVariation\": {\"size\": " << num(v.size) << ", \"shape\": " << vec(v.shape)
      << ", \"asymmetry\": " << num(v.asymmetry) << ", \"skullMm\": " << num(v.skull_mm)
      << ", \"frontalSinus\": " << num(v.frontal_sinus) << ", \"frontalSinusShiftMm\": " << vec(v.frontal_sinus_shift_mm)
      << ", \"sphenoidSinus\": " << num(v.sphenoid_sinus)
      << ", \"sphenoidSinusShiftMm\": " << vec(v.sphenoid_sinus_shift_mm) << ", \"mastoid\": " << num(v.mastoid)
      << ", \"mastoidShiftMm\": " << vec(v.mastoid_shift_mm) << ", \"earCanalRadiusMm\": " << num(v.ear_canal_radius_mm)
      << ", \"earCanalShiftMm\": " << vec(v.ear_canal_shift_mm) << "}" 
      << ",\n  \"PhaseUnits\": \"rad\",\n  \"FieldUnits\": \"ppm\"\n}\n";
  if (!out) throw std::runtime_error("failed writing " + path);
}

}  // namespace

int main(int argc, char** argv) {
  tessera::Geometry g;
  tessera::PhantomOptions options;
  options.threads = 0;
  std::string field_out, chi_out, mask_out;
  tessera::AcquisitionOptions acq_options;
  std::string magnitude_out, phase_out, total_out, local_out, background_out, head_chi_out, head_mask_out, tissue_out,
      phase_offset_out, json_out;
  bool have_dims = false;
  uint64_t variation = 0;
  std::vector<std::function<void(tessera::HeadVariation&)>> head_settings;  // applied after --variation's draw
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto need = [&](int count) {
      if (i + count >= argc) usage(a + " needs " + std::to_string(count) + " value(s)");
    };
    if (a == "--dims") {
      need(3);
      for (int k = 0; k < 3; ++k) {
        const double v = number("--dims", argv[++i]);
        if (v < 1 || v > 32767 || v != static_cast<double>(static_cast<int64_t>(v))) usage("--dims must be integers in [1, 32767]");
        g.dims[k] = static_cast<int64_t>(v);
      }
      have_dims = true;
    } else if (a == "--voxel") {
      need(3);
      for (int k = 0; k < 3; ++k) g.voxel_mm[k] = number("--voxel", argv[++i]);
    } else if (a == "--b0") {
      need(3);
      for (int k = 0; k < 3; ++k) g.b0_dir[k] = number("--b0", argv[++i]);
    } else if (a == "--seed") {
      need(1);
      const double v = number("--seed", argv[++i]);
      if (v < 0) usage("--seed must be >= 0");
      options.seed = static_cast<uint64_t>(std::stoull(argv[i]));
    } else if (a == "--variation") {
      need(1);
      const double v = number("--variation", argv[++i]);
      if (v < 0) usage("--variation must be >= 0");
      variation = static_cast<uint64_t>(std::stoull(argv[i]));
    } else if (a == "--head-size" || a == "--asymmetry" || a == "--skull-mm" || a == "--frontal-sinus" ||
               a == "--sphenoid-sinus" || a == "--mastoid" || a == "--ear-canal-mm") {
      need(1);
      const double v = number(a.c_str(), argv[++i]);
      head_settings.push_back([a, v](tessera::HeadVariation& h) {
        double& target = a == "--head-size"        ? h.size
                         : a == "--asymmetry"      ? h.asymmetry
                         : a == "--skull-mm"       ? h.skull_mm
                         : a == "--frontal-sinus"  ? h.frontal_sinus
                         : a == "--sphenoid-sinus" ? h.sphenoid_sinus
                         : a == "--mastoid"        ? h.mastoid
                                                   : h.ear_canal_radius_mm;
        target = v;
      });
    } else if (a == "--head-shape") {
      need(3);
      tessera::Vec3 shape;
      for (int k = 0; k < 3; ++k) shape[k] = number("--head-shape", argv[++i]);
      head_settings.push_back([shape](tessera::HeadVariation& h) { h.shape = shape; });
    } else if (a == "--noise") {
      need(1);
      options.noise_sigma = number("--noise", argv[++i]);
    } else if (a == "--threads") {
      need(1);
      options.threads = static_cast<unsigned>(number("--threads", argv[++i]));
    } else if (a == "--field-out") {
      need(1);
      field_out = argv[++i];
    } else if (a == "--chi-out") {
      need(1);
      chi_out = argv[++i];
    } else if (a == "--mask-out") {
      need(1);
      mask_out = argv[++i];
    } else if (a == "--te-ms") {
      need(1);
      acq_options.te_s.clear();
      for (double ms : number_list("--te-ms", argv[i + 1])) {
        if (!(ms > 0.0 && ms <= 1000.0)) usage(std::string("--te-ms values must be echo times in (0, 1000] ms, got ") + argv[i + 1]);
        acq_options.te_s.push_back(ms * 1e-3);
      }
      ++i;
    } else if (a == "--b0-tesla") {
      need(1);
      acq_options.b0_tesla = number("--b0-tesla", argv[++i]);
    } else if (a == "--snr") {
      need(1);
      acq_options.snr = number("--snr", argv[++i]);
    } else if (a == "--no-receive-phase") {
      acq_options.receive_phase = false;
    } else if (a == "--magnitude-out" || a == "--phase-out" || a == "--total-out" || a == "--local-out" ||
               a == "--background-out" || a == "--head-chi-out" || a == "--head-mask-out" || a == "--tissue-out" ||
               a == "--phase-offset-out" || a == "--json-out") {
      need(1);
      std::string& target = a == "--magnitude-out"    ? magnitude_out
                            : a == "--phase-out"      ? phase_out
                            : a == "--total-out"      ? total_out
                            : a == "--local-out"      ? local_out
                            : a == "--background-out" ? background_out
                            : a == "--head-chi-out"   ? head_chi_out
                            : a == "--head-mask-out"  ? head_mask_out
                            : a == "--tissue-out"     ? tissue_out
                            : a == "--phase-offset-out" ? phase_offset_out
                                                        : json_out;
      target = argv[++i];
    } else if (a == "--help" || a == "-h") {
      usage("help");
    } else {
      usage("unknown argument " + a);
    }
  }
  if (!have_dims) usage("--dims is required");
  const bool brain = !(field_out.empty() && chi_out.empty() && mask_out.empty());
  const bool scan = !(magnitude_out.empty() && phase_out.empty() && total_out.empty() && local_out.empty() &&
                      background_out.empty() && head_chi_out.empty() && head_mask_out.empty() && tissue_out.empty() &&
                      phase_offset_out.empty() && json_out.empty());
  if (!brain && !scan) usage("give at least one output (--field-out, --chi-out, --mask-out, --magnitude-out, ...)");
  try {
    tessera::HeadVariation head = tessera::head_variation(variation);
    for (const auto& set : head_settings) set(head);
    options.head = head;
    acq_options.head = head;
    if (brain) {
      const tessera::Phantom ph = tessera::make_phantom(g, options);
      if (!field_out.empty()) write_nifti(field_out, g, 16, 32, ph.field.data(), ph.field.size() * sizeof(float));
      if (!chi_out.empty()) write_nifti(chi_out, g, 16, 32, ph.chi.data(), ph.chi.size() * sizeof(float));
      if (!mask_out.empty()) write_nifti(mask_out, g, 2, 8, ph.mask.data(), ph.mask.size());
    }
    if (scan) {
      acq_options.seed = options.seed;
      acq_options.threads = options.threads;
      const tessera::PhantomAcquisition acq = tessera::make_acquisition(g, acq_options);
      const int echoes = static_cast<int>(acq.te_s.size());
      auto floats = [&](const std::string& path, const std::vector<float>& v, int volumes = 1) {
        if (!path.empty()) write_nifti(path, g, 16, 32, v.data(), v.size() * sizeof(float), volumes);
      };
      auto bytes = [&](const std::string& path, const std::vector<uint8_t>& v) {
        if (!path.empty()) write_nifti(path, g, 2, 8, v.data(), v.size());
      };
      floats(magnitude_out, acq.magnitude, echoes);
      floats(phase_out, acq.phase, echoes);
      floats(total_out, acq.total_field);
      floats(local_out, acq.local_field);
      floats(background_out, acq.background_field);
      floats(head_chi_out, acq.chi);
      floats(phase_offset_out, acq.phase_offset);
      bytes(head_mask_out, acq.head_mask);
      bytes(tissue_out, acq.tissue);
      if (!json_out.empty()) write_json(json_out, g, acq_options, acq);
    }
  } catch (const tessera::Error& e) {
    std::cerr << "tessera_phantom: " << tessera::error_code_name(e.code()) << ": " << e.what() << "\n";
    return e.code() == tessera::ErrorCode::InvalidArgument ? 2 : 1;
  } catch (const std::exception& e) {
    std::cerr << "tessera_phantom: " << e.what() << "\n";
    return 1;
  }
  return 0;
}

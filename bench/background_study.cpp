// One head of the background-removal study (bench/background-study.js drives it, one process per head): simulates a
// multi-echo GRE scan of a varied phantom head (make_acquisition with head_variation), runs the pipeline (tessera/
// pipeline.h: echo fit, then each background removal asked for, no inversion) and then each inversion on its local
// field and local mask (run_method: the call the pipeline's inversion stage makes), and prints one JSON object.
//
// Scores, inside the evaluation mask = the pipeline's local_mask ∩ the true brain mask eroded by --erode voxels
// (erode_mask_voxels, a sphere of that many voxels): Pearson r and the demeaned NRMSE (QSM-CI: 100 · ‖(x − mean x) − (t − mean t)‖ / ‖t − mean t‖,
// both maps demeaned inside the mask, then compare_maps) of the local field against the true local field (the forward
// model of the brain's χ alone) and of χ against the brain's χ.
//
//   build/native/tessera_background_study --list-backgrounds
//   build/native/tessera_background_study --dims NX NY NZ [--voxel VX VY VZ] [--b0 BX BY BZ] [--seed S]
//        [--variation V] [--snr SNR] [--te-ms 4,8,12] [--backgrounds vsharp,pdf] [--methods rts,tv]
//        [--erode 5] [--mask given|magnitude] [--threads 2] [--slab CENTRE_MM] [--option name=value ...]
//
// --option name=value sets a pipeline option by its schema name (e.g. resharp.radius=4) for every run.
// A real scan instead of a phantom (no truth: only the plausibility quantities below), its brain mask made by the
// pipeline from the first echo's magnitude:
//   build/native/tessera_background_study --phase P.nii --magnitude M.nii --te-ms 4,8,12 [--phase-scale S] ...
//   build/native/tessera_background_study --total-field F.nii --units hz|rad/s|ppm --magnitude M.nii ...
// NIfTI-1 (.nii, little-endian; uint8, int16, uint16, int32, float32, float64, scl_slope applied when finite and
// nonzero); --phase-scale multiplies the phase (π/4096 for a scanner's integers). B0 3 T along the volume's z.
//
// --slab CENTRE_MM: a slab acquisition (AcquisitionOptions::slab): the field of view cuts through the head along z,
// the slab's centre CENTRE_MM above the brain's centre.
// Also printed, for the plausibility bounds of tessera/common/input_checks.h and the pipeline: the total field's 1st
// and 99th percentiles (ppm) inside the fit mask, the local field's inside the local mask, the share of the given mask
// the echo fit and each background removal leave out, the share of the brain mask at or below the magnitude's tissue
// threshold (mask_background_share), and each run's warnings.
//
// --list-backgrounds prints the pipeline schema's "background" choices (JSON array): the default of --backgrounds.
// --mask given (default) hands the pipeline the true brain mask, so that the scores measure the background removal and
// the inversion, not the masking; magnitude lets the pipeline make its own from the first echo.
#include <chrono>
#include <cmath>
#include <cstring>
#include <fstream>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "tessera/common/error.h"
#include "tessera/common/input_checks.h"
#include "tessera/common/morphology.h"
#include "tessera/common/schema.h"
#include "tessera/inversion/methods.h"
#include "tessera/networks/phase_networks.h"
#include "tessera/phase/brain_mask.h"
#include "tessera/pipeline/pipeline.h"
#include "tessera/quality/fidelity.h"
#include "tessera/sim/phantom.h"

using namespace tessera;
using Clock = std::chrono::steady_clock;

namespace {

double since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

[[noreturn]] void usage(const std::string& problem) {
  std::cerr << "tessera_background_study: " << problem << "\n"
            << "usage: tessera_background_study --list-backgrounds\n"
            << "       tessera_background_study --dims NX NY NZ [--voxel VX VY VZ] [--b0 BX BY BZ] [--seed S]\n"
            << "            [--variation V] [--snr SNR] [--te-ms 4,8,12] [--backgrounds vsharp,pdf] [--methods rts,tv]\n"
            << "            [--erode 5] [--mask given|magnitude] [--threads 2] [--slab CENTRE_MM]\n";
  std::exit(2);
}

double number(const std::string& flag, const char* text) {
  char* end = nullptr;
  const double v = std::strtod(text, &end);
  if (end == text || *end != '\0') usage("bad number for " + flag + ": " + text);
  return v;
}

std::vector<std::string> split(const std::string& text) {
  std::vector<std::string> out;
  std::stringstream ss(text);
  std::string item;
  while (std::getline(ss, item, ',')) {
    if (!item.empty()) out.push_back(item);
  }
  return out;
}

std::vector<std::string> background_choices() {
  std::vector<std::string> out;
  for (auto c : option_choices(find_option(pipeline_options(), "background"))) out.emplace_back(c);
  return out;
}

// r and demeaned NRMSE (%) of test against truth inside mask.
struct Score {
  double r = 0.0;
  double nrmse = 0.0;
};
Score score(const Geometry& g, const std::vector<float>& test, const std::vector<float>& truth,
            const std::vector<uint8_t>& mask) {
  auto demeaned = [&](const std::vector<float>& v) {
    double sum = 0.0;
    uint64_t n = 0;
    for (size_t i = 0; i < v.size(); ++i) {
      if (mask[i]) {
        sum += v[i];
        ++n;
      }
    }
    const double mean = n ? sum / static_cast<double>(n) : 0.0;
    std::vector<float> out(v.size(), 0.0f);
    for (size_t i = 0; i < v.size(); ++i) out[i] = mask[i] ? static_cast<float>(v[i] - mean) : 0.0f;
    return out;
  };
  const Agreement a = compare_maps(g, demeaned(test), demeaned(truth), mask);
  return {a.r, 100.0 * a.nrmse};
}

std::string num(double v) {
  char buf[40];
  std::snprintf(buf, sizeof(buf), "%.6g", v);
  return buf;
}

// text as a JSON string.
std::string json_string(const std::string& text) {
  std::string out = "\"";
  for (char c : text) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (static_cast<unsigned char>(c) < 0x20) {
      char buf[8];
      std::snprintf(buf, sizeof(buf), "\\u%04x", c);
      out += buf;
    } else {
      out += c;
    }
  }
  return out + "\"";
}

// A NIfTI-1 volume (every volume of a 4D file, x fastest) as floats, and its dims and voxel size.
struct Nifti {
  Dims3 dims{0, 0, 0};
  Vec3 voxel_mm{1, 1, 1};
  int64_t volumes = 1;
  std::vector<float> data;
};
Nifti read_nifti(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::vector<char> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  auto get = [&](size_t at, auto v) {
    if (at + sizeof(v) > bytes.size()) usage(path + ": not a NIfTI-1 file (too short)");
    std::memcpy(&v, bytes.data() + at, sizeof(v));
    return v;
  };
  if (get(0, int32_t{}) != 348) usage(path + ": not a little-endian NIfTI-1 file");
  Nifti n;
  int16_t dim[8];
  for (int k = 0; k < 8; ++k) dim[k] = get(40 + 2 * k, int16_t{});
  for (int k = 0; k < 3; ++k) n.dims[k] = dim[k + 1] > 0 ? dim[k + 1] : 1;
  n.volumes = dim[0] >= 4 && dim[4] > 0 ? dim[4] : 1;
  for (int k = 0; k < 3; ++k) n.voxel_mm[k] = std::fabs(get(80 + 4 * k, float{}));
  const int16_t type = get(70, int16_t{});
  const size_t offset = static_cast<size_t>(get(108, float{}));
  const float slope = get(112, float{}), inter = get(116, float{});
  const bool scaled = std::isfinite(slope) && slope != 0.0f;
  const size_t count = static_cast<size_t>(n.dims[0] * n.dims[1] * n.dims[2] * n.volumes);
  n.data.resize(count);
  for (size_t i = 0; i < count; ++i) {
    double v = 0.0;
    switch (type) {
      case 2: v = get(offset + i, uint8_t{}); break;
      case 4: v = get(offset + 2 * i, int16_t{}); break;
      case 512: v = get(offset + 2 * i, uint16_t{}); break;
      case 8: v = get(offset + 4 * i, int32_t{}); break;
      case 16: v = get(offset + 4 * i, float{}); break;
      case 64: v = get(offset + 8 * i, double{}); break;
      default: usage(path + ": NIfTI datatype " + std::to_string(type) + " is not read here");
    }
    n.data[i] = static_cast<float>(scaled ? v * slope + inter : v);
  }
  return n;
}

uint64_t voxels(const std::vector<uint8_t>& mask) {
  uint64_t n = 0;
  for (uint8_t m : mask) n += m != 0;
  return n;
}

// A real scan through the pipeline (mask from the magnitude) with each background removal: the plausibility
// quantities as one JSON object (see the header comment).
int real_scan(const std::string& phase_path, const std::string& total_path, const std::string& magnitude_path,
              const std::string& units, double phase_scale, const std::vector<double>& te_ms,
              const std::vector<std::string>& backgrounds,
              const std::vector<std::pair<std::string, double>>& options, unsigned threads) {
  if (magnitude_path.empty()) usage("a real scan needs --magnitude (the brain mask is made from it)");
  const bool from_total = !total_path.empty();
  Nifti field = read_nifti(from_total ? total_path : phase_path);
  const Nifti magnitude = read_nifti(magnitude_path);
  Geometry g;
  g.dims = field.dims;
  g.voxel_mm = field.voxel_mm;
  const uint64_t n = g.voxel_count();
  if (magnitude.dims != field.dims) usage("the magnitude's dims differ from the field's");
  for (float& v : field.data) v = static_cast<float>(v * phase_scale);
  PipelineRequest base;
  base.threads = threads;
  if (from_total) {
    base.total_field_units = total_field_units_from_name(units);
  } else {
    base.te_s.clear();
    for (int64_t e = 0; e < field.volumes; ++e) base.te_s.push_back(te_ms.at(static_cast<size_t>(e)) * 1e-3);
  }
  const std::span<const float> mag(magnitude.data.data(), n);
  const std::vector<uint8_t> mask = brain_mask(g, mag, base.brain_mask, threads);
  std::ostringstream out;
  out << "{\"dims\": [" << g.dims[0] << ", " << g.dims[1] << ", " << g.dims[2] << "], \"voxelMm\": [" << num(g.voxel_mm[0])
      << ", " << num(g.voxel_mm[1]) << ", " << num(g.voxel_mm[2]) << "], \"volumes\": " << field.volumes
      << ", \"maskVoxels\": " << voxels(mask) << ", \"maskDarkShare\": " << num(mask_background_share(mag, mask, base.brain_mask));
  if (from_total) {
    const std::vector<float> ppm = total_field_to_ppm(field.data, base.total_field_units, base.b0_tesla);
    const RobustRange r = robust_range(ppm, mask);
    out << ", \"units\": " << json_string(units) << ", \"totalP1\": " << num(r.p1) << ", \"totalP99\": " << num(r.p99);
  }
  out << ", \"runs\": [";
  bool first_row = true;
  for (const auto& bg : backgrounds) {
    PipelineRequest req = base;
    set_pipeline_choice(req, "background", bg);
    for (const auto& [name, value] : options) set_pipeline_option(req, name, value);
    out << (first_row ? "" : ", ") << "\n  {\"background\": \"" << bg << "\"";
    first_row = false;
    try {
      Pipeline pipeline(g, field.data, magnitude.data, std::span<const uint8_t>{}, req);
      while (!pipeline.finished()) pipeline.step();
      PipelineResult res = pipeline.take_result();
      const RobustRange total = robust_range(res.total_ppm, res.fit_mask);
      const RobustRange local = robust_range(res.local_ppm, res.local_mask);
      const double given = static_cast<double>(voxels(res.mask)), fit = static_cast<double>(voxels(res.fit_mask)),
                   kept = static_cast<double>(voxels(res.local_mask));
      std::string warnings = "[";
      for (size_t k = 0; k < res.warnings.size(); ++k) warnings += (k ? ", " : "") + json_string(res.warnings[k]);
      out << ", \"totalP1\": " << num(total.p1) << ", \"totalP99\": " << num(total.p99) << ", \"localP1\": " << num(local.p1)
          << ", \"localP99\": " << num(local.p99) << ", \"fitLeftOut\": " << num(1.0 - fit / given)
          << ", \"backgroundLeftOut\": " << num(1.0 - kept / fit) << ", \"warnings\": " << warnings << "]}";
    } catch (const Error& e) {
      out << ", \"error\": " << json_string(e.what()) << "}";
    }
  }
  out << "]}\n";
  std::cout << out.str();
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  Geometry g;
  uint64_t seed = 1, variation = 0;
  double snr = 100.0;
  std::vector<double> te_ms{4, 8, 12, 16, 20};
  std::vector<std::string> backgrounds, methods_asked{"rts", "tv"};
  uint32_t erode = 5;
  bool mask_given = true;
  unsigned threads = 2;
  bool have_dims = false, slab = false;
  double slab_centre_mm = 0.0;
  std::string phase_path, total_path, magnitude_path, units = "hz";
  std::vector<std::pair<std::string, double>> options;  // --option name=value: pipeline options (schema names)
  double phase_scale = 1.0;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto need = [&](int count) {
      if (i + count >= argc) usage(a + " needs " + std::to_string(count) + " value(s)");
    };
    if (a == "--list-backgrounds") {
      std::cout << "[";
      const auto choices = background_choices();
      for (size_t k = 0; k < choices.size(); ++k) std::cout << (k ? ", " : "") << "\"" << choices[k] << "\"";
      std::cout << "]\n";
      return 0;
    } else if (a == "--dims") {
      need(3);
      for (int k = 0; k < 3; ++k) g.dims[k] = static_cast<int64_t>(number(a, argv[++i]));
      have_dims = true;
    } else if (a == "--voxel") {
      need(3);
      for (int k = 0; k < 3; ++k) g.voxel_mm[k] = number(a, argv[++i]);
    } else if (a == "--b0") {
      need(3);
      for (int k = 0; k < 3; ++k) g.b0_dir[k] = number(a, argv[++i]);
    } else if (a == "--seed") {
      need(1);
      seed = static_cast<uint64_t>(number(a, argv[++i]));
    } else if (a == "--variation") {
      need(1);
      variation = static_cast<uint64_t>(number(a, argv[++i]));
    } else if (a == "--snr") {
      need(1);
      snr = number(a, argv[++i]);
    } else if (a == "--te-ms") {
      need(1);
      te_ms.clear();
      for (const auto& t : split(argv[++i])) te_ms.push_back(number(a, t.c_str()));
    } else if (a == "--backgrounds") {
      need(1);
      backgrounds = split(argv[++i]);
    } else if (a == "--methods") {
      need(1);
      methods_asked = split(argv[++i]);
    } else if (a == "--erode") {
      need(1);
      erode = static_cast<uint32_t>(number(a, argv[++i]));
    } else if (a == "--mask") {
      need(1);
      const std::string m = argv[++i];
      if (m != "given" && m != "magnitude") usage("--mask is given or magnitude, got " + m);
      mask_given = m == "given";
    } else if (a == "--slab") {
      need(1);
      slab = true;
      slab_centre_mm = number(a, argv[++i]);
    } else if (a == "--phase" || a == "--total-field" || a == "--magnitude" || a == "--units") {
      need(1);
      (a == "--phase" ? phase_path : a == "--total-field" ? total_path : a == "--magnitude" ? magnitude_path : units) = argv[++i];
    } else if (a == "--option") {
      need(1);
      const std::string kv = argv[++i];
      const size_t eq = kv.find('=');
      if (eq == std::string::npos) usage("--option is name=value, got " + kv);
      options.emplace_back(kv.substr(0, eq), number(a, kv.c_str() + eq + 1));
    } else if (a == "--phase-scale") {
      need(1);
      phase_scale = number(a, argv[++i]);
    } else if (a == "--threads") {
      need(1);
      threads = static_cast<unsigned>(number(a, argv[++i]));
    } else {
      usage("unknown argument " + a);
    }
  }
  if (!phase_path.empty() || !total_path.empty()) return real_scan(phase_path, total_path, magnitude_path, units, phase_scale,
                                                                   te_ms, backgrounds.empty() ? background_choices() : backgrounds, options, threads);
  if (!have_dims) usage("--dims is required");
  if (backgrounds.empty()) backgrounds = background_choices();
  try {
    AcquisitionOptions o;
    o.seed = seed;
    o.head = head_variation(variation);
    o.snr = snr;
    o.te_s.clear();
    for (double t : te_ms) o.te_s.push_back(t * 1e-3);
    o.threads = threads;
    o.slab = slab;
    o.slab_centre_mm = slab_centre_mm;
    auto t0 = Clock::now();
    const PhantomAcquisition acq = make_acquisition(g, o);
    const double simulate_s = since(t0);
    const std::vector<uint8_t> eroded = erode_mask_voxels(g, acq.brain_mask, erode);

    std::ostringstream out;
    out << "{\"dims\": [" << g.dims[0] << ", " << g.dims[1] << ", " << g.dims[2] << "], \"voxelMm\": ["
        << num(g.voxel_mm[0]) << ", " << num(g.voxel_mm[1]) << ", " << num(g.voxel_mm[2]) << "], \"b0Dir\": ["
        << num(g.b0_dir[0]) << ", " << num(g.b0_dir[1]) << ", " << num(g.b0_dir[2]) << "], \"seed\": " << seed
        << ", \"variation\": " << variation << ", \"snr\": " << num(snr) << ", \"echoes\": " << te_ms.size()
        << ", \"erode\": " << erode << ", \"mask\": \"" << (mask_given ? "given" : "magnitude")
        << "\", \"threads\": " << threads << ", \"simulateSeconds\": " << num(simulate_s)
        << ", \"slabCentreMm\": " << (slab ? num(slab_centre_mm) : "null") << ", \"brainVoxels\": " << voxels(acq.brain_mask)
        << ", \"maskDarkShare\": "
        << num(mask_background_share(acq.magnitude, acq.brain_mask, BrainMaskParams{})) << ", \"runs\": [";
    bool first_row = true;
    for (const auto& bg : backgrounds) {
      PipelineRequest req;
      req.te_s = o.te_s;
      req.b0_tesla = o.b0_tesla;
      req.threads = threads;
      set_pipeline_choice(req, "background", bg);
      for (const auto& [name, value] : options) set_pipeline_option(req, name, value);
      t0 = Clock::now();
      Pipeline pipeline(g, acq.phase, acq.magnitude,
                        mask_given ? std::span<const uint8_t>(acq.brain_mask) : std::span<const uint8_t>{}, req);
      while (!pipeline.finished()) pipeline.step();
      PipelineResult res = pipeline.take_result();
      const double pipeline_s = since(t0);
      std::vector<uint8_t> eval(eroded.size());
      uint64_t eval_voxels = 0;
      for (size_t i = 0; i < eval.size(); ++i) {
        eval[i] = eroded[i] && res.local_mask[i];
        eval_voxels += eval[i];
      }
      const Score local = score(g, res.local_ppm, acq.local_field, eval);
      std::vector<uint8_t> kept_mask(res.local_mask.size());
      for (size_t i = 0; i < kept_mask.size(); ++i) kept_mask[i] = res.local_mask[i] && acq.brain_mask[i];
      const Score local_kept = score(g, res.local_ppm, acq.local_field, kept_mask);
      const RobustRange total_range = robust_range(res.total_ppm, res.fit_mask);
      const RobustRange local_range = robust_range(res.local_ppm, res.local_mask);
      const double given = static_cast<double>(voxels(res.mask)), fit = static_cast<double>(voxels(res.fit_mask)),
                   kept = static_cast<double>(voxels(res.local_mask));
      std::string warnings = "[";
      for (size_t k = 0; k < res.warnings.size(); ++k) warnings += (k ? ", " : "") + json_string(res.warnings[k]);
      warnings += "]";
      for (const auto& m : methods_asked) {
        const MethodInfo& info = method_info(m);
        t0 = Clock::now();
        const std::vector<float> chi = run_method(info.method, g, res.local_ppm, res.local_mask,
                                                  std::span<const float>(acq.magnitude.data(), g.voxel_count()),
                                                  MethodParams{}, threads);
        const double method_s = since(t0);
        const Score c = score(g, chi, acq.brain_chi, eval);
        out << (first_row ? "" : ", ") << "\n  {\"background\": \"" << bg << "\", \"method\": \"" << m
            << "\", \"localR\": " << num(local.r) << ", \"localNrmse\": " << num(local.nrmse)
            << ", \"localRKept\": " << num(local_kept.r) << ", \"keptVoxels\": " << voxels(kept_mask)
            << ", \"chiR\": " << num(c.r) << ", \"chiNrmse\": " << num(c.nrmse) << ", \"evalVoxels\": " << eval_voxels
            << ", \"backgroundSeconds\": " << num(pipeline_s) << ", \"methodSeconds\": " << num(method_s)
            << ", \"totalP1\": " << num(total_range.p1) << ", \"totalP99\": " << num(total_range.p99)
            << ", \"localP1\": " << num(local_range.p1) << ", \"localP99\": " << num(local_range.p99)
            << ", \"fitLeftOut\": " << num(1.0 - fit / given) << ", \"backgroundLeftOut\": " << num(1.0 - kept / fit)
            << ", \"warnings\": " << warnings << "}";
        first_row = false;
        std::cerr << "  " << bg << " + " << m << ": local r " << num(local.r) << ", chi r " << num(c.r) << " ("
                  << num(pipeline_s) << " s + " << num(method_s) << " s)\n";
      }
    }
    out << "]}\n";
    std::cout << out.str();
  } catch (const Error& e) {
    std::cerr << "tessera_background_study: " << error_code_name(e.code()) << ": " << e.what() << "\n";
    return 1;
  }
  return 0;
}

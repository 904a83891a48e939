// One head of the background-removal study (bench/background-study.js drives it, one process per head): simulates a
// multi-echo GRE scan of a varied phantom head (make_acquisition with head_variation), runs the pipeline (tessera/
// pipeline.h: echo fit, then each background removal asked for, no inversion) and then each inversion on its local
// field and local mask (run_method: the call the pipeline's inversion stage makes), and prints one JSON object.
//
// Scores, inside the evaluation mask = the pipeline's local_mask ∩ the true brain mask eroded by --erode voxels
// (erode_mask_mm, a sphere): Pearson r and the demeaned NRMSE (QSM-CI: 100 · ‖(x − mean x) − (t − mean t)‖ / ‖t − mean t‖,
// both maps demeaned inside the mask, then compare_maps) of the local field against the true local field (the forward
// model of the brain's χ alone) and of χ against the brain's χ.
//
//   build/native/tessera_background_study --list-backgrounds
//   build/native/tessera_background_study --dims NX NY NZ [--voxel VX VY VZ] [--b0 BX BY BZ] [--seed S]
//        [--variation V] [--snr SNR] [--te-ms 4,8,12] [--backgrounds vsharp,pdf] [--methods rts,tv]
//        [--erode 5] [--mask given|magnitude] [--threads 2]
//
// --list-backgrounds prints the pipeline schema's "background" choices (JSON array): the default of --backgrounds.
// --mask given (default) hands the pipeline the true brain mask, so that the scores measure the background removal and
// the inversion, not the masking; magnitude lets the pipeline make its own from the first echo.
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

#include "tessera/common/error.h"
#include "tessera/common/morphology.h"
#include "tessera/common/schema.h"
#include "tessera/inversion/methods.h"
#include "tessera/networks/phase_networks.h"
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
            << "            [--erode 5] [--mask given|magnitude] [--threads 2]\n";
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
  bool have_dims = false;
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
    } else if (a == "--threads") {
      need(1);
      threads = static_cast<unsigned>(number(a, argv[++i]));
    } else {
      usage("unknown argument " + a);
    }
  }
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
    auto t0 = Clock::now();
    const PhantomAcquisition acq = make_acquisition(g, o);
    const double simulate_s = since(t0);
    const std::vector<uint8_t> eroded = erode_mask_mm(g, acq.brain_mask, erode);

    std::ostringstream out;
    out << "{\"dims\": [" << g.dims[0] << ", " << g.dims[1] << ", " << g.dims[2] << "], \"voxelMm\": ["
        << num(g.voxel_mm[0]) << ", " << num(g.voxel_mm[1]) << ", " << num(g.voxel_mm[2]) << "], \"b0Dir\": ["
        << num(g.b0_dir[0]) << ", " << num(g.b0_dir[1]) << ", " << num(g.b0_dir[2]) << "], \"seed\": " << seed
        << ", \"variation\": " << variation << ", \"snr\": " << num(snr) << ", \"echoes\": " << te_ms.size()
        << ", \"erode\": " << erode << ", \"mask\": \"" << (mask_given ? "given" : "magnitude")
        << "\", \"threads\": " << threads << ", \"simulateSeconds\": " << num(simulate_s) << ", \"runs\": [";
    bool first_row = true;
    for (const auto& bg : backgrounds) {
      PipelineRequest req;
      req.te_s = o.te_s;
      req.b0_tesla = o.b0_tesla;
      req.threads = threads;
      set_pipeline_choice(req, "background", bg);
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
            << ", \"chiR\": " << num(c.r) << ", \"chiNrmse\": " << num(c.nrmse) << ", \"evalVoxels\": " << eval_voxels
            << ", \"backgroundSeconds\": " << num(pipeline_s) << ", \"methodSeconds\": " << num(method_s) << "}";
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

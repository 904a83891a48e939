// The classical dipole inversions on the phantom head, natively: for each method (tessera/methods.h, default
// parameters = the schema's) and each thread count, the seconds of one run (start_method, every step, take_result) and
// r, NRMSE and HFEN of its χ against the phantom's brain χ truth inside the brain mask (tessera/fidelity.h
// compare_maps, HFEN with LoG σ = 1.5 voxels). Both maps are DEMEANED inside the mask first (the dipole kernel is zero
// at k = 0, so no method recovers χ's mean); the JSON also holds the raw (not demeaned) NRMSE and HFEN.
//
// Input: make_acquisition(geometry) in-process (seed 1, defaults: 5 echoes 4-20 ms, 3 T, no noise): its LOCAL field
// (ppm, the brain's own field; background removal is measured elsewhere) inside the brain mask, the echo-1 magnitude
// for MEDI and TFI, the brain χ as the truth; TFI (MethodInfo::total_field) gets the TOTAL field instead. tessera_phantom --local-out/--chi-out/--mask-out/--magnitude-out writes the same
// volumes (bench/classical.js reads those).
//
//   build/native/tessera_methods_bench [--dims 160,192,144] [--voxel 1,1,1] [--methods tkd,tsvd,...] [--threads 1,2]
//        [--repeats 1] [--time-limit 600] [--json out.json] [--chi-out DIR]
//
// --time-limit S: a run still going after S seconds is stopped between two steps; its row gives the seconds per step
// and the projection to the planned steps (complete: false) and no fidelity.
// --chi-out DIR: writes each method's χ (1 thread) as DIR/<method>.f32 (raw float32, x fastest) for the JS driver.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "tessera/common/error.h"
#include "tessera/quality/fidelity.h"
#include "tessera/inversion/methods.h"
#include "tessera/sim/phantom.h"

using namespace tessera;
using Clock = std::chrono::steady_clock;

namespace {

double since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

std::vector<std::string> split(const std::string& s, char sep) {
  std::vector<std::string> out;
  std::stringstream ss(s);
  for (std::string item; std::getline(ss, item, sep);)
    if (!item.empty()) out.push_back(item);
  return out;
}

[[noreturn]] void usage(const std::string& why) {
  std::fprintf(stderr,
               "tessera_methods_bench: %s\nusage: tessera_methods_bench [--dims X,Y,Z] [--voxel X,Y,Z] [--methods a,b]"
               " [--threads 1,2] [--repeats N] [--time-limit S] [--json FILE] [--chi-out DIR]\n",
               why.c_str());
  std::exit(2);
}

// v minus its mean inside the mask, zero outside.
std::vector<float> demeaned(std::span<const float> v, std::span<const uint8_t> mask) {
  double s = 0;
  uint64_t n = 0;
  for (size_t i = 0; i < v.size(); ++i)
    if (mask[i]) s += v[i], ++n;
  const double m = n ? s / n : 0.0;
  std::vector<float> out(v.size(), 0.0f);
  for (size_t i = 0; i < v.size(); ++i)
    if (mask[i]) out[i] = static_cast<float>(v[i] - m);
  return out;
}

std::string host_cpu() {
  std::ifstream f("/proc/cpuinfo");
  for (std::string line; std::getline(f, line);)
    if (line.rfind("model name", 0) == 0) return line.substr(line.find(':') + 2);
  return "unknown CPU";
}

std::string loadavg() {
  std::ifstream f("/proc/loadavg");
  double a = 0, b = 0, c = 0;
  f >> a >> b >> c;
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.2f %.2f %.2f", a, b, c);
  return buf;
}

struct Row {
  std::string method;
  unsigned threads = 1;
  int repeat = 0;
  double seconds = 0;      // the run; projected to every planned step when incomplete
  double measured = 0;     // seconds actually run
  uint32_t steps = 0, planned = 0;
  bool complete = true;
  Agreement demeaned, raw;
  uint64_t plan_module_heap = 0;  // the wasm plan of this run (for the table's heap column)
};

}  // namespace

int main(int argc, char** argv) {
  Geometry g;
  g.dims = {160, 192, 144};
  std::vector<std::string> names;
  std::vector<unsigned> threads{1, 2};
  int repeats = 1;
  double time_limit = 600;
  std::string json_path, chi_dir;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto next = [&]() -> std::string {
      if (i + 1 >= argc) usage(a + " needs a value");
      return argv[++i];
    };
    if (a == "--dims" || a == "--voxel") {
      const auto v = split(next(), ',');
      if (v.size() != 3) usage(a + " takes X,Y,Z");
      for (int k = 0; k < 3; ++k) {
        if (a == "--dims") g.dims[k] = std::stoll(v[k]);
        else g.voxel_mm[k] = std::stod(v[k]);
      }
    } else if (a == "--methods") {
      names = split(next(), ',');
    } else if (a == "--threads") {
      threads.clear();
      for (const auto& t : split(next(), ',')) threads.push_back(static_cast<unsigned>(std::stoul(t)));
    } else if (a == "--repeats") {
      repeats = std::max(1, std::stoi(next()));
    } else if (a == "--time-limit") {
      time_limit = std::stod(next());
    } else if (a == "--json") {
      json_path = next();
    } else if (a == "--chi-out") {
      chi_dir = next();
    } else if (a == "--help" || a == "-h") {
      usage("help");
    } else {
      usage("unknown option " + a);
    }
  }
  if (names.empty())
    for (const MethodInfo& m : methods()) names.emplace_back(m.name);

  try {
    const auto t0 = Clock::now();
    AcquisitionOptions ao;
    ao.threads = std::max(1u, std::thread::hardware_concurrency());
    const PhantomAcquisition acq = make_acquisition(g, ao);
    const uint64_t n = g.voxel_count();
    const std::span<const float> field(acq.local_field), truth(acq.brain_chi), magnitude(acq.magnitude.data(), n);
    const std::span<const uint8_t> mask(acq.brain_mask);
    const std::vector<float> truth_dm = demeaned(truth, mask);
    uint64_t in_mask = 0;
    for (uint8_t m : acq.brain_mask) in_mask += m;
    std::printf("tessera_methods_bench, native, %s x %u, phantom %lldx%lldx%lld at %gx%gx%g mm (%.2f M voxels, %.2f M in "
                "the brain mask), made in %.1f s; load %s\n",
                host_cpu().c_str(), std::thread::hardware_concurrency(), static_cast<long long>(g.dims[0]),
                static_cast<long long>(g.dims[1]), static_cast<long long>(g.dims[2]), g.voxel_mm[0], g.voxel_mm[1],
                g.voxel_mm[2], n / 1e6, in_mask / 1e6, since(t0), loadavg().c_str());
    std::printf("| method | threads | s | steps | r | NRMSE | HFEN | NRMSE raw | HFEN raw | wasm plan MB |\n"
                "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n");
    std::fflush(stdout);
    std::vector<Row> rows;
    const MethodParams params;  // the schema's defaults
    for (const std::string& name : names) {
      const MethodInfo& info = method_info(name);
      for (unsigned t : threads) {
        for (int rep = 0; rep < repeats; ++rep) {
          Row row;
          row.method = name;
          row.threads = t;
          row.repeat = rep;
          row.plan_module_heap =
              plan_method(info.method, g, params, t, info.needs_magnitude ? 1 : 0, Target::Wasm).module_heap_bytes;
          const auto s0 = Clock::now();
          // a total-field method (TFI) gets the total field (the head in air) on the brain mask
          auto c = start_method(info.method, g, info.total_field ? std::span<const float>(acq.total_field) : field, mask,
                                info.needs_magnitude ? magnitude : std::span<const float>{},
                                params, t);
          row.planned = c->total_steps();
          while (!c->finished() && since(s0) < time_limit) c->step();
          row.steps = c->steps_done();
          row.complete = c->finished();
          std::vector<float> chi;
          if (row.complete) chi = c->take_result();
          row.measured = since(s0);
          c.reset();
          row.seconds = row.complete ? row.measured : row.measured / std::max<uint32_t>(1, row.steps) * row.planned;
          if (row.complete) {
            const std::vector<float> chi_dm = demeaned(chi, mask);
            row.demeaned = compare_maps(g, chi_dm, truth_dm, mask, {0, 0, 0}, {0, 0, 0}, true);
            row.raw = compare_maps(g, chi, truth, mask, {0, 0, 0}, {0, 0, 0}, true);
            if (!chi_dir.empty() && rep == 0 && t == threads.front()) {
              std::ofstream f(chi_dir + "/" + name + ".f32", std::ios::binary);
              f.write(reinterpret_cast<const char*>(chi.data()), static_cast<std::streamsize>(chi.size() * sizeof(float)));
            }
            std::printf("| %s | %u | %.3f | %u | %.4f | %.3f | %.3f | %.3f | %.3f | %.0f |\n", name.c_str(), t,
                        row.seconds, row.steps, row.demeaned.r, row.demeaned.nrmse, row.demeaned.hfen, row.raw.nrmse,
                        row.raw.hfen, row.plan_module_heap / 1e6);
          } else {
            std::printf("| %s | %u | %.1f (projected: %u of %u steps in %.1f s, %.3f s/step) | %u | - | - | - | - | - | %.0f |\n",
                        name.c_str(), t, row.seconds, row.steps, row.planned, row.measured,
                        row.measured / std::max<uint32_t>(1, row.steps), row.steps, row.plan_module_heap / 1e6);
          }
          std::fflush(stdout);
          rows.push_back(row);
        }
      }
    }
    std::printf("load at end %s\n", loadavg().c_str());
    if (!json_path.empty()) {
      std::ofstream f(json_path);
      f << "{\n \"runtime\": \"native\",\n \"cpu\": \"" << host_cpu() << "\",\n \"cores\": "
        << std::thread::hardware_concurrency() << ",\n \"dims\": [" << g.dims[0] << ", " << g.dims[1] << ", " << g.dims[2]
        << "],\n \"voxelMm\": [" << g.voxel_mm[0] << ", " << g.voxel_mm[1] << ", " << g.voxel_mm[2]
        << "],\n \"demeaned\": true,\n \"load\": \"" << loadavg() << "\",\n \"rows\": [";
      for (size_t i = 0; i < rows.size(); ++i) {
        const Row& r = rows[i];
        char buf[768];
        std::snprintf(buf, sizeof buf,
                      "%s\n  {\"method\": \"%s\", \"threads\": %u, \"repeat\": %d, \"seconds\": %.4f, \"measuredSeconds\": "
                      "%.4f, \"steps\": %u, \"plannedSteps\": %u, \"complete\": %s, \"r\": %.6f, \"nrmse\": %.6f, "
                      "\"hfen\": %.6f, \"rawNrmse\": %.6f, \"rawHfen\": %.6f, \"wasmPlanModuleHeapBytes\": %llu}",
                      i ? "," : "", r.method.c_str(), r.threads, r.repeat, r.seconds, r.measured, r.steps, r.planned,
                      r.complete ? "true" : "false", r.demeaned.r, r.demeaned.nrmse, r.demeaned.hfen, r.raw.nrmse,
                      r.raw.hfen, static_cast<unsigned long long>(r.plan_module_heap));
        f << buf;
      }
      f << "\n ]\n}\n";
    }
  } catch (const Error& e) {
    std::fprintf(stderr, "tessera_methods_bench: %s: %s\n", error_code_name(e.code()), e.what());
    return 1;
  }
  return 0;
}

// Times and checks 3D complex FFTs (forward + inverse) for Tessera's volumes: the FFT that src/fft.cpp ships
// ("tessera"), the Eigen/kissfft line transforms it shipped before ("kissfft"), pocketfft's own multi-axis c2c
// ("pocketfft-nd", one thread) and its real-to-complex r2c + c2r pair ("pocketfft-r2c", one thread: the half-work
// lever for real volumes). Results and the decision: bench/FFT.md.
// Prints one markdown row per (candidate, size, threads): median / min / max ms of `--reps` forward+inverse pairs,
// after the accuracy table (max error against a separable double-precision DFT, the round trip, and a hash of the
// forward result's bits to compare targets).
// Not built by CMake. From the repository root (the wasm output goes outside the repository: its package.json
// says "type": "module" and the generated .js is CommonJS):
//   native: g++ -std=c++20 -O3 -DNDEBUG -ffp-contract=off -Isrc/include -Isrc -isystem /usr/include/eigen3
//             bench/fft_bench.cpp src/fft.cpp src/error.cpp -pthread -o /tmp/fft_bench && /tmp/fft_bench
//   wasm:   export NODE_PATH=/usr/share/nodejs; em++ -std=c++20 -O3 -DNDEBUG -msimd128 -pthread -fexceptions
//             -ffp-contract=off -Isrc/include -Isrc -isystem /usr/include/eigen3 bench/fft_bench.cpp src/fft.cpp
//             src/error.cpp -sALLOW_MEMORY_GROWTH=1 -sMAXIMUM_MEMORY=4GB -sMALLOC=emmalloc -sPTHREAD_POOL_SIZE=4
//             -sEXIT_RUNTIME=1 -Wno-pthreads-mem-growth -o /tmp/fft_bench.js && node --no-experimental-fetch /tmp/fft_bench.js
// Options: --reps N (3), --threads 1,2, --sizes 64x64x64,160x192x144 (default: the four of FFT.md),
//          --only tessera,kissfft (candidates), --no-accuracy.
// Needs Debian's libeigen3-dev and python3-pythran (pocketfft's header).
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <complex>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include <unsupported/Eigen/FFT>

#include "tessera/common/fft.h"

#define POCKETFFT_NO_MULTITHREADING
#include "/usr/lib/python3/dist-packages/pythran/pythonic/numpy/fft/pocketfft.hpp"

namespace {

using tessera::Complex;
using tessera::Dims3;

uint64_t voxels(const Dims3& d) { return uint64_t(d[0]) * uint64_t(d[1]) * uint64_t(d[2]); }

// kissfft through Eigen's FFT module, 16 strided lines gathered per item, threads over items: src/fft.cpp before
// the switch, kept here as the baseline.
void kiss_axis(Complex* base, const Dims3& dims, int axis, bool inverse, unsigned threads) {
  const uint64_t n = uint64_t(dims[axis]);
  if (n == 1) return;
  uint64_t inner = 1, outer = 1;
  for (int a = 0; a < axis; ++a) inner *= uint64_t(dims[a]);
  for (int a = axis + 1; a < 3; ++a) outer *= uint64_t(dims[a]);
  const uint64_t batch = std::min<uint64_t>(16, inner);
  const uint64_t blocks_per_outer = (inner + batch - 1) / batch;
  const uint64_t items = outer * blocks_per_outer;
  const uint64_t chunk = std::max<uint64_t>(1, items / (uint64_t(threads) * 8 + 1));
  std::atomic<uint64_t> next{0};
  auto work = [&]() {
    Eigen::FFT<float> fft;
    fft.SetFlag(Eigen::FFT<float>::Unscaled);
    std::vector<Complex> lines(batch * n), out(n);
    const int nfft = int(n);
    for (;;) {
      const uint64_t first = next.fetch_add(chunk);
      if (first >= items) break;
      for (uint64_t item = first; item < std::min(items, first + chunk); ++item) {
        const uint64_t o = item / blocks_per_outer, i0 = (item % blocks_per_outer) * batch;
        const uint64_t nb = std::min(batch, inner - i0);
        Complex* start = base + o * n * inner + i0;
        if (inner == 1) {
          if (inverse) fft.inv(out.data(), start, nfft); else fft.fwd(out.data(), start, nfft);
          std::copy(out.begin(), out.end(), start);
          continue;
        }
        for (uint64_t k = 0; k < n; ++k)
          for (uint64_t b = 0; b < nb; ++b) lines[b * n + k] = start[k * inner + b];
        for (uint64_t b = 0; b < nb; ++b) {
          Complex* line = lines.data() + b * n;
          if (inverse) fft.inv(out.data(), line, nfft); else fft.fwd(out.data(), line, nfft);
          std::copy(out.begin(), out.end(), line);
        }
        for (uint64_t k = 0; k < n; ++k)
          for (uint64_t b = 0; b < nb; ++b) start[k * inner + b] = lines[b * n + k];
      }
    }
  };
  std::vector<std::thread> pool;
  for (unsigned t = 1; t < threads; ++t) pool.emplace_back(work);
  work();
  for (auto& t : pool) t.join();
}

void kiss_3d(std::vector<Complex>& v, const Dims3& d, bool inverse, unsigned threads) {
  const unsigned t = unsigned(std::min<uint64_t>(threads, std::max<uint64_t>(1, voxels(d) >> 15)));
  for (int a = 0; a < 3; ++a) kiss_axis(v.data(), d, a, inverse, t);
  if (inverse) {
    const float s = float(1.0 / double(voxels(d)));
    for (auto& x : v) x *= s;
  }
}

pocketfft::shape_t shape_of(const Dims3& d) { return {size_t(d[2]), size_t(d[1]), size_t(d[0])}; }

pocketfft::stride_t strides_of(const pocketfft::shape_t& s, size_t elem) {
  return {ptrdiff_t(s[1] * s[2] * elem), ptrdiff_t(s[2] * elem), ptrdiff_t(elem)};
}

void pocket_nd(std::vector<Complex>& v, const Dims3& d, bool inverse) {
  const auto shape = shape_of(d);
  const auto st = strides_of(shape, sizeof(Complex));
  const float fct = inverse ? float(1.0 / double(voxels(d))) : 1.0f;
  pocketfft::c2c(shape, st, st, {0, 1, 2}, !inverse, v.data(), v.data(), fct, 1);
}

// A candidate: forward then inverse of the volume in place (the real-input one takes the real parts).
struct Candidate {
  const char* name;
  bool threaded;
  std::function<void(std::vector<Complex>&, const Dims3&, unsigned)> pair;
  std::function<void(std::vector<Complex>&, const Dims3&, bool, unsigned)> one_way;  // null: no accuracy row
};

std::vector<Candidate> candidates() {
  std::vector<Candidate> c;
  c.push_back({"tessera", true,
               [](std::vector<Complex>& v, const Dims3& d, unsigned t) {
                 tessera::fft3d_forward(v, d, t);
                 tessera::fft3d_inverse(v, d, t);
               },
               [](std::vector<Complex>& v, const Dims3& d, bool inv, unsigned t) {
                 if (inv) tessera::fft3d_inverse(v, d, t); else tessera::fft3d_forward(v, d, t);
               }});
  c.push_back({"kissfft", true,
               [](std::vector<Complex>& v, const Dims3& d, unsigned t) {
                 kiss_3d(v, d, false, t);
                 kiss_3d(v, d, true, t);
               },
               [](std::vector<Complex>& v, const Dims3& d, bool inv, unsigned t) { kiss_3d(v, d, inv, t); }});
  c.push_back({"pocketfft-nd", false,
               [](std::vector<Complex>& v, const Dims3& d, unsigned) {
                 pocket_nd(v, d, false);
                 pocket_nd(v, d, true);
               },
               [](std::vector<Complex>& v, const Dims3& d, bool inv, unsigned) { pocket_nd(v, d, inv); }});
  c.push_back({"pocketfft-r2c", false,
               [](std::vector<Complex>& v, const Dims3& d, unsigned) {
                 // real in (x-fastest), half spectrum out (nx/2+1 along x), back to real.
                 const auto shape = shape_of(d);
                 const uint64_t hx = uint64_t(d[0]) / 2 + 1;
                 static thread_local std::vector<float> re;
                 static thread_local std::vector<Complex> half;
                 re.resize(voxels(d));
                 half.resize(hx * uint64_t(d[1]) * uint64_t(d[2]));
                 for (uint64_t i = 0; i < re.size(); ++i) re[i] = v[i].real();
                 const pocketfft::shape_t hshape{shape[0], shape[1], size_t(hx)};
                 pocketfft::r2c(shape, strides_of(shape, sizeof(float)), strides_of(hshape, sizeof(Complex)),
                                {0, 1, 2}, true, re.data(), half.data(), 1.0f, 1);
                 pocketfft::c2r(shape, strides_of(hshape, sizeof(Complex)), strides_of(shape, sizeof(float)),
                                {0, 1, 2}, false, half.data(), re.data(), float(1.0 / double(voxels(d))), 1);
                 for (uint64_t i = 0; i < re.size(); ++i) v[i] = Complex(re[i], 0.0f);
               },
               nullptr});
  return c;
}

std::vector<Complex> random_volume(const Dims3& d, uint64_t seed) {
  std::vector<Complex> v(voxels(d));
  uint64_t s = seed;
  auto next = [&]() {
    s = s * 6364136223846793005ull + 1442695040888963407ull;
    return float(double(s >> 40) / double(1ull << 24)) - 0.5f;
  };
  for (auto& x : v) x = Complex(next(), next());
  return v;
}

// Separable DFT in double (exact twiddles from k*x mod n): the 3D DFT, axis by axis.
std::vector<std::complex<double>> reference_dft(const std::vector<Complex>& v, const Dims3& d, double sign) {
  std::vector<std::complex<double>> a(v.begin(), v.end()), line;
  const double two_pi = 2.0 * std::acos(-1.0);
  uint64_t inner = 1;
  for (int axis = 0; axis < 3; ++axis) {
    const uint64_t n = uint64_t(d[axis]), outer = voxels(d) / (n * inner);
    std::vector<std::complex<double>> w(n);
    for (uint64_t k = 0; k < n; ++k) w[k] = std::polar(1.0, sign * two_pi * double(k) / double(n));
    line.resize(n);
    for (uint64_t o = 0; o < outer; ++o)
      for (uint64_t i = 0; i < inner; ++i) {
        std::complex<double>* p = a.data() + o * n * inner + i;
        for (uint64_t k = 0; k < n; ++k) {
          std::complex<double> acc = 0.0;
          for (uint64_t x = 0; x < n; ++x) acc += p[x * inner] * w[(k * x) % n];
          line[k] = acc;
        }
        for (uint64_t k = 0; k < n; ++k) p[k * inner] = line[k];
      }
    inner *= n;
  }
  return a;
}

uint64_t fnv1a(const std::vector<Complex>& v) {
  uint64_t h = 1469598103934665603ull;
  const unsigned char* p = reinterpret_cast<const unsigned char*>(v.data());
  for (size_t i = 0; i < v.size() * sizeof(Complex); ++i) h = (h ^ p[i]) * 1099511628211ull;
  return h;
}

double now_ms() {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

std::vector<std::string> split(const std::string& s) {
  std::vector<std::string> out;
  size_t b = 0;
  for (;;) {
    const size_t e = s.find(',', b);
    out.push_back(s.substr(b, e == std::string::npos ? std::string::npos : e - b));
    if (e == std::string::npos) return out;
    b = e + 1;
  }
}

bool wanted(const std::vector<std::string>& only, const char* name) {
  return only.empty() || std::find(only.begin(), only.end(), name) != only.end();
}

}  // namespace

int main(int argc, char** argv) {
  int reps = 3;
  std::vector<unsigned> threads{1, 2};
  std::vector<Dims3> sizes{{64, 64, 64}, {160, 192, 144}, {256, 256, 176}, {320, 384, 288}};
  std::vector<std::string> only;
  bool accuracy = true;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    const std::string v = i + 1 < argc ? argv[i + 1] : "";
    if (a == "--reps") reps = std::atoi(v.c_str()), ++i;
    else if (a == "--threads") { threads.clear(); for (auto& t : split(v)) threads.push_back(unsigned(std::atoi(t.c_str()))); ++i; }
    else if (a == "--sizes") {
      sizes.clear();
      for (auto& s : split(v)) {
        long long x = 0, y = 0, z = 0;
        if (std::sscanf(s.c_str(), "%lldx%lldx%lld", &x, &y, &z) != 3 || x < 1 || y < 1 || z < 1) {
          std::fprintf(stderr, "fft_bench: bad size '%s' (want NXxNYxNZ, each at least 1)\n", s.c_str());
          return 2;
        }
        const Dims3 d{x, y, z};
        sizes.push_back(d);
      }
      ++i;
    } else if (a == "--only") only = split(v), ++i;
    else if (a == "--no-accuracy") accuracy = false;
    else {
      std::fprintf(stderr, "fft_bench: unknown option %s\n", a.c_str());
      return 2;
    }
  }
#ifdef __EMSCRIPTEN__
  const char* target = "wasm";
#else
  const char* target = "native";
#endif
  const auto cands = candidates();

  if (accuracy) {
    std::printf("| target | candidate | size | max rel. error fwd | max rel. error inv | round trip max abs | "
                "forward bits (FNV-1a) |\n");
    std::printf("|---|---|---|---|---|---|---|\n");
    for (const Dims3& d : {Dims3{30, 28, 22}, Dims3{17, 19, 13}, Dims3{64, 48, 44}}) {
      const auto v = random_volume(d, 5);
      const auto fref = reference_dft(v, d, -1.0), iref = reference_dft(v, d, +1.0);
      double fmax = 0.0;
      for (auto& x : fref) fmax = std::max(fmax, std::abs(x));
      for (const auto& c : cands) {
        if (!c.one_way || !wanted(only, c.name)) continue;
        auto f = v, g = v;
        c.one_way(f, d, false, 1);
        c.one_way(g, d, true, 1);
        double ferr = 0.0, ierr = 0.0, rt = 0.0;
        for (size_t i = 0; i < v.size(); ++i) {
          ferr = std::max(ferr, std::abs(std::complex<double>(f[i]) - fref[i]));
          ierr = std::max(ierr, std::abs(std::complex<double>(g[i]) - iref[i] / double(v.size())));
        }
        const uint64_t hash = fnv1a(f);  // the forward result's bits: equal natively and in wasm?
        c.one_way(f, d, true, 1);
        for (size_t i = 0; i < v.size(); ++i) rt = std::max(rt, double(std::abs(f[i] - v[i])));
        std::printf("| %s | %s | %lldx%lldx%lld | %.2e | %.2e | %.2e | %016llx |\n", target, c.name, (long long)d[0],
                    (long long)d[1], (long long)d[2], ferr / fmax, ierr / (fmax / double(v.size())), rt,
                    (unsigned long long)hash);
      }
    }
    std::printf("\n");
  }

  std::printf("| target | candidate | size | threads | median ms | min ms | max ms |\n|---|---|---|---|---|---|---|\n");
  for (const Dims3& d : sizes) {
    const auto v = random_volume(d, 1);
    auto w = v;
    for (const auto& c : cands) {
      if (!wanted(only, c.name)) continue;
      for (unsigned t : threads) {
        if (!c.threaded && t != 1) continue;
        std::copy(v.begin(), v.end(), w.begin());
        c.pair(w, d, t);  // warm-up: page faults, plans
        std::vector<double> ms;
        for (int r = 0; r < reps; ++r) {
          const double t0 = now_ms();
          c.pair(w, d, t);
          ms.push_back(now_ms() - t0);
        }
        std::sort(ms.begin(), ms.end());
        std::printf("| %s | %s | %lldx%lldx%lld | %u | %.1f | %.1f | %.1f |\n", target, c.name, (long long)d[0],
                    (long long)d[1], (long long)d[2], t, ms[ms.size() / 2], ms.front(), ms.back());
        std::fflush(stdout);
      }
    }
  }
  return 0;
}

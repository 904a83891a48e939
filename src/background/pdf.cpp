#include "tessera/background/pdf.h"

#include <algorithm>
#include <cmath>
#include <string>

#include "background/support.h"
#include "common/message_number.h"
#include "common/conjugate_gradient.h"
#include "common/parallel.h"
#include "tessera/common/error.h"
#include "tessera/background/options.h"
#include "tessera/common/dipole.h"
#include "tessera/common/fft.h"

namespace tessera {

namespace bgi = background_internal;

// ---------------------------------------------------------------------------------------------------------------
// PDF
// ---------------------------------------------------------------------------------------------------------------

void validate(const PdfParams& p) {
  checked_option(background_options(), "pdf.maxIterations", p.max_iterations);
  // The CG tolerance is no request option: its range is the method's own.
  if (!(p.tolerance > 0.0 && p.tolerance < 1.0)) {
    bgi::invalid("pdf: tolerance must be in (0, 1) (a relative residual; 1e-5 is customary), got " +
            message_number(p.tolerance));
  }
  checked_option(background_options(), "pdf.padVoxels", p.pad_voxels);
}

namespace {

Dims3 pdf_padded(const Dims3& ext, uint32_t pad) {
  Dims3 p;
  for (int a = 0; a < 3; ++a) p[a] = fast_fft_size(ext[a] + static_cast<int64_t>(pad));
  return p;
}

}  // namespace

struct Pdf::State {
  Geometry g;
  Geometry pg;  // the padded box
  std::span<const float> field;
  std::span<const uint8_t> mask;
  std::span<const float> weights;
  PdfParams params;
  unsigned threads = 1;
  MaskBox box;
  std::vector<float> kernel;    // dipole kernel of the padded box
  std::vector<float> w2;        // W² inside the mask, 0 elsewhere
  std::vector<uint8_t> source;  // 1 outside the mask (the padding included): where background sources may sit
  std::vector<float> x, r, p, q;
  std::vector<Complex> c;
  double rr = 0.0, b_norm = 0.0, relative = 1.0;
  uint32_t done = 0;
  bool finished = false, taken = false;
  LocalField result;

  // out = real(ifft(D · fft(in))) with in given elementwise by load(i).
  template <typename Load, typename Store>
  void convolve(Load&& load, Store&& store) {
    const uint64_t n = c.size();
    parallel_for(n, threads, [&](uint64_t b, uint64_t e) {
      for (uint64_t i = b; i < e; ++i) c[i] = Complex(load(i), 0.0f);
    });
    fft3d_forward(c, pg.dims, threads);
    parallel_for(n, threads, [&](uint64_t b, uint64_t e) {
      for (uint64_t i = b; i < e; ++i) c[i] *= kernel[i];
    });
    fft3d_inverse(c, pg.dims, threads);
    parallel_for(n, threads, [&](uint64_t b, uint64_t e) {
      for (uint64_t i = b; i < e; ++i) store(i, c[i].real());
    });
  }

  // q = M̄ D W² D M̄ p
  void apply_normal() {
    convolve([&](uint64_t i) { return source[i] ? p[i] : 0.0f; }, [&](uint64_t i, float v) { q[i] = w2[i] * v; });
    convolve([&](uint64_t i) { return q[i]; }, [&](uint64_t i, float v) { q[i] = source[i] ? v : 0.0f; });
  }

  void finish() {
    // background = D M̄ x; local = f − background inside the mask.
    convolve([&](uint64_t i) { return source[i] ? x[i] : 0.0f; }, [&](uint64_t i, float v) { q[i] = v; });
    result.field.assign(static_cast<size_t>(g.voxel_count()), 0.0f);
    result.mask.assign(static_cast<size_t>(g.voxel_count()), 0);
    bgi::for_each_box_voxel(g, box, pg.dims, [&](uint64_t vi, uint64_t pi) {
      if (mask[vi]) {
        result.field[vi] = field[vi] - q[pi];
        result.mask[vi] = 1;
      }
    });
    for (auto* v : {&x, &r, &p, &q, &w2, &kernel}) std::vector<float>().swap(*v);
    std::vector<Complex>().swap(c);
    std::vector<uint8_t>().swap(source);
    finished = true;
  }
};

Pdf::Pdf(const Geometry& g, std::span<const float> field, std::span<const uint8_t> mask, std::span<const float> weights,
         const PdfParams& params, unsigned threads)
    : state_(std::make_unique<State>()) {
  bgi::check_inputs("pdf", g, field, mask);
  validate(params);
  if (!weights.empty()) {
    if (weights.size() != g.voxel_count()) {
      bgi::invalid("pdf: weights hold " + std::to_string(weights.size()) + " values but the volume " + dims_text(g.dims) +
              " has " + std::to_string(g.voxel_count()) + " voxels (or give none: 1 inside the mask)");
    }
    bool any = false;
    for (uint64_t i = 0; i < weights.size(); ++i) {
      if (!mask[i]) continue;
      if (!(weights[i] >= 0.0f && std::isfinite(weights[i]))) {
        bgi::invalid("pdf: weights must be finite and >= 0 inside the mask, got " + message_number(weights[i]) +
                " at index " + std::to_string(i));
      }
      any = any || weights[i] > 0.0f;
    }
    if (!any) bgi::invalid("pdf: every weight inside the mask is 0: no voxel constrains the fit; give positive weights");
  }
  State& s = *state_;
  s.g = g;
  s.field = field;
  s.mask = mask;
  s.weights = weights;
  s.params = params;
  s.threads = threads;
  s.box = mask_box(g, mask);
  s.pg = g;
  s.pg.dims = pdf_padded(s.box.ext(), params.pad_voxels);
  validate_geometry(s.pg);
}

Pdf::~Pdf() = default;

uint32_t Pdf::total_steps() const { return state_->params.max_iterations; }
uint32_t Pdf::steps_done() const { return state_->done; }
bool Pdf::finished() const { return state_->finished; }
std::string Pdf::name() const { return "PDF"; }
double Pdf::relative_residual() const { return state_->relative; }

void Pdf::step() {
  if (finished()) throw Error(ErrorCode::Internal, "PDF: step() after the last step");
  State& s = *state_;
  const uint64_t n = s.pg.voxel_count();
  const unsigned t = s.threads;
  if (s.done == 0) {
    s.kernel = dipole_kernel(s.pg);
    s.w2.assign(static_cast<size_t>(n), 0.0f);
    s.source.assign(static_cast<size_t>(n), 1);
    bgi::for_each_box_voxel(s.g, s.box, s.pg.dims, [&](uint64_t vi, uint64_t pi) {
      if (!s.mask[vi]) return;
      const float w = s.weights.empty() ? 1.0f : s.weights[vi];
      s.w2[pi] = w * w;
      s.source[pi] = 0;
    });
    s.x.assign(static_cast<size_t>(n), 0.0f);
    s.r.assign(static_cast<size_t>(n), 0.0f);
    s.q.assign(static_cast<size_t>(n), 0.0f);
    s.c.resize(static_cast<size_t>(n));
    // b = M̄ D W² f, the residual of x = 0.
    bgi::for_each_box_voxel(s.g, s.box, s.pg.dims, [&](uint64_t vi, uint64_t pi) {
      if (s.mask[vi]) s.q[pi] = s.w2[pi] * s.field[vi];
    });
    s.convolve([&](uint64_t i) { return s.q[i]; }, [&](uint64_t i, float v) { s.r[i] = s.source[i] ? v : 0.0f; });
    s.p = s.r;
    s.rr = dot(s.r, s.r, t);
    s.b_norm = std::sqrt(s.rr);
    if (s.b_norm == 0.0) {  // no field a source outside could explain: the background is 0
      s.relative = 0.0;
      s.done = 1;
      s.finish();
      return;
    }
  }
  // One conjugate-gradient iteration on M̄ D W² D M̄ x = b.
  s.apply_normal();
  const bool stop = plain_cg_iteration(s.x, s.r, s.p, s.q, s.rr, t, [&](double rr_new) {
    s.relative = std::sqrt(rr_new) / s.b_norm;
    return s.relative < s.params.tolerance;
  });
  ++s.done;
  if (stop || s.done >= s.params.max_iterations) s.finish();
}

LocalField Pdf::take_result() {
  if (!finished() || state_->taken) throw Error(ErrorCode::Internal, "PDF: take_result() before the last step or twice");
  state_->taken = true;
  return std::move(state_->result);
}

LocalField pdf(const Geometry& g, std::span<const float> field, std::span<const uint8_t> mask,
               std::span<const float> weights, const PdfParams& params, unsigned threads,
               const std::function<void(uint64_t, uint64_t)>& progress, const std::atomic<bool>* cancel) {
  Pdf solver(g, field, mask, weights, params, threads);
  run_to_end(solver, progress, cancel);
  return solver.take_result();
}

uint64_t pdf_workspace_bytes(const Geometry& g, const PdfParams& params, unsigned threads) {
  validate_geometry(g);
  validate(params);
  const Dims3 padded = pdf_padded(g.dims, params.pad_voxels);
  const uint64_t n = bgi::count(padded), v = g.voxel_count();
  // kernel, W², x, r, p, q (floats), the source mask, one complex volume, the result, FFT scratch
  return n * (6 * sizeof(float) + 1 + sizeof(Complex)) + v * (sizeof(float) + 1) +
         fft3d_workspace_bytes(padded, threads);
}

}  // namespace tessera

#include "tessera/inversion/methods.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <string>

#include "tessera/inversion/closed_form.h"
#include "tessera/common/dipole.h"
#include "tessera/common/error.h"
#include "tessera/common/input_checks.h"
#include "tessera/common/schema.h"
#include "tessera/inversion/ilsqr.h"
#include "tessera/inversion/medi.h"
#include "tessera/inversion/ndi.h"
#include "tessera/inversion/rts.h"
#include "tessera/inversion/tfi.h"
#include "tessera/inversion/tv_admm.h"

namespace tessera {

namespace {

// The methods' papers, each named once.
constexpr Citation kShmueli2009{"Shmueli et al. 2009",
                                "Shmueli K, de Zwart JA, van Gelderen P, et al. Magnetic susceptibility mapping of brain tissue "
                                "in vivo using MRI phase data. Magn Reson Med 2009;62:1510-1522."};
constexpr Citation kWharton2010{"Wharton et al. 2010",
                                "Wharton S, Schafer A, Bowtell R. Susceptibility mapping in the human brain using "
                                "threshold-based k-space division. Magn Reson Med 2010;63:1292-1304."};
constexpr Citation kBilgic2014{"Bilgic et al. 2014",
                               "Bilgic B, Fan AP, Polimeni JR, et al. Fast quantitative susceptibility mapping with "
                               "L1-regularization and automatic parameter selection. Magn Reson Med 2014;72:1444-1459."};
constexpr Citation kMilovic2018{"Milovic et al. 2018",
                                "Milovic C, Bilgic B, Zhao B, Acosta-Cabronero J, Tejos C. Fast nonlinear susceptibility "
                                "inversion with variational regularization. Magn Reson Med 2018;80:814-821."};
constexpr Citation kKames2018{"Kames et al. 2018",
                              "Kames C, Wiggermann V, Rauscher A. Rapid two-step dipole inversion for susceptibility mapping "
                              "with sparsity priors. NeuroImage 2018;167:276-283."};
constexpr Citation kLi2015{"Li et al. 2015",
                           "Li W, Wang N, Yu F, et al. A method for estimating and removing streaking artifacts in "
                           "quantitative susceptibility mapping. NeuroImage 2015;108:111-122."};
constexpr Citation kPolak2020{"Polak et al. 2020",
                              "Polak D, Chatnuntawech I, Yoon J, et al. Nonlinear dipole inversion (NDI) enables robust "
                              "quantitative susceptibility mapping (QSM). NMR Biomed 2020;33:e4271."};
constexpr Citation kLiu2012{"Liu et al. 2012",
                            "Liu J, Liu T, de Rochefort L, et al. Morphology enabled dipole inversion for quantitative "
                            "susceptibility mapping using structural consistency between the magnitude image and the "
                            "susceptibility map. NeuroImage 2012;59:2560-2568."};
constexpr Citation kLiu2017{"Liu et al. 2017",
                            "Liu Z, Kee Y, Zhou D, Wang Y, Spincemaille P. Preconditioned total field inversion (TFI) method "
                            "for quantitative susceptibility mapping. Magn Reson Med 2017;78:303-315."};
constexpr Citation kTkdPapers[] = {kShmueli2009, kWharton2010};
constexpr Citation kTsvdPapers[] = {kWharton2010};
constexpr Citation kTikhonovPapers[] = {kBilgic2014};
constexpr Citation kTvPapers[] = {kBilgic2014, kMilovic2018};
constexpr Citation kRtsPapers[] = {kKames2018};
constexpr Citation kIlsqrPapers[] = {kLi2015};
constexpr Citation kNdiPapers[] = {kPolak2020};
constexpr Citation kMediPapers[] = {kLiu2012};
constexpr Citation kTfiPapers[] = {kLiu2017};

// Methods in the order they are listed; each one's parameters follow in kOptions.
const MethodInfo kMethods[] = {
    {Method::Tkd, "tkd", "TKD", false, "Shmueli et al. 2009 MRM; Wharton et al. 2010 MRM (the threshold)", false, kTkdPapers},
    {Method::Tsvd, "tsvd", "TSVD", false, "Wharton et al. 2010 MRM; threshold as QSM.jl tsvd", false, kTsvdPapers},
    {Method::Tikhonov, "tikhonov", "Tikhonov", false, "Bilgic et al. 2014 MRM (closed form); defaults as QSM.jl tikh", false, kTikhonovPapers},
    {Method::Tv, "tv", "TV-ADMM", false, "Bilgic et al. 2014 MRM; Milovic et al. 2018 MRM (FANSI); defaults as QSM.rs", false, kTvPapers},
    {Method::Rts, "rts", "RTS", false, "Kames, Wiggermann, Rauscher 2018 NeuroImage; defaults as QSM.jl rts", false, kRtsPapers},
    {Method::Ilsqr, "ilsqr", "iLSQR", false, "Li et al. 2015 NeuroImage; defaults as STI Suite / QSM.rs", false, kIlsqrPapers},
    {Method::Ndi, "ndi", "NDI", false, "Polak et al. 2020 NMR Biomed; defaults as FANSI ndi", false, kNdiPapers},
    {Method::Medi, "medi", "MEDI", true, "Liu et al. 2011/2012 MRM; defaults as the MEDI toolbox", false, kMediPapers},
    {Method::Tfi, "tfi", "TFI", true, "Liu et al. 2017 MRM (preconditioned total field inversion); defaults as the MEDI toolbox", true, kTfiPapers},
};

constexpr double kBig = 1e10;

// {name, unit, default, default text, min, max, min exclusive, integer, help, choices}: the defaults are the methods'
// own constants (their headers cite where each comes from).
const OptionSpec kOptions[] = {
    {"tkd.threshold", "", kTkdThreshold, "", 0, kDipoleMaxAbs, true, false,
     "k-space values with |D| below this are truncated to ±threshold (Wharton et al. 2010)", "", true},
    {"tsvd.threshold", "", tsvd_defaults::kThreshold, "", 0, kDipoleMaxAbs, true, false,
     "k-space values with |D| below this are set to 0 (QSM.jl: 0.15)", "", true},
    {"tsvd.padRatio", "", padding_defaults::kPadRatio, "", 1, padding_defaults::kMaxPadRatio, false, false,
     "zero padding: each axis to a 2,3,5-smooth length of at least this × its size (1: measured as accurate as 2, 3-9× cheaper)"},
    {"tikhonov.lambda", "", tikhonov_defaults::kLambda, "", 0, 1e3, true, false,
     "regularisation weight (identity: unitless; gradient: mm²) (QSM.jl tikh: 0.01)"},
    {"tikhonov.regularizer", "", 0, "identity", 0, 0, false, false,
     "R in D/(D² + λR): identity (R = 1) or gradient (R = |k-space finite difference|²)", "identity|gradient"},
    {"tikhonov.padRatio", "", padding_defaults::kPadRatio, "", 1, padding_defaults::kMaxPadRatio, false, false,
     "zero padding ratio (as tsvd.padRatio)"},
    {"tv.lambda", "ppm·mm", tv_defaults::kLambda, "", 0, 1, true, false, "total-variation weight (QSM.rs: 2e-4 for a field in ppm)"},
    {"tv.rho", "ppm·mm", tv_defaults::kRho, "", 0, 1e3, true, false, "ADMM penalty (100 λ)"},
    {"tv.tolerance", "", tv_defaults::kTolerance, "", 0, 1, false, false, "stop when χ changes by less than this (relative)", "", true},
    {"tv.maxIterations", "", static_cast<double>(tv_defaults::kMaxIterations), "", 1, 10000, false, true, "ADMM iterations at most"},
    {"tv.norm", "", 0, "anisotropic", 0, 0, false, false, "anisotropic (|∂x| + |∂y| + |∂z|) or isotropic (‖∇χ‖) total variation",
     "anisotropic|isotropic"},
    {"tv.padRatio", "", padding_defaults::kPadRatio, "", 1, padding_defaults::kMaxPadRatio, false, false, "zero padding ratio (as tsvd.padRatio)"},
    {"rts.delta", "", rts_defaults::kDelta, "", 0, kDipoleMaxAbs, true, false, "|D| above which k-space is solved in step 1 (Kames 2018: 0.15)", "", true},
    {"rts.mu", "", rts_defaults::kMu, "", 0, kBig, true, false, "weight of step 1's k-space data in step 2 (1e5)"},
    {"rts.rho", "", rts_defaults::kRho, "", 0, 1e8, true, false, "initial ADMM penalty of step 2 (10)"},
    {"rts.tolerance", "", rts_defaults::kTolerance, "", 0, 1, false, false, "stop step 2 when χ changes by less than this (relative)", "", true},
    {"rts.maxIterations", "", static_cast<double>(rts_defaults::kMaxIterations), "", 1, 10000, false, true, "ADMM iterations of step 2 at most"},
    {"rts.lsmrIterations", "", static_cast<double>(rts_defaults::kLsmrIterations), "", 1, 1000, false, true, "LSMR iterations of step 1"},
    {"rts.padRatio", "", padding_defaults::kPadRatio, "", 1, padding_defaults::kMaxPadRatio, false, false, "zero padding ratio (as tsvd.padRatio)"},
    {"ilsqr.tolerance", "", ilsqr_defaults::kTolerance, "", 0, 1, true, false, "LSQR stopping tolerance of each solve (Li 2015: 0.01)", "", true},
    {"ilsqr.maxIterations", "", static_cast<double>(ilsqr_defaults::kMaxIterations), "", 1, 1000, false, true, "LSQR iterations per solve at most"},
    {"ilsqr.coneThreshold", "", ilsqr_defaults::kConeThreshold, "", 0, kDipoleMaxAbs, true, false,
     "|D| below which k-space is the ill-conditioned cone whose streaks are estimated (0.1)", "", true},
    {"ndi.tau", "", ndi_defaults::kTau, "", 0, 4, true, false, "gradient step size (FANSI: 2)"},
    {"ndi.lambda", "", ndi_defaults::kLambda, "", 0, 1, false, false, "Tikhonov weight (FANSI: 1e-5)"},
    {"ndi.maxIterations", "", static_cast<double>(ndi_defaults::kMaxIterations), "", 1, 10000, false, true, "iterations at most"},
    {"ndi.tolerance", "", ndi_defaults::kTolerance, "", 0, 1, false, false, "stop when the update is below this (relative)", "", true},
    {"ndi.phaseScale", "rad/ppm", ndi_defaults::kPhaseScale, "", 0, 1000, true, false,
     "radians of phase per ppm of field, 2π·γ̄·B0·TE (16.05 at 3 T, TE 20 ms)"},
    {"medi.lambda", "", medi_defaults::kLambda, "", 0, 1e7, true, false, "data-term weight (MEDI toolbox: 1000)"},
    {"medi.edgeFraction", "", medi_defaults::kEdgeFraction, "", 0, 1, false, false,
     "share of the magnitude's strongest gradients taken as edges, left unpenalised (MEDI: 0.30)", "", true},
    {"medi.maxIterations", "", static_cast<double>(medi_defaults::kMaxIterations), "", 1, 100, false, true, "Gauss-Newton iterations at most"},
    {"medi.tolerance", "", medi_defaults::kTolerance, "", 0, 1, false, false, "stop when ‖dχ‖/‖χ‖ is below this", "", true},
    {"medi.cgMaxIterations", "", static_cast<double>(medi_defaults::kCgMaxIterations), "", 1, 1000, false, true,
     "conjugate-gradient iterations per Gauss-Newton iteration at most"},
    {"medi.cgTolerance", "", medi_defaults::kCgTolerance, "", 0, 1, true, false, "relative CG residual that ends a Gauss-Newton iteration", "", true},
    {"medi.phaseScale", "rad/ppm", medi_defaults::kPhaseScale, "", 0, 1000, true, false,
     "radians of phase per ppm of field, 2π·γ̄·B0·ΔTE (4.01 at 3 T, echo spacing 5 ms)"},
    {"tfi.lambda", "ppm·mm", tfi_defaults::kLambda, "", 0, 1, true, false,
     "weight of the gradient prior ‖M_G ∇χ‖₁ (1.25e-4: the MEDI toolbox's λ = 1000 in ppm)"},
    {"tfi.preconditioner", "", tfi_defaults::kPreconditioner, "", 1, 1000, false, false,
     "P outside the mask, where the background's sources are fitted (Liu 2017: 30)"},
    {"tfi.edgeFraction", "", tfi_defaults::kEdgeFraction, "", 0, 1, false, false,
     "share of the magnitude's strongest gradients taken as edges, left unpenalised (MEDI: 0.30)", "", true},
    {"tfi.maxIterations", "", static_cast<double>(tfi_defaults::kMaxIterations), "", 1, 100, false, true, "Gauss-Newton iterations at most"},
    {"tfi.tolerance", "", tfi_defaults::kTolerance, "", 0, 1, false, false, "stop when ‖dy‖/‖y‖ is below this", "", true},
    {"tfi.cgMaxIterations", "", static_cast<double>(tfi_defaults::kCgMaxIterations), "", 1, 1000, false, true,
     "conjugate-gradient iterations per Gauss-Newton iteration at most"},
    {"tfi.cgTolerance", "", tfi_defaults::kCgTolerance, "", 0, 1, true, false, "relative CG residual that ends a Gauss-Newton iteration", "", true},
};

std::string known_methods() {
  std::string s;
  for (const MethodInfo& m : kMethods) s += (s.empty() ? "" : ", ") + std::string(m.name);
  return s;
}

size_t option_index(std::string_view name) {
  for (size_t i = 0; i < std::size(kOptions); ++i) {
    if (kOptions[i].name == name) return i;
  }
  throw Error(ErrorCode::Internal, "no method option '" + std::string(name) + "'");
}

void check_inputs(const MethodInfo& info, const Geometry& g, std::span<const float> field, std::span<const uint8_t> mask,
                  std::span<const float> magnitude) {
  validate_geometry(g);
  validate_dipole_extent(g);
  validate_volume_sizes(g, field.size(), mask.size());
  validate_finite(g, field);
  validate_mask_not_empty(g, mask);
  if (info.needs_magnitude && magnitude.empty()) {
    throw Error(ErrorCode::InvalidArgument, std::string(info.title) + " needs the magnitude image (its edge prior comes from "
                                                                      "it): give magnitude, or choose another method");
  }
  if (!magnitude.empty() && magnitude.size() != g.voxel_count()) {
    throw Error(ErrorCode::InvalidArgument, "the magnitude holds " + std::to_string(magnitude.size()) + " values but the volume " +
                                                dims_text(g.dims) + " has " + std::to_string(g.voxel_count()) +
                                                ": give one magnitude volume of the field's dims");
  }
}

// A closed-form method: one step computes χ.
class ClosedForm : public MethodComputation {
 public:
  using Body = std::function<std::vector<float>()>;
  ClosedForm(std::string name, Body body) : name_(std::move(name)), body_(std::move(body)) {}
  uint32_t total_steps() const override { return 1; }
  uint32_t steps_done() const override { return done_ ? 1 : 0; }
  bool finished() const override { return done_; }
  void step() override {
    chi_ = body_();
    done_ = true;
  }
  std::string name() const override { return name_; }
  std::vector<float> take_result() override { return std::move(chi_); }

 private:
  std::string name_;
  Body body_;
  std::vector<float> chi_;
  bool done_ = false;
};

// An iterative class (TvAdmm, Rts, ...) as a MethodComputation; take(it) gives its χ.
template <class T, class Take>
class Stepped : public MethodComputation {
 public:
  Stepped(std::unique_ptr<T> it, Take take) : it_(std::move(it)), take_(take) {}
  uint32_t total_steps() const override { return it_->total_steps(); }
  uint32_t steps_done() const override { return it_->steps_done(); }
  bool finished() const override { return it_->finished(); }
  void step() override { it_->step(); }
  std::string name() const override { return it_->name(); }
  std::vector<float> take_result() override { return take_(*it_); }

 private:
  std::unique_ptr<T> it_;
  Take take_;
};

template <class T, class Take>
std::unique_ptr<MethodComputation> stepped(std::unique_ptr<T> it, Take take) {
  return std::make_unique<Stepped<T, Take>>(std::move(it), take);
}

uint32_t whole(const MethodParams& p, std::string_view name) { return static_cast<uint32_t>(p.get(name)); }

TsvdParams tsvd_params(const MethodParams& p) { return {p.get("tsvd.threshold"), p.get("tsvd.padRatio")}; }
TikhonovParams tikhonov_params(const MethodParams& p) {
  TikhonovParams t;
  t.lambda = p.get("tikhonov.lambda");
  t.regulariser = p.get("tikhonov.regularizer") == 1 ? TikhonovRegulariser::Gradient : TikhonovRegulariser::Identity;
  t.pad_ratio = p.get("tikhonov.padRatio");
  return t;
}
TvAdmmParams tv_params(const MethodParams& p) {
  TvAdmmParams t;
  t.lambda = p.get("tv.lambda");
  t.rho = p.get("tv.rho");
  t.tolerance = p.get("tv.tolerance");
  t.max_iterations = whole(p, "tv.maxIterations");
  t.isotropic = p.get("tv.norm") == 1;
  t.pad_ratio = p.get("tv.padRatio");
  return t;
}
RtsParams rts_params(const MethodParams& p) {
  RtsParams r;
  r.delta = p.get("rts.delta");
  r.mu = p.get("rts.mu");
  r.rho = p.get("rts.rho");
  r.tolerance = p.get("rts.tolerance");
  r.max_iterations = whole(p, "rts.maxIterations");
  r.lsmr_iterations = whole(p, "rts.lsmrIterations");
  r.pad_ratio = p.get("rts.padRatio");
  return r;
}
IlsqrParams ilsqr_params(const MethodParams& p) {
  IlsqrParams i;
  i.tolerance = p.get("ilsqr.tolerance");
  i.max_iterations = whole(p, "ilsqr.maxIterations");
  i.cone_threshold = p.get("ilsqr.coneThreshold");
  return i;
}
NdiParams ndi_params(const MethodParams& p) {
  NdiParams n;
  n.tau = p.get("ndi.tau");
  n.lambda = p.get("ndi.lambda");
  n.max_iterations = whole(p, "ndi.maxIterations");
  n.tolerance = p.get("ndi.tolerance");
  n.phase_scale = p.get("ndi.phaseScale");
  return n;
}
MediParams medi_params(const MethodParams& p) {
  MediParams m;
  m.lambda = p.get("medi.lambda");
  m.edge_fraction = p.get("medi.edgeFraction");
  m.max_iterations = whole(p, "medi.maxIterations");
  m.tolerance = p.get("medi.tolerance");
  m.cg_max_iterations = whole(p, "medi.cgMaxIterations");
  m.cg_tolerance = p.get("medi.cgTolerance");
  m.phase_scale = p.get("medi.phaseScale");
  return m;
}
TfiParams tfi_params(const MethodParams& p) {
  TfiParams t;
  t.lambda = p.get("tfi.lambda");
  t.preconditioner = p.get("tfi.preconditioner");
  t.edge_fraction = p.get("tfi.edgeFraction");
  t.max_iterations = whole(p, "tfi.maxIterations");
  t.tolerance = p.get("tfi.tolerance");
  t.cg_max_iterations = whole(p, "tfi.cgMaxIterations");
  t.cg_tolerance = p.get("tfi.cgTolerance");
  return t;
}

}  // namespace

std::span<const MethodInfo> methods() { return kMethods; }

const MethodInfo& method_info(std::string_view name) {
  for (const MethodInfo& m : kMethods) {
    if (m.name == name) return m;
  }
  throw Error(ErrorCode::InvalidArgument, "unknown method '" + std::string(name) + "' (known: " + known_methods() + ")");
}

const MethodInfo& method_info(Method method) {
  for (const MethodInfo& m : kMethods) {
    if (m.method == method) return m;
  }
  throw Error(ErrorCode::Internal, "method not built");
}

std::span<const OptionSpec> method_options() { return kOptions; }

MethodParams::MethodParams() {
  values.resize(std::size(kOptions));
  for (size_t i = 0; i < std::size(kOptions); ++i) values[i] = kOptions[i].default_value;
}

double MethodParams::get(std::string_view name) const { return values.at(option_index(name)); }

void MethodParams::set(std::string_view name, double value) { values.at(option_index(name)) = checked_option(method_options(), name, value); }

void MethodParams::set_choice(std::string_view name, std::string_view choice) {
  const OptionSpec& o = kOptions[option_index(name)];
  const std::vector<std::string_view> choices = option_choices(o);
  for (size_t index = 0; index < choices.size(); ++index) {
    if (choices[index] == choice) {
      values.at(option_index(name)) = static_cast<double>(index);
      return;
    }
  }
  throw word_refusal(o, choice);
}

std::unique_ptr<MethodComputation> start_method(Method method, const Geometry& g, std::span<const float> field,
                                                std::span<const uint8_t> mask, std::span<const float> magnitude,
                                                const MethodParams& p, unsigned threads) {
  const MethodInfo& info = method_info(method);
  check_inputs(info, g, field, mask, magnitude);
  switch (method) {
    case Method::Tkd: {
      const float threshold = static_cast<float>(p.get("tkd.threshold"));
      return std::make_unique<ClosedForm>("TKD", [=] { return tkd(g, field, mask, threshold, 1, threads); });
    }
    case Method::Tsvd: {
      const TsvdParams t = tsvd_params(p);
      validate(t);
      return std::make_unique<ClosedForm>("TSVD", [=] { return tsvd(g, field, mask, t, threads); });
    }
    case Method::Tikhonov: {
      const TikhonovParams t = tikhonov_params(p);
      validate(t);
      return std::make_unique<ClosedForm>("Tikhonov", [=] { return tikhonov(g, field, mask, t, threads); });
    }
    case Method::Tv:
      return stepped(std::make_unique<TvAdmm>(g, field, mask, tv_params(p), threads), [](TvAdmm& t) { return t.result(); });
    case Method::Rts:
      return stepped(std::make_unique<Rts>(g, field, mask, rts_params(p), threads), [](Rts& r) { return r.result(); });
    case Method::Ilsqr:
      return stepped(std::make_unique<Ilsqr>(g, field, mask, ilsqr_params(p), threads), [](Ilsqr& i) { return i.take_result(); });
    case Method::Ndi:
      return stepped(std::make_unique<Ndi>(g, field, mask, magnitude, ndi_params(p), threads), [](Ndi& n) { return n.take_result(); });
    case Method::Medi:
      return stepped(std::make_unique<Medi>(g, field, mask, magnitude, medi_params(p), threads), [](Medi& m) { return m.take_result(); });
    case Method::Tfi:
      return stepped(std::make_unique<Tfi>(g, field, mask, magnitude, tfi_params(p), threads), [](Tfi& t) { return t.take_result(); });
  }
  throw Error(ErrorCode::Internal, "method '" + std::string(info.name) + "' is listed but not dispatched");
}

std::vector<float> run_method(Method method, const Geometry& g, std::span<const float> field, std::span<const uint8_t> mask,
                              std::span<const float> magnitude, const MethodParams& params, unsigned threads,
                              const std::function<void(uint64_t, uint64_t)>& progress, const std::atomic<bool>* cancel) {
  auto c = start_method(method, g, field, mask, magnitude, params, threads);
  run_to_end(*c, progress, cancel);
  return c->take_result();
}

uint32_t method_steps(Method method, const MethodParams& p) {
  switch (method) {
    case Method::Tkd:
    case Method::Tsvd:
    case Method::Tikhonov: return 1;
    case Method::Tv: return whole(p, "tv.maxIterations");
    case Method::Rts: return whole(p, "rts.lsmrIterations") + whole(p, "rts.maxIterations");
    case Method::Ilsqr: return 2 * whole(p, "ilsqr.maxIterations") + 1;
    case Method::Ndi: return whole(p, "ndi.maxIterations");
    case Method::Medi: return whole(p, "medi.maxIterations") * whole(p, "medi.cgMaxIterations");
    case Method::Tfi: return whole(p, "tfi.maxIterations") * whole(p, "tfi.cgMaxIterations");
  }
  throw Error(ErrorCode::Internal, "method '" + std::string(method_info(method).name) + "' has no step count");
}

uint64_t method_workspace_bytes(Method method, const Geometry& g, const MethodParams& p, unsigned threads) {
  switch (method) {
    case Method::Tkd: return dipole_workspace_bytes(g, 1, threads);
    case Method::Tsvd: return tsvd_workspace_bytes(g, tsvd_params(p), threads);
    case Method::Tikhonov: return tikhonov_workspace_bytes(g, tikhonov_params(p), threads);
    case Method::Tv: return tv_admm_workspace_bytes(g, tv_params(p), threads);
    case Method::Rts: return rts_workspace_bytes(g, rts_params(p), threads);
    case Method::Ilsqr: return ilsqr_workspace_bytes(g, ilsqr_params(p), threads);
    case Method::Ndi: return ndi_workspace_bytes(g, ndi_params(p), threads);
    case Method::Medi: return medi_workspace_bytes(g, medi_params(p), threads);
    case Method::Tfi: return tfi_workspace_bytes(g, tfi_params(p), threads);
  }
  throw Error(ErrorCode::Internal, "method '" + std::string(method_info(method).name) + "' has no memory model");
}

Dims3 largest_fitting_crop(const Geometry& g, Dims3 start, const std::function<bool(const Geometry&)>& fits) {
  Geometry c = g;
  c.dims = start;
  // A workspace that is not linear in the voxel count (FFT sizes, padding): 2 % smaller per axis until it fits.
  for (int i = 0; i < 100 && !fits(c); ++i) {
    for (int a = 0; a < 3; ++a) c.dims[a] = std::max<int64_t>(1, static_cast<int64_t>(static_cast<double>(c.dims[a]) * 0.98));
  }
  return c.dims;
}

HeapFit fit_heap(const Geometry& g, uint64_t input_bytes, uint64_t workspace_bytes, unsigned threads, Target target) {
  validate_geometry(g);
  HeapFit f;
  const uint64_t fixed = saturating_add(WASM_MODULE_BASELINE_BYTES, wasm_thread_heap_bytes(threads));
  const uint64_t need = saturating_add(saturating_add(fixed, input_bytes), workspace_bytes);
  f.module_heap_bytes = wasm_module_heap_bytes(need);
  // The largest volume of this shape that fits, the need growing linearly with the voxel count: the heap is the need
  // and its slack (20 % of it, or at most the cap), so it fits when either 1.2 · need or need + cap is within the limit.
  const double per_voxel = static_cast<double>(saturating_add(input_bytes, workspace_bytes)) / static_cast<double>(g.voxel_count());
  const double limit = static_cast<double>(WASM_COMPUTE_HEAP_LIMIT_BYTES), base = static_cast<double>(fixed);
  const double cap = static_cast<double>(wasm_heap_growth_slack(UINT64_MAX));
  f.largest_voxels = static_cast<uint64_t>(std::max(limit / 1.2 - base, limit - cap - base) / per_voxel);
  const double scale = std::min(1.0, std::cbrt(static_cast<double>(f.largest_voxels) / static_cast<double>(g.voxel_count())));
  for (int a = 0; a < 3; ++a) f.largest_dims[a] = std::max<int64_t>(1, static_cast<int64_t>(static_cast<double>(g.dims[a]) * scale));
  f.fits = target == Target::Native || f.module_heap_bytes <= WASM_COMPUTE_HEAP_LIMIT_BYTES;
  return f;
}

MethodPlan plan_method(Method method, const Geometry& g, const MethodParams& params, unsigned threads, uint32_t magnitude_echoes,
                       Target target) {
  validate_geometry(g);
  const MethodInfo& info = method_info(method);
  MethodPlan p;
  p.method = std::string(info.name);
  p.title = std::string(info.title);
  p.threads = std::max(1u, threads);
  p.steps = method_steps(method, params);
  const uint64_t n = g.voxel_count();
  // field (f32), the volume's mask and the plan's (u8), χ (f32), magnitude (f32 per echo)
  const uint64_t per_voxel_inputs = 2 * sizeof(float) + 2 * sizeof(uint8_t) + uint64_t{magnitude_echoes} * sizeof(float);
  p.input_bytes = saturating_mul(n, per_voxel_inputs);
  p.workspace_bytes = method_workspace_bytes(method, g, params, p.threads);
  const HeapFit fit = fit_heap(g, p.input_bytes, p.workspace_bytes, p.threads, target);
  p.module_heap_bytes = p.peak_bytes = fit.module_heap_bytes;
  p.largest_voxels = fit.largest_voxels;
  p.largest_dims = fit.largest_dims;
  p.feasible = fit.fits;
  if (!p.feasible) {
    p.largest_dims = largest_fitting_crop(g, fit.largest_dims, [&](const Geometry& c) {
      return fit_heap(c, saturating_mul(c.voxel_count(), per_voxel_inputs), method_workspace_bytes(method, c, params, p.threads), p.threads, target).fits;
    });
    p.largest_voxels = std::min(p.largest_voxels, static_cast<uint64_t>(p.largest_dims[0] * p.largest_dims[1] * p.largest_dims[2]));
  }
  if (info.needs_magnitude && magnitude_echoes == 0) {
    p.feasible = false;
    p.refusal = ErrorCode::InvalidArgument;
    p.message = p.title + " needs the magnitude image (its edge prior comes from it): give magnitude, or choose another method";
  } else if (!p.feasible) {
    p.message = p.title + " on " + dims_text(g.dims) + " needs " + format_gb(p.module_heap_bytes) + " of the module's heap, over the " +
                format_gb(WASM_COMPUTE_HEAP_LIMIT_BYTES) + " a browser heap can safely hold: the largest volume that fits holds " +
                std::to_string(p.largest_voxels) + " voxels (about " + dims_text(p.largest_dims) +
                "); crop the volume to the mask's bounding box, or choose a method with less memory (tkd, tikhonov)";
  }
  return p;
}

}  // namespace tessera

// Background field removal: separates the field of sources outside a brain mask (air, bone, shim) from the local
// field of the tissue inside it. V-SHARP, PDF, LBV, iSMV, SHARP and RESHARP, one header each. Input: the total field
// (ppm or Hz: the methods are linear, the unit passes through) and a mask (nonzero = inside); output: the local field
// and the mask it is defined on. Volumes are x-fastest.
#pragma once

#include "tessera/background/local_field.h"
#include "tessera/common/citation.h"
#include "tessera/background/pdf.h"
#include "tessera/background/vsharp.h"
#include "tessera/background/ismv.h"
#include "tessera/background/lbv.h"
#include "tessera/background/resharp.h"
#include "tessera/background/sharp.h"

namespace tessera {

// The papers of the background removals.
inline constexpr Citation kVsharpCitation{
    "Wu et al. 2012",
    "Wu B, Li W, Guidon A, Liu C. Whole brain susceptibility mapping using compressed sensing. Magn Reson Med "
    "2012;67:137-147."};
inline constexpr Citation kPdfCitation{
    "Liu et al. 2011",
    "Liu T, Khalidov I, de Rochefort L, et al. A novel background field removal method for MRI using projection onto "
    "dipole fields (PDF). NMR Biomed 2011;24:1129-1136."};
inline constexpr Citation kLbvCitation{
    "Zhou et al. 2014",
    "Zhou D, Liu T, Spincemaille P, Wang Y. Background field removal by solving the Laplacian boundary value problem. "
    "NMR Biomed 2014;27:312-319."};
inline constexpr Citation kIsmvCitation{
    "Wen et al. 2014",
    "Wen Y, Zhou D, Liu T, Spincemaille P, Wang Y. An iterative spherical mean value method for background field "
    "removal in MRI. Magn Reson Med 2014;72:1065-1071."};
inline constexpr Citation kSharpCitation{
    "Schweser et al. 2011",
    "Schweser F, Deistung A, Lehr BW, Reichenbach JR. Quantitative imaging of intrinsic magnetic tissue properties "
    "using MRI signal phase: an approach to in vivo brain iron metabolism? NeuroImage 2011;54:2789-2807."};
inline constexpr Citation kResharpCitation{
    "Sun & Wilman 2014",
    "Sun H, Wilman AH. Background field removal using spherical mean value filtering and Tikhonov regularization. "
    "Magn Reson Med 2014;71:1151-1157."};

}  // namespace tessera

// Background field removal: separates the field of sources outside a brain mask (air, bone, shim) from the local
// field of the tissue inside it. V-SHARP, PDF, LBV, iSMV, SHARP and RESHARP, one header each. Input: the total field
// (ppm or Hz: the methods are linear, the unit passes through) and a mask (nonzero = inside); output: the local field
// and the mask it is defined on. Volumes are x-fastest.
#pragma once

#include "tessera/background/local_field.h"
#include "tessera/background/pdf.h"
#include "tessera/background/vsharp.h"
#include "tessera/background/ismv.h"
#include "tessera/background/lbv.h"
#include "tessera/background/resharp.h"
#include "tessera/background/sharp.h"

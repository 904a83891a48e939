// The volumes the page's viewer can show, with their words and units: the loaded input's (every echo of a phase or a
// magnitude, a field, the mask) and every Volume a run returned (χ, each pipeline intermediate, and whatever else the
// result holds: SWI, minIP, R2*, T2*…), the phantom's truth in the demo. Plain JS (no DOM), tested by node --test.

import { alsoOutput } from '../bindings/js/index.js';

/** Words, unit and display kind of the Volumes pipeline() and the contrast runs return, by key. */
export const VOLUME_INFO = {
  chi: { label: 'χ', unit: 'ppm', kind: 'chi', file: 'chi' },
  localField: { label: 'Local field', unit: 'ppm', kind: 'field', file: 'localfield' },
  totalField: { label: 'Total field', unit: 'ppm', kind: 'field', file: 'totalfield' },
  fieldHz: { label: 'Total field', unit: 'Hz', kind: 'field', file: 'fieldmap_Hz' },
  unwrappedPhase: { label: 'Unwrapped phase', unit: 'rad', kind: 'field', file: 'unwrapped' },
  offset: { label: 'Receive-phase offset', unit: 'rad', kind: 'field', file: 'phaseoffset' },
  fitResidual: { label: 'Echo-fit residual', unit: '', kind: 'positive', file: 'fitresidual' },
  mask: { label: 'Brain mask', unit: '', kind: 'mask', file: 'mask' },
  fitMask: { label: 'Fit mask', unit: '', kind: 'mask', file: 'fitmask' },
  localMask: { label: 'Local mask', unit: '', kind: 'mask', file: 'localmask' },
  swi: { label: 'SWI', unit: 'a.u.', kind: 'positive', file: alsoOutput('swi').suffix },
  minIp: { label: 'SWI minIP', unit: 'a.u.', kind: 'positive', file: alsoOutput('minIp').suffix },
  swiMagnitude: { label: 'SWI magnitude (echoes’ root-sum-of-squares)', unit: 'a.u.', kind: 'positive', file: 'swi_magnitude' },
  swiPhase: { label: 'SWI high-passed phase', unit: 'rad', kind: 'field', file: 'swi_phase' },
  swiPhaseMask: { label: 'SWI phase mask (before the power)', unit: '', kind: 'positive', file: 'swi_phasemask' },
  r2star: { label: 'R2*', unit: 's⁻¹', kind: 'positive', file: alsoOutput('r2star').suffix },
  t2star: { label: 'T2*', unit: 's', kind: 'positive', file: alsoOutput('t2star').suffix },
  s0: { label: 'S0 (fitted signal at TE 0)', unit: 'a.u.', kind: 'positive', file: 'S0map' },
  r2starResidual: { label: 'R2* fit residual (RMS over the mean signal)', unit: '', kind: 'positive', file: 'R2star_residual' },
};

/** True for a Volume ({dims, data}) of n voxels per echo. */
const isVolume = (v) => !!v && typeof v === 'object' && Array.isArray(v.dims) && v.data && typeof v.data.length === 'number';

/**
 * The catalog: [{ key, label, unit, kind ('chi'|'field'|'phase'|'magnitude'|'mask'|'positive'), data (every echo),
 * echoes, file, group ('input'|'result') }] in the order the viewer lists them: the result's first (χ first), then the
 * input's. `mask` is the mask the run will use (the edited one), or null.
 * Preconditions: input is the page's loaded input (geometry.dims, and phase/magnitude/field/display as its workflow
 * keeps them) or null; result is page.result ({chi, quantity, outputs?, input}) or null.
 */
export function catalog(input, result, mask) {
  const list = [];
  if (result) {
    const n = result.input.geometry.dims.reduce((a, b) => a * b, 1);
    const outs = result.outputs;
    if (outs) {
      const keys = Object.keys(outs).filter((k) => isVolume(outs[k]));
      keys.sort((a, b) => order(a) - order(b));
      for (const k of keys) {
        const v = outs[k];
        const info = VOLUME_INFO[k] ?? { label: k, unit: '', kind: 'positive', file: k };
        list.push({ key: `result.${k}`, ...info, data: v.data, echoes: v.echoes ?? Math.max(1, Math.round(v.data.length / n)), group: 'result' });
      }
    } else if (result.chi) {
      const lf = result.quantity === 'local-field';
      list.push({ key: 'result.chi', label: lf ? 'Local field' : 'χ', unit: 'ppm', kind: lf ? 'field' : 'chi', file: lf ? 'localfield' : 'chi', data: result.chi, echoes: 1, group: 'result' });
    }
    if (result.input.truth) list.push({ key: 'result.truth', label: 'Phantom truth χ', unit: 'ppm', kind: 'chi', file: 'truth', data: result.input.truth, echoes: 1, group: 'result' });
  }
  if (input) {
    const n = input.geometry.dims.reduce((a, b) => a * b, 1);
    const echoes = (d) => Math.max(1, Math.round(d.length / n));
    if (input.phase) list.push({ key: 'input.phase', label: 'Wrapped phase', unit: 'rad', kind: 'phase', file: 'phase', data: input.phase, echoes: echoes(input.phase), group: 'input' });
    if (input.field) list.push({ key: 'input.field', label: 'Local field (input)', unit: 'ppm', kind: 'field', file: 'field', data: input.field, echoes: 1, group: 'input' });
    if (input.magnitude) list.push({ key: 'input.magnitude', label: 'Magnitude', unit: 'a.u.', kind: 'magnitude', file: 'magnitude', data: input.magnitude, echoes: echoes(input.magnitude), group: 'input' });
    if (mask) list.push({ key: 'input.mask', label: 'Mask (the run’s)', unit: '', kind: 'mask', file: 'mask_edited', data: mask, echoes: 1, group: 'input' });
  }
  return list;
}

/** χ first, then VOLUME_INFO's order, then the rest by name. */
function order(k) {
  const i = Object.keys(VOLUME_INFO).indexOf(k);
  return i < 0 ? 1000 : i;
}

/** Echo e (1-based) of a catalog entry's data, n voxels each. */
export function echoOf(entry, n, e = 1) {
  const k = Math.min(Math.max(1, e), entry.echoes) - 1;
  return entry.data.subarray(k * n, (k + 1) * n);
}

/**
 * A display window for a 3D volume: a mask 0-1, a phase -π…π, χ and fields symmetric about 0 at the 1st/99th
 * percentile of |v|, other volumes the 1st…99th percentile (a robust range).
 */
export function defaultWindow(kind, data) {
  if (kind === 'mask') return [0, 1];
  if (kind === 'phase') return [-Math.PI, Math.PI];
  const step = Math.max(1, Math.floor(data.length / 200000));
  const v = [];
  for (let i = 0; i < data.length; i += step) if (Number.isFinite(data[i]) && data[i] !== 0) v.push(data[i]);
  if (!v.length) return [0, 1];
  const f = Float32Array.from(v).sort();
  const q = (p) => f[Math.floor(p * (f.length - 1))];
  if (kind === 'chi' || kind === 'field') {
    const w = Math.max(Math.abs(q(0.01)), Math.abs(q(0.99))) || 1;
    return [-w, w];
  }
  const lo = Math.min(0, q(0.01)), hi = q(0.99);
  return [lo, hi > lo ? hi : lo + 1];
}

/** A value in words with its unit: 0.0123 ppm, 25.1 s⁻¹, 1 (a mask). */
export function valueText(v, unit) {
  if (v === undefined || v === null || Number.isNaN(v)) return '—';
  const a = Math.abs(v);
  const s = a !== 0 && (a < 1e-3 || a >= 1e5) ? v.toExponential(3) : String(+v.toPrecision(4));
  return unit ? `${s} ${unit}` : s;
}

/** Whether the plan has a tile grid on these dims (not on a B0-aligned, resampled grid). */
export function tilesFit(plan, dims) {
  return !!plan?.grid?.tiles?.length && !(plan.b0Align?.resampled && plan.b0Align.alignedDims.join() !== dims.join());
}

/**
 * The plan's tiles as a label volume over dims (1 + the tile's index mod 8 in its core, 0 elsewhere and in skipped tiles),
 * for an overlay; null when the plan has no tile grid on these dims.
 */
export function tileLabels(plan, dims) {
  if (!tilesFit(plan, dims)) return null;
  const grid = plan.grid;
  const [nx, ny] = dims;
  const out = new Float32Array(dims[0] * dims[1] * dims[2]);
  for (const t of grid.tiles) {
    if (t.skipped) continue;
    const lo = t.coreLo, hi = t.coreHi.map((h, k) => Math.min(h, dims[k]));
    // Labels cycle 1…8 with the tile's index: neighbours differ unless a grid edge holds a multiple of 8 tiles.
    const label = 1 + (t.index % 8);
    for (let z = lo[2]; z < hi[2]; z++)
      for (let y = lo[1]; y < hi[1]; y++) out.fill(label, lo[0] + y * nx + z * nx * ny, hi[0] + y * nx + z * nx * ny);
  }
  return out;
}

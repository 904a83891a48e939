// Fidelity in words: a plan's predicted agreement with the whole-volume run (plan.predictedFidelity), how far the
// network looks (plan.context), the planned self-check (plan.verify) and a run's verified one (report.verify).
// Every number comes from the C++ plan or the run's report; this module only words them.
import { fmtSeconds } from './dom.js';

/** Pearson r as shown: 3 decimals, 4 above 0.999 (so that 0.9996 does not read as 1.000); 1 as '1'. */
export function fmtR(r) {
  if (r === 1) return '1';
  return r.toFixed(r > 0.999 ? 4 : 3);
}

/** NRMSE as shown (a fraction, 3 decimals). */
export const fmtNrmse = (x) => x.toFixed(3);

/** A voxel position [x, y, z]. */
const at = (p) => `[${p.join(', ')}]`;

/**
 * The plan's predicted fidelity in words: 'predicted r 0.995, NRMSE 0.060 vs the whole-volume run', 'exact (the
 * whole volume runs at once)' for a whole-volume plan, or why there is none.
 */
export function predictedText(plan) {
  const f = plan.predictedFidelity;
  if (plan.wholeVolume && plan.crop) return 'the whole-volume answer up to the network’s response to the zeros left out around the mask’s box';
  if (plan.wholeVolume) return 'exact (the whole volume runs at once)';
  if (!f) return 'fidelity not predicted: the network’s reach is unknown (choose its .onnx file, or use Auto)';
  return `predicted r ${fmtR(f.r)}, NRMSE ${fmtNrmse(f.nrmse)} vs the whole-volume run`;
}

/** The estimate row: the planner's time beside its predicted fidelity. */
export function estimateText(plan) {
  const time = plan.estimatedSeconds > 0 ? `Estimated ${fmtSeconds(plan.estimatedSeconds)}` : 'Time not estimated (not an automatic plan)';
  const from = plan.estimatedSeconds > 0 ? SPEED_SOURCES[plan.estimateSource] : undefined;
  return `${time} · ${predictedText(plan)}${from ? ` · ${from}` : ''}`;
}

/** Whose speed a time estimate used (plan.estimateSource). */
const SPEED_SOURCES = {
  measured: 'time from this machine’s measured speed',
  registry: 'time from the network’s registry speed, measured on another machine (Measure speed times this one)',
  graph: 'time from the work per voxel of the network’s graph at a typical speed of this engine (Measure speed times it here)',
  default: 'time from the planner’s default speed, not this network’s (Measure speed times it here)',
};

/**
 * How far the network looks, as the planner took it: measured by a probe, derived from a receptive radius (with
 * where that radius comes from), or unknown and assumed. source: words for the radius's origin, or ''.
 */
export function reachText(context, source) {
  if (!context) return 'unknown: no fidelity prediction';
  if (context.measured) return `measured by probe: 90 % within ${context.radius90} voxels, 99 % within ${context.radius99}`;
  if (context.assumed) return `unknown: assumed ${context.radius} voxels (choose the network’s .onnx file for its own)`;
  return `receptive radius ${context.radius} voxels, 90 % of the dependence within ${context.radius90}${source ? ` — ${source}` : ''}`;
}

/** The planned self-check (plan.verify) in words. */
export function plannedCheckText(v) {
  if (!v.possible) return `not possible: ${v.message}`;
  return `after the tiles, the box ${at(v.lo)} to ${at(v.hi)} runs whole and is compared with the tiled result ${v.margin} voxels or more inside its inner faces`;
}

/**
 * The verified fidelity of a run (report.verify) as rows (row(key, value)), next to the predicted one.
 * Preconditions: v is report.verify; predicted is the plan's predictedFidelity (or null).
 */
export function verifiedRows(v, predicted, row) {
  if (v.exact) {
    row('Verified', `exact (whole volume): ${v.message}`);
    return;
  }
  if (!v.possible) {
    row('Verified', `not possible: ${v.message}`);
    return;
  }
  row('Verified', `r ${fmtR(v.r)}, NRMSE ${fmtNrmse(v.nrmse)}, max |Δ| ${v.maxAbs.toPrecision(2)} ppm over ${v.voxels.toLocaleString('en')} voxels (tiled vs the box run whole)`);
  const p = v.predicted ?? predicted;
  row('Predicted', p ? `r ${fmtR(p.r)}, NRMSE ${fmtNrmse(p.nrmse)}` : 'not predicted');
  row('Box', `${at(v.box.lo)} to ${at(v.box.hi)} run whole; compared in ${at(v.compareLo)} to ${at(v.compareHi)} (${v.margin} voxels from its inner faces)`);
  row('Data consistency', `‖M(D∗χ − f)‖ / ‖M f‖ = ${v.dataConsistency.toFixed(3)} (the tiled χ’s dipole field against the input field, in the mask)`);
  row('Check time', fmtSeconds(v.seconds));
}

/** report.verify as data-* values (setData). */
export function verifiedData(v, predicted) {
  const p = v.predicted ?? predicted ?? null;
  return {
    possible: !!v.possible,
    exact: !!v.exact,
    r: v.r,
    nrmse: v.nrmse,
    maxAbs: v.maxAbs,
    voxels: v.voxels,
    boxLo: v.box?.lo,
    boxHi: v.box?.hi,
    compareLo: v.compareLo,
    compareHi: v.compareHi,
    margin: v.margin,
    dataConsistency: v.dataConsistency,
    predictedR: p?.r,
    predictedNrmse: p?.nrmse,
    seconds: v.seconds,
    message: v.message || null,
  };
}

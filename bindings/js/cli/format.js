// The command line's words for numbers, plans and reports: sizes, durations, tables, the plan table.
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

import { gbText as GB, bytesText as size, mbText as MB } from '../bytes.js';

export { GB, size, MB };
/** A plan as the CLI writes it to a file or stdout: without the runtime's id (a handle that means nothing outside this process). */
export function planForFile(plan) {
  if (!plan || typeof plan !== 'object') return plan;
  const { id, ...rest } = plan;
  return rest;
}
export const pct = (a, b) => `${Math.round((100 * a) / b)}%`;

export function duration(s) {
  if (s === null || s === undefined || !Number.isFinite(s)) return '?';
  if (s < 60) return `${Math.round(s)} s`;
  const m = Math.floor(s / 60);
  if (m < 60) return `${m}m ${String(Math.round(s - 60 * m)).padStart(2, '0')}s`;
  return `${Math.floor(m / 60)}h ${String(m % 60).padStart(2, '0')}m`;
}

export function table(rows) {
  const w = Math.max(...rows.map((r) => r[0].length));
  return rows.map(([k, v]) => `  ${k.padEnd(w)}  ${v}`).join('\n');
}

export function versions() {
  const out = { node: process.versions.node, v8: process.versions.v8 };
  try {
    const pkg = JSON.parse(fs.readFileSync(new URL('../../../package.json', import.meta.url), 'utf8'));
    out.tessera = pkg.version;
  } catch {
    out.tessera = null;
  }
  try {
    let dir = path.dirname(fileURLToPath(import.meta.resolve('onnxruntime-web')));
    for (; dir !== path.dirname(dir); dir = path.dirname(dir)) {
      const f = path.join(dir, 'package.json');
      if (fs.existsSync(f)) {
        const pkg = JSON.parse(fs.readFileSync(f, 'utf8'));
        if (pkg.name === 'onnxruntime-web') {
          out.onnxruntimeWeb = pkg.version;
          break;
        }
      }
    }
  } catch {
    /* not resolvable: leave it out */
  }
  return out;
}

/** The network of a run, for messages: registry entry or the spec with its defaults filled in. */
export function describeNetwork(o, entry, spec) {
  if (entry) {
    const fixed = entry.fixedBytes ? `${MB(entry.fixedBytes)} + ` : '';
    return `${entry.id} (${entry.kind}, divisor ${entry.divisor}, ${fixed}${entry.bytesPerVoxel} B/voxel${entry.costProvisional ? ' provisional' : ' measured'})`;
  }
  return `spec ${o.spec} (divisor ${spec.divisor})`;
}

/** The memory cost a plan used and where it came from (plan.cost). */
export function costText(c) {
  if (!c) return '?';
  const line = `${c.fixedBytes ? `${size(c.fixedBytes)} + ` : ''}${c.bytesPerVoxel} B/voxel per worker`;
  if (c.source === 'calibrated') {
    const edges = c.points.map((p) => p.edge);
    return `${line}, calibrated (${edges.length} patches ${edges[0]}–${edges.at(-1)}³ measured in ${c.seconds.toFixed(1)} s)`;
  }
  if (c.source === 'declared') return `${line}, declared in the spec`;
  if (c.source === 'assumed') return `${line}, ASSUMED: the spec declares no bytesPerVoxel; give --weights net.onnx to calibrate it`;
  return `${line}, the registry's (${c.provisional ? 'provisional' : 'measured'})`;
}

/** "r 0.995, NRMSE 0.061 against the whole-volume run (predicted)". */
export function fidelityText(plan) {
  const f = plan.predictedFidelity;
  if (plan.wholeVolume && plan.crop) return 'the whole-volume answer up to the network\'s response to the zeros left out around the mask\'s box (--crop off runs the whole volume)';
  if (plan.wholeVolume) return 'exact (the whole volume runs at once)';
  return `r ${f.r.toFixed(3)}, NRMSE ${f.nrmse.toFixed(3)} against the whole-volume run`;
}

/** How far the network looks, and how Tessera knows. */
export function reachText(c) {
  if (c.assumed) return `unknown: assumed ${c.radius} voxels (give --weights, or spec receptiveRadius, or --probe)`;
  if (c.measured) return `measured by probe: 90 % within ${c.radius90} voxels, 99 % within ${c.radius99}`;
  return `receptive radius ${c.radius} voxels (theoretical; 99 % of a dipole-like reach within ${c.radius99})`;
}

export const boxText = (v) => `${v.lo.map((l, i) => `${l}-${v.hi[i]}`).join(' × ')}`;
/** What a plan's box is: the mask's bounding box, or the whole field of view (dims) cut into slabs. */
export const boxName = (v, dims) => (v.lo.every((l, i) => l === 0 && v.hi[i] === dims[i]) ? 'the whole field of view' : 'the mask\'s bounding box');
/** "2 slabs along y, halo 20": a crop box run as slabs (plan.crop.split). */
export const splitText = (s) => `${s.pieces} slabs along ${'xyz'[s.axis]}, halo ${s.halo}`;
export const isSplit = (plan) => !plan.wholeVolume && plan.crop?.split?.pieces > 1;

/** Whose speed the time estimate used (plan.estimateSource), or '' when there is no estimate. */
export function speedText(plan) {
  const from = { measured: 'this machine\'s measured speed (--measure-speed)', registry: 'the registry\'s speed for this network, measured on another machine: --measure-speed times this one', graph: 'the work per voxel of the network\'s graph at a typical speed of this engine: --measure-speed times it here', default: 'the default speed (not this network\'s: --measure-speed measures it)' };
  return plan.estimatedSeconds > 0 && from[plan.estimateSource] ? ` (time from ${from[plan.estimateSource]})` : '';
}

export function planTable(plan, limits, { o, run, entry, spec, geometry, maskVoxels, echoes }) {
  const mode = plan.wholeVolume
    ? plan.crop
      ? `the mask's bounding box as one patch (${boxText(plan.crop)}), chosen by the auto-planner: ${plan.explanation}${speedText(plan)}`
      : 'whole volume'
    : isSplit(plan)
      ? `${boxName(plan.crop, geometry.dims)} (${boxText(plan.crop)}) in ${splitText(plan.crop.split)}, chosen by the auto-planner: ${plan.explanation}${speedText(plan)}`
      : plan.explanation
      ? `tiled, chosen by the auto-planner: ${plan.explanation}${speedText(plan)}`
      : `tiled (core ${plan.tile?.core ?? run.tile?.core}, halo ${plan.tile?.halo ?? run.tile?.halo})`;
  const rows = [
    ['volume', `${geometry.dims.join('×')} voxels, ${geometry.voxelMm.map((v) => +v.toFixed(3)).join('×')} mm${maskVoxels !== undefined ? `, ${maskVoxels} voxels in the mask` : ''}`],
    ['network', describeNetwork(o, entry, spec)],
    ['memory cost', costText(plan.cost)],
    ...(o.phase !== undefined ? [['input', `wrapped phase, ${echoes} echo${echoes > 1 ? 'es' : ''} (one network call each)`]] : []),
    ['mode', mode],
    ['patch edge', plan.patchDims ? `${plan.patchEdge} (${plan.patchDims.join('×')})` : String(plan.patchEdge)],
    ['MB per tile', `${MB(plan.bytesPerTile)} of activations (single-patch limit ${GB(limits.maxPatchActivationBytes)}, ${pct(plan.bytesPerTile, limits.maxPatchActivationBytes)})`],
  ];
  if (plan.feasible) {
    rows.push(
      ['tiles in flight', String(plan.tilesInFlight)],
      ['tiles', `${plan.tilesTotal} total, ${plan.tilesActive} active, ${plan.tilesSkipped} skipped`],
      ['activation memory', `${size(plan.activationBytes)} of the ${GB(limits.tileActivationBudget)} budget for tiles in flight (${pct(plan.activationBytes, limits.tileActivationBudget)})`],
      ['peak memory', `${size(plan.peakBytes)} estimated (${size(plan.moduleHeapBytes)} wasm heap) of the ${GB(limits.heapCeilingBytes)} heap ceiling (${pct(plan.peakBytes, limits.heapCeilingBytes)})`],
    );
    if (plan.networks > 1) rows.push(['networks', String(plan.networks)]);
    if (plan.predictedFidelity) rows.push(['predicted fidelity', fidelityText(plan)]);
    if (plan.context) rows.push(['network reach', reachText(plan.context)]);
    if (plan.verify) rows.push(['self-check', plan.verify.possible ? `box ${boxText(plan.verify)}, compared ${plan.verify.margin} voxels away from its inner faces` : plan.verify.message]);
    if (plan.b0Align?.assumesZ) rows.push(['B0', plan.b0Align.summary]);
    if (plan.trainingGrid) {
      const g = plan.trainingGrid;
      rows.push(['training grid', `${g.dims.join('×')} voxels, ${g.voxelMm.map((v) => +v.toFixed(4)).join('×')} mm (field resampled there in k-space, χ back; ${size(g.extraModuleBytes)} of the heap)`]);
    }
    if (plan.fidelityWarning) rows.push(['warning', plan.fidelityWarning]);
    if (plan.warning) rows.push(['warning', plan.warning]);
  }
  const head = plan.feasible ? 'plan: feasible' : 'plan: REFUSED';
  return `${head}\n${table(rows)}${plan.feasible ? '' : `\nrefused: ${plan.message}`}\n`;
}

/** The self-check's result in one line. */
export function verifyText(v) {
  if (!v.possible) return v.exact ? 'exact (the whole volume ran at once)' : `not made: ${v.message}`;
  const p = v.predicted ? ` (predicted r ${v.predicted.r.toFixed(3)}, NRMSE ${v.predicted.nrmse.toFixed(3)})` : '';
  return `r ${v.r.toFixed(4)}, NRMSE ${v.nrmse.toFixed(3)}, max |Δ| ${v.maxAbs.toFixed(4)} ppm against the whole-volume run of box ${boxText(v.box)} ` +
    `over ${v.voxels} mask voxels${p}; data consistency ‖M(D∗χ − f)‖/‖M f‖ = ${v.dataConsistency.toFixed(3)} (${duration(v.seconds)})`;
}


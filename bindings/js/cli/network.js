// The command line's network: the input it takes, its weights (registry or --spec), its reach (--probe) and its
// memory cost (a spec without bytesPerVoxel is calibrated).
import path from 'node:path';
import { loadModel, sha256Hex } from '../index.js';
import { CliError, EXIT_ERROR, usageError } from './errors.js';
import { readContext } from './files.js';
import { size } from './format.js';

/** Drops the keys whose value is undefined. */
export const defined = (obj) => Object.fromEntries(Object.entries(obj).filter(([, v]) => v !== undefined));

/**
 * The input flag matches the network: --phase for the phase networks (registry inputs name 'phase'),
 * --field for the rest. Returns whether the network is a phase network.
 */
export async function checkInputKind(o, entry, run, tessera) {
  const phaseNet = !!entry?.inputs?.includes('phase');
  if (o.phase !== undefined && !phaseNet) {
    const ids = (await tessera.registry()).filter((m) => m.inputs?.includes('phase')).map((m) => m.id);
    throw usageError(`--phase is the input of the phase networks (${ids.join(', ')}); ${entry.id} (${entry.kind}) inverts a local field map: give --field`);
  }
  if (o.field !== undefined && phaseNet) {
    throw usageError(`${entry.name} (${entry.id}) reconstructs from the wrapped phase: give --phase p.nii --te S[,S...] instead of --field`);
  }
  if (phaseNet && run.inputNames) {
    const unknown = Object.keys(run.inputNames).filter((r) => !entry.inputs.includes(r));
    if (unknown.length) throw usageError(`--input-name: ${entry.name} has no input role ${unknown.map((r) => `'${r}'`).join(', ')} (roles: ${entry.inputs.join(', ')})`);
  }
  return phaseNet;
}

/**
 * The network's weights: a registry network's from --weights or its official URL(s) (size and sha256 checked), a
 * --spec network's from its one --weights. --weights-unverified: a registry network's --weights FILE whose bytes differ
 * from the registry's runs (warned; weightsInfo records their sha256). Returns {weights, weightsInfo, unverified}.
 */
export async function loadNetworkWeights(o, entry, tessera, ctx) {
  const { signal, progress } = ctx;
  const weightSources = o.weights ?? [];
  const onBytes = (p) => progress.bytes(p);
  if (entry) {
    const sources = weightSources.length ? weightSources : undefined;
    (sources ?? entry.weights.map((w) => w.url)).forEach((src, i) => progress.line(`weights ${entry.weights[i].file}: ${src}`));
    const unverified = !!o['weights-unverified'];
    if (unverified && !sources) throw usageError('--weights-unverified runs your own export of the network: give it with --weights FILE');
    const weights = await tessera.loadWeights(entry.id, { sources, signal, onProgress: onBytes, verifyWeights: !unverified });
    signal.throwIfAborted();
    const weightsInfo = [];
    for (const [i, w] of entry.weights.entries()) {
      // Unverified: the sha256 of the bytes that run, beside the registry's.
      const sha256 = unverified ? await sha256Hex(weights[i]) : w.sha256 || null;
      const verified = unverified ? sha256 === w.sha256 : !!w.sha256;
      // Said even with --quiet: the results are not the published network's.
      if (!verified && unverified) process.stderr.write(`warning: weights not verified: sha256 ${sha256} of ${w.file} differs from the registry's ${w.sha256} (--weights-unverified)\n`);
      weightsInfo.push({ source: sources?.[i] ?? w.url, file: w.file, bytes: weights[i].byteLength, sha256, registrySha256: w.sha256 || null, verified });
    }
    return { weights, weightsInfo, unverified };
  }
  if (weightSources.length !== 1) throw usageError(`--spec needs exactly one --weights FILE (the ONNX network), got ${weightSources.length}`);
  const bytes = await loadModel(weightSources[0], { signal, onProgress: (p) => onBytes({ ...p, file: path.basename(weightSources[0]) }) });
  signal.throwIfAborted();
  return { weights: bytes, weightsInfo: [{ source: weightSources[0], bytes: bytes.byteLength, sha256: await sha256Hex(bytes), verified: false }] };
}

/**
 * The sha256s of a network's weights: a registry network's (loadWeights checks the bytes against them), a spec's from
 * its loaded weights (loadNetworkWeights hashed them); null when not all are known.
 * loaded: loadNetworkWeights' result, or null.
 */
export function weightsShas(entry, loaded) {
  // --weights-unverified: the bytes read, not the registry's.
  const shas = entry && !loaded?.unverified ? entry.weights.map((w) => w.sha256) : loaded?.weightsInfo.map((w) => w.sha256);
  return shas?.length && shas.every(Boolean) ? shas : null;
}

/**
 * The run's context, logged: --probe measures it now, --context FILE takes one measured earlier (refused when the file
 * names other weights than the run's), else undefined (the plan takes the graph's or the registry's reach).
 * loaded: loadNetworkWeights' result, or null when the weights are not read yet.
 */
export async function runContext(o, entry, spec, loaded, tessera, ctx) {
  if (o.probe && o.context !== undefined) throw usageError('give --probe (measure the reach now) or --context FILE (a reach measured earlier), not both');
  if (o.probe) return probeContext(o, entry, spec, loaded.weights, tessera, ctx);
  if (o.context === undefined) return undefined;
  const { probe, weightsSha256 } = await readContext(o.context, ctx.signal);
  const shas = weightsSha256 && weightsShas(entry, loaded);
  if (shas && shas.join(',') !== weightsSha256.join(',')) {
    const short = (list) => list.map((s) => String(s).slice(0, 12)).join(', ');
    throw new CliError(
      `the reach in ${o.context} was measured on other weights (sha256 ${short(weightsSha256)}…, these are ${short(shas)}…): measure this network's with \`tessera-qsm receptive-field --probe --json\` or give --probe`,
      EXIT_ERROR,
      'InvalidArgument',
    );
  }
  const radii = Number.isInteger(probe.radius90) ? `: 90 % of the response within ${probe.radius90} voxels, 99 % within ${probe.radius99}` : '';
  ctx.progress.line(`context: the reach measured earlier (${o.context})${radii}`);
  return probe;
}

/** --probe: the network's measured context (two runs of a phantom patch), logged; the plan takes it. */
async function probeContext(o, entry, spec, weights, tessera, ctx) {
  if (entry && !entry.tileable) throw usageError(`--probe measures a field network's reach; ${entry.id} is ${entry.kind}`);
  ctx.progress.line('probe: running the network twice on a phantom patch to measure how far it looks');
  const rf = await tessera.receptiveField({ weights, model: entry?.id, spec, probe: true, signal: ctx.signal });
  ctx.progress.line(`probe: ${rf.probe.edge}³ patch, ${rf.probe.seconds.toFixed(1)} s: 90 % of the response within ${rf.probe.radius90} voxels, 99 % within ${rf.probe.radius99} (graph: ±${rf.graph.radiusMax})`);
  return rf.probe;
}

/** A spec read from a file that declares no bytesPerVoxel: its cost is calibrated before planning. */
export function uncosted(rawSpec) {
  return rawSpec !== undefined && rawSpec.bytesPerVoxel === undefined;
}

/** Calibrates a spec network (tessera.calibrate, remembered for these weights: plan and invert use it), logged. */
export async function calibrateSpec(tessera, weights, spec, ctx) {
  ctx.progress.line('calibrate: the spec declares no bytesPerVoxel: measuring the network\'s memory in ONNX Runtime workers');
  const c = await tessera.calibrate({ weights, spec });
  ctx.signal.throwIfAborted();
  ctx.progress.line(`calibrate: ${size(c.fixedBytes)} + ${c.bytesPerVoxel} B/voxel per worker (${c.points.length} patches ${c.points.map((p) => p.edge).join(', ')}³, ${c.seconds.toFixed(1)} s)`);
  return c;
}

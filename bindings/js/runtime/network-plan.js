// The planning of a network request, here in the driver worker and the same for plan(), invert() and the pipeline's
// network stage: the weights' sha256 (the key of a kept session, graph, calibration and speed), how far the network
// looks and how much it computes from its graph (graphs.js, read once per sha256), its memory cost calibrated when a
// spec declares no bytesPerVoxel (calibration.js), and with measureSpeed: true its speed measured on the threads its
// draft plan gives each worker (probes.js), the draft then planned again with it (the request is not read again).
import { TesseraError } from '../errors.js';
import { firstWeights, weightsSha, graphOf, keptGraph, graphContext, graphMacs, weightsNeeded } from './graphs.js';
import { calibrated } from './calibration.js';
import { measureSpeed } from './probes.js';
import { planOf, replanOf, requestOf } from './requests.js';

/**
 * The request with what it plans with settled: warmKey (the weights' sha256 when one file is given), and unless a plan
 * is handed back (its cost, reach and speed were settled when it was made): context (the request's; else, unless the
 * spec declares receptiveRadius, the graph's), graphMacsPerVoxel (the graph's), and for a spec without bytesPerVoxel
 * given weights its calibration (calibration; the spec's fixedBytes and bytesPerVoxel filled in from it).
 * a.weightsSha (each file's sha256) instead of a.weights (plan()): what is kept of those weights (else weightsNeeded).
 * id: the request's (it cancels a calibration).
 */
export async function settledNetwork(a, id) {
  const w = firstWeights(a.weights);
  const sha = w ? await weightsSha(w) : a.weightsSha?.[0];
  const files = a.weightsSha?.length ?? (Array.isArray(a.weights) ? a.weights.length : 1);
  const out = { ...a, warmKey: files === 1 ? sha : undefined };
  if (a.plan !== undefined && a.plan !== null) return out;
  const facts = w ? graphOf(sha, w) : sha !== undefined ? keptGraph(sha) : null;
  if (facts === undefined) throw weightsNeeded('the graph');
  if (a.context === undefined || a.context === null) out.context = a.spec?.receptiveRadius !== undefined || !facts ? undefined : graphContext(facts);
  out.graphMacsPerVoxel = facts ? graphMacs(facts) : undefined;
  const spec = a.spec;
  if (sha !== undefined && !a.model && spec && typeof spec === 'object' && spec.bytesPerVoxel === undefined) {
    const calibration = await calibrated(w ? { weights: w, spec } : { weightsSha: sha, spec }, id);
    out.spec = { ...spec, fixedBytes: calibration.fixedBytes, bytesPerVoxel: calibration.bytesPerVoxel };
    out.calibration = calibration;
  }
  return out;
}

/**
 * The plan of a network request ({handle, view} as planOf gives them, and settled: the request settledNetwork made).
 * With measureSpeed: true and no speed the request is planned without one (the draft), the speed measured (or the kept
 * one taken) on the threads per worker the request gives, else on those the draft gives each worker, sized to the
 * draft's run, and the draft planned again with it. id: the request's (it cancels a calibration or a probe).
 * Precondition: a is a network request (model or spec) with no plan handed back.
 */
export async function planNetwork(a, id) {
  const s = await settledNetwork(a, id);
  const request = requestOf(s);
  if (s.speed !== undefined || !s.measureSpeed) return { ...planOf(s, request), settled: s };
  const w = firstWeights(s.weights);
  if (!w && s.weightsSha !== undefined) throw weightsNeeded('the speed'); // plan() posts the bytes of a speed to measure
  if (!w) throw new TesseraError('measureSpeed: true needs the network\'s weights (the probe runs them)', 'InvalidArgument');
  const draft = planOf(s, request);
  try {
    const threads = Number.isInteger(s.threadsPerWorker) ? s.threadsPerWorker : draft.view.threadsPerWorker || 1;
    // The spec as given (its cost, not the calibrated one, bounds the probe's patches), as measureSpeed() takes it.
    const speed = await measureSpeed({ weights: w, model: s.model, spec: a.spec, threads, runVoxels: draft.view.voxelsRun || undefined }, id);
    const settled = { ...s, speed };
    return { ...replanOf(draft, settled), settled };
  } finally {
    draft.handle.delete();
  }
}

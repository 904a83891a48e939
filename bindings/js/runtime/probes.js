// The probes of a network: whole runs of phantom patches on a one-worker pool. Two purposes share it: the measured
// context (receptiveField({probe: true}): the centre voxel raised and lowered, the response by distance) and this
// machine's speed (measureSpeed(): patches at two edges timed; its pool is kept for the next run, sessions.js).
import { runSteps } from './driver.js';
import { TesseraError } from '../errors.js';
import { probeEdge, contextProfile } from '../receptive-field.js';
import { rt, call, postProgress, threadsPerWorker } from './context.js';
import { makeVolume, planOf, requestOf } from './requests.js';
import { startPools, stopPools, keepSession, sessionIdleMs } from './sessions.js';
import { firstWeights, weightsSha } from './graphs.js';

const speeds = new Map(); // `${sha256}:${threads}` → Promise<speed>: measureSpeed()'s, kept for the runtime's lifetime

/** What each probe says in its errors. */
const CONTEXT = {
  subject: 'the probe',
  verb: 'probe',
  notTiled: (name) => `${name} is not a field → χ network: it has no receptive field to probe`,
  tooLarge: (edge, why) => `the probe patch (${edge}³) does not fit: ${why}`,
};
const SPEED = {
  subject: 'the speed probe',
  verb: 'measure its speed',
  notTiled: (name) => `${name} is not tiled: its speed is not measured by patches`,
  tooLarge: (edge, why) => `the speed probe's ${edge}³ patch does not fit: ${why}`,
};

/**
 * The probed network: {entry (the registry's, or null for a spec), divisor, largestEdge (the largest cube the
 * single-patch limit allows; C++ fills an undeclared cost from the schema)}.
 */
function probedNetwork(a, purpose) {
  const entry = a.model ? call(() => rt.M.model(a.model)) : null;
  if (entry && !entry.tileable) throw new TesseraError(purpose.notTiled(entry.name), 'InvalidArgument');
  const cost = entry ? { divisor: entry.divisor, bytesPerVoxel: entry.bytesPerVoxel, fixedBytes: entry.fixedBytes } : a.spec;
  if (!cost) throw new TesseraError(`give a registry model id (model) or a custom network spec (spec) to ${purpose.verb}`, 'InvalidArgument');
  const divisor = cost.divisor ?? 1;
  const fit = call(() => rt.M.patchFit({ core: 1, halo: 0 }, { divisor, bytesPerVoxel: cost.bytesPerVoxel, fixedBytes: cost.fixedBytes }));
  return { entry, divisor, largestEdge: fit.largestEdge };
}

/**
 * A phantom patch of edge³ (1 mm, B0 along z, all in the mask) and the network's whole-volume plan of it (handle: an
 * M.Plan, deleted by the caller).
 */
function phantomPatch(a, edge, purpose) {
  const geometry = { dims: [edge, edge, edge], voxelMm: [1, 1, 1], b0Dir: [0, 0, 1] };
  const field = call(() => rt.M.phantom(geometry, { seed: 1, noise: 0 })).field;
  const mask = new Uint8Array(field.length).fill(1);
  const request = { ...requestOf({ model: a.model, spec: a.spec, whole: true }), tile: undefined };
  const { handle, view } = planOf({ geometry, mask }, request);
  if (!view.feasible) {
    handle.delete();
    throw new TesseraError(purpose.tooLarge(edge, view.message), 'BudgetExceeded');
  }
  return { edge, geometry, field, mask, handle };
}

/**
 * Runs body({run, pool, started, signal}) with a ready one-worker pool of a.weights, registered under id for cancel;
 * run(patch, field) runs the network whole on the patch with that field and resolves {chi, report}. The pool is given
 * back at the end unless body returns keep: true (it then belongs to the session cache); the patches' plans are deleted.
 */
async function onProbePool(a, id, { entry, threads, purpose, patches }, body) {
  const controller = new AbortController();
  rt.running.set(id, controller);
  const started = performance.now();
  let pools = [];
  try {
    pools = await startPools([a.weights], { k: 1, threadsPerWorker: threads, spec: entry });
    await pools[0].ready();
    const run = async (patch, field) => {
      if (controller.signal.aborted) throw new DOMException(`${purpose.subject} was cancelled`, 'AbortError');
      const volume = makeVolume(patch.geometry, field, patch.mask);
      try {
        return await runSteps(rt.M, { volume, plan: patch.handle, pools, signal: controller.signal });
      } finally {
        volume.delete();
      }
    };
    const { value, keep } = await body({ run, pool: pools[0], started, signal: controller.signal });
    if (keep) pools = []; // kept: not stopped below
    return value;
  } finally {
    rt.running.delete(id);
    for (const p of patches) p.handle.delete();
    await stopPools(pools);
  }
}

/**
 * The measured context of a network (receptiveField({probe: true})): two whole runs of a phantom field patch with the
 * centre voxel raised and lowered by epsilon ppm; the response by distance. a.graph: graphReceptiveField's result.
 */
export async function probeContext(a, id) {
  const net = probedNetwork(a, CONTEXT);
  const reach = a.graph.global ? 64 : Math.max(1, a.graph.radiusMax);
  const edge = probeEdge(reach, net.divisor, Math.min(net.largestEdge, a.maxEdge ?? 160));
  const epsilon = a.epsilon ?? 0.1;
  const patch = phantomPatch(a, edge, CONTEXT);
  const c = edge >> 1;
  const centre = c + edge * (c + edge * c);
  return onProbePool(a, id, { entry: net.entry, threads: threadsPerWorker(), purpose: CONTEXT, patches: [patch] }, async ({ run, started }) => {
    const out = [];
    for (const sign of [1, -1]) {
      const field = patch.field.slice();
      field[centre] += sign * epsilon;
      out.push((await run(patch, field)).chi);
      postProgress(id, { done: out.length, total: 2, stage: 'probe' });
    }
    // χ is x-fastest: the network layout of the reversed dims.
    const profile = contextProfile(out[0], out[1], [edge, edge, edge], [c, c, c]);
    return { value: { graph: a.graph, probe: { ...profile, edge, epsilon, seconds: (performance.now() - started) / 1000 } } };
  });
}

/**
 * This machine's speed of a network (measureSpeed(), and plan() or invert() with measureSpeed: true) on a.threads
 * (default 1), kept per (weights sha256, threads) for the runtime's lifetime: the kept one, else measured
 * (measureSpeedNow) with its pool kept for the run that follows (a.weights' sha256 its key). A failed or cancelled
 * probe is not kept.
 */
export async function measureSpeed(a, id) {
  const w = firstWeights(a.weights);
  if (!w) throw new TesseraError('measureSpeed needs the network\'s weights (ONNX bytes)', 'InvalidArgument');
  const sha = await weightsSha(w);
  const key = `${sha}:${a.threads ?? 1}`;
  if (!speeds.has(key)) {
    const measured = measureSpeedNow({ ...a, weights: w, warmKey: sha }, id);
    speeds.set(key, measured);
    measured.catch(() => speeds.get(key) === measured && speeds.delete(key));
  }
  return speeds.get(key);
}

/** Forgets the kept speeds (internal: a test measures again to have a worker kept). */
export function forgetSpeeds() {
  speeds.clear();
}

/**
 * This machine's speed of a network, measured now: a one-worker pool runs whole phantom patches at two edges
 * (C++'s speedProbeEdges: sized to a run of a.runVoxels patch voxels; else near 32 and 64), after one untimed run of
 * the larger; each edge's fastest of `repeats` runs is its point (default: C++'s leastRounds, and more pairs
 * while the timed runs add up to less than C++'s leastSeconds, up to its rounds; a run's patches too cheap to tell
 * apart: the standard edges, timed leastRounds times at the least). The fit of the points to the planner's model is C++'s (a
 * request's speed). With a.warmKey (the weights' sha256) the pool is kept for the run that follows (sessions.js).
 */
async function measureSpeedNow(a, id) {
  const net = probedNetwork(a, SPEED);
  const { small, large, leastSeconds, rounds, leastRounds } = call(() => rt.M.speedProbeEdges(a.runVoxels ?? 0, net.divisor, net.largestEdge));
  const threads = a.threads ?? 1;
  const repeats = Math.max(1, a.repeats ?? leastRounds);
  // Cheap pairs are timed again until they add up to leastSeconds (not when the caller fixed the repeats).
  const mostRounds = a.repeats ? repeats : Math.max(repeats, rounds);
  const patches = [];
  try {
    for (const edge of [small, large]) patches.push(phantomPatch(a, edge, SPEED));
  } catch (e) {
    for (const p of patches) p.handle.delete();
    throw e;
  }
  return onProbePool(a, id, { entry: net.entry, threads, purpose: SPEED, patches }, async ({ run, pool, started, signal }) => {
    const time = async (patch) => {
      const t0 = performance.now();
      await run(patch, patch.field);
      return (performance.now() - t0) / 1000;
    };
    const ready = (performance.now() - started) / 1000;
    let done = 0;
    let total = 0;
    // Times a pair of patches [smaller, larger]: {first (the untimed run), best (each edge's fastest), runs (each
    // edge's timed runs)}.
    const measure = async (pair, n) => {
      // The first run of a session at a size is slower (the arena grows to it; a browser compiles the hot code
      // optimised meanwhile): untimed, at the larger edge, which the smaller then fits in.
      const first = await time(pair[1]);
      const best = [Infinity, Infinity];
      const runs = [[], []];
      let timedSeconds = 0;
      const round = async (k) => {
        total += 2 * k;
        for (let e = 0; e < 2; e++) {
          for (let i = 0; i < k; i++) {
            const seconds = await time(pair[e]);
            timedSeconds += seconds;
            runs[e].push(seconds);
            best[e] = Math.min(best[e], seconds);
            postProgress(id, { done: ++done, total, stage: 'speed' });
          }
        }
      };
      await round(n);
      for (let k = n; k < mostRounds && timedSeconds < leastSeconds; k++) await round(1);
      // A busy moment can make the larger patch look no slower (a small network's patches take milliseconds): up to
      // three more runs of each edge before the fit refuses the points as too noisy.
      for (let extra = 0; extra < 3 && !(best[1] > best[0]); extra++) await round(1);
      return { first, best, runs };
    };
    let timed = patches;
    let { first, best, runs } = await measure(timed, repeats);
    // Patches sized to a run can be too cheap to tell apart (a network that takes milliseconds per patch): such a
    // network is timed at the standard edges, which cost it little as well.
    if (!(best[1] > best[0]) && a.runVoxels) {
      const standard = call(() => rt.M.speedProbeEdges(0, net.divisor, net.largestEdge));
      timed = [standard.small, standard.large].map((edge) => phantomPatch(a, edge, SPEED));
      patches.push(...timed); // deleted with the others when the probe ends
      ({ first, best, runs } = await measure(timed, Math.max(leastRounds, repeats)));
    }
    const points = timed.map((p, e) => ({ edge: p.edge, threads, seconds: best[e] }));
    const startSeconds = ready + Math.max(0, first - points[1].seconds);
    const seconds = (performance.now() - started) / 1000;
    const value = { points, startSeconds, threads, seconds, runs: { untimed: first, small: runs[0], large: runs[1] } };
    if (!a.warmKey || signal.aborted) return { value };
    await keepSession(a.warmKey, pool); // the run that follows starts no worker of its own
    return {
      value: { ...value, warmKey: a.warmKey, warmIdleSeconds: sessionIdleMs() / 1000, keptWorkers: pool.liveWorkers },
      keep: true,
    };
  });
}

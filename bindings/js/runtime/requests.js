// What the driver sends to the C++ core for a request: the volume (field or phase, mask, magnitude) copied into the
// module, the request object (network, method or pipeline), read by C++ once into the plan it holds (with the network's
// memory cost beside its view).
import { TesseraError } from '../errors.js';
import { maskFromValues } from '../io/mask-values.js';
import { NETWORK_OPTIONS } from '../request.js';
import { rt, call, hardwareThreads } from './context.js';
import { sessionHolds } from './sessions.js';

/** A mask as 0/1 bytes (io/mask-values.js' rule): all ones when absent. Precondition: n is the volume's voxel count. */
export function toMask(mask, n) {
  if (mask === undefined || mask === null) return new Uint8Array(n).fill(1);
  if (mask.length !== n) {
    throw new TesseraError(`mask holds ${mask.length} values but the volume has ${n} voxels: field and mask must have the same dims`, 'InvalidArgument');
  }
  if (mask instanceof Uint8Array) return mask;
  return maskFromValues(mask); // > 0 inside: a mask of −1 outside is not taken as inside

}

// Copies field (or, for phase networks, the wrapped phase of every echo), mask and an optional magnitude into
// a module Volume (views are taken right after each allocation and filled at once).
export function makeVolume(geometry, field, mask, { echoes = 1, magnitude, what = 'field' } = {}) {
  const volume = call(() => new rt.M.Volume(geometry, echoes));
  const n = volume.voxelCount();
  try {
    const fill = (data, name, view) => {
      if (!(data instanceof Float32Array)) throw new TesseraError(`${name} must be a Float32Array (x-fastest${echoes > 1 ? ', echo after echo' : ''})`, 'InvalidArgument');
      if (data.length !== n * echoes) {
        const dims = geometry.dims.join('×');
        if (what === 'phase' && data.length % n === 0) {
          throw new TesseraError(`${name} holds ${data.length / n} echo(es) of ${dims} but te gives ${echoes} echo time(s): give one TE per echo`, 'InvalidArgument');
        }
        const each = echoes > 1 ? ` (${echoes} echoes)` : '';
        throw new TesseraError(`${name} holds ${data.length} values but the volume ${dims}${each} has ${n * echoes}`, 'InvalidArgument');
      }
      view().set(data);
    };
    if (field !== undefined) fill(field, what, () => volume.fieldView());
    if (magnitude !== undefined && magnitude !== null) fill(magnitude, 'magnitude', () => volume.magnitudeView());
    volume.maskView().set(toMask(mask, n));
  } catch (e) {
    volume.delete();
    throw e;
  }
  return volume;
}

/** Echoes of a phase-network request: one per TE. */
export function echoesOf(a) {
  return Array.isArray(a.te) ? Math.max(1, a.te.length) : 1;
}

// tile "auto", {core: "auto"} or absent (the schema's default): the C++ auto-planner chooses core, workers and
// threads per worker, keeping the caller's workers / threadsPerWorker when they are given.
function isAuto(tile) {
  return tile === undefined || tile === null || tile === 'auto' || (typeof tile === 'object' && tile.core === 'auto');
}

/** Voxels of a geometry, 0 when its dims are not three whole numbers >= 1 (C++ then says what is wrong). */
export function voxels(geometry) {
  const d = geometry?.dims;
  return Array.isArray(d) && d.length === 3 && d.every((x) => Number.isInteger(x) && x >= 1) ? d[0] * d[1] * d[2] : 0;
}

/**
 * The plan of a request, made once in C++ (no volume is allocated: the mask crosses, and the field, which C++ reads
 * where a network reads it unmasked, so that a crop box holds every voxel the network sees): {handle (an M.Plan:
 * delete it, or hold it, plans.js), view (plan()'s object, with the network's cost and where it came from: cost)}.
 */
export function planOf(a, request) {
  const n = voxels(a.geometry);
  const mask = n ? toMask(a.mask, n) : undefined;
  const handle = call(() => rt.M.plan(a.geometry, mask, request, a.field ?? undefined));
  return viewed(handle, request.method === undefined ? costOf(a) : undefined); // a method runs no network: no network cost
}

/**
 * A draft plan of this request (planOf's {handle, view}) planned again with a.speed: the request is not read again.
 * Returns a new {handle, view}; the draft stays the caller's to delete.
 */
export function replanOf(draft, a) {
  const n = voxels(a.geometry);
  const mask = n ? toMask(a.mask, n) : undefined;
  const handle = call(() => draft.handle.replan(mask, a.field ?? undefined, runSpeed(a)));
  return viewed(handle, draft.view.cost);
}

/** {handle, view} of a new M.Plan, its view with the network's cost when there is one (the handle deleted if the view fails). */
function viewed(handle, cost) {
  try {
    const view = call(() => handle.view());
    if (cost !== undefined) view.cost = cost;
    return { handle, view };
  } catch (e) {
    handle.delete();
    throw e;
  }
}

/**
 * The memory cost a request plans with and where it came from: {source: 'registry' | 'declared' | 'calibrated' |
 * 'assumed', fixedBytes, bytesPerVoxel, ...}. a.calibration: what was measured for a spec without bytesPerVoxel
 * (network-plan.js).
 */
export function costOf(a) {
  if (a.model) {
    const m = call(() => rt.M.model(a.model));
    return { source: 'registry', fixedBytes: m.fixedBytes, bytesPerVoxel: m.bytesPerVoxel, provisional: m.costProvisional, note: m.costSource };
  }
  const spec = a.spec ?? {};
  if (a.calibration) {
    const c = a.calibration;
    return {
      source: 'calibrated', fixedBytes: c.fixedBytes, bytesPerVoxel: c.bytesPerVoxel, seconds: c.seconds, threads: c.threads,
      points: c.points, note: c.fit?.note,
    };
  }
  if (spec.bytesPerVoxel !== undefined) return { source: 'declared', fixedBytes: spec.fixedBytes ?? 0, bytesPerVoxel: spec.bytesPerVoxel };
  const schema = call(() => rt.M.schema());
  const option = (name) => schema.find((o) => o.name === name)?.defaultValue;
  return {
    source: 'assumed',
    fixedBytes: spec.fixedBytes ?? option('spec.fixedBytes'),
    bytesPerVoxel: option('spec.bytesPerVoxel'),
    note: 'the spec declares no bytesPerVoxel and no weights were given to calibrate the network: the schema default is assumed',
  };
}

/** The classical methods' names (the schema's method choices), read once from C++. */
let methodNames = null;
function methodsOf() {
  methodNames ??= call(() => rt.M.schema()).find((o) => o.name === 'method').choices;
  return methodNames;
}

/** A method request: its name, every methods' parameter objects given (C++ refuses another method's), the threads. */
function methodRequestOf(a) {
  const r = { method: a.method, hardwareThreads: hardwareThreads(), magnitudeEchoes: a.magnitude ? 1 : 0, fieldUnits: a.fieldUnits };
  for (const m of methodsOf()) if (a[m] !== undefined) r[m] = a[m];
  return r;
}

/**
 * The request a network run sends to C++: the schema's network options as given (request.js NETWORK_OPTIONS; C++
 * checks them), the network, its reach and speed, and the threads this runtime may use.
 */
export function requestOf(a) {
  if (a.method !== undefined && a.method !== null) return methodRequestOf(a);
  const auto = isAuto(a.tile);
  const r = Object.fromEntries(NETWORK_OPTIONS.map((k) => [k, a[k]]));
  return {
    ...r,
    model: a.model,
    whole: !!a.whole,
    // A fixed tile takes createTessera's workers and threads when the request names none (C++'s defaults when neither does).
    workers: auto ? a.workers : a.workers ?? rt.options.workers,
    threadsPerWorker: auto ? a.threadsPerWorker : a.threadsPerWorker ?? rt.options.threadsPerWorker,
    hardwareThreads: hardwareThreads(),
    context: a.context,
    graphMacsPerVoxel: a.graphMacsPerVoxel,
    speed: runSpeed(a),
    verify: !!a.verify,
    fieldUnits: a.fieldUnits,
  };
}

/** The speed a network request plans with: a.speed, with no worker start-up when a session of its weights is kept (sessions.js). */
function runSpeed(a) {
  return a.speed && sessionHolds(a.warmKey) ? { ...a.speed, startSeconds: 0 } : a.speed;
}

/** The request a pipeline sends to C++: its options pass through as given (C++ reads and checks them), the volumes stay. */
export function pipelineRequestOf(a) {
  const { phase, totalField, phaseDifference, magnitude, mask, geometry, weights, model, spec, network, plan, ...options } = a;
  return { ...options, pipeline: true, maskGiven: mask !== undefined && mask !== null, magnitudeEchoes: magnitude ? 1 : 0, hardwareThreads: hardwareThreads() };
}

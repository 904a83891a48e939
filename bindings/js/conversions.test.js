// The objects the wasm module hands to JavaScript (bindings/wasm/conversions.h), checked field by field against what
// the package declares of them (value-types.d.ts's record, index.d.ts's unions): names, their order, Number types
// (never a BigInt: the module is built with WASM_BIGINT=0), the declared string values, and null where a member is
// absent. The API, the CLI (report.json, plan --json) and the page depend on these shapes.
import { test, before } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import { loadTesseraModule } from './debug.js';

let M;
before(async () => {
  M = await loadTesseraModule({ pthreadPoolSize: 3 });
  recordShapes();
});

// ---- Shapes ----
const N = 'number';
const S = 'string';
const B = 'boolean';
class ArrayOf { constructor(shape) { this.shape = shape; } }
class Nullable { constructor(shape) { this.shape = shape; } }
class Either { constructor(...shapes) { this.shapes = shapes; } }
class Lazy { constructor(get) { this.get = get; } }
class Typed { constructor(ctor) { this.ctor = ctor; } }
const arrayOf = (s) => new ArrayOf(s);
const nullable = (s) => new Nullable(s);
const T3 = [N, N, N];

/** Asserts value has exactly this shape: an object's own keys in this order, arrays, typeof of every leaf. */
function assertShape(value, shape, path = 'value') {
  if (shape instanceof Lazy) return assertShape(value, shape.get(), path);
  if (shape instanceof Nullable) {
    if (value !== null) assertShape(value, shape.shape, path);
    return;
  }
  if (shape instanceof Either) {
    const fits = shape.shapes.some((s) => {
      try {
        assertShape(value, s, path);
        return true;
      } catch {
        return false;
      }
    });
    assert.ok(fits, `${path}: ${JSON.stringify(value)} fits none of its shapes`);
    return;
  }
  if (shape instanceof OneOf) {
    assert.ok(shape.values.includes(value), `${path} = ${JSON.stringify(value)} is none of ${shape.values.join(', ')}`);
    return;
  }
  if (typeof shape === 'string') {
    assert.equal(typeof value, shape, `${path} is ${typeof value} (${String(value)}), not ${shape}`);
    if (shape === N) assert.ok(Number.isFinite(value), `${path} = ${value} is not finite`);
    return;
  }
  if (shape instanceof Typed) {
    assert.ok(value instanceof shape.ctor, `${path} is not a ${shape.ctor.name}: ${Object.prototype.toString.call(value)}`);
    return;
  }
  if (shape instanceof ArrayOf) {
    assert.ok(Array.isArray(value), `${path} is not an array: ${Object.prototype.toString.call(value)}`);
    value.forEach((v, i) => assertShape(v, shape.shape, `${path}[${i}]`));
    return;
  }
  if (Array.isArray(shape)) {
    assert.ok(Array.isArray(value), `${path} is not an array: ${Object.prototype.toString.call(value)}`);
    assert.equal(value.length, shape.length, `${path} has ${value.length} elements, not ${shape.length}`);
    shape.forEach((s, i) => assertShape(value[i], s, `${path}[${i}]`));
    return;
  }
  assert.ok(value !== null && typeof value === 'object' && Object.getPrototypeOf(value) === Object.prototype, `${path} is not a plain object`);
  assert.deepEqual(Object.keys(value), Object.keys(shape), `${path}'s fields`);
  for (const k of Object.keys(shape)) assertShape(value[k], shape[k], `${path}.${k}`);
}

// Each registered value type's shape comes from the module's own record of its registration (M.valueTypes(), what
// value-types.d.ts is generated from), its named string unions from index.d.ts: the values the conversions make are
// checked against what the package declares, with no field list kept here.
class OneOf { constructor(values) { this.values = values; } }
const INDEX_DTS = fs.readFileSync(new URL('./index.d.ts', import.meta.url), 'utf8');
const REQUEST_DTS = fs.readFileSync(new URL('./request-types.d.ts', import.meta.url), 'utf8');
/** The type text of field `key` of interface `name` in index.d.ts or the generated request-types.d.ts, or undefined. */
function interfaceFieldType(name, key) {
  for (const text of [INDEX_DTS, REQUEST_DTS]) {
    const body = text.match(new RegExp(`export interface ${name}\\b[^{]*\\{([\\s\\S]*?)\\n\\}`));
    const field = body?.[1].match(new RegExp(`\\n  ${key}\\??: ([^;]+);`));
    if (field) return field[1];
  }
  return undefined;
}
const shapes = new Map();
/** The shape of a TypeScript type text of the record ('number', 'PlanTile[]', 'CropBox | null', "'a' | 'b'", a name). */
function shapeOfType(type) {
  type = type.trim();
  const generic = /^Array<(.*)>$/.exec(type);
  if (generic) return arrayOf(shapeOfType(generic[1]));
  const parts = type.split('|').map((p) => p.trim());
  if (parts.length > 1) {
    if (parts.at(-1) === 'null') return nullable(shapeOfType(parts.slice(0, -1).join(' | ')));
    if (parts.every((p) => /^'[^']*'$/.test(p))) return new OneOf(parts.map((p) => p.slice(1, -1)));
    return new Either(...parts.map(shapeOfType));
  }
  if (type.endsWith('[]')) return arrayOf(shapeOfType(type.slice(0, -2)));
  if (type === 'number' || type === 'string' || type === 'boolean') return type;
  if (type === 'Float32Array') return new Typed(Float32Array);
  if (shapes.has(type)) return new Lazy(() => shapes.get(type));
  // An interface field's type without undefined (NonNullable<TileOptions['blend']>: an alias of a request option).
  const field = /^NonNullable<(\w+)\['(\w+)'\]>$/.exec(type);
  if (field) {
    const declared = interfaceFieldType(field[1], field[2]);
    assert.ok(declared, `the record names ${type}, which names no declared field`);
    return shapeOfType(declared);
  }
  const union = INDEX_DTS.match(new RegExp(`export type ${type} = ([^;]+);`));
  assert.ok(union, `the record names ${type}, which is neither a registered value type nor a type of index.d.ts`);
  return shapeOfType(union[1]);
}
/** The shape of the registered value type name. */
const shapeOf = (name) => {
  assert.ok(shapes.has(name), `${name} is not a registered value type`);
  return shapes.get(name);
};
function recordShapes() {
  const record = M.valueTypes();
  for (const t of record) shapes.set(t.name, null);
  for (const t of record) {
    const fields = t.fields.map((f) => [f.name, shapeOfType(f.type)]);
    shapes.set(t.name, t.tuple ? fields.map(([, s]) => s) : Object.fromEntries(fields));
  }
}

// What the runtime's plan view adds to the planner's TilePlan (index.d.ts Plan), a patch FieldRun.next() hands out,
// what FieldRun.report() adds to the driver's counts and a self-check's comparison: not registered value types.
const planShape = () => ({ ...shapeOf('TilePlan'), b0Align: shapeOf('PlannedB0Alignment'), warning: S, networks: N });
const patchShape = () => ({
  job: N, tile: N, network: N, dims: [N, N, N, N, N], input: new Typed(Float32Array), extras: arrayOf(shapeOf('NamedInput')),
});
const runReportShape = () => ({ ...shapeOf('TileRunReport'), warning: S, warnings: arrayOf(S) });
const verificationShape = () => {
  const { hfen, ...agreement } = shapeOf('Agreement'); // the self-check has no HFEN
  return { ...agreement, compareLo: T3, compareHi: T3, margin: N };
};

// ---- Data ----
const geometry = { dims: [20, 18, 16], voxelMm: [1, 1.5, 2], b0Dir: [0, 0.1, 1] };
const n = 20 * 18 * 16;
function interiorMask([nx, ny, nz], margin) {
  const m = new Uint8Array(nx * ny * nz);
  for (let z = margin; z < nz - margin; z++)
    for (let y = margin; y < ny - margin; y++)
      for (let x = margin; x < nx - margin; x++) m[x + nx * (y + ny * z)] = 1;
  return m;
}
const mask = interiorMask(geometry.dims, 3);
const field = Float32Array.from({ length: n }, (_, i) => Math.sin(i * 0.37) * 0.05);

/** The view of a request's plan (the held plan given back at once). */
function planView(g, m, request) {
  const handle = M.plan(g, m, request, undefined);
  try {
    return handle.view();
  } finally {
    handle.delete();
  }
}

/** Runs a held plan's field run to the end with the identity network (the output is the patch it was given). */
function runIdentity(volume, handle) {
  const run = M.startFieldRun(volume, handle);
  try {
    for (;;) {
      const patches = [];
      for (let p; (p = run.next()) !== null; ) patches.push({ job: p.job, output: p.input.slice() });
      for (const p of patches) run.finish(p.job, p.output);
      if (run.state().finished) break;
      assert.ok(patches.length > 0, 'the run neither finished nor handed out a patch');
    }
    return { report: run.report(), chi: run.result() };
  } finally {
    run.delete();
  }
}

function newVolume(g = geometry, f = field, m = mask) {
  const v = new M.Volume(g, 1);
  v.fieldView().set(f);
  v.maskView().set(m);
  return v;
}

test('a tiled plan: every field, Numbers, the grid tiles; verify, context and predictedFidelity null when absent', () => {
  const request = { spec: { divisor: 4 }, tile: { core: 8, halo: 2 } };
  const plan = planView(geometry, mask, request);
  assertShape(plan, planShape(), 'plan');
  assert.equal(plan.feasible, true, plan.message);
  assert.deepEqual(plan.tile, { core: 8, halo: 2, stride: 8, blend: 'crop' });
  assert.equal(plan.verify, null);
  assert.equal(plan.context, null, 'a custom network without a receptive radius: its reach is unknown');
  assert.equal(plan.predictedFidelity, null);
  assert.equal(plan.patchEdge, 12); // 8 + 2·2, on the divisor 4
  assert.deepEqual(plan.patchDims, [12, 12, 12]);
  // The grid: ceil(dims / core) tiles per axis, in x-fastest order, the skipped ones those whose core misses the mask.
  assert.deepEqual(plan.grid.counts, geometry.dims.map((d) => Math.ceil(d / 8)));
  assert.equal(plan.grid.tiles.length, plan.tilesTotal);
  assert.equal(plan.tilesTotal, plan.grid.counts[0] * plan.grid.counts[1] * plan.grid.counts[2]);
  assert.equal(plan.grid.tiles.filter((t) => t.skipped).length, plan.tilesSkipped);
  assert.equal(plan.tilesActive + plan.tilesSkipped, plan.tilesTotal);
  // Each patch is the core ± halo, or inside it where the tile's mask voxels need less (cut to its mask).
  let voxels = 0;
  plan.grid.tiles.forEach((t, i) => {
    assert.equal(t.index, i);
    for (let a = 0; a < 3; a++) {
      assert.ok(t.patchLo[a] >= t.coreLo[a] - 2 && t.patchLo[a] + t.patchDims[a] <= t.coreLo[a] - 2 + 12, `tile ${i} axis ${a}`);
      assert.ok(t.coreHi[a] > t.coreLo[a] && t.coreHi[a] - t.coreLo[a] <= 8);
    }
    if (!t.skipped) voxels += t.patchDims[0] * t.patchDims[1] * t.patchDims[2];
  });
  assert.equal(plan.voxelsRun, voxels);
  assert.ok(plan.grid.tiles.some((t) => t.patchLo.some((x) => x < 0)), 'negative patch corners stay negative Numbers');
  assert.equal(plan.peakBytes, plan.activationBytes + plan.moduleHeapBytes);
});

test('a plan with verify, a known reach and overlapping blended tiles: the nested objects are there', () => {
  const request = { spec: { divisor: 1, receptiveRadius: 3 }, tile: { core: 6, halo: 3, stride: 4, blend: 'cosine' }, verify: true };
  const plan = planView(geometry, mask, request);
  assertShape(plan, planShape(), 'plan');
  assert.equal(plan.feasible, true, plan.message);
  assert.deepEqual(plan.tile, { core: 6, halo: 3, stride: 4, blend: 'cosine' });
  assert.equal(plan.grid.stride, 4);
  assert.equal(plan.grid.blend, 'cosine');
  assert.notEqual(plan.context, null);
  assert.equal(plan.context.radius, 3);
  assert.ok(plan.context.radius90 <= plan.context.radius99);
  assert.notEqual(plan.predictedFidelity, null);
  assert.ok(plan.predictedFidelity.r <= 1);
  assert.notEqual(plan.verify, null);
  assert.equal(plan.verify.possible, true, plan.verify.message);
  assert.notEqual(plan.verify.plan, null);
  assert.equal(plan.verify.plan.wholeVolume, true);
  assert.deepEqual(plan.verify.plan.patchDims, [0, 1, 2].map((a) => plan.verify.hi[a] - plan.verify.lo[a]));
});

test('a whole-volume plan and a refused one keep every field', () => {
  const whole = planView(geometry, undefined, { spec: {}, whole: true });
  assertShape(whole, planShape(), 'whole');
  assert.equal(whole.wholeVolume, true);
  assert.deepEqual(whole.predictedFidelity, { r: 1, nrmse: 0, deficit: 0, beyondFit: false }, 'the whole-volume run is its own reference');
  assert.equal(whole.grid.tiles.length, 1);
  const refused = planView(geometry, mask, { spec: { bytesPerVoxel: 1e6 }, tile: { core: 200, halo: 8 } });
  assertShape(refused, planShape(), 'refused');
  assert.equal(refused.feasible, false);
  assert.match(refused.message, /single-patch limit/);
  assert.deepEqual(refused.grid.tiles, []);
});

test('patchFit: byte figures past 2^32 arrive whole, as Numbers', () => {
  const fit = M.patchFit({ core: 1000, halo: 4 }, { divisor: 16, bytesPerVoxel: 1100, fixedBytes: 5e9 });
  assertShape(fit, shapeOf('PatchFit'), 'patchFit');
  assert.equal(fit.patchEdge, 1008); // 1000 + 2·4, on the divisor 16
  assert.equal(fit.bytes, 5e9 + 1008 ** 3 * 1100);
  assert.equal(fit.fits, false);
  assert.equal(fit.largestEdge, 0, 'the fixed bytes alone are over the limit');
  const small = M.patchFit({ core: 40, halo: 4 }, { divisor: 8, bytesPerVoxel: 1100 });
  assertShape(small, shapeOf('PatchFit'), 'patchFit');
  assert.equal(small.bytes, 48 ** 3 * 1100);
  assert.equal(small.fits, true);
  assert.equal(small.message, '');
  assert.equal(small.largestCore, small.largestEdge - 8);
  assert.equal(small.largestEdge % 8, 0);
});

test('a run report from a field run, and the volume geometry', () => {
  const request = { spec: { divisor: 2 }, tile: { core: 7, halo: 1 } };
  const handle = M.plan(geometry, mask, request, undefined);
  const plan = handle.view();
  const volume = newVolume();
  try {
    assertShape(volume.geometry(), shapeOf('VolumeGeometry'), 'geometry');
    assert.deepEqual(volume.geometry(), geometry);
    const { report, chi } = runIdentity(volume, handle);
    assertShape(report, runReportShape(), 'report');
    assert.equal(report.tilesTotal, plan.tilesTotal);
    assert.equal(report.tilesRun, plan.tilesActive);
    assert.equal(report.tilesSkipped, plan.tilesSkipped);
    assert.equal(report.tileSeconds.length, report.tilesRun);
    assert.equal(report.patchEdge, plan.patchEdge);
    assert.equal(report.bytesPerTile, plan.bytesPerTile);
    assert.equal(report.concurrency, plan.tilesInFlight);
    // The identity network gives back the field inside the mask, zero outside.
    for (let i = 0; i < n; i++) assert.equal(chi[i], mask[i] ? field[i] : 0);
  } finally {
    volume.delete();
    handle.delete();
  }
});

test('a phase network on the step engine: its network calls (dims, heap views, the extra inputs) and its report', () => {
  const request = { model: 'iqsm', te: 0.02, b0: 3 };
  const handle = M.plan(geometry, mask, request, undefined);
  assert.equal(handle.view().feasible, true, handle.view().message);
  const volume = newVolume(geometry, field.map((f) => f * 40)); // a wrapped phase, rad
  const run = M.startFieldRun(volume, handle);
  try {
    const roles = M.model('iqsm').inputs;
    let calls = 0;
    for (let p; (p = run.next()) !== null; ) {
      calls++;
      assertShape(p, patchShape(), 'patch');
      assert.equal(p.network, 0);
      const [, channels, x, y, z] = p.dims;
      assert.equal(p.input.length, channels * x * y * z);
      assert.ok(p.extras.length > 0, 'iQSM takes more inputs than the phase');
      for (const e of p.extras) {
        assert.ok(roles.includes(e.role), `${e.role} is one of ${roles}`);
        assert.equal(e.input.length, e.dims.reduce((q, d) => q * d, 1));
      }
      assert.equal(run.next(), null, 'one call out at a time: the next echo waits for this output');
      run.finish(p.job, new Float32Array(x * y * z)); // one output channel
    }
    assert.equal(calls, 1, 'one echo, one call');
    assert.equal(run.state().finished, true);
    const report = run.report();
    assertShape(report, runReportShape(), 'report');
  } finally {
    run.delete();
    volume.delete();
    handle.delete();
  }
});

test('the self-check comparison: {voxels, r, nrmse, maxAbs, compareLo, compareHi, margin}, no hfen', () => {
  const request = { spec: { divisor: 1, receptiveRadius: 2 }, tile: { core: 6, halo: 2 }, verify: true };
  const handle = M.plan(geometry, mask, request, undefined);
  const plan = handle.view();
  assert.equal(plan.verify?.possible, true, plan.verify?.message);
  const volume = newVolume();
  try {
    const { chi } = runIdentity(volume, handle);
    const check = M.startVerification(volume, handle);
    try {
      const box = check.box();
      const boxPlan = check.boxPlan();
      let boxChi;
      try {
        ({ chi: boxChi } = runIdentity(box, boxPlan));
      } finally {
        box.delete();
        boxPlan.delete();
      }
      const agreement = check.compare(chi, boxChi);
      assertShape(agreement, verificationShape(), 'verification');
      assert.deepEqual(agreement.compareLo, plan.verify.compareLo);
      assert.deepEqual(agreement.compareHi, plan.verify.compareHi);
      assert.equal(agreement.margin, plan.verify.margin);
      assert.equal(agreement.maxAbs, 0, 'an identity network tiled equals it whole');
      assert.equal(typeof check.dataConsistency(chi), 'number');
    } finally {
      check.delete();
    }
  } finally {
    volume.delete();
    handle.delete();
  }
});

test('compare: the agreement of two maps, hfen 0 unless asked', () => {
  const changed = Float32Array.from(field);
  const voxels = mask.reduce((s, m) => s + m, 0);
  changed[mask.indexOf(1)] += 0.5;
  const a = M.compare(geometry, changed, field, mask, {});
  assertShape(a, shapeOf('Agreement'), 'compare');
  assert.equal(a.voxels, voxels);
  assert.ok(Math.abs(a.maxAbs - 0.5) < 1e-6, `maxAbs ${a.maxAbs}`);
  assert.equal(a.hfen, 0);
  const same = M.compare(geometry, field, field, mask, { hfen: true });
  assertShape(same, shapeOf('Agreement'), 'compare');
  assert.equal(same.nrmse, 0);
  assert.equal(same.maxAbs, 0);
});

test('schema, registry, model and limits', () => {
  const schema = M.schema();
  assertShape(schema, arrayOf(shapeOf('RequestOption')), 'schema');
  assert.ok(schema.length > 0);
  assert.equal(new Set(schema.map((o) => o.name)).size, schema.length, 'option names are unique');
  const quality = schema.find((o) => o.name === 'quality');
  assert.ok(quality.choices.length > 1 && quality.choices.includes(quality.default));
  for (const o of schema) {
    if (typeof o.default === 'number') assert.equal(o.default, o.defaultValue, o.name);
    if (o.choices.length === 0 && typeof o.default === 'number') assert.ok(o.min <= o.default && o.default <= o.max, o.name);
  }
  const registry = M.registry();
  assertShape(registry, arrayOf(shapeOf('ModelInfo')), 'registry');
  assert.ok(registry.some((m) => m.measuredContext === null) && registry.some((m) => m.measuredContext !== null),
    'the registry holds models with and without a measured context');
  assert.ok(registry.some((m) => m.weights.length > 0));
  for (const m of registry) {
    assert.deepEqual(M.model(m.id), m);
    for (const w of m.weights) assert.ok(w.url.endsWith(w.file), `${m.id}: ${w.url}`);
  }
  const limits = M.limits();
  assertShape(limits, shapeOf('Limits'), 'limits');
  assert.ok(limits.tileActivationBudget < limits.maxPatchActivationBytes && limits.maxPatchActivationBytes < limits.workerHeapGuardBytes && limits.workerHeapGuardBytes < limits.heapCeilingBytes);
});

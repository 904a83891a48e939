// value-types.d.ts is what the module's record of its Embind value types generates (scripts/value-types.js), and what
// the module returns has exactly the recorded fields, of the recorded types: a field registered in C++ without
// regenerating, or a value that drifts from its registration, fails here.
// TESSERA_WASM_DIR: the node flavour's folder to test (default dist/wasm/node, what scripts/build.sh installs).
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { renderValueTypes, loadModuleFrom, VALUE_TYPES_DTS, VALUE_TYPES_COMMAND } from '../../scripts/value-types.js';
import { createTessera } from './index.js';
import { GAMMA_BAR_MHZ_PER_T } from './io/nifti.js';
import { unionMembers } from '../../tests/js/type-text.js';

const root = fileURLToPath(new URL('../../', import.meta.url));
const wasmDir = process.env.TESSERA_WASM_DIR ? path.resolve(process.env.TESSERA_WASM_DIR) : path.join(root, 'dist/wasm/node');
const INDEX_DTS = fs.readFileSync(new URL('./index.d.ts', import.meta.url), 'utf8');
// index.d.ts with the request types it re-exports (request-types.d.ts, generated from the schema): the aliases and
// interfaces a value's type may name.
const DECLARED = [INDEX_DTS, fs.readFileSync(new URL('./request-types.d.ts', import.meta.url), 'utf8')].join('\n');

let M;
let record;
let tessera;
before(async () => {
  M = await loadModuleFrom(wasmDir);
  record = new Map(M.valueTypes().map((t) => [t.name, t]));
  tessera = await createTessera({ workers: 1, hardwareThreads: 1, wasmBase: wasmDir });
});
after(() => tessera?.terminate());

test('io/nifti.js\'s γ̄ is the C++ constant (tessera/common/physics.h) the module registers', () => {
  assert.equal(typeof M.GAMMA_BAR_MHZ_PER_T, 'number');
  assert.equal(GAMMA_BAR_MHZ_PER_T, M.GAMMA_BAR_MHZ_PER_T);
});

test('the committed value-types.d.ts is what the module\'s registrations generate', () => {
  const want = renderValueTypes([...record.values()], INDEX_DTS);
  const have = fs.readFileSync(VALUE_TYPES_DTS, 'utf8');
  if (have === want) return;
  const a = have.split('\n');
  const b = want.split('\n');
  const at = a.findIndex((line, i) => line !== b[i]);
  assert.fail(`bindings/js/value-types.d.ts differs from the registrations at line ${at + 1} (committed: ${JSON.stringify(a[at])}, generated: ${JSON.stringify(b[at])}): run \`${VALUE_TYPES_COMMAND}\` after scripts/build.sh and commit it`);
});

// ---------------------------------------------------------------------------------------------------
// Values checked against type texts: the record's, and index.d.ts's for what the runtime adds.

/** The top-level members of a union type text. */
const members = unionMembers;

/** The fields index.d.ts declares for interface name: {parent (the extended name or null), fields: Map(name → {type, optional})}. */
function indexInterface(name) {
  const m = new RegExp(`export interface ${name}(?: extends (\\w+))? \\{`).exec(DECLARED);
  if (!m) return null;
  const body = DECLARED.slice(m.index + m[0].length, DECLARED.indexOf('\n}\n', m.index)).replace(/\/\*\*[\s\S]*?\*\//g, '');
  const fields = new Map();
  for (const f of body.matchAll(/^\s*(?:readonly )?(\w+)(\??): ([^;]+);$/gm)) fields.set(f[1], { type: f[3], optional: f[2] === '?' });
  return { parent: m[1] ?? null, fields };
}

/** An index.d.ts type alias's text, or undefined. */
const indexAlias = (name) => new RegExp(`export type ${name} = ([^;]+);`).exec(DECLARED)?.[1];

/** The record names met with an object (not null), to show every registration was checked on a real value. */
const met = new Set();

/** Asserts value is of type text type (the record's types, index.d.ts's aliases and interfaces, primitives, literals). */
function check(value, type, where) {
  const union = members(type);
  if (union.length > 1) {
    const fits = union.some((t) => {
      try {
        check(value, t, where);
        return true;
      } catch {
        return false;
      }
    });
    if (!fits) {
      // Say why for the member that names a record or an interface (the informative one).
      const named = union.find((t) => t !== 'null' && !/^'/.test(t));
      if (named && value !== null) check(value, named, where);
      assert.fail(`${where}: ${JSON.stringify(value)} is none of ${type}`);
    }
    return;
  }
  if (type === 'null') return assert.equal(value, null, `${where} is not null`);
  if (['string', 'number', 'boolean'].includes(type)) return assert.equal(typeof value, type, `${where} is ${typeof value} (${String(value)}), not ${type}`);
  if (/^'.*'$/.test(type)) return assert.equal(value, type.slice(1, -1), `${where}`);
  const list = /^Array<(.+)>$/.exec(type);
  if (list) {
    assert.ok(Array.isArray(value), `${where} is not an array`);
    value.forEach((v, i) => check(v, list[1], `${where}[${i}]`));
    return;
  }
  if (type.endsWith('[]')) {
    assert.ok(Array.isArray(value), `${where} is not an array`);
    value.forEach((v, i) => check(v, type.slice(0, -2), `${where}[${i}]`));
    return;
  }
  const r = record.get(type);
  if (r) {
    met.add(type);
    if (r.tuple) {
      assert.ok(Array.isArray(value) && value.length === r.fields.length, `${where} is not a ${type} of ${r.fields.length}: ${JSON.stringify(value)}`);
      r.fields.forEach((f, i) => check(value[i], f.type, `${where}[${i}]`));
      return;
    }
    assert.ok(value !== null && typeof value === 'object', `${where} is not a ${type} object: ${String(value)}`);
    assert.deepEqual(Object.keys(value), r.fields.map((f) => f.name), `${where}: the fields of ${type} vs its registration`);
    for (const f of r.fields) check(value[f.name], f.type, `${where}.${f.name}`);
    return;
  }
  if (indexAlias(type) !== undefined) return check(value, indexAlias(type), where);
  // An interface field's type without undefined (NonNullable<TileOptions['blend']>: index.d.ts's alias of a request option).
  const field = /^NonNullable<(\w+)\['(\w+)'\]>$/.exec(type);
  if (field) {
    const declared = indexInterface(field[1])?.fields.get(field[2]);
    assert.ok(declared, `${where}: ${type} names no declared field`);
    return check(value, declared.type, where);
  }
  const own = indexInterface(type);
  if (own) {
    // An index.d.ts interface: the record's fields of what it extends, and its own (the runtime's additions).
    const parent = own.parent ? record.get(own.parent) : null;
    assert.ok(!own.parent || parent, `index.d.ts ${type} extends ${own.parent}, which is no registered value type`);
    const fields = new Map([...(parent?.fields ?? []).map((f) => [f.name, { type: f.type, optional: false }]), ...own.fields]);
    if (parent) met.add(parent.name);
    for (const k of Object.keys(value)) assert.ok(fields.has(k), `${where}.${k} is not declared by index.d.ts ${type}${parent ? ` or its ${parent.name}` : ''}`);
    for (const [k, f] of fields) {
      if (f.optional && value[k] === undefined) continue;
      assert.ok(k in value, `${where} lacks ${k}, which index.d.ts ${type} declares`);
      check(value[k], f.type, `${where}.${k}`);
    }
    return;
  }
  if (typeof globalThis[type] === 'function') return assert.ok(value instanceof globalThis[type], `${where} is not a ${type}`);
  assert.fail(`${where}: type ${type} is neither registered, nor in index.d.ts, nor a global`);
}

// ---------------------------------------------------------------------------------------------------

const geometry = { dims: [20, 18, 16], voxelMm: [1, 1.5, 2], b0Dir: [0, 0.1, 1] };
const n = 20 * 18 * 16;
const mask = new Uint8Array(n).map((_, i) => {
  const x = i % 20;
  const y = Math.floor(i / 20) % 18;
  const z = Math.floor(i / 360);
  return x >= 3 && x < 17 && y >= 3 && y < 15 && z >= 3 && z < 13 ? 1 : 0;
});
const field = Float32Array.from({ length: n }, (_, i) => Math.sin(i * 0.37) * 0.05);

test('plan(), schema(), registry(), model() and limits() return exactly the recorded fields, of the recorded types', async () => {
  // A tiled plan with a self-check (its box's own plan), a known reach, overlapping blended tiles; a B0-tilted one
  // (alignedDims); a cropped whole-volume one; a refused one.
  const plans = {
    tiled: await tessera.plan({ geometry, mask, spec: { divisor: 1, receptiveRadius: 3 }, tile: { core: 6, halo: 3, stride: 4, blend: 'cosine' }, verify: true }),
    tilted: await tessera.plan({ geometry: { ...geometry, b0Dir: [0, 0.5, 1] }, mask, model: 'demo-unet', b0Align: 'on' }),
    cropped: await tessera.plan({ geometry: { dims: [64, 64, 48] }, mask: Uint8Array.from({ length: 64 * 64 * 48 }, (_, i) => (i % 64 > 20 && i % 64 < 30 ? 1 : 0)), model: 'demo-unet' }),
    refused: await tessera.plan({ geometry, mask, spec: { bytesPerVoxel: 1e6 }, tile: { core: 200, halo: 8 } }),
  };
  assert.notEqual(plans.tiled.verify?.plan ?? null, null, 'the tiled plan holds its self-check\'s box plan');
  assert.notEqual(plans.tilted.b0Align.alignedDims, null, 'the tilted plan is resampled');
  assert.notEqual(plans.cropped.crop, null, 'the cropped plan holds its box');
  assert.equal(plans.refused.feasible, false);
  for (const [name, plan] of Object.entries(plans)) check(plan, 'Plan', `plan (${name})`);
  check(await tessera.schema(), 'RequestOption[]', 'schema()');
  check(M.requestKeys(), 'RequestKey[]', 'requestKeys()');
  const registry = await tessera.registry();
  check(registry, 'ModelInfo[]', 'registry()');
  assert.ok(registry.some((m) => m.measuredContext !== null) && registry.some((m) => m.weights.length > 0));
  check(await tessera.model('demo-unet'), 'ModelInfo', 'model()');
  check(await tessera.limits(), 'Limits', 'limits()');
});

test('the module\'s other values (patchFit, compare, fitCalibration, a volume\'s geometry, a run\'s patches and report) match their records', () => {
  check(M.patchFit({ core: 40, halo: 4 }, { divisor: 8, bytesPerVoxel: 1100 }), 'PatchFit', 'patchFit');
  check(M.compare(geometry, field, field, mask, { hfen: true }), 'Agreement', 'compare');
  const points = [16, 32, 48].map((e) => ({ voxels: e ** 3, heapBytes: 60e6 + 900 * e ** 3, afterSessionBytes: 50e6 }));
  check(M.fitCalibration(points), 'CalibrationFit', 'fitCalibration');
  // A phase network's run: its patch's further inputs (NamedInput) and the driver's report.
  const handle = M.plan(geometry, mask, { model: 'iqsm', te: 0.02, b0: 3 }, undefined);
  const volume = new M.Volume(geometry, 1);
  let run;
  try {
    volume.fieldView().set(field.map((f) => f * 40));
    volume.maskView().set(mask);
    check(volume.geometry(), 'VolumeGeometry', 'volume.geometry()');
    run = M.startFieldRun(volume, handle);
    for (let p; (p = run.next()) !== null; ) {
      check(p.extras, 'NamedInput[]', 'patch.extras');
      run.finish(p.job, new Float32Array(p.dims[2] * p.dims[3] * p.dims[4]));
    }
    assert.equal(run.state().finished, true);
    const report = run.report();
    // The run adds its warning beside the driver's counts (bindings/wasm/field_run.cpp); index.d.ts's RunReport declares it.
    const { warning, warnings, ...counts } = report;
    assert.ok(Array.isArray(warnings) && warnings.every((w) => typeof w === 'string'));
    assert.equal(typeof warning, 'string');
    check(counts, 'TileRunReport', 'run.report()');
  } finally {
    run?.delete();
    volume.delete();
    handle.delete();
  }
});

test('every registered value type was met in a value above', () => {
  const unmet = [...record.keys()].filter((name) => !met.has(name));
  assert.deepEqual(unmet, [], 'registered value types no value above reached (a test above failed first, or a new registration needs a value checked here)');
});

// The JS request surface is the C++ schema's: request-surface.js and request-types.d.ts are what the module's record
// (schema() with each option's kinds and type, requestKeys(), registry()) generates (scripts/request-surface.js), and
// the API takes exactly those keys: a key every kind lists is accepted by plan(), any other refused.
// TESSERA_WASM_DIR: the node flavour's folder to test (default dist/wasm/node, what scripts/build.sh installs).
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { renderSurface, surfaceOf, SURFACE_JS, SURFACE_DTS, SCHEMA_JS, SURFACE_COMMAND } from '../../scripts/request-surface.js';
import { SCHEMA } from './cli/schema.js';
import { loadModuleFrom } from '../../scripts/value-types.js';
import { OPTION_KINDS, OTHER_KEYS, REQUEST_KEYS, METHOD_NAMES, PHASE_NETWORKS } from './request-surface.js';
import { createTessera } from './index.js';

const root = fileURLToPath(new URL('../../', import.meta.url));
const wasmDir = process.env.TESSERA_WASM_DIR ? path.resolve(process.env.TESSERA_WASM_DIR) : path.join(root, 'dist/wasm/node');
const INDEX_DTS = fs.readFileSync(new URL('./index.d.ts', import.meta.url), 'utf8');

let M;
let tessera;
before(async () => {
  M = await loadModuleFrom(wasmDir);
  tessera = await createTessera({ workers: 1, hardwareThreads: 1, wasmBase: wasmDir });
});
after(() => tessera?.terminate());

/** Fails naming the first line where the committed file differs from the generated text. */
function sameText(file, want) {
  const have = fs.readFileSync(file, 'utf8');
  if (have === want) return;
  const a = have.split('\n');
  const b = want.split('\n');
  const at = a.findIndex((line, i) => line !== b[i]);
  assert.fail(`${path.relative(root, file)} differs from what the module generates at line ${at + 1} (committed: ${JSON.stringify(a[at])}, generated: ${JSON.stringify(b[at])}): run \`${SURFACE_COMMAND}\` after scripts/build.sh and commit it`);
}

test('the committed request-surface.js, request-types.d.ts and cli/schema.js are what the module\'s schema, request keys and registry generate', () => {
  const { js, dts, schemaJs } = renderSurface(M, INDEX_DTS);
  sameText(SURFACE_JS, js);
  sameText(SURFACE_DTS, dts);
  sameText(SCHEMA_JS, schemaJs);
});

test('the CLI\'s schema (cli/schema.js) is the one a runtime gives', async () => {
  assert.deepEqual(JSON.parse(JSON.stringify(SCHEMA)), await tessera.schema());
});

test('the generated module holds the C++ schema\'s kinds, keys and methods and the registry\'s phase networks', () => {
  const schema = M.schema();
  // Each option's kinds, read from the module here, not through the generator.
  for (const o of schema) assert.deepEqual(OPTION_KINDS[o.name.split('.')[0]], o.kinds, o.name);
  assert.deepEqual(Object.keys(OPTION_KINDS), [...new Set(schema.map((o) => o.name.split('.')[0]))]);
  const keys = M.requestKeys();
  assert.deepEqual(Object.keys(REQUEST_KEYS), ['network', 'method', 'pipeline', 'swi', 'r2star']);
  for (const kind of Object.keys(REQUEST_KEYS)) {
    const options = schema.filter((o) => o.kinds.includes(kind)).map((o) => o.name.split('.')[0]);
    const others = keys.filter((k) => k.kinds.includes(kind) && !k.name.includes('.')).map((k) => k.name);
    assert.deepEqual(new Set(REQUEST_KEYS[kind]), new Set([...options, ...others]), kind);
    for (const k of others) assert.equal(OTHER_KEYS[k][kind], keys.find((r) => r.name === k && r.kinds.includes(kind)).doc, `${kind} ${k}`);
  }
  // swi() and r2star() take the echoes, te and their own options (swi(): also the pipeline's unwrap and brain mask),
  // nothing that makes χ.
  assert.deepEqual(new Set(REQUEST_KEYS.swi), new Set(['te', 'unwrap', 'brainMask', 'swi', 'phase', 'magnitude', 'mask', 'geometry', 'keepInputs', 'signal', 'onProgress']));
  assert.deepEqual(new Set(REQUEST_KEYS.r2star), new Set(['te', 'r2star', 'magnitude', 'mask', 'geometry', 'keepInputs', 'signal', 'onProgress']));
  assert.deepEqual(METHOD_NAMES, schema.find((o) => o.name === 'method').choices);
  assert.deepEqual([...PHASE_NETWORKS].sort(), M.registry().filter((m) => m.inputs.includes('phase')).map((m) => m.id).sort());
  assert.ok(PHASE_NETWORKS.length >= 3 && PHASE_NETWORKS.includes('iqsm'), 'the registry\'s iQSM family');
});

test('a key the C++ surface gives twice for a kind, or an option group\'s kinds that disagree, is refused by the generator', () => {
  const schema = M.schema();
  const keys = M.requestKeys();
  const registry = M.registry();
  const field = keys.find((k) => k.name === 'field');
  assert.throws(() => surfaceOf(schema, [...keys, { ...field }], registry), /the key field is given twice for a/);
  const tile = schema.find((o) => o.name === 'tile.halo');
  assert.throws(() => surfaceOf([...schema, { ...tile, name: 'tile.extra', kinds: ['pipeline'] }], keys, registry), /tile\.extra goes to pipeline, its group tile to network/);
  assert.throws(() => surfaceOf(schema, [...keys, { ...field, name: 'b0', kinds: ['network'] }], registry), /the key b0 is a schema option/);
  assert.throws(() => surfaceOf(schema, [...keys, { ...field, name: 'nogroup.x' }], registry), /names the group nogroup/);
});

const GEOMETRY = { dims: [12, 12, 8], voxelMm: [1, 1, 1], b0Dir: [0, 0, 1] };

/** plan()'s refusal of request, or null when it resolves. */
const refusal = (request) => tessera.plan(request).then(() => null, (e) => e);

test('plan() takes every key of each kind (no "unknown option") and refuses a key of another kind as unknown', async () => {
  const base = {
    network: { geometry: GEOMETRY, model: 'demo-unet' },
    method: { geometry: GEOMETRY, method: 'tkd' },
    pipeline: { geometry: GEOMETRY, pipeline: true, te: [0.004, 0.008] },
  };
  // swi() and r2star() have no plan(): their keys are the generated SwiRequest's and R2starRequest's (checked above).
  for (const [kind, keys] of Object.entries(REQUEST_KEYS).filter(([k]) => base[k])) {
    for (const key of keys) {
      // A value of the wrong sort may be refused, but never as an unknown key.
      const e = await refusal({ ...base[kind], [key]: base[kind][key] ?? undefined });
      assert.ok(!/unknown option/.test(e?.message ?? ''), `${kind} ${key}: ${e?.message}`);
    }
    // method and pipeline say which kind a request is: given, they make it another kind, not an unknown key.
    const foreign = Object.keys({ ...OPTION_KINDS, ...OTHER_KEYS }).filter((k) => !keys.includes(k) && k !== 'method' && k !== 'pipeline');
    assert.ok(foreign.length, kind);
    for (const key of foreign) {
      const e = await refusal({ ...base[kind], [key]: 1 });
      assert.match(e?.message ?? '', new RegExp(`unknown option\\(s\\) ${key} \\(known: ${keys.join(', ').replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}\\)`), `${kind} ${key}`);
    }
  }
});

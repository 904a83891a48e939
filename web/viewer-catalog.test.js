// web/viewer-catalog.js: which volumes the viewer lists (every Volume of a result, SWI/R2* included when present, with
// their units; the input's echoes), an echo's slice of a 4D array, the default windows, the tile map's labels.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import { catalog, echoOf, defaultWindow, valueText, tileLabels, VOLUME_INFO } from './viewer-catalog.js';

const dims = [4, 3, 2];
const n = 24;
const vol = (echoes = 1, fill = 1) => ({ dims, voxelMm: [1, 1, 1], echoes, data: new Float32Array(n * echoes).fill(fill) });

test('catalog: a pipeline result lists χ first, every Volume with its unit (R2* in s⁻¹, unknown keys by name), then the input', () => {
  const input = { geometry: { dims }, phase: new Float32Array(3 * n), magnitude: new Float32Array(3 * n) };
  const outputs = { report: {}, networkReport: undefined, localField: vol(), chi: vol(), mask: vol(), r2star: vol(), unwrappedPhase: vol(3), other: vol() };
  const list = catalog(input, { input: { ...input, truth: new Float32Array(n) }, outputs }, new Uint8Array(n));
  assert.deepEqual(list.map((e) => e.key), ['result.chi', 'result.localField', 'result.unwrappedPhase', 'result.mask', 'result.r2star', 'result.other', 'result.truth', 'input.phase', 'input.magnitude', 'input.mask']);
  const by = Object.fromEntries(list.map((e) => [e.key, e]));
  assert.deepEqual([by['result.chi'].unit, by['result.r2star'].unit, by['result.unwrappedPhase'].echoes, by['input.phase'].echoes], ['ppm', 's⁻¹', 3, 3]);
  assert.equal(by['result.other'].label, 'other');
  // A network result (no outputs): its χ, or iQFM's local field.
  assert.deepEqual(catalog(null, { input: { geometry: { dims } }, chi: new Float32Array(n), quantity: 'local-field' }, null).map((e) => [e.key, e.label]), [['result.chi', 'Local field']]);
  assert.deepEqual(catalog(null, null, null), []);
});

test('echoOf, defaultWindow, valueText', () => {
  const e = { echoes: 3, data: Float32Array.from({ length: 3 * n }, (_, i) => Math.floor(i / n)) };
  assert.deepEqual([...new Set(echoOf(e, n, 2))], [1]);
  assert.deepEqual([...new Set(echoOf(e, n, 9))], [2], 'clamped to the last echo');
  assert.deepEqual(defaultWindow('mask', new Float32Array(4)), [0, 1]);
  assert.deepEqual(defaultWindow('phase', new Float32Array(4)), [-Math.PI, Math.PI]);
  const chi = Float32Array.from({ length: 101 }, (_, i) => (i - 50) / 500); // -0.1 … 0.1
  const [lo, hi] = defaultWindow('chi', chi);
  assert.ok(lo === -hi && hi > 0.09 && hi <= 0.1 + 1e-7, `${lo} ${hi}`);
  assert.equal(valueText(0.012345, 'ppm'), '0.01235 ppm');
  assert.equal(valueText(25, 's⁻¹'), '25 s⁻¹');
  assert.equal(valueText(NaN, 'ppm'), '—');
});

test('tileLabels: each run tile’s core is labelled, skipped tiles and the rest 0; a resampled grid has none', () => {
  const d = [8, 4, 2];
  const plan = {
    grid: {
      tiles: [
        { index: 0, coreLo: [0, 0, 0], coreHi: [4, 4, 2], skipped: false },
        { index: 1, coreLo: [4, 0, 0], coreHi: [8, 4, 2], skipped: true },
      ],
    },
  };
  const l = tileLabels(plan, d);
  for (let z = 0; z < 2; z++) for (let y = 0; y < 4; y++) for (let x = 0; x < 8; x++) assert.equal(l[x + 8 * (y + 4 * z)], x < 4 ? 1 : 0);
  assert.equal(tileLabels({ ...plan, b0Align: { resampled: true, alignedDims: [9, 4, 2] } }, d), null);
  assert.equal(tileLabels({}, d), null);
});

test('VOLUME_INFO names every Volume that index.d.ts declares on PipelineResult (its keys, not others)', () => {
  const dts = fs.readFileSync(new URL('../bindings/js/index.d.ts', import.meta.url), 'utf8');
  const body = dts.slice(dts.indexOf('export interface PipelineResult {'));
  const block = body.slice(0, body.indexOf('\n}'));
  const keys = [...block.matchAll(/^\s+(\w+)\??: Volume</gm)].map((m) => m[1]);
  for (const k of ['swi', 'minIp', 'swiPhaseMask', 'r2star', 't2star', 'r2starResidual']) assert.ok(keys.includes(k), `${k} in PipelineResult: ${keys}`);
  for (const k of keys) assert.ok(VOLUME_INFO[k], `VOLUME_INFO lacks ${k}`);
  // BIDS-like derivative names for the contrasts.
  assert.deepEqual(['swi', 'minIp', 'r2star', 't2star'].map((k) => VOLUME_INFO[k].file), ['swi', 'minIP', 'R2starmap', 'T2starmap']);
  assert.deepEqual([VOLUME_INFO.r2star.unit, VOLUME_INFO.t2star.unit, VOLUME_INFO.swiPhase.unit], ['s⁻¹', 's', 'rad']);
});

// The registry's memory costs against the measurements they come from: every worker-heap high-water that
// bench/calibrate.js and bench/calibrate-browser.js recorded (bench/calibration.json; the phase networks' whole volumes
// in bench/calibration-iqsm.json; the shipped demo network in bench/calibration-demo-unet.json) lies under that
// network's budget line (fixed bytes per worker + bytes per voxel · edge³), read from the registry through the module.
// NeXtQSM runs two networks per tile (one ONNX Runtime pool per weights file, bindings/js/runtime/sessions.js
// startPools), so its line must cover the BF and the VJP heaps together.
// Run: node --test --test-force-exit tests/js/registry-costs.test.js   (needs the wasm module: scripts/build.sh wasm)
import { test } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';

const read = (file) => JSON.parse(fs.readFileSync(new URL(`../../bench/${file}`, import.meta.url), 'utf8'));
const calibration = {
  entries: ['calibration.json', 'calibration-iqsm.json', 'calibration-demo-unet.json'].flatMap((f) => read(f).entries),
};

// Which registry networks a stand-in's measurements stand for (scripts/standins*.js; demo-unet: the shipped weights).
const STANDIN_OF = {
  'xqsm-standin': ['xqsm'],
  'qsmnet-standin': ['qsmnet', 'qsmnet-plus'],
  'ir2qsm-standin': ['ir2qsm'],
  'lpcnn-standin': ['lpcnn'],
  'modl-qsm-standin': ['modl-qsm'],
  'iqsm-standin': ['iqsm', 'iqfm'],
  'iqsm-plus-standin': ['iqsm-plus'],
  'demo-unet': ['demo-unet'],
};
// Networks whose tile holds one worker of each of several networks at once.
const TOGETHER = { nextqsm: ['nextqsm-bf-standin', 'nextqsm-vjp-standin'] };

const line = (spec, edge) => spec.fixedBytes + spec.bytesPerVoxel * edge ** 3;
const MB = (b) => `${(b / 1e6).toFixed(1)} MB`;

async function registry(t) {
  const { createTessera } = await import('../../bindings/js/index.js');
  const tessera = await createTessera({ workers: 1, threadsPerWorker: 1 });
  t.after(() => tessera.terminate());
  return Object.fromEntries((await tessera.registry()).map((m) => [m.id, m]));
}

test('every measured stand-in point lies under its network budget line in the registry', async (t) => {
  const byId = await registry(t);
  let checked = 0;
  for (const e of calibration.entries) {
    for (const id of STANDIN_OF[e.network] ?? []) {
      const spec = byId[id];
      assert.ok(spec, `${id} is in the registry`);
      for (const p of e.points) {
        const budget = line(spec, p.edge);
        assert.ok(p.heapBytes <= budget,
          `${id}: ${e.network} ${e.runtime} ${e.threads} thread(s) at ${p.edge}³ reached ${MB(p.heapBytes)}, over the registry's ` +
            `${MB(spec.fixedBytes)} + ${spec.bytesPerVoxel} B/voxel = ${MB(budget)}`);
        checked++;
      }
    }
  }
  assert.ok(checked > 0);
});

test('a tile of a two-network loop (NeXtQSM) fits both networks\' heaps under its line, at every edge measured for both', async (t) => {
  const byId = await registry(t);
  for (const [id, nets] of Object.entries(TOGETHER)) {
    const spec = byId[id];
    assert.equal(spec.weights.length, nets.length, `${id}: one weights file per network`);
    const entries = calibration.entries.filter((e) => nets.includes(e.network));
    let checked = 0;
    for (const key of new Set(entries.map((e) => `${e.runtime}|${e.threads}`))) {
      const perNet = nets.map((n) => entries.find((e) => e.network === n && `${e.runtime}|${e.threads}` === key));
      if (perNet.some((e) => !e)) continue;
      const edges = perNet.map((e) => new Set(e.points.map((p) => p.edge)));
      for (const edge of edges[0]) {
        if (!edges.every((s) => s.has(edge))) continue;
        const heaps = perNet.map((e) => Math.max(...e.points.filter((p) => p.edge === edge).map((p) => p.heapBytes)));
        const sum = heaps.reduce((a, b) => a + b, 0);
        assert.ok(sum <= line(spec, edge),
          `${id} ${key} at ${edge}³: ${heaps.map(MB).join(' + ')} = ${MB(sum)} over the registry's ${MB(line(spec, edge))}`);
        checked++;
      }
    }
    assert.ok(checked > 0, `${id}: no edge measured for all of ${nets.join(', ')}`);
  }
});

test('no tileable network is left on a provisional cost, and each one is checked against measurements', async (t) => {
  const byId = await registry(t);
  const covered = new Set([...Object.values(STANDIN_OF).flat(), ...Object.keys(TOGETHER)]);
  for (const m of Object.values(byId)) {
    if (m.kind !== 'field-to-chi' && m.kind !== 'physics-loop') continue;
    assert.equal(m.costProvisional, false, `${m.id}: ${m.costSource}`);
    assert.match(m.costSource, /measured/, m.id);
    assert.ok(covered.has(m.id), `${m.id}: no calibration mapped to it here`);
  }
});

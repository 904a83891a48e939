// `npm pack` gives a tarball with the built wasm, JS, worker files and declarations; installed into an
// empty project, an inversion runs through the public import only.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { mkdtempSync, writeFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { convStack } from '../../tests/js/networks.js';

const root = fileURLToPath(new URL('../../', import.meta.url));

test('npm pack installs into an empty project and inverts through the public import', { timeout: 240000 }, () => {
  const dir = mkdtempSync(join(tmpdir(), 'tessera-pack-'));
  try {
    const packed = JSON.parse(execFileSync('npm', ['pack', '--json', '--pack-destination', dir], { cwd: root, encoding: 'utf8' }));
    const files = packed[0].files.map((f) => f.path);
    for (const f of [
      'bindings/js/index.js', 'bindings/js/index.d.ts', 'bindings/js/value-types.d.ts', 'bindings/js/request-types.d.ts', 'bindings/js/request-surface.js', 'bindings/js/runtime/driver-worker.js', 'bindings/js/runtime/ort-worker.js',
      'bindings/js/cli.js', 'dist/wasm/node/tessera.js', 'dist/wasm/node/tessera.wasm', 'dist/wasm/node/tessera.worker.js',
      'dist/wasm/web/tessera.js', 'dist/wasm/web/tessera.wasm', 'dist/wasm/web/tessera.worker.js',
    ]) {
      assert.ok(files.includes(f), `${f} is missing from the tarball`);
    }
    assert.ok(!files.some((f) => f.endsWith('.test.js')), 'tests must not ship');
    const project = join(dir, 'app');
    execFileSync('mkdir', ['-p', project]);
    writeFileSync(join(project, 'package.json'), JSON.stringify({ name: 'app', private: true, type: 'module' }));
    execFileSync('npm', ['install', '--no-audit', '--no-fund', '--prefer-offline', '--loglevel=error', join(dir, packed[0].filename)], {
      cwd: project,
      stdio: 'inherit',
    });
    writeFileSync(join(project, 'net.onnx'), convStack({ layers: 2, seed: 3 }));
    writeFileSync(
      join(project, 'run.mjs'),
      `import { createTessera } from 'tessera-qsm';
import { counters } from 'tessera-qsm/debug';
import { readFileSync } from 'node:fs';
const t = await createTessera({ workers: 2 });
const dims = [20, 18, 16], n = dims[0] * dims[1] * dims[2];
const field = new Float32Array(n).map((_, i) => Math.cos(i * 0.1));
const weights = new Uint8Array(readFileSync('net.onnx'));
const whole = await t.invert({ field, geometry: { dims }, spec: {}, weights, whole: true, keepInputs: true });
const kept = field.length;
const tiled = await t.invert({ field, geometry: { dims }, spec: {}, weights, tile: { core: 8, halo: 2 } });
let d = 0;
for (let i = 0; i < n; i++) d = Math.max(d, Math.abs(whole.chi.data[i] - tiled.chi.data[i]));
console.log(JSON.stringify({ n: tiled.chi.data.length, dims: tiled.chi.dims, kept, transferred: field.length === 0, tiles: tiled.report.tilesRun, models: (await t.registry()).length, maxDiffInterior: d, parses: (await counters(t)).requestParses }));
await t.terminate();
`,
    );
    const out = JSON.parse(execFileSync(process.execPath, ['--no-experimental-fetch', 'run.mjs'], { cwd: project, encoding: 'utf8' }).trim());
    assert.equal(out.n, 20 * 18 * 16);
    assert.deepEqual(out.dims, [20, 18, 16], 'χ is a Volume');
    assert.deepEqual([out.kept, out.transferred], [20 * 18 * 16, true], 'the field kept by keepInputs, then transferred by the next run');
    assert.equal(out.tiles, 3 * 3 * 2);
    assert.ok(out.models >= 12);
    assert.ok(Number.isFinite(out.maxDiffInterior));
    assert.equal(out.parses, 2, 'tessera-qsm/debug resolves in the installed package: each run read its request once');
    // The CLI is installed as a bin.
    const help = execFileSync(join(project, 'node_modules', '.bin', 'tessera-qsm'), ['--help'], { encoding: 'utf8' });
    assert.match(help, /invert/);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test('index.d.ts and debug.d.ts declare every value their entry exports, and nothing it does not', async () => {
  const { readFileSync } = await import('node:fs');
  for (const entry of ['index', 'debug']) {
    const dts = readFileSync(new URL(`./${entry}.d.ts`, import.meta.url), 'utf8');
    const declared = new Set([...dts.matchAll(/^export declare (?:function|class|const) (\w+)/gm)].map((m) => m[1]));
    const exported = Object.keys(await import(`./${entry}.js`)).sort();
    assert.deepEqual(exported.filter((n) => !declared.has(n)), [], `exported by ${entry}.js, not declared in ${entry}.d.ts`);
    assert.deepEqual([...declared].filter((n) => !exported.includes(n)), [], `declared in ${entry}.d.ts, not exported by ${entry}.js`);
  }
  // The test hooks live in the debug entry only.
  const api = await import('./index.js');
  for (const hook of ['loadTesseraModule', 'counters', 'pendingCalls', 'forgetSpeeds']) assert.ok(!(hook in api), `index.js exports ${hook}`);
});

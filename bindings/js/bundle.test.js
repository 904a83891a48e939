// The package as a web app's dependency, from a clean tree:
//   - the working tree's files (git ls-files: no dist/, no build/, no node_modules/) copied to a temp dir, where
//     `npm pack` runs prepack (scripts/prepack.sh builds the wasm module's two Embind targets); the tarball holds
//     the .wasm files, the worker files, node-host.js/browser-host.js, the demo weights, every file "files" names
//     and every file the shipped JS imports, and no test;
//   - a small app doing exactly the README's "Using it" (createTessera → phantom → loadWeights('demo-unet') →
//     invert) with the tarball and Vite installed from the npm cache: `vite build` (production) warns about no
//     node:* module, emits no README or test file, and the build, served with COOP/COEP by scripts/serve.js and
//     opened in Chromium, gives the χ of the same run through the node API (`import 'tessera-qsm'` in the same
//     app, i.e. the package's node conditions) to 1e-5;
//   - the same app built by webpack 5 (production, no config): no warning but asset sizes, same χ in Chromium;
//   - the installed package served as is with the README's import map (no bundler): same χ;
//   - esbuild (`--bundle --format=esm`) resolves the package for browsers with no node:* module (it bundles neither
//     workers nor `new URL()` assets: the README sends esbuild users to the no-bundler setup).
// prepack builds the module in the checkout's wasm tree when it is configured (TESSERA_MODULE_BUILD_DIR: npm test has
// just built it, so this is one wasm build, not two), else from scratch in the clean tree (≈4–6 min on 2 cores).
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync, spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { startServer } from '../../scripts/serve.js';
import { launchChromium } from '../../scripts/chromium.js';

const ROOT = fileURLToPath(new URL('../../', import.meta.url));
const CHROMIUM = '/usr/bin/chromium';
const PKG = JSON.parse(fs.readFileSync(path.join(ROOT, 'package.json'), 'utf8'));
const missingTools = [
  !fs.existsSync(CHROMIUM) && `${CHROMIUM} (scripts/bootstrap.sh --browser)`,
  spawnSync('sh', ['-c', 'command -v emcmake'], { encoding: 'utf8' }).status !== 0 && 'emcmake (scripts/bootstrap.sh)',
].filter(Boolean);
const skip = missingTools.length ? `missing: ${missingTools.join(', ')}` : false;

// The runs compare one χ across four paths (node, Vite, webpack, no bundler): a small phantom, still tiled (2×2×2 tiles
// of 24³ on the demo network's divisor-8 grid).
const DIMS = [32, 32, 32];
const VOXEL_MM = [1.5, 1.5, 1.5];
const TILE = { core: 16, halo: 4 };

let dir = null; // temp folder: clean/ (the tree), the tarball, app/
let browser = null; // one Chromium for the file's three page runs (each in its own page, its server's origin)
let tarball = null;
let files = null; // paths in the tarball

const run = (cmd, args, cwd, opts = {}) => {
  const r = spawnSync(cmd, args, { cwd, encoding: 'utf8', maxBuffer: 64 << 20, ...opts });
  if (r.status !== 0) throw new Error(`${cmd} ${args.join(' ')} failed (${r.status}) in ${cwd}:\n${r.stdout}\n${r.stderr}`);
  return r;
};

before(() => {
  if (skip) return;
  dir = fs.mkdtempSync(path.join(os.tmpdir(), 'tessera-bundle-'));
});

after(async () => {
  await browser?.close().catch(() => {});
  if (dir) fs.rmSync(dir, { recursive: true, force: true });
});

test('npm pack from a clean tree builds the wasm module and ships a complete package', { skip, timeout: 900000 }, () => {
  const clean = path.join(dir, 'clean');
  // Tracked and new (not ignored) files as they are in the working tree: what a fresh clone of this commit holds.
  const listed = execFileSync('git', ['ls-files', '-z', '--cached', '--others', '--exclude-standard'], { cwd: ROOT, encoding: 'utf8' })
    .split('\0')
    .filter((f) => f && fs.existsSync(path.join(ROOT, f)) && fs.statSync(path.join(ROOT, f)).isFile());
  for (const f of listed) {
    fs.mkdirSync(path.dirname(path.join(clean, f)), { recursive: true });
    fs.copyFileSync(path.join(ROOT, f), path.join(clean, f));
  }
  assert.ok(!fs.existsSync(path.join(clean, 'dist')), 'the clean tree must not hold dist/');
  const wasmTree = path.join(ROOT, 'build/wasm');
  const env = { ...process.env };
  if (fs.existsSync(path.join(wasmTree, 'CMakeCache.txt'))) env.TESSERA_MODULE_BUILD_DIR = wasmTree;
  const t0 = performance.now();
  const r = run('npm', ['pack', '--json', '--pack-destination', dir], clean, { env });
  const seconds = (performance.now() - t0) / 1000;
  assert.match(r.stderr, /prepack: building the wasm module/, 'prepack must build the missing module');
  console.log(`# npm pack from a clean tree (module build included, in ${env.TESSERA_MODULE_BUILD_DIR ?? 'the clean tree'}): ${seconds.toFixed(0)} s`);
  const packed = JSON.parse(r.stdout)[0];
  tarball = path.join(dir, packed.filename);
  files = packed.files.map((f) => f.path);

  for (const f of [
    'package.json', 'bindings/js/index.js', 'bindings/js/runtime/driver-worker.js', 'bindings/js/runtime/ort-worker.js', 'bindings/js/node-host.js',
    'bindings/js/browser-host.js', 'web/models/demo-unet.onnx',
    ...['node', 'web'].flatMap((p) => ['tessera.js', 'tessera.wasm', 'tessera.worker.js', 'package.json'].map((n) => `dist/wasm/${p}/${n}`)),
  ]) {
    assert.ok(files.includes(f), `${f} is missing from the tarball`);
  }
  // Every folder or file "files" ships is in the tarball; a negated pattern ("!x") is what it leaves out.
  for (const f of PKG.files.filter((p) => !p.startsWith('!'))) {
    assert.ok(files.some((g) => g === f || g.startsWith(f.replace(/\/?$/, '/'))), `package.json "files" names ${f}, which the tarball lacks`);
  }
  const unwanted = files.filter((f) => /\.test\.js$|^tests\/|^bench\/|^src\/|^scripts\//.test(f));
  assert.deepEqual(unwanted, [], 'tests, benchmarks, sources and scripts must not ship');
  // Every relative import and subpath import target of the shipped JS is shipped too.
  for (const f of files.filter((g) => g.startsWith('bindings/js/') && g.endsWith('.js'))) {
    const src = fs.readFileSync(path.join(clean, f), 'utf8');
    for (const [, spec] of src.matchAll(/(?:from\s+|import\s*\(\s*)'(\.{1,2}\/[^']+)'/g)) {
      const target = path.posix.normalize(path.posix.join(path.posix.dirname(f), spec));
      assert.ok(files.includes(target), `${f} imports ${spec} (${target}), which the tarball lacks`);
    }
  }
  for (const [spec, conds] of Object.entries(PKG.imports)) {
    for (const target of Object.values(conds).filter((t) => t.startsWith('./'))) {
      assert.ok(files.includes(target.slice(2)), `imports ${spec} → ${target}, which the tarball lacks`);
    }
  }
});

const MAIN_JS = `import { createTessera } from 'tessera-qsm';

// The README's "Using it": phantom → loadWeights('demo-unet') → invert. Two ONNX Runtime threads: in a bundle, ORT's
// pthread workers run the ort-worker chunk (see ort-worker.js).
window.runTessera = async ({ dims, voxelMm, tile }) => {
  const tessera = await createTessera({ workers: 1, threadsPerWorker: 2 });
  try {
    const geometry = { dims, voxelMm };
    const { field, mask } = await tessera.phantom({ geometry });
    const [weights] = await tessera.loadWeights('demo-unet');
    const { chi: { data: chi }, report } = await tessera.invert({ field, mask, geometry, model: 'demo-unet', weights, tile });
    const bytes = new Uint8Array(chi.buffer, chi.byteOffset, chi.byteLength);
    let bin = '';
    for (let i = 0; i < bytes.length; i += 0x8000) bin += String.fromCharCode(...bytes.subarray(i, i + 0x8000));
    return { chi: btoa(bin), tilesRun: report.tilesRun, isolated: globalThis.crossOriginIsolated === true };
  } finally {
    await tessera.terminate();
  }
};
window.tesseraReady = true;
`;

const NODE_RUN_JS = `import { createTessera } from 'tessera-qsm';
const { dims, voxelMm, tile } = JSON.parse(process.argv[2]);
const tessera = await createTessera({ workers: 1, threadsPerWorker: 2 });
const geometry = { dims, voxelMm };
const { field, mask } = await tessera.phantom({ geometry });
const [weights] = await tessera.loadWeights('demo-unet');
const { chi: { data: chi }, report } = await tessera.invert({ field, mask, geometry, model: 'demo-unet', weights, tile });
process.stdout.write(JSON.stringify({ chi: Buffer.from(chi.buffer, chi.byteOffset, chi.byteLength).toString('base64'), tilesRun: report.tilesRun }));
await tessera.terminate();
`;

const INDEX_HTML = `<!doctype html>
<html><head><meta charset="utf-8"><link rel="icon" href="data:,"><title>tessera-qsm in a bundled app</title>
<script type="module" src="./main.js"></script></head><body></body></html>
`;

// The README's no-bundler import map (the page's bare specifiers; the workers get ORT's URL from createTessera).
const IMPORT_MAP = `<script type="importmap">
{ "imports": {
  "tessera-qsm": "./node_modules/tessera-qsm/bindings/js/index.js",
  "onnxruntime-web": "./node_modules/onnxruntime-web/dist/ort.wasm.min.mjs",
  "nifti-reader-js": "./node_modules/nifti-reader-js/dist/nifti.js",
  "fflate": "./node_modules/fflate/esm/browser.js"
} }
</script>`;

const decode = (b64) => {
  const buf = Buffer.from(b64, 'base64');
  return new Float32Array(buf.buffer, buf.byteOffset, buf.byteLength / 4);
};

test('a Vite production build of the README example runs in Chromium with the node API\'s χ', { skip, timeout: 600000 }, async (t) => {
  assert.ok(tarball, 'the pack test must have produced the tarball');
  const app = path.join(dir, 'app');
  fs.mkdirSync(app);
  fs.writeFileSync(path.join(app, 'package.json'), JSON.stringify({ name: 'app', private: true, type: 'module' }));
  fs.writeFileSync(path.join(app, 'index.html'), INDEX_HTML);
  fs.writeFileSync(path.join(app, 'main.js'), MAIN_JS);
  fs.writeFileSync(path.join(app, 'node-run.mjs'), NODE_RUN_JS);
  const pins = ['vite', 'esbuild', 'webpack', 'webpack-cli'].map((n) => `${n}@${PKG.devDependencies[n]}`);
  run('npm', ['install', '--no-audit', '--no-fund', '--prefer-offline', '--loglevel=error', tarball, ...pins], app);

  // The node API, from the same installed package (its node conditions).
  const args = JSON.stringify({ dims: DIMS, voxelMm: VOXEL_MM, tile: TILE });
  const ref = JSON.parse(run(process.execPath, ['--no-experimental-fetch', 'node-run.mjs', args], app).stdout);
  fs.writeFileSync(path.join(app, 'node-ref.json'), JSON.stringify(ref));
  const chiNode = decode(ref.chi);
  assert.equal(chiNode.length, DIMS[0] * DIMS[1] * DIMS[2]);
  assert.ok(ref.tilesRun > 1, `the node run is tiled (${ref.tilesRun} tiles)`);

  const vite = run(process.execPath, [path.join(app, 'node_modules/vite/bin/vite.js'), 'build'], app, { env: { ...process.env, NO_COLOR: '1' } });
  const log = vite.stdout + vite.stderr;
  assert.doesNotMatch(log, /externali[sz]ed for browser compatibility/, `vite externalised node modules:\n${log}`);
  assert.doesNotMatch(log, /node:[a-z_]+/, `vite's output names a node:* module:\n${log}`);
  const assets = fs.readdirSync(path.join(app, 'dist/assets'));
  assert.deepEqual(assets.filter((f) => /readme|\.md$|test|\.d\.ts$|package\.json/i.test(f)), [], 'no README, test or package file among the assets');
  for (const re of [/^tessera-.*\.wasm$/, /^ort-wasm-simd-threaded.*\.wasm$/, /^demo-unet-.*\.onnx$/, /^tessera\.worker-.*\.js$/, /^driver-worker-.*\.js$/, /^ort-worker-.*\.js$/]) {
    assert.ok(assets.some((f) => re.test(f)), `the build lacks an asset matching ${re} (${assets.join(', ')})`);
  }

  await compareInChromium(t, path.join(app, 'dist'), '/index.html', chiNode, ref.tilesRun, { bundled: true });
});

test('a webpack 5 production build (no config) of the same app gives the same χ', { skip, timeout: 400000 }, async (t) => {
  const app = path.join(dir, 'app');
  assert.ok(fs.existsSync(path.join(app, 'node_modules/webpack')), 'the Vite test must have installed the app');
  const r = run(process.execPath, [path.join(app, 'node_modules/webpack-cli/bin/cli.js'), '--entry', './main.js', '--mode', 'production', '--output-path', 'wp'], app);
  const log = r.stdout + r.stderr;
  // The only warnings allowed: asset sizes (ONNX Runtime's 14 MB wasm, the 5.6 MB demo weights).
  const warnings = [...log.matchAll(/^WARNING in (.*)$/gm)].map((m) => m[1]).filter((w) => !/size limit/.test(w));
  assert.deepEqual(warnings, [], log);
  assert.doesNotMatch(log, /node:[a-z_]+|ERROR/, log);
  const out = fs.readdirSync(path.join(app, 'wp'));
  assert.deepEqual(out.filter((f) => /readme|\.md$|test/i.test(f)), [], 'no README or test file in the build');
  fs.writeFileSync(path.join(app, 'wp/index.html'), INDEX_HTML.replace('<script type="module" src="./main.js">', '<script src="./main.js">'));
  const ref = JSON.parse(fs.readFileSync(path.join(app, 'node-ref.json'), 'utf8'));
  await compareInChromium(t, path.join(app, 'wp'), '/index.html', decode(ref.chi), ref.tilesRun, { bundled: true });
});

test('no bundler: the installed package served as is, with the README\'s import map, gives the same χ', { skip, timeout: 300000 }, async (t) => {
  const app = path.join(dir, 'app');
  assert.ok(fs.existsSync(path.join(app, 'node_modules/tessera-qsm')), 'the Vite test must have installed the app');
  fs.writeFileSync(path.join(app, 'plain.html'), INDEX_HTML.replace('<script type="module"', `${IMPORT_MAP}\n<script type="module"`));
  const ref = JSON.parse(fs.readFileSync(path.join(app, 'node-ref.json'), 'utf8'));
  await compareInChromium(t, app, '/plain.html', decode(ref.chi), ref.tilesRun);
});

/**
 * Serves root with COOP/COEP, runs window.runTessera on pagePath in Chromium, compares χ with the node run's.
 * bundled: the build must be self-contained (no request into node_modules, e.g. for ONNX Runtime).
 */
async function compareInChromium(t, root, pagePath, chiNode, tilesRun, { bundled = false } = {}) {
  const server = await startServer({ root });
  // Chromium is launched once for the file; each comparison gets a page of its own, on its own server's origin.
  browser ??= await launchChromium(fs.mkdtempSync(path.join(dir, 'chromium-')), CHROMIUM);
  const context = browser;
  const page = await context.newPage();
  const requests = [];
  const onRequest = (r) => requests.push(r);
  context.on('request', onRequest);
  t.after(async () => {
    context.off('request', onRequest);
    await page.close();
    await server.close();
  });
  const problems = [];
  page.on('console', (m) => m.type() === 'error' && problems.push(`console: ${m.text()}`));
  page.on('pageerror', (e) => problems.push(`page error: ${e.message}`));
  page.on('response', (r) => r.status() >= 400 && problems.push(`${r.status()} ${r.url()}`));
  // Workers' requests too (a bundle that still looked for ../../node_modules/onnxruntime-web would show here): this
  // page's, on this server's origin.
  const intoNodeModules = () => requests.filter((r) => r.url().startsWith(server.url) && r.url().includes('/node_modules/')).map((r) => `request into node_modules: ${r.url()}`);
  await page.goto(`${server.url}${pagePath}`);
  await page.waitForFunction(() => window.tesseraReady === true, null, { timeout: 30000 });
  const got = await page.evaluate((a) => window.runTessera(a), { dims: DIMS, voxelMm: VOXEL_MM, tile: TILE });
  assert.equal(got.isolated, true, 'the page must be cross-origin isolated');
  if (bundled) problems.push(...intoNodeModules());
  assert.deepEqual(problems, []);
  const chi = decode(got.chi);
  assert.equal(chi.length, chiNode.length);
  assert.equal(got.tilesRun, tilesRun);
  let maxDiff = 0;
  let nonzero = 0;
  for (let i = 0; i < chi.length; i++) {
    maxDiff = Math.max(maxDiff, Math.abs(chi[i] - chiNode[i]));
    if (chiNode[i] !== 0) nonzero++;
  }
  assert.ok(nonzero > chi.length / 10, `the node χ is mostly zero (${nonzero} nonzero voxels)`);
  assert.ok(maxDiff <= 1e-5, `max |χ(browser) − χ(node)| = ${maxDiff}`);
}

test('esbuild resolves the package for browsers with no node:* module', { skip, timeout: 120000 }, () => {
  const app = path.join(dir, 'app');
  assert.ok(fs.existsSync(path.join(app, 'node_modules/esbuild')), 'the Vite test must have installed the app');
  const r = run(path.join(app, 'node_modules/.bin/esbuild'), ['main.js', '--bundle', '--format=esm', '--outdir=esb', '--log-level=warning'], app);
  assert.doesNotMatch(r.stdout + r.stderr, /node:|Could not resolve/, r.stdout + r.stderr);
  const out = fs.readFileSync(path.join(app, 'esb/main.js'), 'utf8');
  assert.doesNotMatch(out, /from\s*["']node:|import\(\s*["']node:|require\(["']node:/);
  assert.match(out, /new Worker\(new URL\("\.\/runtime\/driver-worker\.js", import\.meta\.url\)/);
});

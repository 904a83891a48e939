// The WebGPU graph rewrite (bindings/js/webgpu-graph.js) on a real WebGPU adapter: headless Chromium
// (/usr/bin/chromium via playwright-core, --enable-unsafe-webgpu; on a machine without a GPU Chromium offers its
// SwiftShader software adapter), both WebGPU builds of ONNX Runtime Web 1.30.0 — ort.all.min.mjs (JSEP, the pool's
// default GPU build) and ort.webgpu.min.mjs (the C++ WebGPU EP) — each network's rewritten graph run on 'webgpu'
// and on 'wasm' in the same page, on the same input:
//   - the demo network's original graph fails on WebGPU in both builds (the operators the rewrite replaces), its
//     rewrite runs, no compute node lands on the CPU (ORT's verbose placement log), output within the bound of wasm;
//   - every registry stand-in (small builds; the NeXtQSM nets with fewer levels, the same operators) likewise.
// Bound: max |webgpu − wasm| ≤ 2⁻¹¹ · max(1, max |wasm|). This is the GPU's own float32 arithmetic, not the rewrite
// (held to 2⁻¹⁶ in node, bindings/js/webgpu-graph.test.js): WGSL allows sin/cos an absolute error of 2⁻¹¹ on [−π, π]
// (the phase networks' LoT layer), and its shaders sum in their own order.
// Skipped, with the reason, when Chromium is missing or navigator.gpu.requestAdapter() gives no adapter.
// No speed is measured: a software adapter says nothing about a GPU's. ≈20 s per build on 2 cores.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { startServer } from '../scripts/serve.js';
import { CHROMIUM_ARGS, NO_FETCH_GLOBALS, testInChildWithFetchGlobals } from '../scripts/chromium.js';
import { rewriteForWebGpu } from '../bindings/js/webgpu-graph.js';
import { nextqsmStandin } from '../scripts/standins-loops.js';
import { ALL_STANDINS, smallStandin } from '../scripts/standins-small.js';
import { onnx } from '../tests/js/onnx-build.js';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const CHROMIUM = '/usr/bin/chromium';
// npm test runs the pool's default GPU build; TESSERA_WEBGPU_BUILDS=all adds the C++ WebGPU EP's build (+ ≈20 s:
// `TESSERA_WEBGPU_BUILDS=all node --test web/webgpu.test.js`, what the README's table of both builds was measured with).
const ALL_BUILDS = ['ort.all.min.mjs', 'ort.webgpu.min.mjs'];
const BUILDS = process.env.TESSERA_WEBGPU_BUILDS === 'all' ? ALL_BUILDS : ALL_BUILDS.slice(0, 1);
const BOUND = 2 ** -11;
const PAGE = '/webgpu-test.html';
const MODELS = '/webgpu-test-models/';
const noBrowser = fs.existsSync(CHROMIUM) ? false : `${CHROMIUM} is missing: install it with scripts/bootstrap.sh --browser (apt-get install chromium)`;

// playwright-core needs node's fetch globals at import; `node --no-experimental-fetch` removes them: then this file
// runs itself again in a child node without that flag (scripts/chromium.js).
if (NO_FETCH_GLOBALS) {
  await testInChildWithFetchGlobals(import.meta.url, 'WebGPU suite, in a child node with the fetch globals playwright-core needs', { skip: noBrowser, timeout: 900000 });
} else suite();

/** The networks: [{id, bytes (original), inputs: {name: dims}}], small builds (see the header). */
function networks() {
  const list = Object.entries(ALL_STANDINS)
    .filter(([id]) => !id.startsWith('nextqsm'))
    .map(([id, s]) => ({ id, bytes: smallStandin(id), edge: Math.max(s.divisor, 8) }));
  // NeXtQSM: 4 and 3 levels in place of 7 and 6 (divisor 8 and 4, not 64 and 32): the same operators
  list.push({ id: 'nextqsm-bf (4 levels)', bytes: nextqsmStandin({ vjp: false, levels: 4, base: 2, maxFilters: 8 }), edge: 8 });
  list.push({ id: 'nextqsm-vjp (3 levels)', bytes: nextqsmStandin({ vjp: true, levels: 3, base: 2, maxFilters: 8 }), edge: 8 });
  for (const n of list) {
    const m = onnx.ModelProto.decode(n.bytes);
    const inits = new Set(m.graph.initializer.map((t) => t.name));
    n.inputs = Object.fromEntries(m.graph.input.filter((v) => !inits.has(v.name)).map((v) => [v.name, v.type.tensorType.shape.dim.map((d) => (d.dimParam ? n.edge : Number(d.dimValue)))]));
  }
  return list;
}

function suite() {
  let srv;
  let ctx;
  let userDir; // the Chromium profile, removed with the browser
  let adapter = null; // {vendor, architecture, fallback} or null
  let noAdapter = noBrowser;
  const pages = new Map(); // build → page
  const models = new Map(); // key → the bytes of a network runBoth serves to its page
  let served = 0;

  before(async () => {
    if (noBrowser) return;
    const html = '<!doctype html><meta charset="utf-8"><title>Tessera WebGPU test</title>';
    srv = await startServer({ port: 0 });
    const { chromium } = await import('playwright-core');
    userDir = fs.mkdtempSync(path.join(os.tmpdir(), 'tessera-webgpu-'));
    ctx = await chromium.launchPersistentContext(userDir, { executablePath: CHROMIUM, headless: true, args: [...CHROMIUM_ARGS, '--enable-unsafe-webgpu'] });
    await ctx.route(`${srv.url}${PAGE}`, (route) =>
      route.fulfill({ status: 200, contentType: 'text/html', body: html, headers: { 'Cross-Origin-Opener-Policy': 'same-origin', 'Cross-Origin-Embedder-Policy': 'require-corp' } }),
    );
    // The networks reach the page as HTTP bodies: bytes handed to page.evaluate travel as a JSON array of numbers
    // (≈30 s for the demo's weights).
    await ctx.route(`${srv.url}${MODELS}*`, (route) => {
      const bytes = models.get(route.request().url().slice(`${srv.url}${MODELS}`.length));
      route.fulfill(bytes ? { status: 200, contentType: 'application/octet-stream', body: Buffer.from(bytes), headers: { 'Cross-Origin-Resource-Policy': 'same-origin' } } : { status: 404 });
    });
    for (const build of BUILDS) {
      const page = await ctx.newPage();
      page.logs = [];
      page.on('console', (m) => page.logs.push(m.text()));
      await page.goto(`${srv.url}${PAGE}`);
      pages.set(build, page);
    }
    adapter = await pages.get(BUILDS[0]).evaluate(async () => {
      const a = await navigator.gpu?.requestAdapter();
      if (!a) return null;
      const info = a.info ?? {};
      return { vendor: info.vendor, architecture: info.architecture, description: info.description, fallback: a.isFallbackAdapter ?? info.isFallbackAdapter };
    });
    if (!adapter) noAdapter = `navigator.gpu.requestAdapter() gave no adapter in ${CHROMIUM} --enable-unsafe-webgpu (headless)`;
    else console.log(`# WebGPU adapter: ${JSON.stringify(adapter)}`);
  });

  after(async () => {
    await ctx?.close();
    await srv?.close();
    if (userDir) fs.rmSync(userDir, { recursive: true, force: true });
  });

  /**
   * Runs bytes in the build's page on each of eps ('wasm' and 'webgpu') with the same seeded inputs; {wasm, webgpu}
   * each {dims, data: number[]} or {error}; with placement, webgpu.cpuNodes: the ops ORT placed on the CPU (read from
   * the verbose log of the webgpu session's creation; its run logs at the default level).
   */
  async function runBoth(build, bytes, inputs, { placement = false, eps = ['wasm', 'webgpu'] } = {}) {
    const page = pages.get(build);
    page.logs.length = 0;
    const key = String(++served);
    models.set(key, bytes);
    const r = await page.evaluate(async ({ build, url, inputs, placement, eps }) => {
      const ort = await import(`/node_modules/onnxruntime-web/dist/${build}`);
      const bytes = new Uint8Array(await (await fetch(url)).arrayBuffer());
      ort.env.wasm.numThreads = 1;
      const feeds = {};
      let seed = 1;
      for (const [name, dims] of Object.entries(inputs)) {
        const n = dims.reduce((a, b) => a * b, 1);
        const k = seed++;
        feeds[name] = new ort.Tensor('float32', Float32Array.from({ length: n }, (_, i) => (n === 1 ? 1 + 0.1 * k : Math.sin(0.37 * i + k) * 0.5 + Math.cos(0.011 * i))), dims);
      }
      const out = {};
      for (const ep of eps) {
        try {
          // with placement, the webgpu session's creation logs verbosely (where each node runs); no run does (the log
          // of a run is long), at the run's own warning level
          const verbose = placement && ep === 'webgpu';
          const s = await ort.InferenceSession.create(bytes, { executionProviders: [ep], graphOptimizationLevel: 'all', ...(verbose ? { logSeverityLevel: 0, logVerbosityLevel: 0 } : { logSeverityLevel: 3 }) });
          const o = await s.run(feeds, { logSeverityLevel: 3 });
          const y = o[s.outputNames[0]];
          out[ep] = { dims: [...y.dims], data: Array.from(y.data) };
          await s.release();
        } catch (e) {
          out[ep] = { error: String(e?.message ?? e) };
        }
      }
      return out;
    }, { build, url: `${MODELS}${key}`, inputs, placement, eps });
    models.delete(key);
    if (placement) {
      // ORT's verbose log: " Node(s) placed on [CPUExecutionProvider]. Number of nodes: n" then "  Op (name)" lines
      const cpu = [];
      let onCpu = false;
      for (const l of page.logs) {
        if (/Node\(s\) placed on \[/.test(l)) onCpu = /\[CPUExecutionProvider\]/.test(l);
        else if (/All nodes placed on \[/.test(l)) onCpu = false;
        else if (onCpu && /VerifyEachNodeIsAssignedToAnEp\]\s+(\w+) \((.*)\)/.test(l)) {
          const [, op, name] = /VerifyEachNodeIsAssignedToAnEp\]\s+(\w+) \((.*)\)/.exec(l);
          cpu.push({ op, name });
        }
      }
      r.webgpu.cpuNodes = cpu;
      r.webgpu.placementLogged = page.logs.some((l) => /placed on \[(JsExecutionProvider|WebGpuExecutionProvider)\]/.test(l));
    }
    return r;
  }

  /** Asserts both ran, equal dims, max |Δ| within the bound; returns {diff, scale}. */
  function assertClose(r, what) {
    assert.ok(!r.wasm.error, `${what}: wasm failed: ${r.wasm.error}`);
    assert.ok(!r.webgpu.error, `${what}: webgpu failed: ${r.webgpu.error}`);
    assert.deepEqual(r.webgpu.dims, r.wasm.dims, `${what}: dims`);
    let diff = 0;
    let scale = 0;
    r.wasm.data.forEach((v, i) => {
      diff = Math.max(diff, Math.abs(v - r.webgpu.data[i]));
      scale = Math.max(scale, Math.abs(v));
    });
    assert.ok(Number.isFinite(diff), `${what}: not finite`);
    assert.ok(diff <= BOUND * Math.max(1, scale), `${what}: max |webgpu − wasm| ${diff} over the bound ${BOUND * Math.max(1, scale)}`);
    return { diff, scale };
  }

  const DEMO = new Uint8Array(fs.readFileSync(path.join(ROOT, 'web/models/demo-unet.onnx')));
  const COMPUTE = new Set(['Conv', 'ConvTranspose', 'MaxPool', 'AveragePool', 'ReduceMax', 'ReduceMean', 'Transpose', 'LeakyRelu', 'Relu', 'Concat', 'Add']);

  for (const build of BUILDS) {
    test(`${build}: the demo network fails on WebGPU as it is; rewritten it runs there, on the GPU, as wasm does`, { skip: noBrowser, timeout: 300000 }, async (t) => {
      if (noAdapter) return t.skip(noAdapter);
      const inputs = { field: [1, 1, 16, 16, 24] };
      // the original graph on WebGPU only (its wasm output is not compared with anything)
      const orig = await runBoth(build, DEMO, inputs, { eps: ['webgpu'] });
      assert.ok(orig.webgpu.error, 'the original demo graph ran on WebGPU: the rewrite may no longer be needed');
      assert.match(orig.webgpu.error, /Pooling with kernelShape\.length > 2 is not supported|Only Conv2d or Conv1d are supported|only support 2-dimensional conv/);
      const rw = await runBoth(build, rewriteForWebGpu(DEMO).bytes, inputs, { placement: true });
      const { diff, scale } = assertClose(rw, `demo (${build})`);
      assert.ok(rw.webgpu.placementLogged, 'ORT logged no WebGPU node placement');
      // the CPU may hold shape arithmetic only: ORT's own int64 nodes and the rewrite's (named webgpu/…; its one
      // Concat joins shape vectors)
      const onCpu = rw.webgpu.cpuNodes.filter(({ op, name }) => COMPUTE.has(op) && !(op === 'Concat' && name.startsWith('webgpu/')));
      assert.deepEqual(onCpu, [], `compute nodes on the CPU: ${JSON.stringify(onCpu)}`);
      t.diagnostic(`demo 16×16×24: max |webgpu − wasm| ${diff.toExponential(2)}, max |y| ${scale.toFixed(3)}; CPU nodes (shape arithmetic): ${rw.webgpu.cpuNodes.length}; adapter ${JSON.stringify(adapter)}`);
    });

    test(`${build}: every registry stand-in, rewritten, runs on WebGPU as on wasm`, { skip: noBrowser, timeout: 600000 }, async (t) => {
      if (noAdapter) return t.skip(noAdapter);
      for (const n of networks()) {
        const rw = rewriteForWebGpu(n.bytes);
        assert.deepEqual(rw.unsupported, [], n.id);
        const { diff, scale } = assertClose(await runBoth(build, rw.bytes, n.inputs), `${n.id} (${build})`);
        t.diagnostic(`${n.id}: ${rw.rewritten.length} nodes rewritten; max |webgpu − wasm| ${diff.toExponential(2)}, max |y| ${scale.toPrecision(3)}`);
      }
    });
  }
}

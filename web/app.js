// Tessera's page, wired: inputs, network and weights, tile settings with the C++ planner's live readout, the
// run with a live tile map, and the results in NiiVue. Each panel lives in web/panels/, each workflow (field →
// χ, wrapped phase → χ) in web/workflows/; the shared state in page.js. Heavy work never runs here: the runtime
// lives in a driver worker (bindings/js/index.js), NIfTI decoding and writing in web/io-worker.js.
import { $ } from './dom.js';
import { Page } from './page.js';
import { DEMO } from './demo.js';
import { createIoClient } from './io-client.js';
import { fieldWorkflow } from './workflows/index.js';
import { NetworkPanel } from './panels/network.js';
import { MethodPanel } from './panels/method.js';
import { methodWorkflow } from './workflows/method.js';
import { pipelineWorkflow, PIPELINE_DEMO, GROUPS } from './workflows/pipeline.js';
import { PipelinePanel } from './panels/pipeline.js';
import { InputsPanel } from './panels/inputs.js';
import { SettingsPanel } from './panels/settings.js';
import { RunPanel } from './panels/run.js';
import { ResultsPanel } from './panels/results.js';
import { ViewerPanel } from './panels/viewer.js';
import { applySchema, followDefaultHalo, watchTyped } from './schema.js';

const page = new Page();
const io = createIoClient();
page.panels = {
  network: new NetworkPanel(page),
  method: new MethodPanel(page),
  pipeline: new PipelinePanel(page),
  inputs: new InputsPanel(page, io),
  settings: new SettingsPanel(page),
  run: new RunPanel(page),
  results: new ResultsPanel(page, io),
  viewer: new ViewerPanel(page, io),
};
const { network, method, inputs, settings, run, results } = page.panels;
methodWorkflow.page = page;
pipelineWorkflow.page = page;

// A change of inversion (network or classical method) or of network: the inputs, tile settings and output names
// follow its workflow; then a new plan.
const inversionChanged = () => {
  syncDemoText();
  inputs.syncWorkflow();
  settings.syncWorkflow();
  if (!page.result) results.setQuantity(page.quantity());
  page.schedulePlan();
};
network.onChange = () => {
  followDefaultHalo(network.selected().model, page.schema);
  inversionChanged();
};
method.onChange = inversionChanged;

/** The demo's words follow the workflow: From phase scans the phantom; otherwise the method panel's words. */
function syncDemoText() {
  if (!page.workflow().pipeline) return method.syncDemoText();
  const m = method.active();
  const g = PIPELINE_DEMO.geometry;
  const background = GROUPS.find((x) => x.group === page.schema?.get('background')?.default)?.label ?? 'background removal';
  $('demoText').textContent =
    `Numerical head phantom scanned (${g.dims.join('×')}, ${g.voxelMm[0]} mm, ${PIPELINE_DEMO.te.length} echoes, SNR ${PIPELINE_DEMO.snr}): ` +
    `mask from the magnitude (eroded ${PIPELINE_DEMO.brainMask.erosion} mm), echo fit, ${background}, then ${m ? method.titles.get(m) : 'RTS'} — no download, no file needed.`;
}

// "Start from": the field → χ workflows, or From phase (the pipeline). From phase inverts with RTS unless a method or a
// field → χ network is chosen.
$('startFrom').addEventListener('change', () => {
  if (page.workflow().pipeline && !method.active() && network.selected().model?.inputs?.includes('phase')) method.select(PIPELINE_DEMO.method);
  else inversionChanged();
});

// The two slice sliders (tile map, results) show the same slice; the user's choice stops the map following.
for (const id of ['tileSlice', 'slice']) {
  $(id).addEventListener('input', (e) => {
    run.tileMap.follow = false;
    page.syncSlice(Number(e.target.value));
  });
}

/**
 * From phase's demo: the phantom head scanned (multi-echo phase and magnitude, SNR 100) as the input, no mask (the
 * pipeline makes it from the magnitude, eroded as PIPELINE_DEMO says), RTS unless another method is chosen; then a run.
 * r vs the phantom's χ truth is shown in the report.
 */
async function pipelineDemo() {
  const tessera = await page.runtime();
  const d = PIPELINE_DEMO;
  if (!method.active()) method.select(d.method);
  $('progressText').textContent = 'scanning the phantom…';
  const scan = await tessera.phantomScan({ geometry: d.geometry, te: d.te, b0: d.b0, snr: d.snr, seed: d.seed });
  $('te').value = d.te.join(', ');
  $('b0').value = String(d.b0);
  page.panels.pipeline.reset();
  page.panels.pipeline.set({ 'brainMask.erosion': d.brainMask.erosion });
  inputs.set(
    pipelineWorkflow.input({
      source: 'demo',
      name: 'phantom-scan',
      geometry: d.geometry,
      phase: scan.phase,
      echoes: d.te.length,
      magnitude: scan.magnitude,
      mask: null,
      truth: scan.chi,
      like: { dims: d.geometry.dims, voxelMm: d.geometry.voxelMm },
      phaseRange: [-Math.PI, Math.PI],
      note: `numerical head phantom scanned: ${d.te.length} echoes, SNR ${d.snr}, no mask (made from the magnitude)`,
    }),
  );
  await settings.update();
  page.setState('idle');
  await run.run();
}

/** The demo: the phantom as the field input, the demo network selected (unless a classical method is chosen), then a run. */
async function demo() {
  if (page.controller) return;
  page.showError(null);
  page.setState('loading');
  $('progressText').textContent = 'making the phantom…';
  try {
    if (page.workflow().pipeline) return await pipelineDemo();
    const tessera = await page.runtime();
    const p = await tessera.phantom({ geometry: DEMO.geometry, seed: DEMO.seed, noise: DEMO.noise });
    network.select('demo');
    inputs.set(
      fieldWorkflow.input({
        source: 'demo',
        name: 'phantom',
        geometry: DEMO.geometry,
        field: p.field,
        mask: p.mask,
        truth: p.chi,
        like: { dims: DEMO.geometry.dims, voxelMm: DEMO.geometry.voxelMm },
        note: 'numerical head phantom, local field from the dipole model',
      }),
    );
    await settings.update();
    page.setState('idle');
    await run.run();
  } catch (e) {
    page.setState('error');
    page.showError(e);
  }
}
$('demo').addEventListener('click', demo);

async function main() {
  // "Start from" is From a scan unless the address says otherwise (?start=field: a local field map).
  const start = new URLSearchParams(location.search).get('start');
  if ([...$('startFrom').options].some((o) => o.value === start)) $('startFrom').value = start;
  inputs.syncMask();
  const iso = globalThis.crossOriginIsolated === true;
  $('env').textContent = `${iso ? 'Cross-origin isolated' : 'NOT cross-origin isolated (threads unavailable: serve with COOP/COEP, e.g. npm start)'} · ${navigator.hardwareConcurrency} logical cores`;
  document.body.dataset.state = page.state;
  try {
    const tessera = await page.runtime();
    let schema;
    [page.registry, page.limits, schema] = await Promise.all([tessera.registry(), tessera.limits(), tessera.schema()]);
    page.schema = applySchema(schema);
    watchTyped();
    network.fill(page.registry);
    await method.fill(schema, tessera);
    page.panels.pipeline.fill(schema);
    results.listColormaps();
    page.started = true;
    network.changed();
    await settings.update();
    page.setState('idle');
    network.refreshCacheInfo();
    $('env').textContent += ' · runtime ready';
  } catch (e) {
    page.setState('error');
    page.showError(e);
  }
}

main();

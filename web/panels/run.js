// The run panel: Run / Cancel, the progress line, and the live tile map of the plan being run. The map's
// counts are published as #tileCounts' data-* (total, done, running, queued, skipped); the runtime's progress
// as #progress' value/max and data-* (done, total, in-flight, running-tiles: the tiles it names as running;
// stage: 'tiles', or 'verify' during the self-check); overlapping tiles as #tileStride's data-* (stride, blend).
import { TesseraError } from '../../bindings/js/index.js';
import { $, fmtSeconds, setData, clearData } from '../dom.js';
import { TileMap } from '../tilemap.js';
import { WORKFLOWS } from '../workflows/index.js';

export class RunPanel {
  /** @param {import('../page.js').Page} page */
  constructor(page) {
    this.page = page;
    this.tileMap = new TileMap($('tilemap'), $('tileLayers'));
    this.progress = null; // the running inversion's last progress event
    this.runWorkflow = null; // the workflow of the run in progress (the selection may change meanwhile)
    this.runPlan = null; // the plan it obeys
    $('run').addEventListener('click', () => this.run());
    $('cancel').addEventListener('click', () => this.cancel());
  }

  /** Enables the controls for the page's state: Run needs the runtime, an input, a feasible plan and no problem. */
  sync() {
    const { page } = this;
    const running = page.running;
    const feasible = !!page.plan?.feasible;
    const wf = page.workflow();
    const input = page.input;
    const problem = wf.problem(input);
    const measuring = !!page.panels.settings.measuring; // the run would take the measuring worker: it waits
    $('run').disabled = !page.ready || running || measuring || !feasible || !input || !!problem;
    $('measureSpeed').disabled = $('measureReach').disabled = !page.ready || running || measuring || !wf.tiled;
    $('run').title = !input ? wf.needInputText : problem || (!feasible ? ((wf.method || wf.pipeline) && page.plan?.message) || wf.infeasibleText : '');
    // The demo runs the demo network with the tile settings, or the chosen method with its parameters: they must fit
    // (whatever a whole-volume network's plan says).
    // From phase's demo sets its own scan, TEs and options: it needs only the runtime.
    $('demo').disabled = !page.ready || running || measuring || (!wf.pipeline && (wf.tiled || wf.method) && (!feasible || !!problem));
    $('cancel').disabled = page.state !== 'running' && !measuring; // a measurement is cancelled like a run
    $('download').disabled = running || !page.result;
    for (const id of ['workers', 'threads', 'maskFile', 'magFile', 'model', 'inversion', 'startFrom', ...WORKFLOWS.map((w) => w.fileInput)]) $(id).disabled = running;
    if (!wf.tiled) $('workers').disabled = true; // one network call at a time (echo after echo)
  }

  /** A new input: the tile map follows the running tiles' layer again. */
  follow() {
    this.tileMap.follow = true;
  }

  /** The tile slice slider for a volume nz voxels deep (centred). */
  setDepth(nz) {
    const s = $('tileSlice');
    s.max = String(nz - 1);
    s.value = String(Math.floor(nz / 2));
    this.tileMap.z = Math.floor(nz / 2);
  }

  /** Shows slice z of the tile map. */
  setSlice(z) {
    $('tileSlice').value = String(z);
    this.tileMap.setSlice(z);
  }

  /**
   * Draws the plan's tiles (plan.grid, from the C++ planner) over the input: all queued, or skipped. A run resampled to
   * a B0-aligned grid tiles that grid: its tiles are drawn on its dims, without the input's image under them.
   */
  showPlan(plan, input) {
    if (plan.method || plan.pipeline) {
      // A classical method (or the From phase pipeline) runs on the whole volume: one tile, running until its last step.
      const dims = input.geometry.dims;
      const grid = { counts: [1, 1, 1], patchEdge: Math.max(...dims), tiles: [{ index: 0, coreLo: [0, 0, 0], coreHi: [...dims], patchLo: [0, 0, 0], skipped: false }] };
      this.tileMap.setup({ grid, dims, mask: input.mask, background: input.display, patchDims: dims });
      this.renderTiles();
      $('tileStride').hidden = true;
      clearData($('tileStride'));
      return;
    }
    const aligned = plan.b0Align?.resampled ? plan.b0Align.alignedDims : null;
    this.tileMap.setup(aligned
      ? { grid: plan.grid, dims: aligned, patchDims: plan.patchDims }
      : { grid: plan.grid, dims: input.geometry.dims, mask: input.mask, background: input.display, patchDims: plan.patchDims });
    this.renderTiles();
    // Tiles on a stride shorter than the core overlap: the legend says so (the map draws every core).
    const t = plan.feasible && !plan.wholeVolume ? plan.tile : null;
    const overlap = !!t && t.stride < t.core;
    const li = $('tileStride');
    li.hidden = !overlap;
    li.querySelector('span').textContent = overlap ? `stride ${t.stride} (${t.blend} blend): the ${t.core}-voxel cores overlap` : '';
    clearData(li);
    if (overlap) setData(li, { stride: t.stride, blend: t.blend, core: t.core });
  }

  renderTiles() {
    const c = this.tileMap.counts();
    const el = $('tileCounts');
    el.textContent = `${c.total} tiles: ${c.done} done · ${c.running} running · ${c.queued} queued · ${c.skipped} skipped`;
    setData(el, c);
  }

  onProgress(p) {
    this.progress = p;
    const bar = $('progress');
    bar.max = p.total || 1;
    bar.value = p.done;
    const stage = p.stage ?? 'tiles';
    setData(bar, { done: p.done, total: p.total, inFlight: p.inFlight, runningTiles: p.runningTiles ?? null, stage });
    const pct = p.total ? Math.round((100 * p.done) / p.total) : 0;
    $('progressText').textContent = this.runWorkflow.progressText(p, pct, fmtSeconds(p.etaSeconds), this.runPlan);
    if (stage === 'verify') return; // the self-check's box is not one of the map's tiles: they stay done
    const map = this.tileMap;
    if (this.runWorkflow.method || this.runWorkflow.pipeline) {
      map.setProgress(p.done >= p.total ? 1 : 0, p.done >= p.total ? 0 : 1); // the whole volume, one tile
    } else if (p.runningTiles && p.startedTiles?.length) {
      map.setTiles(p.startedTiles, p.runningTiles); // exact: the runtime names the tiles
    } else {
      const active = map.order.length;
      map.setProgress(p.total === active ? p.done : Math.round((p.done / (p.total || 1)) * active), p.inFlight);
    }
    $('tileSlice').value = String(map.z);
    this.renderTiles();
  }

  /** Runs the selected network on the loaded input with the plan shown; the results panel shows the outcome. */
  async run() {
    const { page } = this;
    if (page.controller) return;
    const input = page.input;
    if (!input) return;
    page.showError(null);
    if (!page.plan?.feasible) return page.showError(page.plan?.message || 'This tile setting does not fit.');
    const wf = page.workflow();
    const net = page.network();
    const params = wf.params(input);
    if (params.problem) return page.showError(params.problem);
    const controller = new AbortController();
    page.controller = controller;
    const previous = page.settling;
    const results = page.panels.results;
    page.result = null;
    this.runWorkflow = wf;
    this.runPlan = null;
    this.progress = null;
    results.clear(page.quantity());
    clearData($('progress'));
    page.setState('running');
    $('progress').value = 0;
    // A classical method needs no weights; From phase needs them only when a network inverts.
    const needsWeights = wf.needsWeights ? wf.needsWeights() : !wf.method;
    $('progressText').textContent = needsWeights ? 'loading the network…' : 'planning…';
    let own = null; // the run's own runtime (a classical run), ended when the run settles
    const body = (async () => {
      await previous;
      // The plan of the settings as they are now (a change may still be being planned): the run obeys it.
      const { plan, request: req } = await page.panels.settings.current();
      if (!plan?.feasible) throw new TesseraError(plan?.message || wf.infeasibleText, 'BudgetExceeded');
      this.runPlan = plan;
      this.showPlan(plan, input);
      // A classical run goes to a runtime of its own, ended after it (its heap is the run's alone); it plans the same
      // request again, since a plan is held by the runtime that made it.
      if (wf.ownRuntime?.(params)) {
        $('progressText').textContent = 'starting a runtime for this run…';
        own = await page.runRuntime();
        if (controller.signal.aborted) throw new DOMException('cancelled', 'AbortError');
      }
      const tessera = own ?? (await page.runtime());
      const runPlan = own && !wf.execute ? await own.plan(req) : plan;
      // A classical method needs no weights.
      const weights = needsWeights ? await page.panels.network.weights(net, controller.signal) : undefined;
      if (controller.signal.aborted) throw new DOMException('cancelled', 'AbortError');
      $('progressText').textContent = wf.startText(plan);
      // Every tile queued until the runtime names the running ones (a method's one tile runs from the start).
      this.tileMap.setProgress(0, wf.method || wf.pipeline ? 1 : 0);
      this.renderTiles();
      const t0 = performance.now();
      const onProgress = (p) => page.controller === controller && this.onProgress(p);
      // The inputs stay the page's (the viewer shows them, a rerun takes them again): copied to the runtime.
      const controls = { signal: controller.signal, onProgress, keepInputs: true };
      // A workflow that runs something else than invert() (From phase: pipeline()) says so with execute(); the page
      // keeps χ's voxels (its geometry is the input's).
      const out = wf.execute
        ? await wf.execute(tessera, req, input, params, weights, controls, runPlan)
        : await tessera.invert(wf.invertRequest(req, input, params, weights, controls, runPlan)).then((r) => ({ ...r, chi: r.chi.data }));
      return { ...out, plan, seconds: (performance.now() - t0) / 1000 };
    })().finally(() => own?.terminate().catch(() => {}));
    page.settling = body.catch(() => {});
    try {
      const { chi, report, quantity, plan, seconds, outputs, stageSeconds } = await body;
      if (controller.signal.aborted) return;
      this.tileMap.setProgress(this.tileMap.order.length, 0);
      if (this.tileMap.follow) this.tileMap.setSlice(Math.floor(input.geometry.dims[2] / 2));
      this.renderTiles();
      $('progress').max = 1;
      $('progress').value = 1;
      page.result = { chi, input, quantity: quantity ?? 'chi', name: wf.runName?.(net, plan) ?? net.name, params, workflow: wf, outputs, stageSeconds, networkReport: outputs?.networkReport, maskEdit: input.maskEdit, ownRuntime: !!own };
      $('progressText').textContent = wf.doneText(report, fmtSeconds(report.wallSeconds));
      await results.show(page.result, report, seconds, plan);
      await page.panels.viewer?.resultChanged();
      page.setState('done');
    } catch (e) {
      if (page.controller !== controller) return; // a cancel already settled the page
      if (e?.name === 'AbortError') {
        page.setState('cancelled');
      } else {
        this.tileMap.settle();
        this.renderTiles();
        $('progressText').textContent = 'failed';
        page.showError(e);
        page.setState('error');
      }
    } finally {
      if (page.controller === controller) {
        page.controller = null;
        page.refresh();
      }
    }
  }

  /** Settles the page at once; the runtime stops its workers in the background. A measurement in progress stops. */
  cancel() {
    const { page } = this;
    const c = page.controller;
    if (!c) return page.panels.settings.measuring?.abort();
    page.controller = null;
    c.abort();
    this.tileMap.settle();
    this.renderTiles();
    $('progressText').textContent = `cancelled at ${this.progress?.done ?? 0}/${this.progress?.total ?? this.runPlan?.methodSteps ?? '?'} ${this.runWorkflow?.unit ?? 'tiles'}`;
    page.panels.network.hideProgress();
    page.setState('cancelled');
  }
}

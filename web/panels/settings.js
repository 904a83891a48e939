// The settings panel: tile settings (core, halo, auto, whole volume, workers, threads, quality, verify) and the
// C++ planner's live readout for the selected network and input — every number from the planner: the estimated
// time beside the predicted fidelity, the network's reach, the fidelity warning when nothing within the budget
// reaches the quality target. The plan is published as #planReadout's data-* attributes (feasible, core, halo,
// stride, blend, patch-edge, tiles-total, tiles-active, tiles-skipped, tiles-in-flight, whole-volume, quality,
// estimated-seconds, estimate-source, crop-pieces, predicted-r, predicted-nrmse, predicted-deficit, fidelity-warning, context-radius,
// context-radius90, context-radius99, context-measured, context-assumed, verify-possible, verify-lo, verify-hi,
// b0-tilt, b0-resampled, b0-aligned-dims; a classical method's plan: method, method-title, method-steps, threads,
// module-heap-bytes, heap-limit-bytes, largest-voxels). With a method chosen, the tile settings are hidden: the
// readout shows the method's plan.
import { $, fmtBytes, fmtSeconds, rows, setData, clearData } from '../dom.js';
import { DEMO } from '../demo.js';
import { typedInt } from '../schema.js';
import { measuredKey } from './network.js';

const TILE_SETTINGS = ['core', 'halo', 'auto', 'whole', 'workers', 'quality', 'verify', 'b0Align', 'crop'];

// What is measured on a network's weights is kept across visits (localStorage), keyed by the weights (measuredKey: a
// registry network's sha256s, a custom .onnx's own): its speed for this machine and browser only (an entry measured in
// another browser version or on another machine, by user agent and logical cores, is not used), its reach for any (it
// is the weights' own).
const SPEED_STORE = 'tessera-qsm.speeds.v2';
const REACH_STORE = 'tessera-qsm.reaches.v1';
const machineKey = () => `${navigator.userAgent} · ${navigator.hardwareConcurrency} logical cores`;

/** A store's entries, by measuredKey ({} when empty). Throws when storage is off or the store unreadable. */
const readStore = (store) => JSON.parse(localStorage.getItem(store) ?? '{}');

/**
 * A store's usable entries: Map key → {measuredAt, earlier: true, ...what(entry)}; empty when storage is off.
 * what(entry): the entry's measurement ({speed} or {probe}), or null when it is not usable here.
 */
function kept(store, what) {
  try {
    const out = new Map();
    for (const [key, e] of Object.entries(readStore(store))) {
      const m = typeof e?.measuredAt === 'string' ? what(e) : null;
      if (m) out.set(key, { ...m, measuredAt: e.measuredAt, earlier: true });
    }
    return out;
  } catch {
    return new Map(); // storage off (a private window) or unreadable: measured again
  }
}

/** Keeps a measurement for later visits under key; false when this browser's storage refuses it or the key is unknown. */
function keep(store, key, entry) {
  if (!key) return false;
  try {
    const all = readStore(store);
    all[key] = entry;
    localStorage.setItem(store, JSON.stringify(all));
    return true;
  } catch {
    return false;
  }
}

const keptSpeeds = () => kept(SPEED_STORE, (e) => (e.machine === machineKey() && Array.isArray(e.speed?.points) ? { speed: e.speed } : null));
const keptReaches = () => kept(REACH_STORE, (e) => (Array.isArray(e.probe?.within) ? { probe: e.probe } : null));

/** When a measurement was made, as the page says it: "2026-12-05 13:40 UTC". */
const measuredAtText = (measuredAt) => `${measuredAt.slice(0, 16).replace('T', ' ')} UTC`;

/** A probe's points as the page says them: "32³ 0.09 s, 64³ 0.59 s" (hundredths under a second: small patches take milliseconds). */
const pointsText = (points) => points.map((p) => `${p.edge}³ ${p.seconds < 1 ? `${p.seconds.toFixed(2)} s` : fmtSeconds(p.seconds)}`).join(', ');

export class SettingsPanel {
  /** @param {import('../page.js').Page} page */
  constructor(page) {
    this.page = page;
    this.seq = 0;
    this.timer = 0; // a plan scheduled (the user is typing), or 0
    this.latest = null; // the latest update() while it runs, or null
    this.speeds = keptSpeeds(); // this machine's measured speed, by measuredKey: {speed, measuredAt, earlier | stored}
    this.measuring = null; // the AbortController of the speed measurement in progress, or null
    this.byItself = new Set(); // the networks (measuredKey) whose speed this page measured by itself
    this.reaches = keptReaches(); // the networks' measured reach, by measuredKey: {probe (receptiveField's), measuredAt, earlier | stored}
    for (const id of TILE_SETTINGS) $(id).addEventListener('input', () => this.schedule());
    $('measureSpeed').addEventListener('click', () => this.measureSpeed());
    $('measureReach').addEventListener('click', () => this.measureReach());
  }

  /**
   * The first plan of a loaded input, for a network this machine has no speed of: its speed is measured by itself
   * (measureSpeed, sized to the planned run: a few % of its voxels), so that the estimate
   * before Run is this machine's. Once per network and page, and only when its weights are here (no download).
   */
  async measureByItself() {
    const { page } = this;
    const { plan } = await this.current();
    await page.panels.network.reading; // a custom .onnx still being read: its sha256 keys its speed
    const net = page.network();
    const key = measuredKey(net);
    if (!page.input || !page.workflow().tiled || !plan?.feasible || !(plan.voxelsRun > 0)) return;
    if (page.running || this.measuring || this.speeds.has(key) || this.byItself.has(key)) return;
    if (!page.panels.network.weightsAtHand(net)) return; // no download nobody asked for
    this.byItself.add(key);
    await this.measureSpeed({ runVoxels: plan.voxelsRun });
  }

  /**
   * This machine's speed of the selected network: a few patches timed in the worker that its next run takes (the
   * runtime keeps it, so the run starts no worker of its own); the estimate then uses it. Run waits while it runs.
   * runVoxels: the planned run's patch voxels (the probe is then sized to it), else the probe's standard patches.
   */
  async measureSpeed({ runVoxels } = {}) {
    await this.measure('speedText', 'Speed not measured', async ({ tessera, weights, net, signal, text }) => {
      const { plan } = await this.current();
      const threads = plan?.threadsPerWorker || this.runtimeOptions().threadsPerWorker;
      const speed = await tessera.measureSpeed({
        weights,
        ...SettingsPanel.network(net),
        threads,
        runVoxels,
        signal,
        onProgress: (p) => (text.textContent = `measuring: patch ${p.done} of ${p.total}…`),
      });
      const entry = { speed: { points: speed.points, startSeconds: speed.startSeconds, threads: speed.threads, seconds: speed.seconds }, measuredAt: new Date().toISOString() };
      const key = measuredKey(net);
      const stored = keep(SPEED_STORE, key, { ...entry, machine: machineKey() });
      this.speeds.set(key, { ...entry, byItself: !!runVoxels, stored });
      text.textContent = this.speedNote();
    });
  }

  /**
   * How far the selected network looks, measured (receptiveField's probe: a phantom patch run with its centre voxel
   * raised and lowered); the plan then takes it as the request's context instead of the graph's reach, which lifts the
   * caution for a trained network that uses less than its graph allows. Run waits while it runs.
   */
  async measureReach() {
    await this.measure('reachText', 'Reach not measured', async ({ tessera, weights, net, signal, text }) => {
      text.textContent = 'measuring the reach…';
      const { probe } = await tessera.receptiveField({
        weights,
        ...SettingsPanel.network(net),
        probe: true,
        signal,
        onProgress: (p) => p.total && (text.textContent = `measuring the reach: ${p.done} of ${p.total}…`),
      });
      const entry = { probe, measuredAt: new Date().toISOString() };
      const key = measuredKey(net);
      this.reaches.set(key, { ...entry, stored: keep(REACH_STORE, key, entry) });
      text.textContent = this.reachNote();
    });
  }

  /** How a request names the network: its registry id, or a custom network's spec. */
  static network(net) {
    return net.kind === 'custom' ? { spec: net.spec } : { model: net.id };
  }

  /**
   * One measurement of the selected network at a time, in the page's runtime with its weights (Run waits for it;
   * Cancel stops it); work({tessera, weights, net, signal, text}) says its result in #textId, then the page plans again.
   * failure: the words before the reason when it fails.
   */
  async measure(textId, failure, work) {
    const { page } = this;
    if (!page.workflow().tiled || page.running || this.measuring) return;
    const controller = new AbortController();
    this.measuring = controller;
    page.refresh();
    const text = $(textId);
    text.textContent = 'loading the network…';
    try {
      await page.panels.network.reading; // a custom .onnx still being read: its sha256 keys the measurement
      const net = page.network();
      const tessera = await page.runtime();
      const weights = await page.panels.network.weights(net, controller.signal);
      await work({ tessera, weights, net, signal: controller.signal, text });
      await this.update();
    } catch (e) {
      text.textContent = `${failure}: ${e?.name === 'AbortError' ? 'cancelled' : page.friendly(e)}`;
    } finally {
      this.measuring = null;
      page.refresh();
    }
  }

  /** What #reachText says of the selected network's measured reach: measured now, kept from a visit, or nothing yet. */
  reachNote() {
    const e = this.reaches.get(measuredKey(this.page.network()));
    if (!e) return '';
    const uses = "the plan uses it instead of the graph's reach";
    if (e.earlier) return `Measured on ${measuredAtText(e.measuredAt)} (a ${e.probe.edge}³ patch), kept from an earlier visit: ${uses}; Measure reach measures again`;
    return `Measured in ${fmtSeconds(e.probe.seconds)} (a ${e.probe.edge}³ patch): ${uses}${e.stored ? '; kept for later visits' : ''}`;
  }

  /** The workers and ONNX Runtime threads per worker the user typed; undefined ones are the planner's (C++'s) choice. */
  runtimeOptions() {
    return { workers: typedInt('workers', 1, 16), threadsPerWorker: typedInt('threads', 1, 16) };
  }

  /** The tile settings follow the workflow: off for whole-volume networks, with the reason. */
  syncWorkflow() {
    const wf = this.page.workflow();
    const net = this.page.network();
    if (!wf.tiled) for (const id of TILE_SETTINGS) $(id).disabled = true; // the next plan keeps them so
    $('tileControls').hidden = !!wf.method || !!wf.pipeline; // a method has no tiles, workers or quality: its parameters are in card 2
    $('tileTitle').textContent = wf.method || wf.pipeline ? '3 · Plan' : '3 · Tiles';
    $('tileNote').textContent = wf.tiled
      ? ''
      : wf.pipeline
      ? `From phase runs the C++ pipeline on the whole volume, stage by stage (progress and Cancel between steps)${this.page.panels.method.active() ? '' : `; ${net.name} then inverts the local field with the auto-planner's tiles`}.`
      : `${net.name} runs on the whole volume at once (it cannot be tiled): the tile settings, the quality target and the self-check do not apply (the result is the whole-volume run itself); only the threads per worker do.`;
  }

  /** Plans again shortly (the user is typing). */
  schedule() {
    clearTimeout(this.timer);
    this.timer = setTimeout(() => this.update(), 120);
  }

  /**
   * The plan of the settings as they are now and the request it was made for ({plan, request}): waits for a plan
   * still scheduled or being made (a run obeys what the page shows once it settles).
   */
  async current() {
    while (this.timer || this.latest) await (this.timer ? this.update() : this.latest);
    return { plan: this.page.plan, request: this.page.planRequest };
  }

  /** The plan request for the page as it is (the demo geometry until an input is loaded). */
  request() {
    const { page } = this;
    const input = page.input;
    const net = page.network();
    const wf = page.workflow();
    const req = wf.planRequest(net, input, input?.geometry ?? wf.demoGeometry ?? DEMO.geometry, this.runtimeOptions());
    const key = measuredKey(net);
    const speed = wf.tiled ? this.speeds.get(key)?.speed : undefined;
    const reach = wf.tiled ? this.reaches.get(key)?.probe : undefined;
    return { ...req, ...(speed && { speed }), ...(reach && { context: { within: reach.within } }) };
  }

  /** What #speedText says of the selected network's speed: measured now, kept from a visit, or nothing yet. */
  speedNote() {
    const e = this.speeds.get(measuredKey(this.page.network()));
    if (!e) return '';
    if (e.earlier) return `Measured on this machine on ${measuredAtText(e.measuredAt)} (${pointsText(e.speed.points)}), kept from an earlier visit; Measure speed measures again`;
    const { seconds, threads, points } = e.speed;
    return `${e.byItself ? 'Measured by itself before the first run' : 'Measured'} on this machine in ${fmtSeconds(seconds)} (${threads} thread${threads > 1 ? 's' : ''}: ${pointsText(points)}); the next run of it takes the measuring worker${e.stored ? '; kept for later visits' : ''}`;
  }

  /** Asks the C++ planner for the current settings and shows its answer (the latest request wins). */
  update() {
    clearTimeout(this.timer);
    this.timer = 0;
    const p = this.planNow();
    this.latest = p;
    const settled = () => this.latest === p && (this.latest = null); // before any waiter of current() resumes
    p.then(settled, settled);
    return p;
  }

  /** update()'s work: the plan, shown unless a newer request was made meanwhile. */
  async planNow() {
    const { page } = this;
    if (!page.tessera) return;
    const seq = ++this.seq;
    const req = this.request();
    let plan;
    try {
      plan = await page.tessera.plan(req);
    } catch (e) {
      plan = { feasible: false, message: page.friendly(e), warning: '' };
    }
    if (seq !== this.seq) return;
    // The inversion changed meanwhile (a method's plan for a network, or back): the plan scheduled for it follows.
    const kindOf = (x) => (x.pipeline ? 'pipeline' : x.method ? 'method' : 'network');
    if (kindOf(req) !== kindOf(page.workflow())) return this.schedule();
    page.plan = plan;
    page.planRequest = req;
    this.render(plan, req);
    if (page.input && !page.controller) page.panels.run.showPlan(plan, page.input);
    page.refresh();
  }

  render(plan, req) {
    const { page } = this;
    const wf = page.workflow();
    const row = rows($('planReadout'));
    wf.planRows(plan, page.network(), !!page.input, row);
    if (plan.feasible && !wf.method && !wf.pipeline) row('Estimated peak', `${fmtBytes(plan.peakBytes)} (activations ${fmtBytes(plan.activationBytes)} + module heap ${fmtBytes(plan.moduleHeapBytes)})`);
    if (plan.cost?.source === 'calibrated') {
      row('Memory cost', `${fmtBytes(plan.cost.fixedBytes)} + ${plan.cost.bytesPerVoxel} B/voxel per worker, calibrated (${plan.cost.points.length} patches measured in ${plan.cost.seconds.toFixed(1)} s)`);
    } else if (plan.cost?.source === 'assumed') {
      row('Memory cost', `${plan.cost.bytesPerVoxel} B/voxel assumed: choose the network's .onnx to calibrate it, or type its bytes per voxel`);
    }
    this.publish(plan, req);
    if (!this.measuring) $('speedText').textContent = this.speedNote();
    if (!this.measuring) $('reachText').textContent = this.reachNote();
    const L = page.limits;
    const bars = $('memBars');
    bars.textContent = '';
    if (L && plan.feasible) {
      const bar = (label, value, limit) => {
        const d = document.createElement('div');
        d.className = 'membar';
        const frac = Math.min(1, value / limit);
        d.innerHTML = `<span class="lbl"></span><span class="track"><span class="fill"></span></span><span class="val mono"></span>`;
        d.querySelector('.lbl').textContent = label;
        d.querySelector('.fill').style.width = `${(100 * frac).toFixed(1)}%`;
        d.querySelector('.fill').classList.toggle('hot', frac > 0.85);
        d.querySelector('.val').textContent = `${fmtBytes(value)} / ${fmtBytes(limit)}`;
        bars.append(d);
      };
      if (wf.memBars) {
        for (const [label, value, limit] of wf.memBars(plan, L)) bar(label, value, limit);
      } else {
        bar(wf.barLabels[0], plan.activationBytes, L.tileActivationBudget);
        bar(wf.barLabels[1], plan.bytesPerTile, L.maxPatchActivationBytes);
        bar('Estimated peak vs heap ceiling', plan.peakBytes, L.heapCeilingBytes);
      }
    }
    if (wf.method || (wf.pipeline && page.panels.method.active())) page.panels.method.showPlan(plan);
    if (wf.pipeline) page.panels.pipeline.showPlan(plan);
    $('planAdvice').hidden = plan.feasible;
    $('planAdvice').textContent = plan.feasible ? '' : plan.message;
    $('planWarning').hidden = !plan.warning;
    $('planWarning').textContent = plan.warning || '';
    const fw = plan.feasible ? plan.fidelityWarning : '';
    $('fidelityWarning').hidden = !fw;
    $('fidelityWarning').textContent = fw ? `Fidelity: ${fw}.` : '';
    if (!wf.tiled) {
      for (const id of ['core', 'halo', 'auto', 'whole', 'quality', 'verify', 'b0Align', 'crop']) $(id).disabled = true; // the note above says why
    } else {
      $('whole').disabled = $('verify').disabled = $('b0Align').disabled = false;
      $('core').disabled = $('halo').disabled = $('auto').disabled = $('whole').checked;
      // The quality steers the auto-planner: with explicit tiles or the whole volume the plan only predicts.
      $('quality').disabled = $('crop').disabled = $('whole').checked || !$('auto').checked;
      $('quality').title = $('quality').disabled ? 'The quality target steers the auto-planner (Auto); the plan below predicts the fidelity of the tiles set here.' : (page.schema?.get('quality')?.help ?? '');
      if ($('auto').checked) {
        $('core').disabled = true;
        if (plan.feasible && plan.tile) $('core').value = String(plan.tile.core);
        // The planner's halo, unless the user set one (then it was kept).
        if (plan.feasible && plan.tile && $('halo').dataset.userSet !== '1') $('halo').value = String(plan.tile.halo);
      }
    }
    // The plan's workers and threads show until the user types their own.
    if (plan.feasible) {
      if ($('workers').dataset.userSet !== '1') $('workers').value = String(plan.workers);
      if ($('threads').dataset.userSet !== '1' && plan.threadsPerWorker) $('threads').value = String(plan.threadsPerWorker);
    }
    $('planExplain').hidden = !plan.explanation;
    $('planExplain').textContent = plan.explanation ? `Auto-planner: ${plan.explanation}.` : '';
  }

  /** #planReadout's data-*: the plan's numbers (and the quality it was asked for). */
  publish(plan, req) {
    const el = $('planReadout');
    clearData(el);
    const f = plan.predictedFidelity, c = plan.context, v = plan.verify;
    setData(el, {
      feasible: !!plan.feasible,
      core: plan.tile?.core,
      halo: plan.tile?.halo,
      stride: plan.tile?.stride,
      blend: plan.tile?.blend,
      patchEdge: plan.patchEdge,
      tilesTotal: plan.tilesTotal,
      tilesActive: plan.tilesActive,
      tilesSkipped: plan.tilesSkipped,
      tilesInFlight: plan.tilesInFlight,
      wholeVolume: plan.wholeVolume,
      cropped: plan.feasible ? !!plan.crop : undefined,
      cropPatchDims: plan.crop?.patchDims,
      cropPieces: plan.feasible && plan.crop ? plan.crop.split.pieces : undefined,
      quality: req?.quality,
      estimatedSeconds: plan.estimatedSeconds,
      estimateSource: plan.estimatedSeconds > 0 ? plan.estimateSource : undefined,
      predictedR: f?.r,
      predictedNrmse: f?.nrmse,
      predictedDeficit: f?.deficit,
      fidelityWarning: plan.feasible ? !!plan.fidelityWarning : undefined,
      contextRadius: c?.radius,
      contextRadius90: c?.radius90,
      contextRadius99: c?.radius99,
      contextMeasured: c?.measured,
      contextAssumed: c?.assumed,
      verifyPossible: v?.possible,
      verifyLo: v?.possible ? v.lo : undefined,
      verifyHi: v?.possible ? v.hi : undefined,
      costSource: plan.cost?.source,
      costBytesPerVoxel: plan.cost?.bytesPerVoxel,
      b0Tilt: plan.b0Align?.tiltDegrees,
      b0Resampled: plan.b0Align?.resampled,
      b0AlignedDims: plan.b0Align?.alignedDims ?? undefined,
      method: plan.method,
      methodTitle: plan.title,
      methodSteps: plan.methodSteps,
      threads: plan.method || plan.pipeline ? plan.threads : undefined,
      moduleHeapBytes: plan.method || plan.pipeline ? plan.moduleHeapBytes : undefined,
      heapLimitBytes: plan.method || plan.pipeline ? this.page.workflow().memBars?.(plan, this.page.limits)[0][2] : undefined,
      pipeline: plan.pipeline,
      stages: plan.stages?.join('|'),
      workspaceBytes: plan.pipeline ? plan.workspaceBytes : undefined,
      largestVoxels: plan.largestVoxels,
    });
  }
}

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

const TILE_SETTINGS = ['core', 'halo', 'auto', 'whole', 'workers', 'quality', 'verify', 'b0Align', 'crop'];

// The speeds measured here are kept across visits (localStorage), for the registry's networks only: their weights are
// fixed by sha256, while a custom network's file name says nothing of its weights. An entry measured in another
// browser version or on another machine (user agent, logical cores) is not used.
const SPEED_STORE = 'tessera-qsm.speeds.v1';
const machineKey = () => `${navigator.userAgent} · ${navigator.hardwareConcurrency} logical cores`;

/** The store's entries, by network id ({} when empty). Throws when storage is off or the store unreadable. */
const readStore = () => JSON.parse(localStorage.getItem(SPEED_STORE) ?? '{}');

/** The kept speeds of this machine and browser: Map network id → {speed, measuredAt, earlier: true}; empty when storage is off. */
function keptSpeeds() {
  try {
    const ok = (e) => e?.machine === machineKey() && Array.isArray(e.speed?.points) && typeof e.measuredAt === 'string';
    return new Map(Object.entries(readStore()).filter(([, e]) => ok(e)).map(([id, { speed, measuredAt }]) => [id, { speed, measuredAt, earlier: true }]));
  } catch {
    return new Map(); // storage off (a private window) or unreadable: the speed is measured again
  }
}

/** Keeps a registry network's measured speed for later visits; false when this browser's storage refuses it. */
function keepSpeed(id, { speed, measuredAt }) {
  try {
    const all = readStore();
    all[id] = { speed, measuredAt, machine: machineKey() };
    localStorage.setItem(SPEED_STORE, JSON.stringify(all));
    return true;
  } catch {
    return false;
  }
}

/** A probe's points as the page says them: "32³ 0.09 s, 64³ 0.59 s" (hundredths under a second: small patches take milliseconds). */
const pointsText = (points) => points.map((p) => `${p.edge}³ ${p.seconds < 1 ? `${p.seconds.toFixed(2)} s` : fmtSeconds(p.seconds)}`).join(', ');

export class SettingsPanel {
  /** @param {import('../page.js').Page} page */
  constructor(page) {
    this.page = page;
    this.seq = 0;
    this.timer = 0; // a plan scheduled (the user is typing), or 0
    this.latest = null; // the latest update() while it runs, or null
    this.speeds = keptSpeeds(); // this machine's measured speed, by network: {speed, measuredAt, earlier | stored}
    this.measuring = null; // the AbortController of the speed measurement in progress, or null
    this.byItself = new Set(); // the networks (networkKey) whose speed this page measured by itself
    this.reaches = new Map(); // the networks' reach measured here (networkKey → receptiveField's probe), for this page
    // (a custom network's until another file is chosen)
    for (const id of TILE_SETTINGS) $(id).addEventListener('input', () => this.schedule());
    $('measureSpeed').addEventListener('click', () => this.measureSpeed());
    $('measureReach').addEventListener('click', () => this.measureReach());
  }

  /** The key of a network's measurements (speed, reach): its registry id, or the custom network's name (its file). */
  static networkKey(net) {
    return net.kind === 'custom' ? `custom:${net.name}` : net.id;
  }

  /**
   * The first plan of a loaded input, for a network this machine has no speed of: its speed is measured by itself
   * (measureSpeed, sized to the planned run: a few % of its voxels), so that the estimate
   * before Run is this machine's. Once per network and page, and only when its weights are here (no download).
   */
  async measureByItself() {
    const { page } = this;
    const { plan } = await this.current();
    const net = page.network();
    const key = SettingsPanel.networkKey(net);
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
      const entry = { speed: { points: speed.points, startSeconds: speed.startSeconds, threads: speed.threads, seconds: speed.seconds }, measuredAt: new Date().toISOString(), byItself: !!runVoxels };
      const key = SettingsPanel.networkKey(net);
      entry.stored = net.kind !== 'custom' && keepSpeed(key, entry);
      this.speeds.set(key, entry);
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
      this.reaches.set(SettingsPanel.networkKey(net), probe);
      text.textContent = this.reachNote();
    });
  }

  /** How a request names the network: its registry id, or a custom network's spec. */
  static network(net) {
    return net.kind === 'custom' ? { spec: net.spec } : { model: net.id };
  }

  /**
   * One measurement of the selected network at a time, in the page's runtime with its weights (Run waits for it);
   * work({tessera, weights, net, signal, text}) says its result in #textId, then the page plans again.
   * failure: the words before the reason when it fails.
   */
  async measure(textId, failure, work) {
    const { page } = this;
    const net = page.network();
    if (!page.workflow().tiled || page.running || this.measuring) return;
    const controller = new AbortController();
    this.measuring = controller;
    page.refresh();
    const text = $(textId);
    text.textContent = 'loading the network…';
    try {
      const tessera = await page.runtime();
      const weights = await page.panels.network.weights(net, controller.signal);
      await work({ tessera, weights, net, signal: controller.signal, text });
      await this.update();
    } catch (e) {
      text.textContent = e?.name === 'AbortError' ? '' : `${failure}: ${page.friendly(e)}`;
    } finally {
      this.measuring = null;
      page.refresh();
    }
  }

  /** Forgets the custom network's measured reach (another file is chosen: other weights, maybe the same name). */
  forgetCustomReach() {
    for (const key of [...this.reaches.keys()]) if (key.startsWith('custom:')) this.reaches.delete(key);
  }

  /** What #reachText says of the selected network's measured reach, or nothing. */
  reachNote() {
    const probe = this.reaches.get(SettingsPanel.networkKey(this.page.network()));
    return probe ? `Measured in ${fmtSeconds(probe.seconds)} (a ${probe.edge}³ patch): the plan uses it instead of the graph's reach` : '';
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
    const key = SettingsPanel.networkKey(net);
    const speed = wf.tiled ? this.speeds.get(key)?.speed : undefined;
    const reach = wf.tiled ? this.reaches.get(key) : undefined;
    return { ...req, ...(speed && { speed }), ...(reach && { context: { within: reach.within } }) };
  }

  /** What #speedText says of the selected network's speed: measured now, kept from a visit, or nothing yet. */
  speedNote() {
    const e = this.speeds.get(SettingsPanel.networkKey(this.page.network()));
    if (!e) return '';
    if (e.earlier) return `Measured on this machine on ${e.measuredAt.slice(0, 16).replace('T', ' ')} UTC (${pointsText(e.speed.points)}), kept from an earlier visit; Measure speed measures again`;
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

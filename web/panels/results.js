// The results panel: the input, the output (χ, or iQFM's local field) and, for the demo, the phantom truth in
// NiiVue on one slice, with colormap and window; the run report; the output as .nii.gz. The report's numbers
// are published as #report's data-* (tiles-run, tiles-skipped, tiles-total, wall-seconds, quantity, mask-voxels,
// mean, std, finite, nonzero-outside, r, nrmse, worker-heap-vs-plan, memory-warning, warm-start: the run took the worker Measure speed
// kept; a classical method's or From phase's run: method, module-heap-bytes (the heap after the run), module-heap-planned,
// module-heap-plan-vs-run: planned / reached, set when the run had a runtime of its own); the panels shown as .panels' data-shown; a run's self-check
// (report.verify: verified against predicted fidelity, the data-consistency residual) as #verifyReadout's data-*
// (possible, exact, r, nrmse, max-abs, voxels, box-lo, box-hi, compare-lo, compare-hi, margin, data-consistency,
// predicted-r, predicted-nrmse, seconds, message).
import { $, addOption, fmtBytes, fmtSeconds, rows, setData, clearData } from '../dom.js';
import { verifiedRows, verifiedData } from '../fidelity.js';
import { robustRange } from '../tilemap.js';
import { ResultPanels, colormapNames } from '../result-panels.js';
import { OUTPUTS, countMask } from '../workflows/pipeline.js';
import { runHeapRow } from '../workflows/method.js';
import { commandFiles, stackNifti, stem } from '../methods.js';

/** One network file's execution provider, in words: what ran, and why each preferred one did not. */
function epText(ep) {
  const why = [...ep.skipped.map((s) => `${s.provider} skipped: ${s.reason}`), ...(ep.fallback ? [ep.fallback] : [])];
  return `${ep.provider ?? ep.selected}${why.length ? ` (${why.join('; ')})` : ''}`;
}

export class ResultsPanel {
  /**
   * @param {import('../page.js').Page} page
   * @param {(op: string, args: object) => Promise<any>} io the I/O worker client (writes the NIfTI)
   */
  constructor(page, io) {
    this.page = page;
    this.io = io;
    this.viewer = new ResultPanels({ field: $('nvField'), chi: $('nvChi'), truth: $('nvTruth') });
    this.windowSet = false; // the user's χ window wins over the automatic one
    $('download').addEventListener('click', () => this.download().catch((e) => page.showError(e)));
    const display = () => this.viewer.setChiDisplay($('cmap').value, Number($('winMin').value), Number($('winMax').value));
    for (const id of ['cmap', 'winMin', 'winMax']) $(id).addEventListener('input', display);
    for (const id of ['winMin', 'winMax']) $(id).addEventListener('input', () => (this.windowSet = true));
    $('methodsDownload').addEventListener('click', () => this.downloadMethods());
    // From phase: which intermediate the χ panel shows (and Download writes).
    $('output').addEventListener('change', () => this.showOutput().catch((e) => page.showError(e)));
  }

  /**
   * The intermediate chosen in #output of a From phase result: { key, label, file, kind, data (3D: echo 1 of the
   * unwrapped phase) }, or null for other results.
   */
  selectedOutput(result = this.page.result) {
    const outs = result?.outputs;
    if (!outs) return null;
    const o = OUTPUTS.find((x) => x.key === $('output').value) ?? OUTPUTS[0];
    const v = outs[o.key];
    if (!v) return null;
    const n = v.dims[0] * v.dims[1] * v.dims[2];
    const data = o.firstEcho ? v.data.subarray(0, n) : v.data instanceof Float32Array ? v.data : Float32Array.from(v.data);
    return { ...o, data };
  }

  /** Lists a From phase result's intermediates in #output (χ first); hides the choice for other results. */
  listOutputs(result) {
    const sel = $('output');
    const outs = result.outputs;
    $('outputLabel').hidden = !outs;
    sel.textContent = '';
    if (!outs) return;
    for (const o of OUTPUTS) {
      if (!outs[o.key]) continue;
      addOption(sel, o.key, o.label);
    }
    sel.value = outs.chi ? 'chi' : 'localField';
  }

  /** Shows the chosen intermediate in the χ panel (its own window: χ's, a field's robust range, a mask's 0-1). */
  async showOutput() {
    const res = this.page.result;
    const o = this.selectedOutput(res);
    if (!o) return;
    const mask = res.outputs.mask.data;
    let win;
    if (o.kind === 'chi') win = [Number($('winMin').value), Number($('winMax').value)];
    else if (o.kind === 'mask') win = [0, 1];
    else {
      const [a, z] = robustRange(o.data, mask);
      const w = Math.max(Math.abs(a), Math.abs(z)) || 1;
      win = [-w, w];
    }
    $('capChi').textContent = o.label;
    document.querySelector('#download .qty').textContent = o.label.replace(/ \(.*\)$/, '').replace(/^./, (c) => c.toLowerCase());
    await this.viewer.show({ field: res.input.display, chi: o.data, truth: res.input.truth }, res.input.like, { field: res.input.range, chi: win }, o.kind === 'chi' ? $('cmap').value || 'gray' : 'gray');
    this.page.syncSlice(Number($('slice').value));
    setData($('output'), { selected: o.key, window: win });
    setData(document.querySelector('#resultCard .panels'), { shown: [...this.viewer.loaded].sort() });
  }

  /** Lists NiiVue's colormaps. */
  listColormaps() {
    const cm = $('cmap');
    for (const name of colormapNames()) {
      addOption(cm, name);
    }
    cm.value = 'gray';
  }

  /** Output names: χ, or the local field (iQFM). */
  setQuantity(quantity) {
    const lf = quantity === 'local-field';
    for (const e of document.querySelectorAll('.qty')) e.textContent = lf ? (e.hasAttribute('data-lower') ? 'local field' : 'Local field') : 'χ';
    $('capChi').textContent = lf ? 'Local field (ppm)' : 'χ (ppm)';
  }

  /** A run starts: the last report goes, the output is named for the selected network. */
  clear(quantity) {
    rows($('report'));
    clearData($('report'));
    rows($('verifyReadout'));
    clearData($('verifyReadout'));
    $('verifyBox').hidden = true;
    $('methodsBox').hidden = true;
    this.methodsShown = null;
    clearData($('methodsBox'));
    $('outputLabel').hidden = true;
    clearData($('output'));
    $('corr').textContent = '';
    this.setQuantity(quantity);
  }

  /** The slice slider for a volume nz voxels deep (centred). */
  setDepth(nz) {
    const s = $('slice');
    s.max = String(nz - 1);
    s.value = String(Math.floor(nz / 2));
  }

  /** Shows slice z in every panel. */
  setSlice(z) {
    $('slice').value = String(z);
    $('sliceText').textContent = `z = ${z}`;
    this.viewer.setSlice(z);
  }

  /**
   * Shows a run's result: report, statistics and the volumes.
   * Preconditions: result = { chi, input, quantity, name, params, workflow }; report is invert()'s; plan the plan
   * the run obeyed.
   */
  async show(result, report, seconds, plan) {
    const { chi, input } = result;
    this.setQuantity(result.quantity);
    this.listOutputs(result);
    // From phase: χ is judged on the local mask (background removal's), with the phantom's truth in the demo.
    const st = stats(chi, result.outputs ? { mask: result.outputs.localMask.data, truth: input.truth } : input);
    this.report(report, seconds, st, result);
    this.verified(report.verify, plan);
    this.methods(result, report);
    if (!this.windowSet) {
      // A symmetric χ window from the data (the truth in the demo), once; the user's window is kept after.
      const [a, z] = robustRange(input.truth ?? chi, result.outputs?.localMask.data ?? input.mask);
      const w = Math.max(Math.abs(a), Math.abs(z)) || 0.1;
      $('winMin').value = String(-+w.toPrecision(2));
      $('winMax').value = String(+w.toPrecision(2));
    }
    const win = [Number($('winMin').value), Number($('winMax').value)];
    $('capField').textContent = result.workflow.fieldCaption(input);
    if (result.outputs) {
      await this.showOutput();
      return;
    }
    await this.viewer.show({ field: input.display, chi, truth: input.truth }, input.like, { field: input.range, chi: win }, $('cmap').value || 'gray');
    this.page.syncSlice(Number($('slice').value));
    setData(document.querySelector('#resultCard .panels'), { shown: [...this.viewer.loaded].sort() });
  }

  report(r, seconds, st, result) {
    const row = rows($('report'));
    row('Wall time', `${fmtSeconds(r.wallSeconds)} (driver ${fmtSeconds(r.driverSeconds)}, page ${fmtSeconds(seconds)})`);
    if (result.workflow.method || result.workflow.pipeline) {
      // A classical method: no tiles, workers or network; its rows say the method and its heap against its plan.
      result.workflow.reportRows(r, result, row);
      if (r.warning) row('Warning', r.warning);
    } else this.networkRows(r, result, row);
    row(`${result.quantity === 'local-field' ? 'Local field' : 'χ'} in the mask`, `mean ${st.mean.toFixed(4)} ppm, std ${st.std.toFixed(4)} ppm over ${st.maskVoxels.toLocaleString()} voxels`);
    const me = result.maskEdit;
    if (me) row('Mask edited in the page', `${me.voxels.toLocaleString('en')} voxels: from ${me.source}${me.ops.length ? `, then ${me.ops.join(' → ')}` : ''}; ${me.added.toLocaleString('en')} added, ${me.removed.toLocaleString('en')} removed`);
    if (st.r !== undefined) row('Against the phantom truth', `r = ${st.r.toFixed(3)}, NRMSE = ${(100 * st.nrmse).toFixed(1)} %`);
    $('corr').textContent = st.r !== undefined ? `r vs truth = ${st.r.toFixed(3)}` : '';
    setData($('report'), {
      tilesRun: r.tilesRun, tilesSkipped: r.tilesSkipped, tilesTotal: r.tilesTotal, wallSeconds: r.wallSeconds,
      quantity: result.quantity, workerHeapVsPlan: r.memory.workerHeapVsPlan, memoryWarning: !!r.memory.warning,
      warmStart: !!r.pool?.[0]?.warmStart, method: r.method,
      moduleHeapBytes: r.method || result.outputs ? r.memory.moduleHeapBytes : undefined,
      moduleHeapPlanned: r.method || result.outputs ? r.plan?.moduleHeapBytes : undefined,
      moduleHeapPlanVsRun: r.method || result.outputs ? runHeapRow(r, r.plan, result).planVsRun ?? undefined : undefined, ...st,
      maskEdited: !!me, maskAdded: me?.added, maskRemoved: me?.removed, maskRunVoxels: me?.voxels,
    });
    if (result.outputs) {
      const o = result.outputs;
      setData($('report'), {
        pipeline: true, stages: r.plan?.stages?.join('|'), brainMaskVoxels: countMask(o.mask.data), fitMaskVoxels: countMask(o.fitMask.data),
        localMaskVoxels: countMask(o.localMask.data), echoes: o.unwrappedPhase?.echoes,
      });
    }
  }

  /** A network run's rows: per tile, concurrency, execution provider, memory, warnings. */
  networkRows(r, result, row) {
    const ts = [...r.tileSeconds].sort((a, b) => a - b);
    const perCall = ts.length ? `median ${fmtSeconds(ts[Math.floor(ts.length / 2)])}, max ${fmtSeconds(ts.at(-1))}` : '';
    result.workflow.reportRows(r, result, row, perCall);
    row('Concurrency', `${r.concurrency} planned, ${r.maxInFlightObserved} observed in flight; pool max ${r.pool.map((p) => p.maxInFlight).join(', ')}, runs ${r.pool.map((p) => p.runs).join(', ')}, retries ${r.pool.map((p) => p.retries).join(', ')}, recycles ${r.pool.map((p) => p.recycles).join(', ')}`);
    if (r.executionProvider) row('Execution provider', r.executionProvider.map(epText).join(' · '));
    row('Memory', `module heap ${fmtBytes(r.memory.moduleHeapBytes)}; ONNX Runtime worker heaps high-water ${r.memory.workerHeapHighWater.map(fmtBytes).join(', ') || '—'}; planner estimate ${fmtBytes(r.memory.estimatedPeakBytes)}`);
    if (r.memory.warning) row('Memory warning', r.memory.warning);
    if (r.warning) row('Warning', r.warning);
  }

  /** The run's self-check (report.verify, absent when not asked for) beside the plan's predicted fidelity. */
  verified(v, plan) {
    const table = $('verifyReadout');
    const row = rows(table);
    clearData(table);
    $('verifyBox').hidden = !v;
    if (!v) return;
    verifiedRows(v, plan?.predictedFidelity ?? null, row);
    setData(table, verifiedData(v, plan?.predictedFidelity ?? null));
  }

  /**
   * A pipeline run's methods text (report.methods: the paragraph, the references, each step's parameters) and the
   * `tessera-qsm pipeline` command that reruns it on the files it names (web/methods.js: the user's files where the
   * run took them as they are, else files written here, offered as downloads). #methodsBox's data-*: steps (the
   * stages, |-separated), references (their count), command (the command's arguments as JSON), files (the offered
   * files' names, |-separated). Other runs hide the box.
   */
  methods(result, report) {
    const m = report.methods;
    const box = $('methodsBox');
    if (!result.outputs || !m?.steps) return;
    const input = result.input;
    const cf = commandFiles(input, this.page.files);
    const { markdown, command, args } = this.page.tessera.methodsText(report, { files: cf.files });
    const offer = cf.offer;
    this.methodsShown = { markdown, name: `${stem(input.name)}_methods.md` };
    $('methodsText').textContent = m.text;
    const refs = $('methodsRefs');
    refs.textContent = '';
    for (const r of m.references) {
      const li = document.createElement('li');
      li.textContent = r;
      refs.append(li);
    }
    const steps = $('methodsSteps');
    steps.textContent = '';
    for (const st of m.steps) {
      const li = document.createElement('li');
      const ps = Object.entries(st.parameters).map(([k, v]) => `${k} ${v}`).join('; ');
      li.textContent = `${st.stage}${st.title ? `: ${st.title}` : ''}${ps ? ` (${ps})` : ''}${st.references.length ? ` [${st.references.join(', ')}]` : ''}`;
      steps.append(li);
    }
    $('methodsCommand').textContent = command;
    const filesBox = $('methodsFiles');
    filesBox.textContent = '';
    for (const f of offer) {
      const b = document.createElement('button');
      b.className = 'small';
      b.dataset.file = f.file;
      b.textContent = `Download ${f.file}`;
      b.title = `${f.what}, as NIfTI with the input's header`;
      b.addEventListener('click', () => this.downloadInput(f, input).catch((e) => this.page.showError(e)));
      filesBox.append(b);
    }
    clearData(box);
    setData(box, { steps: m.steps.map((s) => s.stage).join('|'), references: m.references.length, command: JSON.stringify(args), files: offer.map((f) => f.file).join('|') });
    box.hidden = false;
  }

  /** One of the command's input files the page writes (commandFiles' offer), with the input's header. */
  async downloadInput(f, input) {
    const { data, ...like } = input.like;
    const n = input.geometry.dims[0] * input.geometry.dims[1] * input.geometry.dims[2];
    const all = Float32Array.from(f.data);
    const gzip = f.echoes === 1 && f.file.endsWith('.gz');
    let bytes = await this.io('write', { data: all.slice(0, n), like, gzip, description: `Tessera input: ${f.role}` });
    if (f.echoes > 1) bytes = stackNifti(bytes, all, f.echoes);
    saveBytes(bytes, f.file, gzip ? 'application/gzip' : 'application/octet-stream');
  }

  /** The methods text as Markdown. */
  downloadMethods() {
    if (this.methodsShown) saveBytes(new TextEncoder().encode(this.methodsShown.markdown), this.methodsShown.name, 'text/markdown');
  }

  /** The last run's output as .nii.gz with its input's header (whatever network is selected now). */
  async download() {
    const res = this.page.result;
    if (!res) return;
    const lf = res.quantity === 'local-field';
    const { data, ...like } = res.input.like; // the header only: the voxels stay here
    const o = this.selectedOutput(res); // From phase: the intermediate shown
    const bytes = await this.io('write', {
      data: o ? Float32Array.from(o.data) : res.chi.slice(),
      like,
      gzip: true,
      description: o ? `Tessera From phase: ${o.label}` : lf ? `Tessera ${res.name} local field (ppm)` : undefined,
    });
    const a = document.createElement('a');
    a.href = URL.createObjectURL(new Blob([bytes], { type: 'application/gzip' }));
    a.download = `${res.input.name.replace(/ \(\+\d+\)$/, '').replace(/\.nii(\.gz)?$/i, '')}_${o ? o.file : lf ? 'localfield' : 'chi'}.nii.gz`;
    document.body.append(a);
    a.click();
    a.remove();
    setTimeout(() => URL.revokeObjectURL(a.href), 10000);
  }
}

/** Saves bytes as a download named `name`. */
function saveBytes(bytes, name, type) {
  const a = document.createElement('a');
  a.href = URL.createObjectURL(new Blob([bytes], { type }));
  a.download = name;
  document.body.append(a);
  a.click();
  a.remove();
  setTimeout(() => URL.revokeObjectURL(a.href), 10000);
}

/**
 * Statistics of an output in the mask: voxels, mean, std; outside it the count of nonzero voxels; finite; with
 * a truth (the demo phantom) Pearson r and NRMSE inside the mask.
 */
export function stats(chi, input) {
  let n = 0, s = 0, ss = 0, sx = 0, sy = 0, sxx = 0, syy = 0, sxy = 0, outside = 0;
  const t = input.truth;
  for (let i = 0; i < chi.length; i++) {
    const x = chi[i];
    if (!input.mask[i]) {
      if (x !== 0) outside++;
      continue;
    }
    n++;
    s += x;
    ss += x * x;
    if (t) {
      const y = t[i];
      sx += x; sy += y; sxx += x * x; syy += y * y; sxy += x * y;
    }
  }
  const mean = s / n;
  const out = { maskVoxels: n, mean, std: Math.sqrt(Math.max(0, ss / n - mean * mean)), nonzeroOutside: outside, finite: chi.every(Number.isFinite) };
  if (t) {
    out.r = (n * sxy - sx * sy) / Math.sqrt((n * sxx - sx * sx) * (n * syy - sy * sy));
    let e = 0, tt = 0;
    for (let i = 0; i < chi.length; i++) if (input.mask[i]) { e += (chi[i] - t[i]) ** 2; tt += t[i] ** 2; }
    out.nrmse = Math.sqrt(e / tt);
  }
  return out;
}

// The "From phase" workflow: a scanner's multi-echo wrapped phase (one 4D NIfTI, one 3D file per echo, or a DICOM folder
// converted in the page: web/dicom.js), an optional magnitude (every echo) and an optional mask in, with TE (s, one per echo) and B0; the C++ pipeline
// (tessera.pipeline()) makes the brain mask from the magnitude when no mask is given, fits the echoes with phase
// unwrapping (Hz → ppm), removes the background field (RESHARP by default) and inverts the local field with a classical
// method (the Inversion select) or a network (the network panel). Every intermediate comes back and can be shown and
// downloaded (OUTPUTS). The pipeline's options (unwrap, background and its parameters, the brain mask's) are the C++
// schema's: this file keeps no copy of their defaults or ranges. Same shape as field.js / phase.js / method.js.
import { $, fmtBytes } from '../dom.js';
import { checkAcquisition, showAcquisitionProblem } from './phase.js';
import { methodHeapLimit, methodParams, readParam, runHeapRow } from './method.js';
import { loadDicom } from '../dicom.js';

const PI = Math.PI;

/** The pipeline's own schema options: top-level ones, then the groups (<group>.<param>) and when each applies. */
export const TOP_OPTIONS = ['unwrap', 'fitResidualLimit', 'background'];
export const GROUPS = [
  { group: 'vsharp', label: 'V-SHARP', when: (v) => v.background === 'vsharp' },
  { group: 'pdf', label: 'PDF', when: (v) => v.background === 'pdf' },
  { group: 'lbv', label: 'LBV', when: (v) => v.background === 'lbv' },
  { group: 'ismv', label: 'iSMV', when: (v) => v.background === 'ismv' },
  { group: 'sharp', label: 'SHARP', when: (v) => v.background === 'sharp' },
  { group: 'resharp', label: 'RESHARP', when: (v) => v.background === 'resharp' },
  { group: 'brainMask', label: 'Brain mask (made from the magnitude when no mask is given)', when: (v, maskGiven) => !maskGiven },
  { group: 'swi', label: 'SWI + minIP', when: (v) => !!v.also?.includes('swi') },
  { group: 'r2star', label: 'R2*/T2*', when: (v) => !!v.also?.includes('r2star') },
];

/** The pipeline's optional outputs (the schema's `also` choices) in the page's words; a choice not listed shows its name. */
export const ALSO_LABELS = { swi: 'also SWI + minIP', r2star: 'also R2*/T2*' };

/** The schema's `also` choices (['swi', 'r2star']), or none when the runtime's schema has no `also`. */
export function alsoChoices(schema) {
  const list = schema instanceof Map ? [...schema.values()] : schema;
  const o = list.find((x) => x.name === 'also');
  return o?.choices?.length ? [...o.choices] : [];
}

/**
 * The inputs of the pipeline's options, from the schema: methodParams' shape ({name, param, label, unit, help, kind,
 * choices, value, placeholder, min, max, step, integer, range}) plus group ('' for the top-level ones).
 * Preconditions: schema is tessera.schema()'s list (or the page's Map of it).
 */
export function pipelineParams(schema) {
  const list = schema instanceof Map ? [...schema.values()] : schema;
  // A top-level option is read as a group of one: methodParams on a one-option list named '<name>.'.
  const top = TOP_OPTIONS.map((name) => list.find((o) => o.name === name))
    .filter(Boolean)
    .map((o) => ({ ...methodParams([{ ...o, name: `_.${o.name}` }], '_')[0], name: o.name, param: o.name, group: '' }));
  return [...top, ...GROUPS.flatMap(({ group }) => methodParams(list, group).map((p) => ({ ...p, group })))];
}

/**
 * The request's options from the values typed ({name: text}): { options: {unwrap, background, vsharp: {...}, ...},
 * problem } — an empty value leaves the option out (the default applies); a value that is not a number is the
 * page's problem, the C++ plan says the rest.
 */
export function readPipelineParams(params, values) {
  const options = {};
  let problem = null;
  for (const p of params) {
    const r = readParam(p, values[p.name]);
    if (r.problem) problem ??= r.problem;
    if (r.value === undefined) continue;
    if (p.group) (options[p.group] ??= {})[p.param] = r.value;
    else options[p.param] = r.value;
  }
  return { options, problem };
}

/** The intermediates the page shows and downloads: pipeline() output key, words, unit, and how they are windowed. */
export const OUTPUTS = [
  { key: 'chi', label: 'χ (ppm)', file: 'chi', kind: 'chi' },
  { key: 'localField', label: 'Local field (ppm)', file: 'localfield', kind: 'field' },
  { key: 'totalField', label: 'Total field (ppm)', file: 'totalfield', kind: 'field' },
  { key: 'unwrappedPhase', label: 'Unwrapped phase, echo 1 (rad)', file: 'unwrapped_echo1', kind: 'field', firstEcho: true },
  { key: 'mask', label: 'Brain mask', file: 'mask', kind: 'mask' },
  { key: 'fitMask', label: 'Fit mask (echo fit reliable)', file: 'fitmask', kind: 'mask' },
  { key: 'localMask', label: 'Local mask (after background removal)', file: 'localmask', kind: 'mask' },
];

/** Voxels set in a mask. */
export function countMask(m) {
  let n = 0;
  for (let i = 0; i < m.length; i++) n += m[i] ? 1 : 0;
  return n;
}

/** The demo: the phantom head scanned (4 echoes, SNR 100) at 1.5 mm, RTS, the brain mask eroded by 3 mm. */
export const PIPELINE_DEMO = {
  geometry: { dims: [128, 128, 96], voxelMm: [1.5, 1.5, 1.5], b0Dir: [0, 0, 1] },
  te: [0.004, 0.008, 0.012, 0.016],
  b0: 3,
  snr: 100,
  seed: 1,
  method: 'rts',
  // The magnitude's Otsu mask reaches the skull's edge, where the total field cannot be unwrapped: 3 mm of erosion
  // keeps those voxels out (r vs truth 0.70 → 0.86 on this scan with RTS).
  brainMask: { erosion: 3 },
};

/**
 * The stage the next step of the pipeline belongs to (done: steps finished), as far as the planned step counts say it:
 * the brain mask (1 step, when it is made) and the echo fit (an offset step, then one per echo) have fixed counts;
 * background removal and the method may converge early (the total shrinks only at the end), so past the echo fit the
 * step is named by both ("RESHARP → RTS"). The runtime's progress events do not name the stage (stage: 'pipeline').
 * Returns { key: 'brain mask' | 'echo fit' | 'rest', text }.
 */
export function stageOf(done, stages, echoes) {
  const names = stages ?? [];
  let at = 0;
  if (names[0] === 'brain mask') {
    if (done < 1) return { key: 'brain mask', text: 'brain mask' };
    at = 1;
  }
  if ((!stages || names.includes('echo fit')) && done < at + echoes + 1) return { key: 'echo fit', text: `echo fit (${done - at < 1 ? 'offset' : `echo ${done - at} of ${echoes}`})` };
  const rest = names.slice(names.indexOf('echo fit') + 1);
  return { key: 'rest', text: rest.length ? rest.join(' → ') : 'finishing' };
}

export const pipelineWorkflow = {
  kind: 'pipeline',
  /** The page (app.js binds it): the Inversion select, the network panel and the options are read there. */
  page: null,
  pipeline: true,
  tiled: false,
  unit: 'steps',
  mainName: 'multi-echo wrapped phase',
  fileInput: 'pipePhaseFile',
  b0Slot: 'b0PhaseSlot',
  b0Reloads: false,
  noInputText:
    'No phase loaded: choose a DICOM folder (phase and magnitude series), or the wrapped phase (one 4D NIfTI, or one 3D file per echo in echo order), its magnitude (every echo; it makes the mask when none is given) and/or a mask, and type the echo times.',
  needInputText: 'Load a multi-echo wrapped phase (and a magnitude or a mask), or try the demo',
  infeasibleText: 'The pipeline cannot run: see the advice',
  errorWords: {
    BudgetExceeded: 'The pipeline cannot run on this volume',
    NonFiniteInput: 'The phase or magnitude holds invalid values',
    InvalidArgument: 'The pipeline refused the input',
  },

  /** TE, B0 and the phase units are the phase workflow's inputs (phase.js wires them for both). */
  wire() {},

  describeNetwork() {},

  /** Magnitude and mask are both optional: the magnitude makes the mask when no mask file is chosen. */
  magnitudeLabel() {
    return { text: 'Magnitude (every echo; optional: weights the echo fit, and makes the brain mask when no mask is chosen)', shown: true };
  },

  magnitudeMakesMask() {
    return false;
  },

  /** The inversion: a classical method (the Inversion select) or the selected network. */
  inversion() {
    const m = this.page.panels.method.selected();
    if (m) return { kind: 'method', ...m };
    const net = this.page.network();
    return { kind: 'network', net, title: net.name };
  },

  /**
   * TE, B0 and the pipeline's options as typed, checked: { te, b0, options, inversion, problem }.
   * Preconditions: `input` is the loaded input or null (any echo count then).
   */
  params(input) {
    // A B0 map in Hz needs no echo time (a stand-in passes the check); a phase difference's one TE is its ΔTE.
    const fromMap = input?.from === 'fieldmap';
    const acq = checkAcquisition({ te: fromMap ? String(PIPELINE_DEMO.te[0]) : $('te').value, b0: $('b0').value, erode: 0, sign: -1 }, input?.echoes ?? null);
    if (fromMap) acq.te = null;
    const typed = this.page.panels.pipeline.read(!!input?.mask);
    const inversion = this.inversion();
    let problem = acq.problem ?? typed.problem ?? (inversion.kind === 'method' ? inversion.problem : null);
    if (!problem && inversion.kind === 'network' && inversion.net.model?.inputs?.includes('phase')) {
      problem = `${inversion.net.name} takes the wrapped phase itself: in From phase the network inverts the local field; choose a field → χ network, or a classical method`;
    }
    if (!problem && input && !input.mask && !input.magnitude) problem = 'No mask and no magnitude: choose a mask, or the magnitude to make one from.';
    return { te: acq.te, b0: acq.b0, options: typed.options, inversion, problem };
  },

  problem(input) {
    return this.params(input).problem;
  },

  /** The problem next to TE and B0 (the pipeline's options show theirs in their own box). */
  syncParams(input) {
    showAcquisitionProblem(this.problem(input), input);
  },

  /**
   * Reads the phase (one 4D file or several 3D ones), the optional magnitude and mask in the I/O worker (phase units,
   * dims and echoes checked there by the package's loader); returns the input, or a string saying what is missing.
   * Preconditions: files.pipeline is an array of File; io is the I/O worker client.
   */
  async load(io, files) {
    if (files.dicom && files.dicom.phaseFiles === files.pipeline) return this.loadDicom(io, files);
    const phases = files.pipeline;
    const phaseBytes = await Promise.all(phases.map((f) => f.arrayBuffer()));
    const bytes = {
      magnitude: files.magnitude ? await files.magnitude.arrayBuffer() : undefined,
      mask: files.mask ? await files.mask.arrayBuffer() : undefined,
    };
    const names = { phase: phases.map((f) => f.name).join(', '), magnitude: files.magnitude?.name, mask: files.mask?.name };
    const r = await io('pipeline', { phases: phaseBytes, ...bytes, units: $('phaseUnits').value, names }, [...phaseBytes, ...Object.values(bytes).filter(Boolean)]);
    const notes = [...r.notes];
    if (phases.length > 1) notes.push(`${phases.length} 3D files stacked as echoes 1-${phases.length} in the order chosen`);
    if (!r.mask) notes.push(r.magnitude ? `no mask: the pipeline makes it from ${files.magnitude.name}` : 'no mask and no magnitude: choose one');
    return this.input({
      source: 'files',
      name: phases.length > 1 ? `${phases[0].name} (+${phases.length - 1})` : phases[0].name,
      geometry: { dims: r.dims, voxelMm: r.voxelMm, b0Dir: r.b0Dir },
      phase: r.phase,
      echoes: r.echoes,
      magnitude: r.magnitude ?? undefined,
      mask: r.mask ?? null,
      like: r.like,
      phaseRange: r.range,
      fixed: r.fixed ?? 0,
      phaseUnitsRead: r.units, // the units the loader read the phase in ('rad': the file holds radians as run)
      note: notes.join('; '),
    });
  },

  /**
   * The input from a converted DICOM folder (web/dicom.js loadDicom): its phase and magnitude series, the mask file when
   * one is chosen (a NIfTI magnitude only when the folder has no magnitude series). The Phase units select follows the
   * units the phase was read in (scanner integers for Siemens' -4096…4094).
   * Preconditions: files.dicom is the panel's conversion ({ ...sortSeries(), folder, files, phaseFiles }).
   */
  async loadDicom(io, files) {
    const d = files.dicom;
    const { r, magnitude, units } = await loadDicom(io, files, $('phaseUnits').value);
    if (units !== 'hz') $('phaseUnits').value = units;
    const s = d.phaseSeries ?? d.fieldSeries, m = d.magnitudeSeries;
    const ms = (t) => +(t * 1000).toPrecision(4);
    const what = {
      phase: `phase series ${s.number}${m ? `, magnitude series ${m.number}` : ''}, ${s.echoes} echo${s.echoes > 1 ? 'es' : ''}; TE and B0 from the DICOM headers`,
      phasediff: `phase difference series ${s.number}${m ? `, magnitude series ${m.number}` : ''} (TE1 ${ms(d.te1)} ms, TE2 ${ms(d.te2)} ms): ` +
        `the pipeline starts from it with ΔTE ${ms(d.deltaTE)} ms (the TE box); B0 from the DICOM headers`,
      fieldmap: `field map in Hz, series ${s.number}${m ? `, its magnitude` : ''}: the pipeline starts from it as the total field (no echo fit); B0 from the DICOM headers`,
    }[d.kind ?? 'phase'];
    const notes = [
      `DICOM ${d.folder ? `folder “${d.folder}”` : 'files'} (${d.files} files) converted in this page by dcm2niix: ${what}`,
      ...d.notes.filter((n) => !/^no magnitude series/.test(n) || !(files.mask || r.magnitude)),
      ...r.notes,
    ];
    return this.input({
      source: 'dicom',
      name: d.folder ?? `DICOM series ${s.number}`,
      geometry: { dims: r.dims, voxelMm: r.voxelMm, b0Dir: r.b0Dir },
      phase: r.phase,
      echoes: r.echoes,
      magnitude: magnitude ?? r.magnitude ?? undefined,
      mask: r.mask ?? null,
      like: r.like,
      phaseRange: r.range,
      note: notes.join('; '),
      // A scanner field map: 'fieldmap' (the total field in Hz, input.phase holds it) or 'phasediff' (ΔTE: the TE box).
      from: d.kind === 'fieldmap' || d.kind === 'phasediff' ? d.kind : undefined,
    });
  },

  /** Completes an input: kind, display (echo 1 of the phase, or the field map), range (±π, or the map's) and summary. */
  input(input) {
    const n = input.geometry.dims[0] * input.geometry.dims[1] * input.geometry.dims[2];
    input.kind = 'pipeline';
    input.display = input.phase.subarray(0, n);
    input.range = input.from === 'fieldmap' ? input.phaseRange : [-PI, PI];
    input.maskVoxels = input.mask ? countMask(input.mask) : 0;
    input.summary = {
      kind: 'pipeline', source: input.source, dims: input.geometry.dims, voxelMm: input.geometry.voxelMm, maskVoxels: input.mask ? input.maskVoxels : undefined,
      echoes: input.echoes, phaseRange: input.phaseRange, magnitude: !!input.magnitude, maskGiven: !!input.mask, ...(input.from ? { from: input.from } : {}),
    };
    return input;
  },

  describe(input) {
    return { counts: `${input.echoes} echo${input.echoes > 1 ? 'es' : ''}${input.magnitude ? ' with magnitude' : ''}, `, notes: [] };
  },

  /** The geometry the plan is made for before an input is loaded: the demo's. */
  demoGeometry: PIPELINE_DEMO.geometry,

  /**
   * The plan request (tessera.plan({pipeline: true, ...})): TE (the typed ones, else the loaded echoes at example TEs),
   * B0, the options, the mask and whether a magnitude goes with it, and the method when one inverts.
   */
  planRequest(net, input, geometry) {
    const p = this.params(input);
    const echoes = input?.echoes ?? p.te?.length ?? PIPELINE_DEMO.te.length;
    const req = {
      pipeline: true,
      geometry: input ? geometry : PIPELINE_DEMO.geometry,
      te: p.te ?? Array.from({ length: echoes }, (_, i) => 0.004 * (i + 1)),
      b0: p.b0 > 0 && p.b0 <= 30 ? p.b0 : 3,
      ...p.options,
    };
    // A scanner field map: the total field in Hz (no TE), or a phase difference with its ΔTE.
    if (input?.from === 'fieldmap') {
      delete req.te;
      req.totalFieldUnits = 'hz';
    } else if (input?.from === 'phasediff') {
      req.deltaTE = req.te[0];
      delete req.te;
    }
    if (input?.mask) req.mask = input.mask;
    // Without a mask the brain mask is planned from the magnitude (no input yet: the demo's magnitude).
    if (!input || input.magnitude) req.magnitude = input?.magnitude ?? true;
    if (p.inversion.kind === 'method') {
      req.method = p.inversion.method;
      req[p.inversion.method] = p.inversion.params;
    }
    return req;
  },

  /**
   * Whether the run goes to a runtime of its own (started for it, ended after it: its heap is the run's alone): when a
   * classical method inverts; a network's run keeps the page's runtime, where its ONNX Runtime workers and sessions live.
   */
  ownRuntime(params) {
    return params.inversion.kind === 'method';
  },

  /** Whether the run needs network weights (a network inverts). */
  needsWeights() {
    return this.inversion().kind === 'network';
  },

  /**
   * Runs tessera.pipeline() on the input with the request the plan was made for; a network gets its weights and the
   * runtime's workers and threads. Returns { chi, report, quantity, outputs } (outputs: pipeline()'s Volumes).
   */
  async execute(tessera, req, input, params, weights, run, plan) {
    const { pipeline, magnitude, mask, geometry, ...options } = req;
    const source = input.from === 'fieldmap' ? { totalField: input.phase } : input.from === 'phasediff' ? { phaseDifference: input.phase } : { phase: input.phase, te: params.te };
    const request = {
      ...options,
      geometry,
      ...source,
      b0: params.b0,
      ...(input.magnitude ? { magnitude: input.magnitude } : {}),
      ...(input.mask ? { mask: input.mask } : {}),
      ...run,
    };
    const inv = params.inversion;
    if (inv.kind === 'network') {
      const net = inv.net;
      if (net.kind === 'custom') request.spec = net.spec;
      else request.model = net.id;
      request.weights = weights;
      const rt = this.page.panels.settings.runtimeOptions();
      request.network = { workers: rt.workers, threadsPerWorker: rt.threadsPerWorker };
    }
    // Each stage's wall time, from the progress events: a stage ends when the next one's first step is reported.
    this.runEchoes = input.echoes;
    const stageSeconds = {};
    const t0 = performance.now();
    let current = null, since = t0;
    const stages = plan?.stages;
    const onProgress = run.onProgress;
    request.onProgress = (p) => {
      if (p.stage === 'pipeline') {
        const key = p.done >= p.total ? 'done' : stageOf(p.done, stages, input.echoes).key;
        if (key !== current) {
          const now = performance.now();
          if (current) stageSeconds[current] = (now - since) / 1000;
          current = key;
          since = now;
        }
      }
      onProgress?.(p);
    };
    const out = await tessera.pipeline(request);
    if (current && current !== 'done') stageSeconds[current] = (performance.now() - since) / 1000;
    return { chi: out.chi?.data ?? null, report: out.report, quantity: 'chi', outputs: out, stageSeconds };
  },

  /** The plan readout: the stages, the step count, threads and memory. */
  planRows(plan, net, hasInput, row) {
    if (!plan.feasible) return;
    const limit = methodHeapLimit(this.page.limits);
    const inv = this.inversion();
    const on = hasInput ? '' : ' (the demo’s 128×128×96 scan; no input loaded yet)';
    const stages = [...(plan.stages ?? [])];
    if (inv.kind === 'network') stages.push(`${inv.net.name} (network, planned on the local mask when it is known)`);
    row('Stages', `${stages.join(' → ')}${on}`);
    row('Threads', String(plan.threads));
    row('Memory', `input ${fmtBytes(plan.inputBytes)} + workspace ${fmtBytes(plan.workspaceBytes)}`);
    row('Module heap', `${fmtBytes(plan.moduleHeapBytes)} of the ${fmtBytes(limit)} heap limit (${((100 * plan.moduleHeapBytes) / limit).toFixed(1)} %)`);
    row('Largest volume', `${plan.largestVoxels.toLocaleString('en')} voxels fit this pipeline`);
  },

  memBars(plan, limits) {
    return [['Module heap vs heap limit', plan.moduleHeapBytes, methodHeapLimit(limits)]];
  },

  /** "step 12/48 (25%) · echo fit (echo 3 of 4) · ETA 3 s"; a network's tiles after the pipeline say so. */
  progressText(p, pct, eta, plan) {
    if (p.stage !== 'pipeline') return `${this.runName(null, plan)}: network ${p.done}/${p.total} tiles (${pct}%) · ETA ${eta}`;
    return `${stageOf(p.done, plan?.stages, this.runEchoes ?? 1).text}: step ${p.done}/${p.total} (${pct}%) · ETA ${eta}`;
  },

  startText(plan) {
    return `${(plan.stages ?? [])[0] ?? 'pipeline'}: starting…`;
  },

  doneText(report, wall) {
    return `pipeline: ${(report.plan?.stages ?? []).join(' → ')} done · ${wall}`;
  },

  /** The report's rows: each stage's figures (voxels in the masks, the fit's left-out voxels), wall times, memory. */
  reportRows(r, result, row) {
    const o = result.outputs;
    const plan = r.plan ?? {};
    const params = result.params;
    const n = (x) => x.toLocaleString('en');
    const mask = countMask(o.mask.data), fit = countMask(o.fitMask.data), local = countMask(o.localMask.data);
    const times = result.stageSeconds ?? {};
    const t = (name) => (times[name] !== undefined ? ` · ${times[name].toFixed(1)} s` : '');
    const te = (params.te ?? []).map((x) => +x.toPrecision(6)).join(', ');
    const from = result.input.from;
    row('Acquisition', from === 'fieldmap' ? `a field map in Hz, B0 ${params.b0} T` : from === 'phasediff' ? `a phase difference, ΔTE ${te} s, B0 ${params.b0} T` : `${result.input.echoes} echoes, TE ${te} s, B0 ${params.b0} T`);
    row('Brain mask', `${n(mask)} voxels (${result.input.mask ? 'the mask given' : `made from the magnitude: ${params.options.brainMask?.threshold ?? 'default'} threshold, eroded ${params.options.brainMask?.erosion ?? 0} mm`})${t('brain mask')}`);
    if (from !== 'fieldmap') row('Echo fit', `${params.options.unwrap ?? 'default'} unwrapping; fit mask ${n(fit)} voxels (${n(mask - fit)} left out: residual above the limit)${t('echo fit')}`);
    const bg = (plan.stages ?? []).find((s) => /SHARP|PDF/.test(s)) ?? params.options.background;
    row('Background removal', `${bg}: local mask ${n(local)} voxels`);
    const inv = params.inversion;
    if (inv.kind === 'method') {
      const ps = Object.entries(inv.params ?? {}).map(([k, v]) => `${k} ${v}`).join(', ');
      row('Inversion', `${inv.title} (${inv.method})${ps ? `: ${ps}` : ''}`);
    } else {
      const nr = result.networkReport;
      row('Inversion', `${inv.net.name} on the local field${nr ? `: ${nr.tilesRun} tile(s) run, ${nr.wallSeconds.toFixed(1)} s` : ''}`);
    }
    if (times.rest !== undefined) row('Background removal + inversion', `${times.rest.toFixed(1)} s (the runtime's progress does not say where one ends)`);
    row('Memory', runHeapRow(r, plan, result).text);
  },

  runName(net, plan) {
    const inv = this.inversion();
    return inv.kind === 'method' ? `From phase + ${inv.title}` : `From phase + ${inv.net.name}`;
  },

  fieldCaption(input) {
    if (input.from === 'fieldmap') return 'Field map (Hz)';
    if (input.from === 'phasediff') return 'Phase difference (rad)';
    return `Wrapped phase (rad${input.echoes > 1 ? ', echo 1' : ''})`;
  },
};

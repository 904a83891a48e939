// The page's shared state and services: what is loaded, planned and run, the runtime, errors in words, and the
// selected network's workflow. Panels (web/panels/) and workflows (web/workflows/) read and change it; app.js
// creates it and wires the panels in. Its state is published on the DOM: <body data-state>, the error box.
import { createTessera } from '../bindings/js/index.js';
import { $, setData } from './dom.js';
import { workflowFor } from './workflows/index.js';
import { methodWorkflow } from './workflows/method.js';
import { pipelineWorkflow } from './workflows/pipeline.js';

/** States of the page: what <body data-state> says. */
export const STATES = ['starting', 'idle', 'loading', 'running', 'done', 'cancelled', 'error'];

export class Page {
  constructor() {
    this.state = 'starting';
    this.registry = [];
    this.limits = null;
    this.tessera = null;
    this.starting = null; // the runtime being created
    // The loaded input per workflow ('field' | 'phase'); `input` is the selected workflow's.
    this.inputs = { field: null, phase: null, pipeline: null };
    this.inputSeq = 0; // counts loaded inputs (published as #inputInfo data-seq)
    this.files = { field: null, mask: null, magnitude: null, phase: null, pipeline: null }; // pipeline: File[] (the phase's files)
    this.plan = null;
    this.planRequest = null; // the request this.plan was made for (a run sends it, with the plan)
    this.controller = null; // the running inversion's AbortController
    this.settling = Promise.resolve(); // the last run, settled (a cancelled run still tears its workers down)
    this.result = null; // { chi, input, quantity, name, params, workflow } of the last run
    this.errorCount = 0;
    this.started = false; // the runtime, the registry and the viewer are up
    /** Set by app.js: { network, method, pipeline, inputs, settings, run, results }. */
    this.panels = null;
  }

  /** The selected network: { kind: 'demo'|'registry'|'custom', id?, model?, name, spec? }. */
  network() {
    return this.panels.network.selected();
  }

  /**
   * The selected workflow: a classical method's when one is chosen (its input is the field → χ workflow's), else the
   * selected network's (field → χ, or wrapped phase → χ), decided from the registry.
   */
  workflow() {
    if ($('startFrom')?.value === 'pipeline') return pipelineWorkflow;
    if (this.panels?.method?.active()) return methodWorkflow;
    return workflowFor(this.network().model);
  }

  /** What the selected inversion outputs: 'chi', or 'local-field' (iQFM). */
  quantity() {
    if (this.workflow().pipeline) return 'chi';
    return this.panels?.method?.active() ? 'chi' : this.panels.network.quantity();
  }

  /** The loaded input of the selected workflow, or null. */
  get input() {
    return this.inputs[this.workflow().kind];
  }

  /** True once the page started and while a runtime is up. */
  get ready() {
    return this.started && !!this.tessera;
  }

  get running() {
    return this.state === 'running' || this.state === 'loading';
  }

  /** Sets the page state (one of STATES), published as <body data-state>, and refreshes the controls. */
  setState(state) {
    this.state = state;
    document.body.dataset.state = state;
    this.refresh();
  }

  /** Re-evaluates which controls are enabled (after any change of input, plan, network or state). */
  refresh() {
    this.panels?.run.sync();
    this.panels?.viewer?.syncControls();
  }

  /** Shows axial slice z in the tile map and the result panels. */
  syncSlice(z) {
    this.panels.run.setSlice(z);
    this.panels.results.setSlice(z);
  }

  /** Plans again after the user changed something (debounced). */
  schedulePlan() {
    this.panels?.settings.schedule();
  }

  /**
   * The runtime, started once: workers and threads per worker go with each plan and run request, so changing
   * them needs no new runtime.
   * Preconditions: the settings panel exists.
   */
  async runtime() {
    this.tessera ??= await (this.starting ??= createTessera({ ...this.panels.settings.runtimeOptions(), watchdogMs: 120000 }));
    return this.tessera;
  }

  /**
   * A runtime for one run, started now with the page runtime's options: its wasm heap holds that run alone (wasm memory
   * never shrinks, so the page's runtime keeps the high-water of all it ran). The caller ends it after the run, which
   * gives its memory back to the browser.
   */
  async runRuntime() {
    return createTessera({ ...this.panels.settings.runtimeOptions(), watchdogMs: 120000 });
  }

  /** Shows an error in words in the page's error box (null hides it); data-count counts those shown. */
  showError(e) {
    const box = $('error');
    if (!e) {
      box.hidden = true;
      box.textContent = '';
      return;
    }
    box.textContent = this.friendly(e);
    box.hidden = false;
    setData(box, { count: ++this.errorCount, code: e?.code ?? null });
  }

  /** An error as the page words it: the workflow says what a budget or invalid-value refusal is about. */
  friendly(e) {
    if (typeof e === 'string') return e;
    const m = e?.message ?? String(e);
    const words = {
      WeightsMismatch: 'The network weights do not match the registry',
      DownloadFailed: 'The weights could not be downloaded',
      ModelLoadFailed: 'The network could not be loaded',
      ...this.workflow().errorWords,
    };
    const lead = words[e?.code];
    return lead ? `${lead}: ${m}` : m;
  }
}

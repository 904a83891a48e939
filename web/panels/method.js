// The inversion choice: a network (the network panel, the tile settings) or a classical method from the C++ schema's
// `method` list (titles from the C++ plan). With a method chosen, the network's weights and the tile settings give way
// to the method's parameters: one input per schema option <method>.<param> (label, unit, default, range, help; a
// select for worded options), back to the defaults on every change of method. A value the C++ schema refuses is said
// in its words next to the inputs (the plan's message), the input marked aria-invalid, and Run stays disabled.
// Published: #inversion's value ('network' or the method), #methodParams' data-method, each input's data-option.
import { $, addOption } from '../dom.js';
import { optionLabel, showOptionProblem } from '../schema.js';
import { methodNames, methodParams, readParam } from '../workflows/method.js';

/** A small volume to ask the planner each method's title with. */
const PROBE = { dims: [8, 8, 8], voxelMm: [1, 1, 1], b0Dir: [0, 0, 1] };

export class MethodPanel {
  /** @param {import('../page.js').Page} page */
  constructor(page) {
    this.page = page;
    this.titles = new Map(); // method → its title (the plan's)
    this.fields = []; // the chosen method's parameters (methodParams) with their input elements (el)
    this.built = null; // the method the inputs were built for
    /** Called after the choice changed (app.js wires the other panels to it). */
    this.onChange = () => {};
    $('inversion').addEventListener('change', () => this.changed());
  }

  /**
   * Fills the choice: a network, then every method of the schema with its title (asked of the C++ planner on a small
   * volume; the name in capitals if it cannot say).
   */
  async fill(schema, tessera) {
    const names = methodNames(schema);
    await Promise.all(names.map(async (m) => {
      const title = await tessera.plan({ geometry: PROBE, method: m }).then((p) => p.title, () => '');
      this.titles.set(m, title || m.toUpperCase());
    }));
    const sel = $('inversion');
    sel.textContent = '';
    addOption(sel, 'network', 'A network (deep learning; its weights below)');
    if (names.length) {
      const g = document.createElement('optgroup');
      g.label = 'Classical dipole inversion (no network, no download)';
      for (const m of names) addOption(g, m, `${this.titles.get(m)} (${m})`);
      sel.append(g);
    }
    sel.value = 'network';
    this.sync();
  }

  /** The chosen method's name, or null (a network inverts). */
  active() {
    const v = $('inversion').value;
    return v && v !== 'network' ? v : null;
  }

  /**
   * The chosen method and its parameters as typed: { method, title, params: {param: value}, problem (words, or
   * null) }, or null when a network inverts.
   */
  selected() {
    const method = this.active();
    if (!method) return null;
    if (this.built !== method) this.build(method);
    const params = {};
    let problem = null;
    for (const f of this.fields) {
      const r = readParam(f, f.el.value);
      if (r.problem) problem ??= r.problem;
      else if (r.value !== undefined) params[f.param] = r.value;
    }
    return { method, title: this.titles.get(method) ?? method, params, problem };
  }

  /** Selects 'network' or a method by name, and updates the page. */
  select(value) {
    $('inversion').value = value;
    this.changed();
  }

  changed() {
    this.sync();
    this.onChange();
  }

  /** The network's boxes or the method's, and the method's inputs at their defaults. */
  sync() {
    const m = this.active();
    $('networkBox').hidden = !!m;
    $('methodBox').hidden = !m;
    if (m) this.build(m);
    else {
      this.built = null;
      this.fields = [];
      $('methodParams').textContent = '';
      delete $('methodParams').dataset.method;
    }
    $('methodInfo').textContent = m
      ? `${this.titles.get(m)} inverts the local field in the C++ core on the whole volume, step by step (progress and Cancel between steps): no network and no download. Its parameters and their ranges are the C++ schema's.`
      : '';
    this.syncDemoText();
    this.showProblem(null);
  }

  /** The demo's words for the chosen inversion (the field → χ demo; From phase words its own). */
  syncDemoText() {
    const m = this.active();
    $('demoText').textContent = m
      ? `Numerical head phantom (128×128×96, 1.75 mm) inverted with ${this.titles.get(m)} — no download, no file needed.`
      : 'Numerical head phantom (128×128×96, 1.75 mm) inverted with the bundled demo U-Net — no download, no file needed.';
  }

  /** One input per parameter of the method, from the schema, at its default. */
  build(method) {
    const box = $('methodParams');
    box.textContent = '';
    this.built = method;
    this.fields = methodParams(this.page.schema ?? [], method);
    box.dataset.method = method;
    for (const f of this.fields) box.append(optionLabel(f, () => this.edited()));
    if (!this.fields.length) box.textContent = 'This method has no parameters.';
  }

  /** A value typed: said at once when it is not a number; the plan (C++) checks the rest. */
  edited() {
    this.showProblem(this.selected()?.problem ?? null);
    this.page.refresh();
    this.page.schedulePlan();
  }

  /** After a plan: its refusal in the C++ core's words next to the inputs (a value not a number: the page's). */
  showPlan(plan) {
    const typed = this.selected()?.problem;
    this.showProblem(typed ?? (plan && !plan.feasible ? plan.message : null));
  }

  /** Shows `text` next to the inputs (null hides it); the input it names is marked invalid. */
  showProblem(text) {
    showOptionProblem($('methodMsg'), this.fields, text);
  }
}

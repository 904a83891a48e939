// The "From phase" options panel: one input per pipeline option of the C++ schema (unwrap, fitResidualLimit,
// background, vsharp.*, pdf.*, brainMask.*) at its default, with its unit, range and help; the background's
// parameters follow the background chosen, the brain mask's show only when no mask file is loaded. A value that is not
// a number is said here; the C++ plan refuses the rest in its own words (shown here and as the plan's advice).
// Published: each input's data-option; #pipelineParams' data-background.
import { $ } from '../dom.js';
import { optionLabel } from '../schema.js';
import { GROUPS, pipelineParams, readPipelineParams } from '../workflows/pipeline.js';

export class PipelinePanel {
  /** @param {import('../page.js').Page} page */
  constructor(page) {
    this.page = page;
    this.fields = [];
    this.maskGiven = false;
  }

  /** Builds the inputs from the schema (once the runtime is up). */
  fill(schema) {
    const box = $('pipelineParams');
    box.textContent = '';
    this.fields = pipelineParams(schema);
    const groups = new Map([['', box]]);
    for (const g of GROUPS) {
      const fs = document.createElement('fieldset');
      fs.className = 'inline';
      fs.dataset.group = g.group;
      const legend = document.createElement('legend');
      legend.textContent = g.label;
      fs.append(legend);
      groups.set(g.group, fs);
    }
    for (const f of this.fields) groups.get(f.group).append(optionLabel(f, () => this.edited(), 'short'));
    for (const g of GROUPS) if (groups.get(g.group).children.length > 1) box.append(groups.get(g.group));
    this.sync();
  }

  /** The values as typed, by option name. */
  values() {
    return Object.fromEntries(this.fields.map((f) => [f.name, f.el.value]));
  }

  /** Sets options by name (the demo); the rest stay as they are. */
  set(values) {
    for (const f of this.fields) if (values[f.name] !== undefined) f.el.value = String(values[f.name]);
    this.sync();
  }

  /** Back to the schema's defaults. */
  reset() {
    for (const f of this.fields) f.el.value = f.value;
    this.sync();
  }

  /**
   * The options for the request: { options, problem } (readPipelineParams), only the groups that apply (the
   * background chosen; the brain mask's without a mask file).
   */
  read(maskGiven) {
    this.maskGiven = maskGiven;
    const v = this.values();
    const active = this.fields.filter((f) => !f.group || GROUPS.find((g) => g.group === f.group).when({ background: v.background }, maskGiven));
    return readPipelineParams(active, v);
  }

  /** Shows the groups that apply. */
  sync() {
    const background = this.fields.find((f) => f.name === 'background')?.el.value;
    for (const g of GROUPS) {
      const fs = document.querySelector(`#pipelineParams fieldset[data-group="${g.group}"]`);
      if (fs) fs.hidden = !g.when({ background }, this.maskGiven);
    }
    $('pipelineParams').dataset.background = background ?? '';
  }

  edited() {
    this.sync();
    this.showProblem(this.read(this.maskGiven).problem);
    this.page.refresh();
    this.page.schedulePlan();
  }

  /** After a plan: a typed value that is not a number (the page's words), else the plan's refusal (C++'s). */
  showPlan(plan) {
    this.sync();
    const typed = this.read(this.maskGiven).problem;
    this.showProblem(typed ?? (plan && !plan.feasible ? plan.message : null));
  }

  showProblem(text) {
    const el = $('pipelineMsg');
    el.hidden = !text;
    el.textContent = text || '';
    for (const f of this.fields) {
      const bad = !!text && (text.startsWith(f.name) || text.includes(` ${f.name} `) || text.includes(`${f.name}:`));
      if (bad) f.el.setAttribute('aria-invalid', 'true');
      else f.el.removeAttribute('aria-invalid');
    }
  }
}

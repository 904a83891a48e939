// The page's number inputs follow the C++ request schema (tessera.schema()): defaults, ranges and units are
// defined once in C++, so the page keeps no copy of them. The halo follows the selected network's default halo
// (the registry's, or the schema's for a custom network) until the user types one.
import { $, addOption, fitNumberInput } from './dom.js';

/** The schema last applied (name → option), or null before the runtime answered. */
let applied = null;

/** The schema's option name (its range, unit, default), or undefined before the schema is applied. */
export function schemaOption(name) {
  return applied?.get(name);
}

/** Input id → schema option name. */
const INPUTS = {
  customDivisor: 'spec.divisor',
  customBpv: 'spec.bytesPerVoxel',
  customInMean: 'spec.inputMean',
  customInStd: 'spec.inputStd',
  customOutMean: 'spec.outputMean',
  customOutStd: 'spec.outputStd',
  core: 'tile.core',
  halo: 'tile.halo',
  threads: 'threadsPerWorker',
  workers: 'workers',
  b0: 'b0',
  erode: 'erodeRadius',
};

/** Select id → schema option name: a worded option, its values (choices) and default from the schema. */
const SELECTS = {
  quality: 'quality',
  b0Align: 'b0Align',
  crop: 'crop',
};

/**
 * Applies the schema's defaults (numeric ones), bounds and help to the page's inputs, and its values, default and
 * help to the page's selects (the quality's help also shows under it, in #qualityHelp).
 * schema is what tessera.schema() returned.
 */
export function applySchema(schema) {
  const byName = new Map(schema.map((o) => [o.name, o]));
  applied = byName;
  for (const [id, name] of Object.entries(SELECTS)) {
    const el = document.getElementById(id);
    const o = byName.get(name);
    if (!el || !o?.choices?.length) continue;
    el.textContent = '';
    for (const v of o.choices) {
      addOption(el, v);
    }
    el.value = o.choices.includes(o.default) ? o.default : o.choices[0];
    el.title = o.help;
  }
  const quality = byName.get('quality');
  if (quality) $('qualityHelp').textContent = `Quality: ${quality.help}.`;
  for (const [id, name] of Object.entries(INPUTS)) {
    const el = document.getElementById(id);
    const o = byName.get(name);
    if (!el || !o) continue;
    if (typeof o.default === 'number') el.value = String(o.default);
    if (Math.abs(o.min) < 1e14) el.min = String(o.minExclusive && !o.integer ? o.min : o.minExclusive ? o.min + 1 : o.min);
    if (Math.abs(o.max) < 1e14) el.max = String(o.max);
    el.step = o.integer ? '1' : 'any';
    el.title = `${o.help}${o.unit ? ` (${o.unit})` : ''}`;
  }
  return byName;
}

/**
 * A labelled input for one schema option field ({name, label, kind: 'select' | number, choices, step, min, max,
 * placeholder, value, unit, range, help}, what method.js's methodParams / pipeline's pipelineParams make): a select for a
 * worded option, a number input otherwise; f.el is set to the input, onInput runs on every edit.
 * inputClass, when given, is the number input's class.
 */
export function optionLabel(f, onInput, inputClass) {
  const label = document.createElement('label');
  label.title = `${f.help}${f.unit ? ` (${f.unit})` : ''}${f.range ? `; range ${f.range}` : ''}`;
  let el;
  if (f.kind === 'select') {
    el = document.createElement('select');
    for (const c of f.choices) {
      addOption(el, c);
    }
  } else {
    el = document.createElement('input');
    el.type = 'number';
    el.step = f.step;
    if (inputClass) el.className = inputClass;
    if (f.min !== '') el.min = f.min;
    if (f.max !== '') el.max = f.max;
    if (f.placeholder) el.placeholder = f.placeholder;
  }
  el.value = f.value;
  if (f.kind !== 'select') fitNumberInput(el);
  el.dataset.option = f.name;
  el.addEventListener('input', onInput);
  f.el = el;
  const after = [f.unit, f.range && `in ${f.range}`].filter(Boolean).join(' ');
  label.append(`${f.label} `, el);
  if (after) {
    const s = document.createElement('span');
    s.className = 'muted small';
    s.textContent = ` ${after}`;
    label.append(s);
  }
  return label;
}

/**
 * Sets the halo to the network's default unless the user has typed one.
 * model is a registry entry or undefined (a custom network: the schema's tile.halo default value).
 */
export function followDefaultHalo(model, byName) {
  const el = $('halo');
  if (el.dataset.userSet === '1') return;
  const halo = model?.defaultHalo ?? byName?.get('tile.halo')?.defaultValue;
  if (Number.isFinite(halo)) el.value = String(halo);
}

/** Marks the halo, the workers and the threads as the user's once they type in them (until then the plan's show). */
export function watchTyped() {
  for (const id of ['halo', 'workers', 'threads']) $(id).addEventListener('input', () => ($(id).dataset.userSet = $(id).value === '' ? '' : '1'));
}

/** The whole number the user typed in input id, clamped to [lo, hi]; undefined when they typed none (the planner's choice). */
export function typedInt(id, lo, hi) {
  const el = $(id);
  const n = Math.floor(Number(el.value));
  return el.dataset.userSet === '1' && el.value !== '' && Number.isFinite(n) ? Math.max(lo, Math.min(hi, n)) : undefined;
}

/**
 * Shows text in el next to schema-option inputs (null hides it) and marks the input it names invalid.
 * fields are optionLabel's {name, el}.
 */
export function showOptionProblem(el, fields, text) {
  el.hidden = !text;
  el.textContent = text || '';
  for (const f of fields) {
    const bad = !!text && (text.startsWith(f.name) || text.includes(` ${f.name} `) || text.includes(`${f.name}:`));
    if (bad) f.el.setAttribute('aria-invalid', 'true');
    else f.el.removeAttribute('aria-invalid');
  }
}

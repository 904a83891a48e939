// Small DOM and formatting helpers shared by the page's panels and workflows.
import { bytesText } from '../bindings/js/index.js';

/** The element with this id. */
export const $ = (id) => document.getElementById(id);

/** Appends an <option> of this value and text (the value when none) to a <select> or <optgroup>. */
export function addOption(parent, value, text = value) {
  const o = document.createElement('option');
  o.value = value;
  o.textContent = text;
  parent.append(o);
}

/**
 * Widens a number input to show its whole value (a schema default such as 0.000001 or 16.051331246463125 is the value
 * a run takes: cut off, it would read as another number), and again as the user types: style.css's input.digits
 * sizes it from --digits. Precondition: el is an <input type=number>.
 */
export function fitNumberInput(el) {
  el.classList.add('digits');
  const fit = () => el.style.setProperty('--digits', String(el.value.length + 1));
  fit();
  el.addEventListener('input', fit);
}

/** The value of the checked radio button named `name` (undefined when none is checked). */
export function checkedValue(name) {
  return document.querySelector(`input[name=${name}]:checked`)?.value;
}

/** Checks the radio button `name` = `value`, when there is one. */
export function setRadio(name, value) {
  const r = document.querySelector(`input[name=${name}][value=${value}]`);
  if (r) r.checked = true;
}

/**
 * A colour custom property of the page's root (style.css) as '#rrggbb' and as WebGL's [r, g, b, 1] in 0..1.
 * Precondition: style.css defines name as a #rrggbb colour.
 */
export function cssColor(name) {
  const hex = getComputedStyle(document.documentElement).getPropertyValue(name).trim();
  const m = /^#([0-9a-f]{2})([0-9a-f]{2})([0-9a-f]{2})$/i.exec(hex);
  if (!m) throw new Error(`style.css does not define ${name} as a #rrggbb colour (it reads ${JSON.stringify(hex)})`);
  return { hex, rgba: [...m.slice(1).map((h) => parseInt(h, 16) / 255), 1] };
}

/**
 * Writes `values` as the element's data-* attributes (camelCase keys, as element.dataset names them): arrays are
 * joined with ',', null/undefined remove the attribute. The page's state is readable there (by CSS, scripts, tests).
 * Preconditions: `el` is an element; values are strings, numbers, booleans, arrays of those, or null/undefined.
 */
export function setData(el, values) {
  for (const [k, v] of Object.entries(values)) {
    if (v === null || v === undefined) delete el.dataset[k];
    else el.dataset[k] = Array.isArray(v) ? v.join(',') : String(v);
  }
}

/** Removes every data-* attribute of the element. */
export function clearData(el) {
  for (const k of Object.keys(el.dataset)) delete el.dataset[k];
}

/**
 * Empties a table and returns row(key, value), which appends a two-cell row.
 * Preconditions: `table` is a <table>.
 */
export function rows(table) {
  table.textContent = '';
  return (k, v) => {
    const tr = table.insertRow();
    tr.insertCell().textContent = k;
    tr.insertCell().textContent = v;
  };
}

/** An integer from a form value, clamped to [lo, hi]; `dflt` when it is not a number. */
export function clampInt(v, lo, hi, dflt) {
  const n = Math.floor(Number(v));
  return Number.isFinite(n) ? Math.max(lo, Math.min(hi, n)) : dflt;
}

/** Bytes as the package words them (MB or GB), '—' when not a number. */
export function fmtBytes(b) {
  return b >= 0 ? bytesText(b) : '—';
}

/** Seconds as '4.2 s', '42 s' or '3 min 12 s'; '—' when unknown. */
export function fmtSeconds(s) {
  if (s === null || s === undefined || !Number.isFinite(s)) return '—';
  if (s < 59.5) return `${s.toFixed(s < 10 ? 1 : 0)} s`;
  const t = Math.round(s); // 119.7 s is '2 min 0 s', not '1 min 60 s'
  return `${Math.floor(t / 60)} min ${t % 60} s`;
}

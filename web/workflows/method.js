// The classical methods (TKD, and whatever else the C++ schema's `method` option lists): a local field map and a
// mask in (the field → χ workflow's inputs, shared with it), a dipole inversion in the C++ core step by step, χ out —
// no network, no weights. The method names, their parameters (options named <method>.<param>: unit, default, range,
// help, worded choices) and every check come from tessera.schema() and the C++ plan: the page keeps no copy of them.
// This file has the pure parts (the schema → the inputs, a typed value → the request's value) and the workflow
// object, the field workflow with the method's plan, request, progress and report.
import { fmtBytes } from '../dom.js';
import { fieldWorkflow } from './field.js';

/** The schema's classical method names (the `method` option's choices; [] when the runtime lists none). */
export function methodNames(schema) {
  const list = schema instanceof Map ? [...schema.values()] : schema;
  return list.find((o) => o.name === 'method')?.choices ?? [];
}

/** 'maxIter' → 'Max iter', 'lambda' → 'Lambda': a parameter's name as a label. */
export function paramLabel(param) {
  const words = param.replace(/([a-z0-9])([A-Z])/g, '$1 $2').replace(/[_-]+/g, ' ').toLowerCase();
  return words.charAt(0).toUpperCase() + words.slice(1);
}

/** A bound the schema gives (a huge one means none). */
const bounded = (x) => Number.isFinite(x) && Math.abs(x) < 1e14;

/** The range of a numeric option in words: "(0, 0.667]", "≥ 1", "" when unbounded. */
export function rangeText(o) {
  const lo = bounded(o.min), hi = bounded(o.max);
  const n = (x) => String(+x.toPrecision(3));
  if (lo && hi) return `${o.minExclusive ? '(' : '['}${n(o.min)}, ${n(o.max)}]`;
  if (lo) return `${o.minExclusive ? '>' : '≥'} ${n(o.min)}`;
  if (hi) return `≤ ${n(o.max)}`;
  return '';
}

/**
 * The inputs of a method's parameters, from the schema: one per option named `<method>.<param>`, in the schema's
 * order: { name (the option's), param, label, unit, help, kind: 'select' (worded choices) | 'number', value (the
 * default as the input shows it; '' when the default is words, e.g. "derived from the field"), placeholder (those
 * words), min, max, step (numbers: '' when unbounded), integer, range (words) }.
 * Preconditions: schema is tessera.schema()'s list (or the page's Map of it).
 */
export function methodParams(schema, method) {
  const list = schema instanceof Map ? [...schema.values()] : schema;
  return list
    .filter((o) => o.name.startsWith(`${method}.`))
    .map((o) => {
      const param = o.name.slice(method.length + 1);
      const select = o.choices?.length > 0;
      const numeric = typeof o.default === 'number';
      return {
        name: o.name,
        param,
        label: paramLabel(param),
        unit: o.unit ?? '',
        help: o.help ?? '',
        kind: select ? 'select' : 'number',
        choices: select ? [...o.choices] : [],
        value: select ? (o.choices.includes(o.default) ? o.default : o.choices[0]) : numeric ? String(o.default) : '',
        placeholder: !select && !numeric ? String(o.default ?? '') : '',
        min: !select && bounded(o.min) ? String(o.min) : '',
        max: !select && bounded(o.max) ? String(o.max) : '',
        step: o.integer ? '1' : 'any',
        integer: !!o.integer,
        range: select ? '' : rangeText(o),
      };
    });
}

/**
 * A parameter's value as typed, for the request: { value } (a number, or a choice's word; undefined: left out, the
 * default applies) or { problem } in words when it is not a number at all. Whether a number is in range, whole, ...
 * is the C++ schema's to say (the plan refuses it with its message).
 */
export function readParam(p, text) {
  const s = String(text ?? '').trim();
  if (p.kind === 'select') return { value: s };
  if (s === '') return p.placeholder ? { value: undefined } : { problem: `Type a value for ${p.name}${p.range ? ` in ${p.range}` : ''}.` };
  const v = Number(s);
  if (!Number.isFinite(v)) return { problem: `${p.name}: “${s}” is not a number${p.range ? ` (it must be in ${p.range})` : ''}.` };
  return { value: v };
}

/**
 * The report's memory row of a classical run (a method, or From phase): the module heap its plan allowed against the heap
 * the run reached. A run in a runtime of its own (result.ownRuntime) is the only thing that runtime's heap ever held, read
 * after the run as bindings/js/memory-plans.test.js reads it: {text, planVsRun: plan / heap}. Otherwise the heap also
 * keeps the high-water of the page runtime's earlier work (wasm memory never shrinks): said so, planVsRun null.
 * Precondition: r is the run's report (r.memory.moduleHeapBytes), plan its plan (moduleHeapBytes).
 */
export function runHeapRow(r, plan, result) {
  const planned = plan?.moduleHeapBytes, reached = r.memory?.moduleHeapBytes;
  if (!result.ownRuntime || !(planned > 0) || !(reached > 0)) {
    return { text: `module heap ${fmtBytes(reached)} after the run, in the page's runtime: it keeps the high-water of everything run there before, so it is not this run's alone (the plan allowed ${fmtBytes(planned)})`, planVsRun: null };
  }
  const planVsRun = planned / reached;
  return {
    text: `the plan allowed ${fmtBytes(planned)} of module heap; the run reached ${fmtBytes(reached)} (in a runtime of its own, read after the run): the plan is ${planVsRun.toFixed(2)}× what the run used`,
    planVsRun,
  };
}

/** The heap limit a method's (and the pipeline's) plan is held to: limits().computeHeapLimitBytes, the C++ core's. */
export function methodHeapLimit(limits) {
  return limits?.computeHeapLimitBytes;
}

export const methodWorkflow = {
  ...fieldWorkflow,
  /** The page (app.js binds it): the method panel's choice and the runtime's limits are read there. */
  page: null,
  /** A classical method: no network, no tiles, no weights. */
  method: true,
  /** Runs in a runtime of its own (started for the run, ended after it): its heap is the run's alone. */
  ownRuntime() {
    return true;
  },
  tiled: false,
  /** What the progress counts. */
  unit: 'steps',
  infeasibleText: 'The method cannot run: see the advice',
  errorWords: {
    BudgetExceeded: 'The volume does not fit in memory for this method',
    NonFiniteInput: 'The field map holds invalid values',
  },

  /** The magnitude is offered always: it makes the mask on request, and a method that weights with it (MEDI) takes it. */
  magnitudeLabel(maskSource) {
    return { text: `Magnitude (${maskSource === 'magnitude' ? 'thresholded for the mask; ' : ''}a method that weights with it, e.g. MEDI, takes it)`, shown: true };
  },

  /** A dropped magnitude makes the mask only when no mask file was chosen. */
  magnitudeMakesMask(files) {
    return !files.mask;
  },

  /** The chosen method and its parameters ({method, title, params, problem}; the method panel's reading). */
  params() {
    return this.page.panels.method.selected();
  },

  /** A parameter that is not a number at all (the C++ plan says the rest: see the advice). */
  problem() {
    return this.params()?.problem ?? null;
  },

  /** The plan request: the method, its parameters, the mask and whether a magnitude goes with the run. */
  planRequest(net, input, geometry) {
    const m = this.params();
    const req = { geometry, mask: input?.mask, method: m.method, [m.method]: m.params };
    if (input?.magnitude) req.magnitude = input.magnitude;
    return req;
  },

  /** The invert request: the plan request with the field and the plan shown (the run obeys it). */
  invertRequest(req, input, params, weights, run, plan) {
    return { ...req, field: input.field, plan, ...run };
  },

  /** The plan readout's rows: the method's steps, threads and memory (or nothing: the advice says why not). */
  planRows(plan, net, hasInput, row) {
    if (!plan.feasible) return;
    const limit = methodHeapLimit(this.page.limits);
    const on = hasInput ? '' : ' (demo phantom geometry; no input loaded yet)';
    row('Method', `${plan.title} (${plan.method}): whole volume in the C++ core, no network, no download${on}`);
    row('Steps', `${plan.methodSteps} ${plan.methodSteps === 1 ? 'step' : 'steps'}; progress and Cancel between steps`);
    row('Threads', String(plan.threads));
    row('Memory', `input ${fmtBytes(plan.inputBytes)} + workspace ${fmtBytes(plan.workspaceBytes)}`);
    row('Module heap', `${fmtBytes(plan.moduleHeapBytes)} of the ${fmtBytes(limit)} heap limit (${((100 * plan.moduleHeapBytes) / limit).toFixed(1)} %)`);
    row('Largest volume', `${plan.largestVoxels.toLocaleString('en')} voxels fit this method`);
  },

  /** One bar: the module heap against the heap limit a method is held to. */
  memBars(plan, limits) {
    return [['Module heap vs heap limit', plan.moduleHeapBytes, methodHeapLimit(limits)]];
  },

  /** "tkd: 12/250 steps (5%) · ETA 3 s". */
  progressText(p, pct, eta) {
    return `${p.stage}: ${p.done}/${p.total} steps (${pct}%) · ETA ${eta}`;
  },

  startText(plan) {
    return `${plan.method}: 0/${plan.methodSteps} steps · starting…`;
  },

  doneText(report, wall) {
    const n = report.plan?.methodSteps ?? 0;
    return `${report.method}: ${n}/${n} steps (100%) · ${wall}`;
  },

  /** The run report's method rows (row(key, value)). */
  reportRows(r, result, row) {
    const plan = r.plan ?? {};
    const params = Object.entries(result.params?.params ?? {}).map(([k, v]) => `${k} ${v}`).join(', ');
    row('Method', `${plan.title ?? r.method} (${r.method})${params ? `: ${params}` : ''}; ${plan.methodSteps} step(s), ${plan.threads} thread(s)`);
    row('Memory', runHeapRow(r, plan, result).text);
  },

  /** The run's name (results, downloads): the method's title. */
  runName(net, plan) {
    return plan?.title ?? plan?.method ?? 'method';
  },
};

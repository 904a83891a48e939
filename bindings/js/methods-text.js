// A pipeline run's methods text as Markdown, and the `tessera-qsm pipeline` command that reproduces the run. The
// paragraph, its parameters and its references come from C++ (report.methods: tessera/pipeline/methods_text.h, whose
// citations sit beside each method's code); this module only lays them out and writes the command.

/** The request keys that become `--option NAME=VALUE` (the pipeline's stage, SWI and R2* options), in order. */
const OPTION_GROUPS = ['unwrap', 'fitResidualLimit', 'background', 'vsharp', 'pdf', 'lbv', 'ismv', 'sharp', 'resharp', 'brainMask', 'swi', 'r2star'];

/** Placeholders for the files a command reads and writes when the caller names none. */
export const COMMAND_PLACEHOLDERS = Object.freeze({
  phase: '<phase.nii.gz>', totalField: '<total-field.nii.gz>', magnitude: '<magnitude.nii.gz>', mask: '<mask.nii.gz>', out: '<chi.nii.gz>', weights: '<weights.onnx>',
});

/** A shell word: left bare when it is safe, else single-quoted. */
export function shellWord(s) {
  const w = String(s);
  return /^[\w@%+=:,./-]+$/.test(w) ? w : `'${w.replace(/'/g, "'\\''")}'`;
}

/** The options of a pipeline request that a command restates (no volumes, no callbacks): a plain object. */
export function commandRequest(request) {
  const r = {};
  for (const k of ['te', 'deltaTE', 'b0', 'totalFieldUnits', 'method', 'model', 'also', ...OPTION_GROUPS]) if (request[k] !== undefined && request[k] !== null) r[k] = request[k];
  if (typeof r.method === 'string' && request[r.method] !== undefined) r.params = request[r.method];
  r.mask = request.mask !== undefined && request.mask !== null;
  r.magnitude = request.magnitude !== undefined && request.magnitude !== null;
  r.fromTotal = request.totalField !== undefined && request.totalField !== null;
  r.fromDifference = request.phaseDifference !== undefined && request.phaseDifference !== null;
  return r;
}

/**
 * The `tessera-qsm pipeline` arguments that rerun a request (commandRequest's) on files: {phase | totalField,
 * magnitude, mask, out, weights} (placeholders where not given). The phase file (a phase difference's too) holds
 * radians as pipeline() was given them (--phase-units rad).
 */
export function pipelineArgs(r, files = {}) {
  const f = { ...COMMAND_PLACEHOLDERS, ...files };
  const args = ['tessera-qsm', 'pipeline'];
  if (r.fromTotal) args.push('--total-field', f.totalField, '--units', r.totalFieldUnits);
  else if (r.fromDifference) args.push('--phase-difference', f.phase, '--phase-units', 'rad', '--delta-te', String(r.deltaTE));
  else args.push('--phase', f.phase, '--phase-units', 'rad');
  if (r.magnitude) args.push('--magnitude', f.magnitude);
  if (r.mask) args.push('--mask', f.mask);
  if (!r.fromTotal && !r.fromDifference) args.push('--te', [].concat(r.te).join(','));
  if (r.b0 !== undefined) args.push('--b0', String(r.b0));
  if (r.method) {
    args.push('--method', r.method);
    for (const [k, v] of Object.entries(r.params ?? {})) args.push('--param', `${k}=${v}`);
  }
  if (r.model) args.push('--model', r.model, '--weights', f.weights);
  for (const g of OPTION_GROUPS) {
    const v = r[g];
    if (v === undefined) continue;
    if (v !== null && typeof v === 'object') for (const [k, x] of Object.entries(v)) args.push('--option', `${g}.${k}=${x}`);
    else args.push('--option', `${g}=${v}`);
  }
  if (r.also !== undefined && [].concat(r.also).length) args.push('--also', [].concat(r.also).join(','));
  args.push('--out', f.out);
  return args;
}

/** Arguments as one shell line. */
export const commandLine = (args) => args.map(shellWord).join(' ');

/**
 * The methods text of a pipeline report as Markdown: the paragraph with [n] references, the reference list, each
 * step's parameters, and the command that reproduces the run. methods: report.methods; command: the command line
 * (report.methods.command, or one rebuilt with the files).
 */
export function methodsMarkdown(methods, command = methods.command) {
  const lines = ['## Methods', '', methods.text, '', '### References', ''];
  methods.references.forEach((r, i) => lines.push(`${i + 1}. ${r}`));
  lines.push('', '### Steps and parameters', '');
  for (const s of methods.steps) {
    const params = Object.entries(s.parameters).map(([k, v]) => `${k} ${v}`).join('; ');
    lines.push(`- ${s.stage}${s.title ? `: ${s.title}` : ''}${params ? ` (${params})` : ''}${s.references.length ? ` [${s.references.join(', ')}]` : ''}`);
  }
  lines.push('', '### Reproducing this run', '', '```sh', command, '```', '');
  return lines.join('\n');
}

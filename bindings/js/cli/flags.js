// The command line's flags: the request's options come from the C++ schema (tessera.schema()) at run time, each
// named by flagName; the CLI's own flags (files, output, the runtime, how the input is read) are CLI_FLAGS.
import { parseArgs } from 'node:util';
import { NETWORK_OPTIONS, PIPELINE_OPTIONS, PIPELINE_KEYS, methodNamesOf } from '../request.js';
import { usageError } from './errors.js';
import { optionValue } from './values.js';

const TEXT = { type: 'string' };
const SWITCH = { type: 'boolean' };
const MANY = { type: 'string', multiple: true };
const HELP = { type: 'boolean', short: 'h' };
const OUT = { type: 'string', short: 'o' };
const QUIET = { type: 'boolean', short: 'q' };

/** The CLI's own flags per command (parseArgs options); the request's flags are added from the schema (requestFlags). */
export const CLI_FLAGS = {
  invert: {
    field: TEXT, phase: TEXT, mask: TEXT, magnitude: TEXT, units: TEXT, 'phase-units': TEXT, 'phase-scale': TEXT, 'input-name': MANY,
    model: TEXT, spec: TEXT, weights: MANY, 'weights-unverified': SWITCH, param: MANY, cores: TEXT, verify: SWITCH, probe: SWITCH, context: TEXT,
    'measure-speed': SWITCH, out: OUT, report: TEXT, quiet: QUIET, help: HELP,
  },
  plan: {
    field: TEXT, phase: TEXT, mask: TEXT, model: TEXT, spec: TEXT, weights: MANY, 'weights-unverified': SWITCH, cores: TEXT, verify: SWITCH,
    probe: SWITCH, context: TEXT, 'measure-speed': SWITCH, json: SWITCH, help: HELP,
    // a classical run's plan from the input's header: --method (with --param), --pipeline (with its inputs and --option)
    pipeline: SWITCH, 'total-field': TEXT, units: TEXT, magnitude: TEXT, param: MANY, option: MANY,
  },
  pipeline: {
    phase: TEXT, 'total-field': TEXT, 'phase-difference': TEXT, te1: TEXT, te2: TEXT, 'delta-te': TEXT, units: TEXT, magnitude: TEXT,
    mask: TEXT, 'phase-units': TEXT, 'phase-scale': TEXT, model: TEXT, weights: MANY, 'weights-unverified': SWITCH, param: MANY,
    option: MANY, also: TEXT, cores: TEXT, out: OUT, 'keep-intermediates': TEXT, report: TEXT, quiet: QUIET, help: HELP,
  },
  score: { chi: TEXT, reference: TEXT, mask: TEXT, cores: TEXT, json: SWITCH, help: HELP },
  'qsm-ci': { in: TEXT, out: OUT, method: TEXT, background: TEXT, param: MANY, cores: TEXT, quiet: QUIET, help: HELP },
  swi: {
    phase: TEXT, magnitude: TEXT, mask: TEXT, te: TEXT, 'phase-units': TEXT, 'phase-scale': TEXT, option: MANY, cores: TEXT,
    out: OUT, 'min-ip': TEXT, quiet: QUIET, help: HELP,
  },
  r2star: { magnitude: TEXT, mask: TEXT, te: TEXT, method: TEXT, cores: TEXT, out: OUT, t2star: TEXT, quiet: QUIET, help: HELP },
  models: { json: SWITCH, help: HELP },
  methods: { json: SWITCH, help: HELP },
  calibrate: { model: TEXT, spec: TEXT, weights: MANY, 'weights-unverified': SWITCH, threads: TEXT, json: SWITCH, help: HELP },
  'receptive-field': { model: TEXT, spec: TEXT, weights: MANY, 'weights-unverified': SWITCH, probe: SWITCH, json: SWITCH, help: HELP },
};

/** The schema options of the phase networks only (their flags need --phase). */
export const PHASE_OPTIONS = ['te', 'erodeRadius', 'phaseSign'];

/** The flag of a schema option where it is not the kebab case of the option's last name segment. */
const FLAG_NAMES = { threadsPerWorker: 'threads', erodeRadius: 'erode' };

/** The flag of a schema option: tile.core → core, cropMargin → crop-margin, threadsPerWorker → threads. */
export function flagName(name) {
  return FLAG_NAMES[name] ?? name.split('.').at(-1).replace(/[A-Z]/g, (c) => `-${c.toLowerCase()}`);
}

/** A schema option's default (a number, or its rule in words). schema: tessera.schema(); name: one of its options. */
export const schemaDefault = (schema, name) => schema.find((o) => o.name === name).default;

/** Whether a schema option is a switch (on or off; its default is false). */
export const isSwitch = (option) => option.default === 'false';

/** Whether a command takes a schema option as a flag of its own. */
function takes(command, option, methodNames) {
  const top = option.name.split('.')[0];
  if (command === 'invert' || command === 'plan') {
    // tile is given by its fields' flags, spec by a --spec file's keys.
    if (NETWORK_OPTIONS.includes(top)) return option.name !== 'tile' && top !== 'spec';
    return option.name === 'method';
  }
  if (command === 'pipeline') {
    // Its stages' options are --option NAME=VALUE, a method's parameters --param.
    return PIPELINE_KEYS.includes(option.name) && !PIPELINE_OPTIONS.includes(option.name) && !methodNames.includes(option.name) && option.name !== 'spec';
  }
  return false;
}

/**
 * A command's request flags, from the schema, in its order: [{flag, option}] (option: the tessera.schema() entry).
 * invert and plan: the network options (tile through its fields, spec through the --spec file); invert also method
 * (its parameters: --param NAME=VALUE); pipeline: te, b0 and method (its stages' options: --option NAME=VALUE).
 */
export function requestFlags(command, schema) {
  const names = methodNamesOf(schema);
  return schema.filter((o) => takes(command, o, names)).map((option) => ({ flag: flagName(option.name), option }));
}

/** A command's parseArgs options: its own flags and the schema's request flags (a name both give is an error here). */
export function optionsOf(command, schema) {
  const out = { ...CLI_FLAGS[command] };
  for (const { flag, option } of requestFlags(command, schema)) {
    if (out[flag]) throw new Error(`the schema option ${option.name} and a CLI flag are both --${flag}`);
    out[flag] = isSwitch(option) ? SWITCH : TEXT;
  }
  return out;
}

/** `--flag -1` → `--flag=-1`: parseArgs refuses a value that starts with a dash as ambiguous. */
function joinNegativeValues(options, args) {
  const out = [];
  for (let i = 0; i < args.length; i++) {
    const m = /^--([\w-]+)$/.exec(args[i]);
    if (m && options[m[1]]?.type === 'string' && i + 1 < args.length && /^-(\d|\.\d)/.test(args[i + 1])) {
      out.push(`${args[i]}=${args[++i]}`);
    } else out.push(args[i]);
  }
  return out;
}

/**
 * The command's flags from its arguments, and the schema's request flags given, checked against their options:
 * {o: {flag: text | true | list}, values: Map(schema name → value)}. A usage error names what is wrong.
 * schema: tessera.schema(), for the commands with request flags (else undefined).
 */
export function parse(command, args, schema) {
  const options = schema ? optionsOf(command, schema) : CLI_FLAGS[command];
  let o;
  try {
    o = parseArgs({ args: joinNegativeValues(options, args), options, strict: true, allowPositionals: false }).values;
  } catch (e) {
    if (!String(e.code).startsWith('ERR_PARSE_ARGS')) throw e;
    const hint = `see \`tessera-qsm ${command} --help\``;
    if (e.code === 'ERR_PARSE_ARGS_UNKNOWN_OPTION') {
      const m = /option '([^']+)'/i.exec(e.message);
      throw usageError(`unknown option ${m ? m[1] : ''} for \`tessera-qsm ${command}\`; ${hint}`);
    }
    if (e.code === 'ERR_PARSE_ARGS_UNEXPECTED_POSITIONAL') {
      const m = /argument '([^']*)'/i.exec(e.message);
      throw usageError(`unexpected argument ${m ? `'${m[1]}'` : ''} (every value belongs to a --flag); ${hint}`);
    }
    throw usageError(`${e.message.replace(/\.$/, '')}; ${hint}`);
  }
  const values = new Map();
  for (const { flag, option } of schema ? requestFlags(command, schema) : []) {
    if (o[flag] !== undefined) values.set(option.name, optionValue(option, flag, o[flag]));
  }
  return { o, values };
}

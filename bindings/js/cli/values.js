// The command line's values: a flag's text checked and turned into what the request takes, with a usage error
// (exit 2) naming the flag, the value and what it must be.
import { checkEchoTimes } from '../io/inputs.js';
import { usageError } from './errors.js';

/**
 * The schema's bound that means "none" (request.cpp kHuge): a range up to it is printed open.
 * The schema reports an unbounded side as ±1e15.
 */
export const UNBOUNDED = 1e15;

/** A number as the help and the messages print it (6 significant digits, no trailing zeros). */
export const fmt = (v) => String(+v.toPrecision(6));

/** A whole number >= min from the flag's text, or undefined when the flag is absent. */
export function wholeNumber(v, flag, min) {
  if (v === undefined) return undefined;
  if (!/^\d+$/.test(v.trim()) || Number(v) < min) throw usageError(`--${flag} must be a whole number >= ${min}, got '${v}'`);
  return Number(v);
}

/** --te 0.01,0.02: echo times in seconds, each > 0 and at most 1 s (inputs.js checkEchoTimes: a larger value is milliseconds). */
export function echoTimes(v) {
  if (v === undefined) return undefined;
  const parts = v.split(',').map((p) => p.trim());
  const te = parts.map((p) => (p === '' ? NaN : Number(p)));
  try {
    return checkEchoTimes(te);
  } catch (e) {
    if (e.code === 'TeInvalid') throw usageError(`--te takes echo times in seconds > 0, comma-separated (e.g. 0.01,0.02); '${parts[e.index]}' is not one`);
    if (e.code === 'TeMilliseconds') {
      throw usageError(`--te ${v}: ${e.values.join(', ')} s is implausible for an echo time; give TE in seconds, not milliseconds (20 ms = 0.02: --te ${e.seconds.join(',')})`);
    }
    throw e;
  }
}

/** --phase-sign: +1 or -1 (the schema's phaseSign range is [-1, 1] but C++ refuses 0: checked_option's one rule by name). */
function phaseSign(v, flag) {
  if (!/^\s*[+-]?1(\.0*)?\s*$/.test(v)) throw usageError(`--${flag} must be +1 or -1, got '${v}'`);
  return Number(v);
}

/** Options whose flag takes a comma-separated list (the schema does not say so): te, one per echo. */
export const LIST_OPTIONS = ['te'];

/** Options whose flag value is not one number or word: te is a list, phaseSign a sign (the schema says neither). */
const SPECIAL = { te: (v) => echoTimes(v), phaseSign };

/**
 * A request flag's value from its text, checked against its schema option: a choice (case-insensitive), a whole
 * number or a number within the option's range, or what SPECIAL says. A switch passes as true.
 * option: a tessera.schema() entry; flag: its flag's name (for the message); v: the text, or true for a switch.
 */
export function optionValue(option, flag, v) {
  if (v === true) return true;
  if (SPECIAL[option.name]) return SPECIAL[option.name](v, flag);
  if (option.choices.length) {
    const word = v.trim().toLowerCase();
    if (!option.choices.includes(word)) throw usageError(`--${flag} must be ${option.choices.join(', ')}, got '${v}'`);
    return word;
  }
  const x = Number(v);
  const kind = option.integer ? 'a whole number' : 'a number';
  const isNumber = option.integer ? /^\s*[+-]?\d+\s*$/.test(v) : v.trim() !== '' && Number.isFinite(x);
  const lowOk = option.minExclusive ? x > option.min : x >= option.min;
  if (!isNumber || (option.min > -UNBOUNDED && !lowOk)) {
    const bound = option.min > -UNBOUNDED ? ` ${option.minExclusive ? '>' : '>='} ${fmt(option.min)}` : '';
    throw usageError(`--${flag} must be ${kind}${bound}, got '${v}'`);
  }
  if (option.max < UNBOUNDED && (x > option.max || (option.maxExclusive && x === option.max))) {
    throw usageError(`--${flag} must be ${option.range || `${kind} <= ${fmt(option.max)}`}, got '${v}'`);
  }
  return x;
}

/** --input-name role=name (repeatable) → {role: name}. */
export function inputNames(list) {
  if (!list?.length) return undefined;
  const out = {};
  for (const item of list) {
    const m = /^\s*([^=\s]+)\s*=\s*(\S.*?)\s*$/.exec(item);
    if (!m) throw usageError(`--input-name takes ROLE=NAME (e.g. --input-name phase=wphs), got '${item}'`);
    if (m[1] in out) throw usageError(`--input-name gives the role '${m[1]}' twice`);
    out[m[1]] = m[2];
  }
  return out;
}

/**
 * NAME=VALUE items (repeatable --param, --option) → {NAME: number | word}; an --option's name may hold a dot
 * (vsharp.maxRadius).
 * C++ checks the names and values when the request is planned. flag: '--param' or '--option', for the message.
 */
export function keyValues(list, flag = '--param') {
  const out = {};
  for (const item of list ?? []) {
    const m = (flag === '--option' ? /^\s*([A-Za-z]\w*(?:\.[A-Za-z]\w*)?)\s*=\s*(\S+)\s*$/ : /^\s*([A-Za-z]\w*)\s*=\s*(\S+)\s*$/).exec(item);
    if (!m) throw usageError(`${flag} takes NAME=VALUE (e.g. ${flag === '--param' ? '--param threshold=0.15' : '--option background=pdf'}), got '${item}'`);
    if (m[1] in out) throw usageError(`${flag} gives ${m[1]} twice`);
    out[m[1]] = Number.isFinite(Number(m[2])) ? Number(m[2]) : m[2];
  }
  return out;
}

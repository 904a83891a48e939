// The request is described once, by the C++ schema (tessera.schema(), each option with the kinds of request that take
// it) and its keys that are no option (requestKeys()): the API's key lists and the request types are generated from
// them (request-surface.test.js checks the generated files); here the API, the CLI's flags and the types agree with it.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import { createTessera } from './index.js';
import { PIPELINE_OPTIONS, OTHER_KEYS, NETWORK_KEYS, METHOD_KEYS, PIPELINE_KEYS, methodNamesOf } from './request.js';
import { CLI_FLAGS, PHASE_OPTIONS, requestFlags, optionsOf, flagName } from './cli/flags.js';
import { checkSpec } from './cli/files.js';
import { helpText, defaultText } from './cli/help.js';
import { stageOptions } from './cli/pipeline.js';
import { UNBOUNDED, LIST_OPTIONS } from './cli/values.js';
import { unionMembers } from '../../tests/js/type-text.js';

let tessera;
let schema;
let methods;
before(async () => {
  tessera = await createTessera({ workers: 1, hardwareThreads: 1 });
  schema = await tessera.schema();
  methods = methodNamesOf(schema);
});
after(() => tessera?.terminate());

const top = (name) => name.split('.')[0];

/** The kind of request plan() is asked with to set a schema option: a method's for a method's, else a network's, else a pipeline's. */
function kindOf(option) {
  for (const kind of ['method', 'network', 'pipeline']) if (option.kinds.includes(kind)) return kind;
  return null;
}

/** A value the schema allows for an option: its numeric default when in range, else its first choice, its upper bound or above its lower. */
function validValue(o) {
  if (o.default === 'false') return true;
  if (o.name === 'tile') return 'auto';
  if (o.choices.length) return typeof o.default === 'string' && o.choices.includes(o.default) ? o.default : o.choices[0];
  const inRange = (x) => (o.minExclusive ? x > o.min : x >= o.min) && x <= o.max;
  if (typeof o.default === 'number' && inRange(o.default)) return o.default;
  if (o.max < UNBOUNDED) return o.max;
  return o.min + 1;
}

/** The request that sets a schema option ("a.b" → {a: {b: v}}) to v. */
function setting(name, v) {
  const [a, b] = name.split('.');
  return b === undefined ? { [a]: v } : { [a]: { [b]: v } };
}

const GEOMETRY = { dims: [24, 24, 16], voxelMm: [1, 1, 1], b0Dir: [0, 0, 1] };

test('every schema option belongs to a kind of request, and every key of a kind is its schema option or a documented other key', () => {
  for (const o of schema) assert.ok(kindOf(o), `${o.name}: the schema option goes to no kind of request`);
  const tops = new Set(schema.map((o) => top(o.name)));
  for (const [kind, keys] of [['network', NETWORK_KEYS], ['method', METHOD_KEYS], ['pipeline', PIPELINE_KEYS]]) {
    for (const k of keys) {
      assert.ok(tops.has(k) ? schema.some((o) => top(o.name) === k && o.kinds.includes(kind)) : OTHER_KEYS[k]?.[kind], `${kind} request key ${k}: neither a schema option of a ${kind} request nor an other key documented for it`);
    }
    for (const o of schema) if (o.kinds.includes(kind)) assert.ok(keys.includes(top(o.name)), `${kind} request keys lack ${o.name}'s ${top(o.name)}`);
    assert.equal(new Set(keys).size, keys.length, `${kind} keys are listed once`);
  }
  for (const k of Object.keys(OTHER_KEYS)) assert.ok(!tops.has(k), `OTHER_KEYS ${k} is a schema option: list it with the schema's`);
  for (const k of PIPELINE_OPTIONS) assert.ok(tops.has(k), `request.js names ${k}, which the schema lacks`);
});

test('the API accepts every schema option: plan() with the option at an allowed value resolves', async () => {
  for (const o of schema) {
    const v = validValue(o);
    let request;
    const kind = kindOf(o);
    if (kind === 'network') {
      const tile = top(o.name) === 'tile' && o.name !== 'tile' ? { tile: { core: 16, ...setting(o.name, v).tile } } : setting(o.name, v);
      const network = top(o.name) === 'spec' ? { spec: { ...tile.spec } } : { model: 'demo-unet' };
      request = { geometry: GEOMETRY, ...network, ...(top(o.name) === 'spec' ? {} : tile) };
    } else if (kind === 'method') {
      request = o.name === 'method' ? { geometry: GEOMETRY, method: v } : { geometry: GEOMETRY, method: top(o.name), ...setting(o.name, v) };
    } else {
      request = { pipeline: true, geometry: GEOMETRY, te: [0.004, 0.008], magnitude: true, ...setting(o.name, v) };
    }
    const plan = await tessera.plan(request).catch((e) => assert.fail(`${o.name} = ${JSON.stringify(v)}: plan(${JSON.stringify(request)}) refused: ${e.message}`));
    assert.equal(typeof plan.feasible, 'boolean', o.name);
  }
});

test('plan() refuses the unknown keys invert() refuses, with the same words, for networks, methods and pipelines', async () => {
  const cases = [
    { geometry: GEOMETRY, model: 'demo-unet', tE: 0.02 },
    { geometry: GEOMETRY, model: 'demo-unet', tile: 'auto', cropmargin: 2 },
    { geometry: GEOMETRY, method: 'tkd', tile: 'auto' },
  ];
  for (const request of cases) {
    const fromPlan = await tessera.plan(request).then(() => null, (e) => e);
    const data = request.method ? { field: new Float32Array(24 * 24 * 16) } : { field: new Float32Array(24 * 24 * 16), weights: new Uint8Array(8) };
    const fromInvert = await tessera.invert({ keepInputs: true, ...request, ...data }).then(() => null, (e) => e);
    assert.ok(fromPlan, `plan(${JSON.stringify(request)}) resolved`);
    assert.equal(fromPlan.code, 'InvalidArgument');
    assert.match(fromPlan.message, /^plan( \(method tkd\))?: unknown option\(s\) (tE|cropmargin|tile) \(known: /);
    assert.equal(fromInvert.message.replace(/^invert/, 'plan'), fromPlan.message);
  }
  await assert.rejects(tessera.plan({ pipeline: true, geometry: GEOMETRY, te: [0.004], backgrund: 'pdf' }), /plan: unknown option\(s\) backgrund/);
  await assert.rejects(tessera.pipeline({ keepInputs: true, geometry: GEOMETRY, te: [0.004], backgrund: 'pdf' }), /pipeline: unknown option\(s\) backgrund/);
});

test('every schema option is reachable from the CLI: its own flag, a --spec key, --param or --option; no flag is both the CLI\'s and the schema\'s', () => {
  const flagOf = new Map();
  for (const command of ['invert', 'plan', 'pipeline']) {
    const options = optionsOf(command, schema); // throws when a schema flag and a CLI flag share a name
    for (const { flag, option } of requestFlags(command, schema)) {
      assert.ok(options[flag], `${command} --${flag}`);
      assert.equal(flagName(option.name), flag);
      flagOf.set(option.name, flag);
    }
  }
  for (const o of schema) {
    const t = top(o.name);
    if (flagOf.has(o.name)) continue;
    if (o.name === 'tile') {
      assert.ok(['tile.core', 'tile.halo'].every((k) => flagOf.has(k)), 'tile is given by --core and --halo');
    } else if (t === 'spec') {
      const key = o.name.slice(5);
      assert.equal(checkSpec({ [key]: 1 }, schema, 'net.json')[key], 1, `--spec file key ${key}`);
    } else if (methods.includes(t)) {
      assert.ok(CLI_FLAGS.invert.param && CLI_FLAGS.pipeline.param && flagOf.get('method') === 'method', `${o.name}: --method ${t} --param`);
    } else if (PIPELINE_OPTIONS.includes(t)) {
      assert.deepEqual(stageOptions([`${o.name}=1`], schema), setting(o.name, 1), `pipeline --option ${o.name}=V`);
    } else {
      assert.fail(`schema option ${o.name} has no way in from the command line`);
    }
  }
  // The CLI's own flags are no schema option's flag: a request option is never restated as a CLI flag (a --spec key, a
  // method's or a stage's parameter is no flag).
  const flagged = schema.filter((o) => top(o.name) !== 'spec' && !methods.includes(top(o.name)) && !PIPELINE_OPTIONS.includes(top(o.name)));
  const requestFlagNames = new Set(flagged.map((o) => flagName(o.name)));
  for (const command of ['invert', 'plan', 'pipeline']) {
    for (const flag of Object.keys(CLI_FLAGS[command])) assert.ok(!requestFlagNames.has(flag), `${command} --${flag} is a schema option's flag: let the schema give it`);
  }
  assert.throws(() => stageOptions(['vsharp.radius=3'], schema), /--option vsharp\.radius is not a pipeline option/);
});

test('the CLI\'s own groupings of schema options agree with the surface: the phase flags are network options, the list flags take arrays', () => {
  const byName = new Map(schema.map((o) => [o.name, o]));
  for (const name of PHASE_OPTIONS) {
    assert.ok(byName.get(name)?.kinds.includes('network'), `cli/flags.js PHASE_OPTIONS names ${name}, which is no network request's schema option`);
    assert.ok(NETWORK_KEYS.includes(name), name);
  }
  for (const name of LIST_OPTIONS) {
    assert.match(byName.get(name)?.type ?? '', /\[\]|Array</, `cli/values.js LIST_OPTIONS names ${name}, whose schema type takes no list`);
  }
});

test('the help describes every request flag from the schema (help, range, default) and names only flags the command takes', () => {
  for (const command of ['invert', 'pipeline']) {
    const text = helpText(command, schema).replace(/\n {21}/g, ' ');
    const flags = optionsOf(command, schema);
    for (const { flag, option } of requestFlags(command, schema)) {
      const at = text.indexOf(`\n  --${flag} `);
      assert.ok(at >= 0, `${command} --help has a line for --${flag}`);
      const entry = text.slice(at + 1, text.indexOf('\n', at + 1));
      assert.ok(entry.includes(option.help), `${command} --${flag}: the schema's help`);
      if (defaultText(option)) assert.ok(entry.includes(`default ${defaultText(option)}`), `${command} --${flag}: the schema's default (${entry})`);
    }
    for (const [, flag] of text.matchAll(/(?<![\w-])--([a-z][\w-]*)/g)) {
      if (flag === 'help' || flag === 'field' && command === 'pipeline') continue;
      assert.ok(flags[flag], `${command} --help names --${flag}, which ${command} does not take`);
    }
  }
  const pipeline = helpText('pipeline', schema).replace(/\n {21}/g, ' ');
  for (const o of schema.filter((x) => PIPELINE_OPTIONS.includes(top(x.name)))) assert.match(pipeline, new RegExp(`\\n {6}${o.name.replace('.', '\\.')} +${o.help.slice(0, 20).replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}`), o.name);
});

// ---------------------------------------------------------------------------------------------------
// index.d.ts and the request types it re-exports (request-types.d.ts, generated), read as text

const DTS = ['./index.d.ts', './request-types.d.ts'].map((f) => fs.readFileSync(new URL(f, import.meta.url), 'utf8')).join('\n');

/** The text from an opening brace at `from` to its closing one (exclusive). */
function braced(text, from) {
  let depth = 0;
  for (let i = from; i < text.length; i++) {
    if (text[i] === '{') depth++;
    else if (text[i] === '}' && --depth === 0) return text.slice(from + 1, i);
  }
  throw new Error('unbalanced braces in index.d.ts');
}

/** The fields of an object type's body: Map(name → {type, doc}); a field's type ends at a ';' outside brackets. */
function fieldsOf(body) {
  const out = new Map();
  let doc = '';
  let i = 0;
  while (i < body.length) {
    if (/\s/.test(body[i])) i++;
    else if (body.startsWith('/**', i)) {
      const end = body.indexOf('*/', i);
      doc = body.slice(i + 3, end).replace(/\s*\*\s*/g, ' ').trim();
      i = end + 2;
    } else {
      const m = /^(\w+)\??:/.exec(body.slice(i));
      if (!m) throw new Error(`index.d.ts: cannot read a field at '${body.slice(i, i + 40)}'`);
      let j = i + m[0].length;
      let depth = 0;
      for (; j < body.length; j++) {
        const c = body[j];
        if ('{(<['.includes(c)) depth++;
        else if ('})>]'.includes(c) && body[j - 1] !== '=') depth--;
        else if (c === ';' && depth === 0) break;
      }
      out.set(m[1], { type: body.slice(i + m[0].length, j).trim(), doc });
      doc = '';
      i = j + 1;
    }
  }
  return out;
}

/** An interface's fields, its parents' included (extends, with Omit<X, 'a' | 'b'>). */
function interfaceFields(name) {
  const m = new RegExp(`export interface ${name}(?:<[^>]*>)? (?:extends ([^{]+))?\\{`).exec(DTS);
  assert.ok(m, `index.d.ts declares interface ${name}`);
  const own = fieldsOf(braced(DTS, m.index + m[0].length - 1));
  const out = new Map();
  for (const parent of (m[1] ?? '').split(/,(?![^<]*>)/).map((p) => p.trim()).filter(Boolean)) {
    const omit = /^Omit<(\w+), ([^>]+)>$/.exec(parent);
    const fields = interfaceFields(omit ? omit[1] : parent);
    const dropped = omit ? [...omit[2].matchAll(/'(\w+)'/g)].map((x) => x[1]) : [];
    for (const [k, v] of fields) if (!dropped.includes(k)) out.set(k, v);
  }
  for (const [k, v] of own) out.set(k, v);
  return out;
}

/** A type alias's text, or undefined. */
const alias = (name) => new RegExp(`export type ${name} = ([^;]+);`).exec(DTS)?.[1];

/** The union members of a type text, aliases followed: ["'a'", "TileConfig", "{ core: 'auto'; … }", …]. */
function members(type) {
  return unionMembers(type).flatMap((p) => (alias(p) ? members(alias(p)) : [p]));
}

/** The fields a type offers for a nested option: an interface's or an inline object's, over its union members. */
function nestedFields(type) {
  const out = new Map();
  for (const p of members(type)) {
    const fields = p.startsWith('{') ? fieldsOf(braced(p, 0)) : /^\w+$/.test(p) && new RegExp(`export interface ${p}\\b`).test(DTS) ? interfaceFields(p) : new Map();
    for (const [k, v] of fields) if (!out.has(k) || /^'/.test(out.get(k).type)) out.set(k, v);
  }
  return out;
}

const REQUEST_TYPES = {
  network: () => interfaceFields('InvertRequest'),
  method: () => interfaceFields('MethodRequest'),
  pipeline: () => new Map([...interfaceFields('PipelineRequest'), ...interfaceFields('PipelinePlanRequest')]),
};
const KEYS = { network: () => NETWORK_KEYS, method: () => METHOD_KEYS, pipeline: () => PIPELINE_KEYS };

test('index.d.ts: each request interface has exactly the keys of its kind of request', () => {
  for (const kind of Object.keys(REQUEST_TYPES)) {
    const fields = [...REQUEST_TYPES[kind]().keys()].sort();
    assert.deepEqual(fields, [...KEYS[kind]()].sort(), `${kind} request: index.d.ts fields vs the request surface's keys`);
  }
});

test('index.d.ts: every schema option has its field, with the schema\'s choices as its type and the schema\'s default in its doc comment', () => {
  for (const o of schema) {
    const [a, b] = o.name.split('.');
    // Every kind of request that takes the option (te and b0: network and pipeline requests; a method's: both too).
    const kinds = Object.keys(REQUEST_TYPES).filter((kind) => KEYS[kind]().includes(a));
    assert.ok(kinds.includes(kindOf(o)), o.name);
    for (const kind of kinds) {
      const fields = REQUEST_TYPES[kind]();
      assert.ok(fields.has(a), `index.d.ts: the ${kind} request has no field ${a} (schema option ${o.name})`);
      const field = b === undefined ? fields.get(a) : nestedFields(fields.get(a).type).get(b);
      assert.ok(field, `index.d.ts: the ${kind} request's ${a} has no field ${b} (schema option ${o.name})`);
      if (o.choices.length) {
        const literals = members(field.type).filter((p) => /^'.*'$/.test(p)).map((p) => p.slice(1, -1));
        assert.deepEqual(literals.sort(), [...o.choices].sort(), `index.d.ts ${o.name}: the type's words vs the schema's choices`);
      }
      // "(default 3)", "(default auto: …)", "(default: the core)": the words up to a ':', ';', ',' or ')'.
      const said = /\bdefault:? ([^:;,)]+)/.exec(field.doc)?.[1].trim();
      const schemaSays = String(defaultText(o));
      if (said !== undefined) {
        assert.ok(typeof o.default === 'number' ? said === schemaSays : schemaSays.startsWith(said), `index.d.ts ${kind} ${o.name}: the doc comment says default ${said}, the schema ${schemaSays}`);
      }
    }
  }
});

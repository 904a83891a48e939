#!/usr/bin/env node
// Writes the JS request surface from the wasm module's record of it: bindings/js/request-surface.js (which kinds of
// request take each schema option, every kind's keys, the keys that are no option, the method names, the phase
// networks) and bindings/js/request-types.d.ts (the request types index.d.ts re-exports), from schema() (each option
// with its kinds and TypeScript type), requestKeys() (the keys that are no option, src/session/request.cpp) and
// registry() (the networks that take wrapped phase), so that no option list is kept by hand in JavaScript; and
// bindings/js/cli/schema.js, the schema itself, from which the CLI reads its flags and help without starting a runtime.
// Usage: node scripts/request-surface.js [WASM_DIR]   (WASM_DIR: the node flavour's folder, default dist/wasm/node)
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { loadModuleFrom, docComment } from './value-types.js';

const root = fileURLToPath(new URL('../', import.meta.url));
/** The generated files, and the command that writes them (named in their headers). */
export const SURFACE_JS = path.join(root, 'bindings/js/request-surface.js');
export const SURFACE_DTS = path.join(root, 'bindings/js/request-types.d.ts');
export const SCHEMA_JS = path.join(root, 'bindings/js/cli/schema.js');
export const SURFACE_COMMAND = 'node scripts/request-surface.js';

/** Each kind's request types: a run's, and plan()'s of the same request (none for swi() and r2star(), which plan() does not take). */
const FORMS = {
  network: { run: 'InvertRequest', plan: 'PlanRequest', what: 'invert() of a network (model or spec)' },
  method: { run: 'MethodRequest', plan: 'MethodPlanRequest', what: 'invert() of a classical method (method)' },
  pipeline: { run: 'PipelineRequest', plan: 'PipelinePlanRequest', what: 'pipeline(): multi-echo phase, a total field or a phase difference to χ' },
  swi: { run: 'SwiRequest', what: 'swi(): susceptibility-weighted imaging from a scanner\'s multi-echo wrapped phase and magnitude' },
  r2star: { run: 'R2starRequest', what: 'r2star(): R2* and T2* from the multi-echo magnitude' },
};
/** TypeScript's own type names a type text may use besides the JS globals. */
const TS_BUILTINS = new Set(['ArrayLike', 'Record', 'Partial', 'Array', 'Omit', 'NonNullable']);

const top = (name) => name.split('.')[0];
const pascal = (s) => s[0].toUpperCase() + s.slice(1);
/** The interface of an option group's fields (tile.* → TileOptions). */
export const groupType = (group) => `${pascal(group)}Options`;

/**
 * What the generated files say, from the module's record: {kinds, optionKinds (top → kinds), keys (kind → keys),
 * other (key → kind → row), groups (group → fields), options (top → the option itself, when the top is one), methods,
 * phaseNetworks}. Throws an Error naming the key and the fix when the record contradicts itself.
 */
export function surfaceOf(schema, requestKeys, registry) {
  const kinds = Object.keys(FORMS);
  const optionKinds = new Map();
  const options = new Map();
  const groups = new Map();
  for (const o of schema) {
    const t = top(o.name);
    const had = optionKinds.get(t);
    if (had && had.join() !== o.kinds.join()) throw new Error(`request-surface: ${o.name} goes to ${o.kinds.join(', ')}, its group ${t} to ${had.join(', ')}: give a group one set of kinds (src/session/request.cpp)`);
    for (const k of o.kinds) if (!kinds.includes(k)) throw new Error(`request-surface: ${o.name} names the kind ${k}, which ${Object.keys(FORMS).join(', ')} lack: add its forms here`);
    optionKinds.set(t, o.kinds);
    if (o.name === t) options.set(t, o);
    else {
      if (!groups.has(t)) groups.set(t, []);
      groups.get(t).push({ name: o.name.slice(t.length + 1), type: o.type, doc: optionDoc(o) });
    }
  }
  const other = new Map();
  for (const k of requestKeys) {
    if (k.name.includes('.')) {
      const g = groups.get(top(k.name));
      if (!g) throw new Error(`request-surface: the key ${k.name} names the group ${top(k.name)}, which no schema option has`);
      g.push({ name: k.name.slice(top(k.name).length + 1), type: k.type, doc: k.doc });
      continue;
    }
    if (optionKinds.has(k.name)) throw new Error(`request-surface: the key ${k.name} is a schema option: drop it from requestKeys()`);
    if (!other.has(k.name)) other.set(k.name, {});
    for (const kind of k.kinds) {
      if (other.get(k.name)[kind]) throw new Error(`request-surface: the key ${k.name} is given twice for a ${kind} request`);
      other.get(k.name)[kind] = k;
    }
  }
  const keys = {};
  for (const kind of kinds) {
    keys[kind] = [
      ...[...optionKinds].filter(([, ks]) => ks.includes(kind)).map(([t]) => t),
      ...[...other].filter(([, byKind]) => byKind[kind]).map(([name]) => name),
    ];
  }
  const methods = options.get('method')?.choices ?? [];
  const phaseNetworks = registry.filter((m) => m.inputs.includes('phase')).map((m) => m.id);
  return { kinds, optionKinds, options, groups, other, keys, methods, phaseNetworks };
}

/** An option's doc comment text: its help, then its range with its unit and its default (a number to 6 digits). */
function optionDoc(o) {
  const range = [/\bnumber\b/.test(o.type) ? o.range : '', o.unit].filter(Boolean).join(' '); // a number's range only
  const dflt = o.default === 'false' || o.default === '' ? '' : `default ${typeof o.default === 'number' ? String(+o.default.toPrecision(6)) : o.default}`;
  const facts = [range, dflt].filter(Boolean);
  return facts.length ? `${o.help} (${facts.join('; ')})` : o.help;
}

const frozen = (x) => `Object.freeze(${JSON.stringify(x)})`;

/** The text of request-surface.js. */
export function renderSurfaceJs(s) {
  let out = `// Generated by \`${SURFACE_COMMAND}\` from the wasm module's request schema (schema(), requestKeys(),\n`;
  out += '// registry(); src/session/request.cpp): do not edit. Change the C++, rebuild the module, run the command again.\n\n';
  out += '/** The kinds of request: a network\'s run, a classical method\'s, a pipeline\'s, swi()\'s, r2star()\'s. */\n';
  out += `export const REQUEST_KINDS = ${frozen(s.kinds)};\n\n`;
  out += '/** Each schema option\'s first name segment (tile.core → tile) with the kinds of request that take it, in schema order. */\n';
  out += 'export const OPTION_KINDS = Object.freeze({\n';
  for (const [t, ks] of s.optionKinds) out += `  ${JSON.stringify(t)}: ${frozen(ks)},\n`;
  out += '});\n\n';
  out += '/** The keys that are no schema option: per key, per kind of request that takes it, what it holds. */\n';
  out += 'export const OTHER_KEYS = Object.freeze({\n';
  for (const [name, byKind] of s.other) {
    out += `  ${JSON.stringify(name)}: Object.freeze({\n`;
    for (const [kind, k] of Object.entries(byKind)) out += `    ${kind}: ${JSON.stringify(k.doc)},\n`;
    out += '  }),\n';
  }
  out += '});\n\n';
  out += '/** Every kind\'s keys: its schema options (by first segment), then the keys that are no option. */\n';
  out += 'export const REQUEST_KEYS = Object.freeze({\n';
  for (const kind of s.kinds) out += `  ${kind}: ${frozen(s.keys[kind])},\n`;
  out += '});\n\n';
  out += '/** The classical methods (the schema\'s method choices); each one\'s parameters are the options under its name. */\n';
  out += `export const METHOD_NAMES = ${frozen(s.methods)};\n\n`;
  out += '/** The phase networks: the registry\'s networks that take wrapped phase (their inputs name \'phase\'). */\n';
  out += `export const PHASE_NETWORKS = ${frozen(s.phaseNetworks)};\n`;
  return out;
}

/** The capitalised names a TypeScript type text refers to ("PlanTile[]", "Volume<VoxelArray>" → PlanTile; Volume, VoxelArray). */
function typeNames(type) {
  return [...type.replace(/'[^']*'/g, '').matchAll(/\b[A-Z]\w*/g)].map((m) => m[0]);
}

/**
 * The text of request-types.d.ts: an interface per option group (its options and the group's keys that are no
 * option), MethodName and MethodOptions, and each kind's two request types. Names neither generated nor TypeScript's
 * are imported from index.d.ts, whose text (indexDts) must export them.
 */
export function renderSurfaceDts(s, indexDts) {
  const generated = new Set([...[...s.groups.keys()].map(groupType), 'MethodName', 'MethodOptions', ...Object.values(FORMS).flatMap((f) => [f.run, f.plan].filter(Boolean))]);
  const body = [];
  const field = (name, optional, type, doc) => `${docComment(doc, '  ')}  ${name}${optional ? '?' : ''}: ${type};\n`;
  for (const [group, fields] of s.groups) {
    const isMethod = s.methods.includes(group);
    const doc = isMethod ? `The parameters of the method ${group} (${group}.* in the schema).` : `The ${group}.* options of a request.`;
    body.push(`${docComment(doc, '')}export interface ${groupType(group)} {\n${fields.map((f) => field(f.name, true, f.type, f.doc)).join('')}}\n`);
  }
  body.push(`/** A classical method's name (the schema's method choices). */\nexport type MethodName = ${s.methods.map((m) => `'${m}'`).join(' | ')};\n`);
  body.push(`/** Each classical method's parameters under its name; C++ refuses another method's. */\nexport interface MethodOptions {\n${s.methods.filter((m) => s.groups.has(m)).map((m) => field(m, true, groupType(m), `${m}'s parameters`)).join('')}}\n`);
  for (const kind of s.kinds) {
    for (const form of ['run', 'plan'].filter((f) => FORMS[kind][f])) {
      let fields = '';
      for (const key of s.keys[kind]) {
        const option = s.options.get(key);
        if (s.optionKinds.has(key)) {
          const type = key === 'method' ? 'MethodName' : option ? option.type : groupType(key);
          const doc = option ? optionDoc(option) : s.methods.includes(key) ? `${key}'s parameters (with method '${key}')` : `the ${key}.* options`;
          fields += field(key, !(option?.requiredIn ?? []).includes(kind), type, doc);
          continue;
        }
        const k = s.other.get(key)[kind];
        if (k.presence === 'plan' && form === 'run') continue;
        const optional = k.presence === 'optional' || (k.presence === 'run' && form === 'plan');
        fields += field(key, optional, form === 'plan' ? k.planType : k.type, k.doc);
      }
      const name = FORMS[kind][form];
      const doc = form === 'run' ? `${FORMS[kind].what}: the request.` : `plan() of ${FORMS[kind].run}'s request: the same keys, no volume or weights needed.`;
      body.push(`${docComment(doc, '')}export interface ${name} {\n${fields}}\n`);
    }
  }
  const text = body.join('\n');
  const fromIndex = new Set();
  for (const name of typeNames(text.replace(/\/\*\*[\s\S]*?\*\//g, ''))) {
    if (generated.has(name) || TS_BUILTINS.has(name) || name in globalThis) continue;
    if (!new RegExp(`export (?:type|interface|declare class) ${name}\\b`).test(indexDts)) {
      throw new Error(`request-surface: a request type names ${name}, which is neither generated nor exported by index.d.ts: export ${name} from index.d.ts, or correct the type in src/session/request.cpp`);
    }
    fromIndex.add(name);
  }
  let out = `// Generated by \`${SURFACE_COMMAND}\` from the wasm module's request schema (schema(), requestKeys();\n`;
  out += '// src/session/request.cpp): do not edit. Change the C++, rebuild the module, run the command again.\n';
  if (fromIndex.size) out += `import type { ${[...fromIndex].sort().join(', ')} } from './index.js';\n`;
  return `${out}\n${text}`;
}

/** The text of cli/schema.js: the schema as tessera.schema() returns it, an option a line. */
export function renderSchemaJs(schema) {
  let out = `// Generated by \`${SURFACE_COMMAND}\` from the wasm module's request schema (schema(); src/session/request.cpp):\n`;
  out += '// do not edit. Change the C++, rebuild the module, run the command again.\n\n';
  out += '/** The request schema as tessera.schema() returns it (each option\'s unit, default, range, kinds and type): the CLI\'s flags and help. */\n';
  out += 'export const SCHEMA = Object.freeze([\n';
  for (const o of schema) out += `  ${frozen(o)},\n`;
  out += ']);\n';
  return out;
}

/** The three files' texts from a loaded module M: {js, dts, schemaJs}. */
export function renderSurface(M, indexDts) {
  const schema = M.schema();
  const s = surfaceOf(schema, M.requestKeys(), M.registry());
  return { js: renderSurfaceJs(s), dts: renderSurfaceDts(s, indexDts), schemaJs: renderSchemaJs(schema) };
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? '').href) {
  try {
    const dir = process.argv[2] ?? path.join(root, 'dist/wasm/node');
    const M = await loadModuleFrom(dir);
    if (typeof M.requestKeys !== 'function') throw new Error(`request-surface: the module in ${dir} has no requestKeys(): it predates the record; rebuild it (scripts/build.sh)`);
    const { js, dts, schemaJs } = renderSurface(M, fs.readFileSync(path.join(root, 'bindings/js/index.d.ts'), 'utf8'));
    fs.writeFileSync(SURFACE_JS, js);
    fs.writeFileSync(SURFACE_DTS, dts);
    fs.writeFileSync(SCHEMA_JS, schemaJs);
    console.log(`wrote ${[SURFACE_JS, SURFACE_DTS, SCHEMA_JS].map((f) => path.relative(process.cwd(), f)).join(', ')}`);
    process.exit(0);
  } catch (e) {
    console.error(e.message);
    process.exit(1);
  }
}

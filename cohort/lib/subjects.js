#!/usr/bin/env node
// The subjects of a cohort, for cohort/Snakefile: a BIDS-style tree or a TSV manifest in, one record per run
// (subject, session, input files, echo times, field strength, network, output name) out, as JSON on stdout.
// Every problem a user can fix is refused here, before anything runs, with a message naming the file and the fix
// (exit 1, "error: ..." on stderr).
//
//   node cohort/lib/subjects.js '<config as JSON>'
//
// BIDS inputs, in sub-<label>/[ses-<label>/]anat/ (entities such as acq-, run- are kept in the output name):
//   local field   <prefix>_localfield.nii[.gz]  (BIDS has no local-field suffix; SEPIA's name), ppm unless its
//                 JSON sidecar says "Units": "Hz" | "rad/s" (then with "MagneticFieldStrength", tesla)
//   wrapped phase <prefix>[_echo-<n>]_part-phase_MEGRE.nii[.gz] (BIDS multi-echo GRE), echo times from the JSON
//                 sidecars' EchoTime (seconds), B0 from MagneticFieldStrength (tesla); magnitude (optional)
//                 <prefix>[_echo-<n>]_part-mag_MEGRE.nii[.gz], every echo of the phase
//   mask          <prefix>_desc-brain_mask.nii[.gz] (the BIDS derivatives name), or <prefix>[_desc-<x>]_mask
// BIDS field maps, in sub-<label>/[ses-<label>/]fmap/, through the pipeline (config phase_pipeline):
//   total field   <prefix>_fieldmap.nii[.gz] with "Units" ("Hz", "rad/s" or "ppm") and MagneticFieldStrength in its
//                 JSON sidecar, and optionally <prefix>_magnitude.nii[.gz] (the brain mask is made from it)
//   phase diff.   <prefix>_phasediff.nii[.gz] with "EchoTime1" and "EchoTime2" (seconds) in its JSON sidecar, and
//                 optionally <prefix>_magnitude1.nii[.gz]
//   (a <prefix>_desc-brain_mask.nii[.gz] beside either is used; without one the magnitude makes it)
// Manifest (TSV, header row; paths relative to the manifest's folder): subject, mask, and one of field | phase |
// fieldmap | phasediff per row; optional session, magnitude, te (seconds, comma-separated, one per echo; else the phase's
// JSON sidecar), b0, units (field and fieldmap: ppm | hz | rad/s), phase_units (rad | deg | scanner), model, method.
// A fieldmap (a total field map, with units) or a phasediff (a phase difference, with te1 and te2 in seconds) goes
// through the pipeline as a BIDS fmap/ map does (config phase_pipeline, or the row's method); its units, te1, te2 and
// b0 columns override its JSON sidecar (same name, .json); its mask is optional when the magnitude is given.
// The classical pipeline (`tessera-qsm pipeline`: mask from the magnitude, echo fit with unwrapping, background removal, a
// classical method or a field network on the local field) instead of a phase network: config phase_pipeline
// ({method, params, options} or {model}; a string is a method) takes every wrapped phase there, or a manifest phase
// row's method column takes that row. Such a run needs no mask when it has a magnitude (the pipeline makes one).
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';

/** A problem with the cohort's inputs or configuration: printed as "error: message". */
export class CohortError extends Error {}

const NIFTI = /\.nii(\.gz)?$/;
const LABEL = /^[a-zA-Z0-9]+$/;
const MANIFEST_COLUMNS = ['subject', 'session', 'field', 'phase', 'fieldmap', 'phasediff', 'magnitude', 'mask', 'te', 'te1', 'te2', 'b0', 'units', 'phase_units', 'model', 'method'];
/** A manifest row's inputs (exactly one per row), in words. */
const MANIFEST_INPUTS = {
  field: 'field (a local field map)',
  phase: 'phase (wrapped phase)',
  fieldmap: 'fieldmap (a total field map, with its units)',
  phasediff: 'phasediff (a phase difference, with te1 and te2)',
};
/** The manifest column that gives each sidecar key of a field map (a column overrides the map's JSON sidecar). */
const FIELD_MAP_COLUMNS = { Units: 'units', EchoTime1: 'te1', EchoTime2: 'te2', MagneticFieldStrength: 'b0' };
// The pipeline's own options (tessera-qsm pipeline --option N=V), as the schema names them.
const PIPELINE_OPTION = /^(unwrap|background|fitResidualLimit|(vsharp|pdf|lbv|ismv|sharp|resharp|brainMask|swi|r2star)\.\w+)$/;
const FIELD_UNITS = { ppm: 'ppm', hz: 'hz', 'rad/s': 'rad/s' };
const PHASE_UNITS = ['rad', 'deg', 'scanner'];
/** The words a yes-or-no config value may be (snakemake --config passes them as text), by the value they mean. */
const SWITCH_WORDS = { true: true, yes: true, on: true, 1: true, false: false, no: false, off: false, 0: false };

/** A yes-or-no config value (absent: false); throws CohortError naming the key when it is neither. */
function switchOf(config, key) {
  const v = config[key];
  if (v === undefined || typeof v === 'boolean') return !!v;
  const word = String(v).trim().toLowerCase();
  if (!(word in SWITCH_WORDS)) throw new CohortError(`config ${key} must be true or false, got '${v}'`);
  return SWITCH_WORDS[word];
}
const MAX_TE_SECONDS = 1;

/** BIDS entities of a file name: {entities: [[key, value]...], suffix, ext}, or null when it is not one. */
export function parseName(name) {
  const m = /^(.*?)(\.nii\.gz|\.nii|\.json)$/.exec(name);
  if (!m) return null;
  const parts = m[1].split('_');
  const suffix = parts.pop();
  const entities = [];
  for (const p of parts) {
    const kv = /^([a-zA-Z]+)-([a-zA-Z0-9]+)$/.exec(p);
    if (!kv) return null;
    entities.push([kv[1], kv[2]]);
  }
  if (!entities.length || entities[0][0] !== 'sub') return null;
  return { entities, suffix, ext: m[2] };
}

const stemOf = (entities, drop = []) => entities.filter(([k]) => !drop.includes(k)).map(([k, v]) => `${k}-${v}`).join('_');
const entity = (entities, key) => entities.find(([k]) => k === key)?.[1];

function readJson(file) {
  try {
    return JSON.parse(fs.readFileSync(file, 'utf8'));
  } catch (e) {
    throw new CohortError(`the JSON sidecar ${file} could not be read: ${e.message}`);
  }
}

/**
 * The metadata of a data file by the BIDS inheritance principle (simplified): sidecars with a subset of its entities
 * and the same suffix, from the dataset root down to the file's folder, the more specific overriding.
 * Returns {meta, files} (files: the sidecars read, most specific last).
 */
export function sidecar(root, file) {
  const p = parseName(path.basename(file));
  const ents = p.entities;
  const dirs = [];
  for (let d = path.dirname(file); ; d = path.dirname(d)) {
    dirs.unshift(d);
    if (path.resolve(d) === path.resolve(root) || d === path.dirname(d)) break;
  }
  const meta = {};
  const files = [];
  for (const d of dirs) {
    let names = [];
    try {
      names = fs.readdirSync(d).filter((n) => n.endsWith('.json'));
    } catch {
      continue;
    }
    const candidates = [];
    for (const n of names) {
      const q = /^(.*)\.json$/.exec(n)[1].split('_');
      const suffix = q.pop();
      if (suffix !== p.suffix) continue;
      const kv = q.map((x) => /^([a-zA-Z]+)-([a-zA-Z0-9]+)$/.exec(x));
      if (kv.some((x) => !x)) continue;
      if (kv.every(([, k, v]) => entity(ents, k) === v)) candidates.push({ n, count: kv.length });
    }
    candidates.sort((a, b) => a.count - b.count);
    for (const c of candidates) {
      Object.assign(meta, readJson(path.join(d, c.n)));
      files.push(path.join(d, c.n));
    }
  }
  return { meta, files };
}

function echoTime(te, what, where) {
  if (typeof te !== 'number' || !Number.isFinite(te) || te <= 0) {
    throw new CohortError(`${what}: EchoTime ${JSON.stringify(te)} ${where} is not an echo time in seconds (> 0)`);
  }
  if (te > MAX_TE_SECONDS) {
    throw new CohortError(`${what}: EchoTime ${te} ${where} is implausible: BIDS gives it in seconds (20 ms = 0.02), not milliseconds`);
  }
  return te;
}

function fieldStrength(b0, what, where) {
  if (typeof b0 !== 'number' || !Number.isFinite(b0) || b0 <= 0) {
    throw new CohortError(`${what}: MagneticFieldStrength ${JSON.stringify(b0)} ${where} is not a field strength in tesla (> 0)`);
  }
  return b0;
}

/** Lists sub-*[/ses-*]/anat folders: [{dir, subject, session}]. */
function anatFolders(root, kind = 'anat') {
  const out = [];
  for (const s of fs.readdirSync(root, { withFileTypes: true })) {
    if (!s.isDirectory() || !/^sub-/.test(s.name)) continue;
    const sub = path.join(root, s.name);
    const anat = path.join(sub, kind);
    if (fs.existsSync(anat)) out.push({ dir: anat, rel: path.join(s.name, kind) });
    for (const t of fs.readdirSync(sub, { withFileTypes: true })) {
      if (!t.isDirectory() || !/^ses-/.test(t.name)) continue;
      const a = path.join(sub, t.name, kind);
      if (fs.existsSync(a)) out.push({ dir: a, rel: path.join(s.name, t.name, kind) });
    }
  }
  return out;
}

/**
 * The field-map runs of a BIDS tree's fmap/ folders (a total field <prefix>_fieldmap in its Units, or a phase difference
 * <prefix>_phasediff with EchoTime1/EchoTime2), each through the pipeline: records of kind 'phase' with input
 * 'fieldmap' (totalFieldUnits, b0) or 'phasediff' (te1, te2, b0), the map in phase[0], its magnitude in magnitude[0].
 */
function fieldMapRecords(root, config, want) {
  const records = [];
  for (const { dir, rel } of anatFolders(root, 'fmap')) {
    const files = new Map(); // stem → {fieldmap, phasediff, magnitude, magnitude1}
    const masks = [];
    for (const name of fs.readdirSync(dir).sort()) {
      if (!NIFTI.test(name)) continue;
      const p = parseName(name);
      if (!p) continue;
      const file = path.join(dir, name);
      if (p.suffix === 'mask') masks.push({ file, stem: stemOf(p.entities, ['desc']), desc: entity(p.entities, 'desc') });
      else if (['fieldmap', 'phasediff', 'magnitude', 'magnitude1'].includes(p.suffix)) {
        const stem = stemOf(p.entities);
        if (!files.has(stem)) files.set(stem, { entities: p.entities });
        files.get(stem)[p.suffix] = file;
      }
    }
    for (const [stem, f] of files) {
      if (!f.fieldmap && !f.phasediff) continue; // a magnitude alone: nothing to invert
      const subject = /^sub-([a-zA-Z0-9]+)/.exec(stem)[1];
      if (want && !want.has(subject)) continue;
      const what = path.join(rel, stem);
      if (f.fieldmap && f.phasediff) throw new CohortError(`${what}: both a field map and a phase difference are given: keep one per run (or name them with acq-<label>)`);
      if (config.phase_pipeline == null) {
        throw new CohortError(`${what}: a field map goes through the pipeline (background removal, then the inversion): set config phase_pipeline (a method, e.g. phase_pipeline=rts)`);
      }
      const map = f.fieldmap ?? f.phasediff;
      const { meta, files: jsons } = sidecar(root, map);
      const where = jsons.length ? `in ${jsons.at(-1)}` : `(no ${path.basename(map).replace(NIFTI, '.json')} found)`;
      const rec = { path: path.join(rel, stem), subject, session: entity(f.entities, 'ses') ?? null, kind: 'phase', source: what, pipeline: true, phase: [map] };
      rec.mask = findMask(masks, stem, what, dir, true);
      const mag = f.fieldmap ? f.magnitude : f.magnitude1;
      if (mag) rec.magnitude = [mag];
      if (!rec.mask && !rec.magnitude) {
        throw new CohortError(`${what}: no mask and no magnitude in ${dir}: the pipeline makes the brain mask from the magnitude: add ${stem}_${f.fieldmap ? 'magnitude' : 'magnitude1'}.nii.gz, or ${stem}_desc-brain_mask.nii.gz`);
      }
      rec.input = f.fieldmap ? 'fieldmap' : 'phasediff';
      fieldMapInput(rec, meta, config, what, {
        where: () => where,
        fix: {
          Units: 'add "Units": "Hz" (or "rad/s", "ppm") to its JSON sidecar',
          EchoTime: 'add "EchoTime1" and "EchoTime2" (seconds) to its JSON sidecar',
          MagneticFieldStrength: 'add it (tesla), or set config b0=<tesla>',
        },
      });
      if (config.phase_units !== undefined && rec.input === 'phasediff') rec.phaseUnits = config.phase_units;
      records.push(rec);
    }
  }
  return records;
}

/**
 * Completes a field-map run's record from its metadata, for a BIDS fmap/ map and a manifest row alike: a total field
 * (rec.input 'fieldmap') gets its units (totalFieldUnits, no TE), a phase difference (rec.input 'phasediff') its two echo
 * times (te1, te2, te = [ΔTE]); both get B0 (MagneticFieldStrength, else config b0).
 * Precondition: meta holds the keys of a BIDS sidecar (Units, EchoTime1, EchoTime2, MagneticFieldStrength), numbers as
 * numbers; src.where(key) says where that key's value was looked for, src.fix[Units | EchoTime | MagneticFieldStrength]
 * how to give a missing one.
 */
function fieldMapInput(rec, meta, config, what, src) {
  if (rec.input === 'fieldmap') {
    if (meta.Units === undefined) throw new CohortError(`${what}: the field map has no "Units" ${src.where('Units')}: ${src.fix.Units}`);
    const u = FIELD_UNITS[String(meta.Units).toLowerCase()];
    if (!u) throw new CohortError(`${what}: Units ${JSON.stringify(meta.Units)} ${src.where('Units')} is not one of Hz, rad/s, ppm`);
    rec.totalFieldUnits = u;
    rec.te = null;
    if (switchOf(config, 'keep_intermediates')) {
      throw new CohortError(`${what}: keep_intermediates keeps the echo fit's stages, and a total field map has none (no echo fit runs): set keep_intermediates=false for a cohort with field maps`);
    }
  } else {
    for (const k of ['EchoTime1', 'EchoTime2']) {
      if (meta[k] === undefined) throw new CohortError(`${what}: the phase difference has no "${k}" ${src.where(k)}: ${src.fix.EchoTime}`);
    }
    rec.te1 = echoTime(meta.EchoTime1, what, src.where('EchoTime1'));
    rec.te2 = echoTime(meta.EchoTime2, what, src.where('EchoTime2'));
    if (!(rec.te2 > rec.te1)) throw new CohortError(`${what}: EchoTime2 (${rec.te2}) must be later than EchoTime1 (${rec.te1}) ${src.where('EchoTime2')}: the phase difference is φ(TE2) − φ(TE1)`);
    rec.te = [+(rec.te2 - rec.te1).toPrecision(12)];
  }
  const b0 = meta.MagneticFieldStrength ?? config.b0;
  if (b0 === undefined) throw new CohortError(`${what}: no MagneticFieldStrength ${src.where('MagneticFieldStrength')}: ${src.fix.MagneticFieldStrength}`);
  rec.b0 = fieldStrength(b0, what, meta.MagneticFieldStrength !== undefined ? src.where('MagneticFieldStrength') : 'in the config');
}

/** The mask of a run (its stem, without echo/part/desc): prefer desc-brain; several others are ambiguous. */
function findMask(masks, stem, what, dir, optional = false) {
  const mine = masks.filter((m) => m.stem === stem);
  if (!mine.length && optional) return null;
  if (!mine.length) {
    throw new CohortError(`${what}: no mask in ${dir}: add ${stem}_desc-brain_mask.nii.gz (nonzero inside the brain)`);
  }
  const brain = mine.filter((m) => m.desc === 'brain');
  if (brain.length === 1) return brain[0].file;
  if (mine.length === 1) return mine[0].file;
  throw new CohortError(`${what}: several masks in ${dir} (${mine.map((m) => path.basename(m.file)).join(', ')}) and none is desc-brain: name the one to use ${stem}_desc-brain_mask.nii.gz`);
}

/** The records of a BIDS tree. */
export function fromBids(root, config) {
  if (!fs.existsSync(root) || !fs.statSync(root).isDirectory()) throw new CohortError(`the BIDS folder ${root} does not exist (config bids=...)`);
  const folders = anatFolders(root);
  const want = config.participant_label?.length ? new Set(config.participant_label.map((s) => String(s).replace(/^sub-/, ''))) : null;
  const records = fieldMapRecords(root, config, want);
  const found = new Set(records.map((r) => r.subject));
  for (const { dir, rel } of folders) {
    const fields = [];
    const echoes = new Map(); // stem → {phase: Map(echo → file), mag: Map}
    const masks = [];
    for (const name of fs.readdirSync(dir).sort()) {
      if (!NIFTI.test(name)) continue;
      const p = parseName(name);
      if (!p) continue;
      const file = path.join(dir, name);
      if (p.suffix === 'localfield') fields.push({ file, stem: stemOf(p.entities, ['desc']), entities: p.entities });
      else if (p.suffix === 'mask') masks.push({ file, stem: stemOf(p.entities, ['desc', 'part', 'echo']), desc: entity(p.entities, 'desc') });
      else if (p.suffix === 'MEGRE') {
        const part = entity(p.entities, 'part');
        if (part !== 'phase' && part !== 'mag') continue;
        const stem = stemOf(p.entities, ['echo', 'part']);
        if (!echoes.has(stem)) echoes.set(stem, { phase: new Map(), mag: new Map(), entities: p.entities.filter(([k]) => k !== 'echo' && k !== 'part') });
        const echo = entity(p.entities, 'echo') ?? '1';
        if (!/^\d+$/.test(echo)) throw new CohortError(`${file}: the echo entity must be a number (echo-1, echo-2, ...)`);
        const set = echoes.get(stem)[part];
        if (set.has(Number(echo))) throw new CohortError(`${dir}: echo ${echo} of ${stem} (${part}) is given twice (${path.basename(set.get(Number(echo)))}, ${name})`);
        set.set(Number(echo), file);
      }
    }
    const stems = new Set([...fields.map((x) => x.stem), ...echoes.keys()]);
    for (const stem of stems) {
      const field = fields.filter((x) => x.stem === stem);
      const series = echoes.get(stem);
      const subject = /^sub-([a-zA-Z0-9]+)/.exec(stem)[1];
      if (want && !want.has(subject)) continue;
      const what = `${path.join(rel, stem)}`;
      let kind = field.length ? 'field' : 'phase';
      if (field.length && series?.phase.size) {
        if (config.input === 'field' || config.input === 'phase') kind = config.input;
        else {
          throw new CohortError(`${what}: both a local field (${path.basename(field[0].file)}) and a wrapped phase are given: set config input=field or input=phase`);
        }
      }
      if (field.length > 1) throw new CohortError(`${what}: several local field maps (${field.map((x) => path.basename(x.file)).join(', ')}): give one per run`);
      if (kind === 'phase' && !series?.phase.size) continue; // only magnitudes: nothing to invert
      const ents = kind === 'field' ? field[0].entities.filter(([k]) => k !== 'desc') : series.entities;
      const session = entity(ents, 'ses') ?? null;
      const rec = { path: path.join(rel, stemOf(ents)), subject, session, kind, source: what };
      const piped = kind === 'phase' && config.phase_pipeline != null;
      rec.mask = findMask(masks, stem, what, dir, piped);
      if (piped) rec.pipeline = true;
      if (kind === 'field') {
        rec.field = field[0].file;
        const { meta, files } = sidecar(root, field[0].file);
        const where = files.length ? `in ${files.at(-1)}` : '';
        const u = meta.Units === undefined ? config.units ?? 'ppm' : String(meta.Units).toLowerCase();
        if (!FIELD_UNITS[u]) throw new CohortError(`${what}: Units ${JSON.stringify(meta.Units)} ${where} is not one of ppm, Hz, rad/s`);
        rec.units = FIELD_UNITS[u];
        if (rec.units !== 'ppm') {
          const b0 = meta.MagneticFieldStrength ?? config.b0;
          if (b0 === undefined) {
            throw new CohortError(`${what}: the local field is in ${meta.Units ?? rec.units} but no MagneticFieldStrength is given (JSON sidecar ${path.basename(field[0].file).replace(NIFTI, '.json')}, or config b0=<tesla>)`);
          }
          rec.b0 = fieldStrength(b0, what, where);
        }
      } else {
        const numbers = [...series.phase.keys()].sort((a, b) => a - b);
        rec.phase = numbers.map((n) => series.phase.get(n));
        if (series.mag.size) {
          const missing = numbers.filter((n) => !series.mag.has(n));
          const extra = [...series.mag.keys()].filter((n) => !series.phase.has(n));
          if (missing.length || extra.length) {
            throw new CohortError(`${what}: the magnitude must have every echo of the phase (phase echoes ${numbers.join(', ')}; magnitude echoes ${[...series.mag.keys()].sort((a, b) => a - b).join(', ')})`);
          }
          rec.magnitude = numbers.map((n) => series.mag.get(n));
        }
        if (rec.mask === null && !rec.magnitude) {
          throw new CohortError(`${what}: no mask and no magnitude in ${dir}: the pipeline makes the brain mask from the magnitude: add ${stem}_echo-<n>_part-mag_MEGRE.nii.gz for every echo, or ${stem}_desc-brain_mask.nii.gz`);
        }
        rec.te = [];
        let b0;
        for (const file of rec.phase) {
          const { meta, files } = sidecar(root, file);
          const json = path.basename(file).replace(NIFTI, '.json');
          if (meta.EchoTime === undefined) {
            throw new CohortError(`${what}: the phase ${path.basename(file)} has no EchoTime in a JSON sidecar (${files.length ? files.map((f) => path.basename(f)).join(', ') : `no ${json} found`}): add "EchoTime" in seconds to ${json}`);
          }
          const where = `in ${files.at(-1)}`;
          const tes = Array.isArray(meta.EchoTime) ? meta.EchoTime : [meta.EchoTime];
          rec.te.push(...tes.map((t) => echoTime(t, what, where)));
          if (meta.MagneticFieldStrength !== undefined) {
            const v = fieldStrength(meta.MagneticFieldStrength, what, where);
            if (b0 !== undefined && b0 !== v) throw new CohortError(`${what}: the echoes' sidecars give different MagneticFieldStrength (${b0}, ${v})`);
            b0 = v;
          }
        }
        if (b0 === undefined && config.b0 === undefined) {
          throw new CohortError(`${what}: no MagneticFieldStrength in the phase's JSON sidecar (${path.basename(rec.phase[0]).replace(NIFTI, '.json')}): add it (tesla), or set config b0=<tesla>`);
        }
        rec.b0 = b0 ?? fieldStrength(config.b0, what, 'in the config');
        if (config.phase_units !== undefined) rec.phaseUnits = config.phase_units;
      }
      found.add(subject);
      records.push(rec);
    }
  }
  if (!records.length) {
    const subs = fs.readdirSync(root).filter((n) => /^sub-/.test(n));
    const filter = want ? ` for participant_label ${[...want].join(', ')}` : '';
    throw new CohortError(
      `no subject to run in the BIDS folder ${root}${filter}: ${subs.length ? `its ${subs.length} sub-* folder(s) hold` : 'it holds no sub-* folder and'} no ` +
        'sub-<label>/[ses-<label>/]anat/ input: a local field <prefix>_localfield.nii.gz, or a wrapped phase ' +
        '<prefix>_echo-<n>_part-phase_MEGRE.nii.gz with JSON sidecars (EchoTime), each with a <prefix>_desc-brain_mask.nii.gz',
    );
  }
  if (want) {
    const missing = [...want].filter((s) => !found.has(s));
    if (missing.length) throw new CohortError(`participant_label: no input for sub-${missing.join(', sub-')} in ${root}`);
  }
  return records;
}

/** Splits a TSV line (no quoting in BIDS TSV). */
const cells = (line) => line.split('\t').map((c) => c.trim());

/** The records of a TSV manifest. */
export function fromManifest(file, config) {
  let text;
  try {
    text = fs.readFileSync(file, 'utf8');
  } catch (e) {
    throw new CohortError(`the manifest ${file} could not be read: ${e.code === 'ENOENT' ? 'no such file' : e.message} (config manifest=...)`);
  }
  const base = path.dirname(path.resolve(file));
  const lines = text.split(/\r?\n/).map((l, i) => ({ l, n: i + 1 })).filter(({ l }) => l.trim() !== '' && !l.startsWith('#'));
  if (!lines.length) throw new CohortError(`the manifest ${file} is empty: expected a header row (subject, mask, field or phase, ...) and one row per run`);
  const header = cells(lines[0].l);
  const unknown = header.filter((h) => !MANIFEST_COLUMNS.includes(h));
  if (unknown.length) throw new CohortError(`the manifest ${file} has unknown column(s) ${unknown.join(', ')} (columns: ${MANIFEST_COLUMNS.join(', ')}; tab-separated)`);
  for (const need of ['subject', 'mask']) if (!header.includes(need)) throw new CohortError(`the manifest ${file} has no '${need}' column (tab-separated header row)`);
  if (!Object.keys(MANIFEST_INPUTS).some((k) => header.includes(k))) throw new CohortError(`the manifest ${file} needs a 'field', 'phase', 'fieldmap' or 'phasediff' column`);
  const records = [];
  const seen = new Map();
  for (const { l, n } of lines.slice(1)) {
    const c = cells(l);
    const at = `the manifest ${path.basename(file)} line ${n}`;
    if (c.length !== header.length) throw new CohortError(`${at} has ${c.length} cell(s), the header ${header.length} (tab-separated; an empty cell is two tabs)`);
    const row = Object.fromEntries(header.map((h, i) => [h, c[i]]).filter(([, v]) => v !== '' && v !== 'n/a'));
    const subject = row.subject?.replace(/^sub-/, '');
    const session = row.session?.replace(/^ses-/, '');
    if (!subject || !LABEL.test(subject)) throw new CohortError(`${at}: subject '${row.subject ?? ''}' is not a BIDS label (letters and digits, e.g. 01)`);
    if (session !== undefined && !LABEL.test(session)) throw new CohortError(`${at}: session '${row.session}' is not a BIDS label (letters and digits)`);
    const id = `sub-${subject}${session ? `_ses-${session}` : ''}`;
    if (seen.has(id)) throw new CohortError(`${at}: ${id} is also on line ${seen.get(id)}: one row per subject and session`);
    seen.set(id, n);
    const what = `${at} (${id})`;
    const file_ = (col) => {
      if (row[col] === undefined) return undefined;
      const p = path.resolve(base, row[col]);
      if (!fs.existsSync(p)) throw new CohortError(`${what}: the ${col} ${row[col]} does not exist (${p}); paths are relative to the manifest's folder`);
      if (!NIFTI.test(p)) throw new CohortError(`${what}: the ${col} ${row[col]} is not a .nii or .nii.gz file`);
      return p;
    };
    const given = Object.keys(MANIFEST_INPUTS).filter((k) => row[k] !== undefined);
    if (given.length !== 1) {
      const inputs = Object.values(MANIFEST_INPUTS);
      throw new CohortError(`${what}: give exactly one of ${inputs.slice(0, -1).join(', ')} or ${inputs.at(-1)}${given.length ? `; this row gives ${given.join(' and ')}` : '; this row gives none'}`);
    }
    if (row.fieldmap !== undefined || row.phasediff !== undefined) {
      records.push(manifestFieldMap(row, config, { subject, session, id, what, file_ }));
      continue;
    }
    for (const col of ['te1', 'te2']) if (row[col] !== undefined) throw new CohortError(`${what}: ${col} is for a phasediff row (the phase difference's echo times)`);
    const piped = row.phase !== undefined && (row.method !== undefined || config.phase_pipeline != null);
    if (row.mask === undefined && !(piped && row.magnitude !== undefined)) {
      throw new CohortError(`${what}: the mask is empty: every run needs a brain mask${piped ? ' (the pipeline makes one from the magnitude: give the magnitude column)' : ''}`);
    }
    if (row.method !== undefined && row.field !== undefined) {
      throw new CohortError(`${what}: method runs the pipeline (tessera-qsm pipeline) on a phase row; this row gives a local field (its network: the model column)`);
    }
    const rel = path.join(`sub-${subject}`, ...(session ? [`ses-${session}`] : []), 'anat', id);
    const rec = { path: rel, subject, session: session ?? null, kind: row.field !== undefined ? 'field' : 'phase', source: what, mask: row.mask === undefined ? null : file_('mask') };
    if (piped) rec.pipeline = true;
    if (row.method !== undefined) {
      if (row.model !== undefined) throw new CohortError(`${what}: give the pipeline's inversion as method (classical) or model (a field network), not both`);
      rec.method = row.method;
    }
    if (row.model !== undefined) rec.model = row.model;
    if (row.b0 !== undefined) rec.b0 = fieldStrength(Number(row.b0), what, "in the b0 column (as MagneticFieldStrength)");
    if (rec.kind === 'field') {
      for (const col of ['te', 'magnitude', 'phase_units']) if (row[col] !== undefined) throw new CohortError(`${what}: ${col} is for a phase row, this row gives a field`);
      rec.field = file_('field');
      const u = (row.units ?? config.units ?? 'ppm').toLowerCase();
      if (!FIELD_UNITS[u]) throw new CohortError(`${what}: units '${row.units}' is not one of ppm, hz, rad/s`);
      rec.units = FIELD_UNITS[u];
      if (rec.units !== 'ppm' && rec.b0 === undefined) {
        if (config.b0 === undefined) throw new CohortError(`${what}: a field in ${rec.units} needs b0 (tesla) in its row or config b0=<tesla>`);
        rec.b0 = fieldStrength(config.b0, what, 'in the config');
      }
    } else {
      if (row.units !== undefined) throw new CohortError(`${what}: units is for a field row; give the phase's units in phase_units (rad, deg, scanner)`);
      rec.phase = [file_('phase')];
      if (row.magnitude !== undefined) rec.magnitude = [file_('magnitude')];
      if (row.te !== undefined) {
        rec.te = row.te.split(',').map((t) => echoTime(t.trim() === '' ? NaN : Number(t), what, 'in the te column'));
      } else {
        // The JSON sidecar next to the phase (same name, .json).
        const json = rec.phase[0].replace(NIFTI, '.json');
        const meta = fs.existsSync(json) ? readJson(json) : {};
        if (meta.EchoTime === undefined) {
          throw new CohortError(`${what}: a phase row needs te (echo times in seconds, comma-separated) or EchoTime in the JSON sidecar ${json}${fs.existsSync(json) ? ' (it has none)' : ' (not found)'}`);
        }
        rec.te = (Array.isArray(meta.EchoTime) ? meta.EchoTime : [meta.EchoTime]).map((t) => echoTime(t, what, `in ${json}`));
        if (rec.b0 === undefined && meta.MagneticFieldStrength !== undefined) rec.b0 = fieldStrength(meta.MagneticFieldStrength, what, `in ${json}`);
      }
      if (rec.b0 === undefined) {
        if (config.b0 === undefined) throw new CohortError(`${what}: no field strength: give b0 (tesla) in its row, MagneticFieldStrength in the phase's sidecar, or config b0=<tesla>`);
        rec.b0 = fieldStrength(config.b0, what, 'in the config');
      }
      const pu = row.phase_units ?? config.phase_units;
      if (pu !== undefined) {
        if (!PHASE_UNITS.includes(pu)) throw new CohortError(`${what}: phase_units '${pu}' is not one of ${PHASE_UNITS.join(', ')}`);
        rec.phaseUnits = pu;
      }
    }
    records.push(rec);
  }
  if (!records.length) throw new CohortError(`the manifest ${file} has a header but no row: one row per subject (and session)`);
  return records;
}

/**
 * A manifest row that names a scanner's field map: a total field (fieldmap, its units) or a phase difference (phasediff,
 * te1 and te2), through the pipeline as a BIDS fmap/ map goes (fieldMapInput); the columns units, te1, te2 and b0 override
 * the map's JSON sidecar (same name, .json). Output in sub-<label>/[ses-<label>/]fmap/, as for a BIDS map.
 * Precondition: the row gives exactly one input, fieldmap or phasediff; file_(col) resolves and checks a path column.
 */
function manifestFieldMap(row, config, { subject, session, id, what, file_ }) {
  const kind = row.fieldmap !== undefined ? 'fieldmap' : 'phasediff';
  const words = kind === 'fieldmap' ? 'a total field map' : 'a phase difference';
  const own = kind === 'fieldmap' ? ['units', 'b0'] : ['te1', 'te2', 'b0', 'phase_units'];
  for (const col of ['te', 'units', 'te1', 'te2', 'phase_units']) {
    if (row[col] !== undefined && !own.includes(col)) throw new CohortError(`${what}: ${col} is not for ${words} (its columns: ${own.join(', ')})`);
  }
  if (row.model !== undefined && row.method !== undefined) throw new CohortError(`${what}: give the pipeline's inversion as method (classical) or model (a field network), not both`);
  if (row.method === undefined && row.model === undefined && config.phase_pipeline == null) {
    throw new CohortError(`${what}: a field map goes through the pipeline (background removal, then the inversion): set config phase_pipeline (a method, e.g. phase_pipeline=rts), or give the row a method`);
  }
  const map = file_(kind);
  const rel = path.join(`sub-${subject}`, ...(session ? [`ses-${session}`] : []), 'fmap', id);
  const rec = { path: rel, subject, session: session ?? null, kind: 'phase', source: what, pipeline: true, phase: [map], input: kind, mask: row.mask === undefined ? null : file_('mask') };
  if (row.magnitude !== undefined) rec.magnitude = [file_('magnitude')];
  if (!rec.mask && !rec.magnitude) throw new CohortError(`${what}: no mask and no magnitude: the pipeline makes the brain mask from the magnitude: give the magnitude column, or the mask`);
  if (row.method !== undefined) rec.method = row.method;
  if (row.model !== undefined) rec.model = row.model;
  // The sidecar's keys, each column given in its place.
  const json = map.replace(NIFTI, '.json');
  const sidecarMeta = fs.existsSync(json) ? readJson(json) : {};
  const meta = { ...sidecarMeta };
  for (const [key, col] of Object.entries(FIELD_MAP_COLUMNS)) {
    if (row[col] !== undefined) meta[key] = key === 'Units' ? row[col] : Number(row[col]);
  }
  fieldMapInput(rec, meta, config, what, {
    where: (key) => {
      const col = FIELD_MAP_COLUMNS[key];
      if (row[col] !== undefined) return `in the ${col} column`;
      return sidecarMeta[key] !== undefined ? `in ${json}` : `(no ${col} column, and ${fs.existsSync(json) ? `no "${key}" in ${json}` : `no ${path.basename(json)} beside it`})`;
    },
    fix: {
      Units: 'give the units column (hz, rad/s or ppm)',
      EchoTime: 'give the te1 and te2 columns (seconds)',
      MagneticFieldStrength: 'give the b0 column (tesla), or set config b0=<tesla>',
    },
  });
  const pu = row.phase_units ?? config.phase_units;
  if (kind === 'phasediff' && pu !== undefined) {
    if (!PHASE_UNITS.includes(pu)) throw new CohortError(`${what}: phase_units '${pu}' is not one of ${PHASE_UNITS.join(', ')}`);
    rec.phaseUnits = pu;
  }
  return rec;
}

/** A value of a schema option ({name, min, max, minExclusive, integer, choices}), checked; returns it as the CLI takes it. */
function schemaValue(entry, value, what) {
  if (entry.choices?.length) {
    if (!entry.choices.includes(String(value))) throw new CohortError(`${what}: ${entry.name} '${value}' is not one of ${entry.choices.join(', ')}`);
    return String(value);
  }
  const v = typeof value === 'number' ? value : typeof value === 'string' && value.trim() !== '' ? Number(value) : NaN;
  const range = `${entry.minExclusive ? '(' : '['}${entry.min}, ${entry.max}]`;
  if (!Number.isFinite(v) || v < entry.min || v > entry.max || (entry.minExclusive && v === entry.min) || (entry.integer && !Number.isInteger(v))) {
    throw new CohortError(`${what}: ${entry.name} ${JSON.stringify(value)} is not ${entry.integer ? 'a whole number' : 'a number'} in ${range}${entry.unit ? ` ${entry.unit}` : ''}`);
  }
  return v;
}

/** {a: {b: 1}, 'c.d': 2} → {'a.b': 1, 'c.d': 2}. */
function flatten(o, prefix = '') {
  const out = {};
  for (const [k, v] of Object.entries(o ?? {})) {
    if (v !== null && typeof v === 'object' && !Array.isArray(v)) Object.assign(out, flatten(v, `${prefix}${k}.`));
    else out[`${prefix}${k}`] = v;
  }
  return out;
}

/**
 * config.phase_pipeline as {method, model, params: {name: value}, options: {name: value}} (flat names, as the CLI's
 * --param / --option take them), checked against the schema; null when it is not set. A string is a method.
 */
export function pipelineConfig(config, schema) {
  let p = config.phase_pipeline;
  if (p === undefined || p === null) return null;
  const what = 'config phase_pipeline';
  if (typeof p === 'string') p = { method: p };
  if (typeof p !== 'object' || Array.isArray(p)) throw new CohortError(`${what} must be a method name (rts) or {method: rts, params: {...}, options: {...}} or {model: <field network>}`);
  const unknown = Object.keys(p).filter((k) => !['method', 'model', 'params', 'options', 'also'].includes(k));
  if (unknown.length) throw new CohortError(`${what}: unknown key(s) ${unknown.join(', ')} (keys: method, model, params, options, also)`);
  if ((p.method == null) === (p.model == null)) throw new CohortError(`${what}: give one inversion of the local field: method (classical: ${methodNames(schema).join(', ')}) or model (a field network)`);
  if (p.params != null && (typeof p.params !== 'object' || Array.isArray(p.params))) throw new CohortError(`${what}.params must be a mapping (name: value)`);
  if (p.options != null && (typeof p.options !== 'object' || Array.isArray(p.options))) throw new CohortError(`${what}.options must be a mapping (name: value), e.g. {background: pdf, vsharp.maxRadius: 12}`);
  if (p.params != null && p.method == null) throw new CohortError(`${what}.params are a classical method's parameters: they need method`);
  const byName = new Map(schema.map((e) => [e.name, e]));
  const options = {};
  for (const [k, v] of Object.entries(flatten(p.options))) {
    const entry = byName.get(k);
    if (!entry || !PIPELINE_OPTION.test(k)) {
      throw new CohortError(`${what}.options: unknown option '${k}' (options: ${schema.filter((e) => PIPELINE_OPTION.test(e.name)).map((e) => e.name).join(', ')})`);
    }
    options[k] = schemaValue(entry, v, `${what}.options`);
  }
  const out = { options, params: {} };
  // also: the optional outputs (the schema's also choices: swi, r2star), a list or a comma-separated string.
  if (p.also != null) {
    const choices = byName.get('also')?.choices ?? [];
    const list = (Array.isArray(p.also) ? p.also : String(p.also).split(',')).map((x) => String(x).trim()).filter(Boolean);
    for (const a of list) if (!choices.includes(a)) throw new CohortError(`${what}.also: unknown output '${a}' (outputs: ${choices.join(', ')})`);
    if (list.length) out.also = [...new Set(list)];
  }
  if (p.model != null) out.model = String(p.model);
  else {
    out.method = checkMethod(String(p.method), schema, what);
    out.params = methodParams(out.method, p.params, schema, `${what}.params`);
  }
  return out;
}

const methodNames = (schema) => schema.find((e) => e.name === 'method')?.choices ?? [];

function checkMethod(method, schema, what) {
  const names = methodNames(schema);
  if (!names.includes(method)) throw new CohortError(`${what}: unknown method '${method}' (methods: ${names.join(', ')}; tessera-qsm methods)`);
  return method;
}

function methodParams(method, params, schema, what) {
  const out = {};
  for (const [k, v] of Object.entries(flatten(params))) {
    const entry = schema.find((e) => e.name === `${method}.${k}`);
    if (!entry) {
      const known = schema.filter((e) => e.name.startsWith(`${method}.`)).map((e) => e.name.slice(method.length + 1));
      throw new CohortError(`${what}: ${method} has no parameter '${k}' (its parameters: ${known.join(', ') || 'none'})`);
    }
    out[k] = schemaValue(entry, v, what);
  }
  return out;
}

/**
 * Records + the networks they run, checked against the registry: each record gets its model, output suffix
 * (Chimap, or localfield for iQFM) and the weights it needs ([{file, source, bytes, sha256}]).
 * config.weights: {model: source | [sources] | {source, sha256} | [{source, sha256}]} overrides the registry's URLs.
 * A pipeline record (rec.pipeline) gets rec.pipeline = {method, params, options} or {model, options}: a manifest row's
 * method or model, else config phase_pipeline's (its params only for its own method); its model, a field network,
 * joins the networks.
 */
export function assignModels(records, registry, config, packageRoot, schema = []) {
  const byId = new Map(registry.map((m) => [m.id, m]));
  const ids = registry.map((m) => m.id).join(', ');
  const models = {};
  const fieldNets = () => registry.filter((x) => !x.inputs.includes('phase')).map((x) => x.id).join(', ');
  const piped = records.some((r) => r.pipeline);
  const base = piped ? pipelineConfig(config, schema) ?? { options: {}, params: {} } : null;
  // The background removal is always named (the schema's default when the config names none): the Snakefile names the
  // local field's derivative after it.
  if (base) base.options.background ??= schema.find((e) => e.name === 'background').default;
  const addModel = (id, m) => {
    if (models[id]) return;
    let given = config.weights?.[id];
    if (given !== undefined && !Array.isArray(given)) given = [given];
    if (given !== undefined && given.length !== m.weights.length) {
      throw new CohortError(`config weights.${id}: ${m.name} needs ${m.weights.length} weights file(s) (${m.weights.map((w) => w.file).join(', ')}), got ${given.length}`);
    }
    models[id] = {
      id, name: m.name, quantity: m.quantity, tileable: m.tileable,
      weights: m.weights.map((w, i) => {
        const g = given?.[i];
        const source = typeof g === 'object' && g !== null ? g.source : g;
        const pinned = typeof g === 'object' && g !== null ? g.sha256 : undefined;
        if (given && (typeof source !== 'string' || !source)) throw new CohortError(`config weights.${id}: entry ${i + 1} has no source (a file or URL)`);
        if (pinned !== undefined && !/^[0-9a-fA-F]{64}$/.test(pinned)) throw new CohortError(`config weights.${id}: sha256 '${pinned}' is not 64 hex digits`);
        const local = source && !/^[a-z]+:\/\//i.test(source) ? path.resolve(source) : undefined;
        if (local && !fs.existsSync(local)) throw new CohortError(`config weights.${id}: ${source} does not exist (${local})`);
        const fallback = w.bundled ? path.join(packageRoot, w.url) : w.url;
        return { file: w.file, source: local ?? source ?? fallback, bytes: w.bytes || 0, sha256: (pinned ?? w.sha256 ?? '').toLowerCase() };
      }),
    };
  };
  for (const rec of records) {
    if (rec.pipeline) {
      const p = { options: base.options, ...(base.also && { also: base.also }) };
      if (rec.method !== undefined) {
        p.method = checkMethod(rec.method, schema, `${rec.source}: method`);
        p.params = p.method === base.method ? base.params : {};
      } else if (rec.model !== undefined || base.model !== undefined) {
        p.model = rec.model ?? base.model;
      } else {
        p.method = base.method;
        p.params = base.params;
      }
      delete rec.method;
      delete rec.model;
      if (p.model !== undefined) {
        const m = byId.get(p.model);
        if (!m) throw new CohortError(`${rec.source}: unknown network '${p.model}' (networks: ${ids})`);
        if (m.inputs.includes('phase')) {
          throw new CohortError(`${rec.source}: ${p.model} takes a wrapped phase, but this run goes through the pipeline (config phase_pipeline / method column), which inverts the local field: give a field network (${fieldNets()}) or a method`);
        }
        rec.model = p.model;
        addModel(p.model, m);
      }
      if (p.also && !rec.magnitude) {
        throw new CohortError(`${rec.source}: config phase_pipeline.also (${p.also.join(', ')}) needs the magnitude of every echo (SWI weights it, R2* fits it): add its _part-mag echoes, or leave also out`);
      }
      rec.pipeline = p;
      rec.suffix = 'Chimap';
      continue;
    }
    const id = rec.model ?? (rec.kind === 'field' ? config.field_model ?? 'xqsm' : config.phase_model ?? 'iqsm');
    const m = byId.get(id);
    if (!m) throw new CohortError(`${rec.source}: unknown network '${id}' (networks: ${ids})`);
    const phaseNet = m.inputs.includes('phase');
    if (phaseNet !== (rec.kind === 'phase')) {
      const other = registry.filter((x) => x.inputs.includes('phase') === (rec.kind === 'phase')).map((x) => x.id);
      throw new CohortError(`${rec.source}: ${id} takes ${phaseNet ? 'a wrapped phase' : 'a local field'}, this run gives ${rec.kind === 'phase' ? 'a wrapped phase' : 'a local field'} (networks for it: ${other.join(', ')}; config ${rec.kind}_model=...)`);
    }
    rec.model = id;
    rec.suffix = m.quantity === 'local-field' ? 'localfield' : 'Chimap';
    addModel(id, m);
  }
  return models;
}

/** Everything the Snakefile needs. config: the Snakefile's config (bids | manifest, ...). */
export async function discover(config) {
  if ((config.bids === undefined) === (config.manifest === undefined)) {
    throw new CohortError('give exactly one of config bids=<BIDS folder> or manifest=<subjects.tsv> (snakemake --config bids=/data/study)');
  }
  if (config.input !== undefined && !['field', 'phase'].includes(config.input)) throw new CohortError(`config input must be field or phase, got '${config.input}'`);
  const measureReach = switchOf(config, 'measure_reach');
  if (config.phase_units !== undefined && !PHASE_UNITS.includes(config.phase_units)) throw new CohortError(`config phase_units must be one of ${PHASE_UNITS.join(', ')}, got '${config.phase_units}'`);
  const records = config.bids !== undefined ? fromBids(path.resolve(config.bids), config) : fromManifest(path.resolve(config.manifest), config);
  const packageRoot = fileURLToPath(new URL('../../', import.meta.url));
  const { createTessera } = await import(pathToFileURL(path.join(packageRoot, 'bindings/js/index.js')).href);
  const tessera = await createTessera({ workers: 1 });
  let registry;
  let schema;
  try {
    registry = await tessera.registry();
    schema = await tessera.schema();
  } finally {
    await tessera.terminate();
  }
  // A phase_pipeline in the config is checked even when no run takes it (a typo is refused, not ignored).
  pipelineConfig(config, schema);
  const models = assignModels(records, registry, config, packageRoot, schema);
  const version = JSON.parse(fs.readFileSync(path.join(packageRoot, 'package.json'), 'utf8')).version;
  return { version, records, models, measureReach };
}

if (process.argv[1] && path.resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  let code = 0;
  try {
    const config = JSON.parse(process.argv[2] ?? '{}');
    process.stdout.write(`${JSON.stringify(await discover(config))}\n`);
  } catch (e) {
    process.stderr.write(`error: ${e instanceof CohortError ? e.message : e.stack}\n`);
    code = 1;
  }
  await new Promise((r) => process.stdout.write('', r));
  process.exit(code);
}

// A DICOM folder for the page's From phase workflow: converted in the page by dcm2niix compiled to wasm (npm
// @niivue/dcm2niix, in its own worker; nothing is uploaded), its NIfTI outputs sorted by their BIDS sidecars into the
// multi-echo phase and magnitude, with the echo times and B0 from the DICOM headers; or into a scanner's field map: a
// B0 map in Hz (GE, Philips) or a phase difference of two echoes with EchoTime1/EchoTime2 (Siemens), with its magnitude.
//
//   convertDicom(files, { signal, onProgress }) → [{ name, nii: File, sidecar }]  (dcm2niix's outputs)
//   sortSeries(outputs)                         → { phase, magnitude, te, b0, phaseSeries, magnitudeSeries, notes }
//   loadDicom(io, files, units)                 → the From phase input's parts (phase through the I/O worker's loader)
//   dropEntries(dataTransfer) / entryFiles(...) → the files of a dropped folder, with their paths
// Refusals are DicomErrors: a code and the message in the page's words (the problem and its fix).
import { readEchoesAsync } from '../bindings/js/index.js';

/** dcm2niix's exit codes (nii_dicom_batch.h) that are not success, in words. */
const EXIT_WORDS = {
  1: 'it failed',
  2: 'no DICOM image found',
  4: 'a corrupt DICOM file',
  5: 'the input folder is unreadable',
  8: 'some files could not be converted',
  10: 'incomplete volumes (slices missing)',
};
/** dcm2niix's exit code for "no valid DICOM files found". */
const EXIT_NO_DICOM = 2;

/** A DICOM folder refused: a code and the message in words. */
export class DicomError extends Error {
  /**
   * Precondition: code is NoFiles, NoDicom, ConverterFailed, NoPhase, SeveralPhase, SeveralMagnitude, EchoRepeated,
   * EchoesMismatch, TeMismatch, DimsMismatch, NotOneVolume or SeveralFieldMaps.
   * Precondition: message names the problem and the fix.
   * @param {string} code
   * @param {string} message
   */
  constructor(code, message) {
    super(message);
    this.name = 'DicomError';
    this.code = code;
  }
}

/** The folder the files were chosen from (the first part of their relative paths), or null. */
export function folderName(files) {
  const p = [...files].map((f) => f.webkitRelativePath || f._webkitRelativePath || '').find(Boolean);
  return p && p.includes('/') ? p.split('/')[0] : null;
}

/** "the DICOM folder 'name' (n files)" or "the n DICOM files", for messages. */
function where(files) {
  const name = folderName(files);
  const n = `${files.length} file${files.length === 1 ? '' : 's'}`;
  return name ? `the folder “${name}” (${n})` : `the ${n} given`;
}

/**
 * Converts DICOM files with dcm2niix (wasm, in a worker that is ended when the conversion ends or is cancelled);
 * returns its NIfTI outputs with their BIDS sidecars, or a DicomError.
 * Precondition: files are File objects (from a webkitdirectory input, or dropped with _webkitRelativePath).
 * Precondition: signal (optional) cancels: the worker is terminated and the promise rejects with an AbortError.
 * onProgress({ stage: 'starting' | 'converting' | 'reading', files }) says what runs (dcm2niix itself reports nothing
 * until it is done).
 * @param {File[]} files
 * @param {{signal?: AbortSignal, onProgress?: (p: {stage: string, files: number}) => void}} [opts]
 * @returns {Promise<{name: string, nii: File, sidecar: Record<string, unknown>}[]>}
 */
export async function convertDicom(files, { signal, onProgress = () => {} } = {}) {
  const list = [...files];
  if (!list.length) throw new DicomError('NoFiles', 'The DICOM folder holds no file: choose the folder that holds the scan’s DICOM files.');
  const progress = (stage) => onProgress({ stage, files: list.length });
  progress('starting');
  const { Dcm2niix } = await import('@niivue/dcm2niix');
  const converter = new Dcm2niix();
  const cancelled = () => new DOMException('The DICOM conversion was cancelled', 'AbortError');
  let stop;
  const aborted = new Promise((_, reject) => {
    stop = () => reject(cancelled());
    signal?.addEventListener('abort', stop, { once: true });
  });
  try {
    if (signal?.aborted) throw cancelled();
    await Promise.race([converter.init(), aborted]);
    progress('converting');
    // -z n: plain .nii (read at once, nothing to gunzip); -b y: the BIDS sidecars the outputs are sorted by.
    let out;
    try {
      out = await Promise.race([converter.input(list).z('n').b('y').f('series%s').run(), aborted]);
    } catch (e) {
      if (e?.name === 'AbortError') throw e;
      const code = Number(/exit code (\d+)/.exec(e?.message ?? '')?.[1]);
      if (code === EXIT_NO_DICOM) throw noDicom(list);
      throw new DicomError(
        'ConverterFailed',
        `dcm2niix could not convert ${where(list)}${Number.isFinite(code) ? ` (exit code ${code}: ${EXIT_WORDS[code] ?? 'see dcm2niix’s documentation'})` : `: ${e?.message ?? e}`}: ` +
          'choose a folder with the complete series of one scan (every slice of every echo), or convert it with dcm2niix outside the page and load the NIfTI files.',
      );
    }
    progress('reading');
    const byBase = new Map();
    for (const f of out) {
      const m = /^(.*)\.(nii|json)$/.exec(f.name);
      if (m) byBase.set(m[1], { ...byBase.get(m[1]), [m[2]]: f });
    }
    const outputs = [];
    for (const [name, { nii, json }] of byBase) {
      if (!nii) continue;
      outputs.push({ name, nii, sidecar: json ? JSON.parse(await json.text()) : {} });
    }
    if (!outputs.length) throw noDicom(list);
    if (signal?.aborted) throw cancelled(); // cancelled while the outputs were read
    return outputs;
  } finally {
    signal?.removeEventListener('abort', stop);
    converter.worker?.terminate();
  }
}

function noDicom(files) {
  return new DicomError(
    'NoDicom',
    `No DICOM image in ${where(files)}: dcm2niix found nothing it can convert. Choose the folder that holds the scan’s DICOM files ` +
      '(.dcm, .ima, or files without an extension), or load NIfTI files with the inputs above.',
  );
}

/** What a dcm2niix output is, from its sidecar's ImageType and dcm2niix's file-name suffixes. */
function partOf({ name, sidecar }) {
  const type = (Array.isArray(sidecar.ImageType) ? sidecar.ImageType : []).map((t) => String(t).toUpperCase());
  if (/_(real|imaginary)$/i.test(name) || type.includes('REAL') || type.includes('IMAGINARY')) return 'other';
  // A B0 map already in Hz (GE, Philips: dcm2niix marks it FIELDMAPHZ and writes Units "Hz").
  if (/_fieldmaphz$/i.test(name) || type.includes('FIELDMAPHZ') || sidecar.Units === 'Hz') return 'fieldmap';
  if (/_ph$/i.test(name) || type.includes('P') || type.includes('PHASE')) return 'phase';
  if (type.includes('M') || type.includes('MAGNITUDE')) return 'magnitude';
  // Philips' enhanced field map: its first echo is the magnitude, typed only by dcm2niix's BIDS guess.
  if (Array.isArray(sidecar.BidsGuess) && /_magnitude\d?$/.test(String(sidecar.BidsGuess[1] ?? ''))) return 'magnitude';
  return 'other';
}

/** A phase output that is a phase difference of two echoes (Siemens' field map): EchoTime1 < EchoTime2 in its sidecar. */
function phaseDifferenceTimes(o) {
  const [t1, t2] = [Number(o.sidecar.EchoTime1), Number(o.sidecar.EchoTime2)];
  return t1 > 0 && t2 > t1 ? { te1: t1, te2: t2 } : null;
}

/** A series in words: "series 3 “gre_phase”". */
const seriesWords = (s) => `series ${s.number}${s.description ? ` “${s.description}”` : ''}`;

/**
 * Sorts dcm2niix's outputs into the phase and magnitude of one multi-echo acquisition: phase = ImageType P or PHASE
 * (or dcm2niix's _ph suffix), magnitude = M or MAGNITUDE; real and imaginary parts and other images are left out (said
 * in notes). A series is a SeriesNumber; its echoes are ordered by EchoNumber, else EchoTime. With several magnitude
 * series, the one of the phase's protocol, then the one with the phase's echo count, is taken.
 * Precondition: outputs as convertDicom returns them (nii may be any value; only name and sidecar are read).
 * Returns { kind: 'phase', phase: outputs (echo order), magnitude: outputs (echo order; [] when there is none), te: s[] | null (null
 * when an echo has no EchoTime), b0: T | null, phaseSeries, magnitudeSeries (null or {number, description, echoes}),
 * notes: string[] }; or throws a DicomError (NoPhase, SeveralPhase, SeveralMagnitude, EchoRepeated, EchoesMismatch,
 * TeMismatch, SeveralFieldMaps).
 * Scanner field maps: a B0 map in Hz (ImageType FIELDMAPHZ or Units "Hz": GE, Philips incl. enhanced DICOM) gives
 * { kind: 'fieldmap', fieldMap: output, units: 'hz', magnitude: [its series' first magnitude echo] | [], te1, te2 (s or
 * null), b0, fieldSeries, magnitudeSeries, notes }; one phase output with EchoTime1 < EchoTime2 (Siemens' phase
 * difference) gives { kind: 'phasediff', phase: [output], magnitude, te1, te2, deltaTE (s), b0, phaseSeries,
 * magnitudeSeries, notes }.
 */
export function sortSeries(outputs) {
  const groups = { phase: new Map(), magnitude: new Map(), fieldmap: new Map() };
  const others = new Set();
  for (const o of outputs) {
    const part = partOf(o);
    const number = o.sidecar.SeriesNumber ?? '?';
    if (part === 'other') {
      others.add(`${seriesWords({ number, description: o.sidecar.SeriesDescription })} (${(o.sidecar.ImageType ?? []).join('\\') || 'no ImageType'})`);
      continue;
    }
    const g = groups[part];
    if (!g.has(number)) g.set(number, { number, description: o.sidecar.SeriesDescription ?? '', protocol: o.sidecar.ProtocolName ?? '', outputs: [] });
    g.get(number).outputs.push(o);
  }
  const phases = [...groups.phase.values()];
  let mags = [...groups.magnitude.values()];
  const found = () => [...mags.map((s) => `${seriesWords(s)} (magnitude)`), ...others].join(', ') || 'no image series';
  const maps = [...groups.fieldmap.values()];
  if (maps.length) return sortFieldMap(maps, phases, mags, others);
  const diffs = phases.filter((p) => p.outputs.length === 1 && phaseDifferenceTimes(p.outputs[0]));
  if (phases.length === 1 && diffs.length === 1) return sortPhaseDifference(diffs[0], mags, others);
  if (!phases.length) {
    throw new DicomError(
      'NoPhase',
      `The DICOM folder holds no phase series (found: ${found()}): choose a folder with the multi-echo phase (ImageType P or PHASE) ` +
        'as well as the magnitude — the scanner writes them as separate series — or load NIfTI files.',
    );
  }
  if (phases.length > 1) {
    throw new DicomError('SeveralPhase', `The DICOM folder holds ${phases.length} phase series (${phases.map(seriesWords).join(', ')}): choose a folder with the phase and magnitude of one acquisition.`);
  }
  const phase = phases[0];
  sortEchoes(phase, 'phase');
  // Several magnitude series (e.g. a second scan, or derived images): the phase's protocol, then its echo count.
  const narrow = (list, keep) => (list.filter(keep).length ? list.filter(keep) : list);
  if (mags.length > 1) mags = narrow(mags, (s) => s.protocol === phase.protocol);
  if (mags.length > 1) mags = narrow(mags, (s) => s.outputs.length === phase.outputs.length);
  if (mags.length > 1) {
    throw new DicomError('SeveralMagnitude', `The DICOM folder holds ${mags.length} magnitude series that could go with the phase (${mags.map(seriesWords).join(', ')}): choose a folder with the phase and magnitude of one acquisition.`);
  }
  const mag = mags[0] ?? null;
  const te = echoTimes(phase);
  if (mag) {
    sortEchoes(mag, 'magnitude');
    if (mag.outputs.length !== phase.outputs.length) {
      throw new DicomError(
        'EchoesMismatch',
        `The phase (${seriesWords(phase)}) has ${phase.outputs.length} echo${phase.outputs.length > 1 ? 'es' : ''} but the magnitude (${seriesWords(mag)}) ` +
          `has ${mag.outputs.length}: choose a folder with every echo of both series (an incomplete export?), or leave the magnitude out and give a mask.`,
      );
    }
    const mte = echoTimes(mag);
    if (te && mte && te.some((t, i) => Math.abs(t - mte[i]) > 1e-6)) {
      throw new DicomError(
        'TeMismatch',
        `The magnitude (${seriesWords(mag)}) has echo times ${mte.join(', ')} s but the phase (${seriesWords(phase)}) ${te.join(', ')} s: ` +
          'they are not the same acquisition; choose a folder with the phase and magnitude of one scan.',
      );
    }
  }
  const notes = [];
  if (!te) notes.push('the echo times are not in the DICOM headers: type them');
  const b0 = Number(phase.outputs[0].sidecar.MagneticFieldStrength);
  if (!(b0 > 0)) notes.push('B0 is not in the DICOM headers: type it');
  if (!mag) notes.push('no magnitude series: choose a mask (the pipeline makes its mask from the magnitude)');
  if (others.size) notes.push(`left out: ${[...others].join(', ')}`);
  const info = (s) => s && { number: s.number, description: s.description, echoes: s.outputs.length };
  return { kind: 'phase', phase: phase.outputs, magnitude: mag?.outputs ?? [], te, b0: b0 > 0 ? b0 : null, phaseSeries: info(phase), magnitudeSeries: info(mag), notes };
}

/** A series' facts for the page: {number, description, echoes}. */
const seriesInfo = (s) => s && { number: s.number, description: s.description, echoes: s.outputs.length };

/** The magnitude that goes with a field map's or phase difference's series: the same series, else the same protocol. */
function fieldMapMagnitude(series, mags) {
  const same = mags.filter((m) => m.number === series.number);
  const list = same.length ? same : mags.filter((m) => m.protocol === series.protocol);
  if (!list.length) return null;
  const m = list[0];
  sortEchoes(m, 'magnitude');
  return m;
}

/** The notes of a field map's sorting: B0, the magnitude, what was left out. */
function fieldMapNotes(b0, mag, others) {
  const notes = [];
  if (!(b0 > 0)) notes.push('B0 is not in the DICOM headers: type it');
  if (!mag) notes.push('no magnitude series: choose a mask (the pipeline makes its mask from the magnitude)');
  if (others.size) notes.push(`left out: ${[...others].join(', ')}`);
  return notes;
}

/**
 * A B0 map in Hz (FIELDMAPHZ: GE, Philips): the total field the pipeline starts from, with the first echo of its
 * series' magnitude (or of the same protocol's). One field map only; a phase series beside it is refused (ambiguous).
 */
function sortFieldMap(maps, phases, mags, others) {
  const all = maps.flatMap((m) => m.outputs);
  if (all.length > 1 || phases.length) {
    const what = [...maps.map((m) => `${seriesWords(m)} (${m.outputs.length} field map${m.outputs.length > 1 ? 's' : ''} in Hz)`), ...phases.map((p) => `${seriesWords(p)} (phase)`)];
    throw new DicomError('SeveralFieldMaps', `The DICOM folder holds ${what.join(', ')}: choose a folder with one field map (its magnitude beside it), or with the multi-echo phase alone.`);
  }
  const series = maps[0];
  const map = all[0];
  const mag = fieldMapMagnitude(series, mags);
  const b0 = Number(map.sidecar.MagneticFieldStrength);
  const t = phaseDifferenceTimes(map);
  const notes = fieldMapNotes(b0, mag, others);
  return {
    kind: 'fieldmap', fieldMap: map, units: 'hz', phase: [], magnitude: mag ? mag.outputs.slice(0, 1) : [], te: null, te1: t?.te1 ?? null, te2: t?.te2 ?? null,
    b0: b0 > 0 ? b0 : null, phaseSeries: null, fieldSeries: seriesInfo(series), magnitudeSeries: seriesInfo(mag), notes,
  };
}

/** A phase difference of two echoes (Siemens: EchoTime1, EchoTime2 in its sidecar), with a magnitude of its acquisition. */
function sortPhaseDifference(series, mags, others) {
  const o = series.outputs[0];
  const { te1, te2 } = phaseDifferenceTimes(o);
  // Siemens writes the magnitude of the same acquisition as the series before it (echo 1, and echo 2 when kept).
  const narrowed = mags.filter((m) => m.protocol === series.protocol);
  const mag = fieldMapMagnitude(series, narrowed.length ? narrowed : mags);
  const b0 = Number(o.sidecar.MagneticFieldStrength);
  return {
    kind: 'phasediff', phase: [o], magnitude: mag ? mag.outputs.slice(0, 1) : [], te: null, te1, te2, deltaTE: +(te2 - te1).toPrecision(6),
    b0: b0 > 0 ? b0 : null, phaseSeries: seriesInfo(series), magnitudeSeries: seriesInfo(mag), notes: fieldMapNotes(b0, mag, others),
  };
}

/** Orders a series' outputs by EchoNumber (else EchoTime); an echo that appears twice is refused. */
function sortEchoes(series, part) {
  const key = (o) => Number(o.sidecar.EchoNumber ?? NaN);
  const byNumber = series.outputs.every((o) => Number.isFinite(key(o)));
  const k = byNumber ? key : (o) => Number(o.sidecar.EchoTime ?? 0);
  series.outputs.sort((a, b) => k(a) - k(b));
  for (let i = 1; i < series.outputs.length; i++) {
    if (k(series.outputs[i]) === k(series.outputs[i - 1])) {
      const what = byNumber ? `echo ${k(series.outputs[i])}` : `echo time ${k(series.outputs[i])} s`;
      throw new DicomError('EchoRepeated', `The ${part} (${seriesWords(series)}) holds ${what} twice (${series.outputs[i - 1].name}, ${series.outputs[i].name}): choose a folder with one scan of this series.`);
    }
  }
}

/** The echo times (s) of a sorted series, or null when one is missing. */
function echoTimes(series) {
  const te = series.outputs.map((o) => Number(o.sidecar.EchoTime));
  return te.every((t) => t > 0) ? te : null;
}

/**
 * The From phase input from a sorted DICOM conversion: the phase echoes (and the mask file, or a NIfTI magnitude when
 * the folder has none) through the I/O worker's loader, the magnitude echoes read here and checked against the phase.
 * Phase units: the page's default “radians” is tried first; a phase the loader refuses as not radians (PhaseNotRadians:
 * scanner integers such as Siemens' −4096…4094) is read as scanner integers (phase-units.js: the stored span = 2π).
 * Precondition: io is the I/O worker client; dicom is { ...sortSeries(), folder }; mask, magnitude: File or null.
 * Precondition: units is the Phase units select's value.
 * Returns { r (the io 'pipeline' op's result), magnitude: Float32Array | null, units (the ones used) }.
 */
export async function loadDicom(io, { dicom, mask, magnitude }, units) {
  if (dicom.kind === 'fieldmap') return loadFieldMap(io, { dicom, mask, magnitude });
  const read = async (u) => {
    const phases = await Promise.all(dicom.phase.map((o) => o.nii.arrayBuffer()));
    const bytes = {
      mask: mask ? await mask.arrayBuffer() : undefined,
      magnitude: !dicom.magnitude.length && magnitude ? await magnitude.arrayBuffer() : undefined,
    };
    const what = dicom.kind === 'phasediff' ? 'phase difference' : 'phase';
    const names = { phase: `The DICOM ${what} (${seriesWords(dicom.phaseSeries)})`, mask: mask?.name, magnitude: magnitude?.name };
    return io('pipeline', { phases, ...bytes, units: u, names, difference: dicom.kind === 'phasediff' }, [...phases, ...Object.values(bytes).filter(Boolean)]);
  };
  let used = units;
  let r;
  try {
    r = await read(units);
  } catch (e) {
    if (units !== 'rad' || e?.code !== 'PhaseNotRadians') throw e;
    used = 'scanner';
    r = await read(used);
  }
  let mag = null;
  if (dicom.magnitude.length) {
    const n = r.dims[0] * r.dims[1] * r.dims[2];
    mag = new Float32Array(n * dicom.magnitude.length);
    for (const [i, o] of dicom.magnitude.entries()) {
      const v = await readEchoesAsync(await o.nii.arrayBuffer());
      if (v.echoes !== 1) {
        throw new DicomError('NotOneVolume', `The magnitude (${seriesWords(dicom.magnitudeSeries)}), echo ${i + 1}, was converted to ${v.echoes} volumes: choose a folder with one scan of this series.`);
      }
      if (v.dims.join() !== r.dims.join()) {
        throw new DicomError(
          'DimsMismatch',
          `The phase (${seriesWords(dicom.phaseSeries)}) is ${r.dims.join('×')} but the magnitude (${seriesWords(dicom.magnitudeSeries)}) is ${v.dims.join('×')}: ` +
            'they must have the same dimensions; choose a folder with the phase and magnitude of one acquisition.',
        );
      }
      mag.set(v.data, i * n);
    }
  }
  return { r, magnitude: mag, units: used };
}

/**
 * A B0 map in Hz from a sorted DICOM conversion (sortSeries kind 'fieldmap'): the map as it is (Hz; the pipeline
 * converts it and checks its values), its magnitude (first echo, when the folder has one) and the mask file, through the
 * I/O worker's loader. Returns loadDicom's { r, magnitude: Float32Array | null, units: 'hz' }.
 */
async function loadFieldMap(io, { dicom, mask, magnitude }) {
  const field = await dicom.fieldMap.nii.arrayBuffer();
  const mag = dicom.magnitude.length ? await dicom.magnitude[0].nii.arrayBuffer() : magnitude ? await magnitude.arrayBuffer() : undefined;
  const maskBytes = mask ? await mask.arrayBuffer() : undefined;
  const names = { field: `The DICOM field map (${seriesWords(dicom.fieldSeries)})`, mask: mask?.name, magnitude: dicom.magnitude.length ? `The DICOM magnitude (${seriesWords(dicom.magnitudeSeries)})` : magnitude?.name };
  const r = await io('totalField', { field, magnitude: mag, mask: maskBytes, names }, [field, mag, maskBytes].filter(Boolean));
  return { r, magnitude: r.magnitude, units: 'hz' };
}

/**
 * The dropped items as FileSystemEntries, read at once (a DataTransfer is empty after its drop event), with the
 * dropped files as they are for a drop without entries.
 * Precondition: called synchronously in the drop event's handler.
 * @param {DataTransfer} dataTransfer
 */
export function dropEntries(dataTransfer) {
  const items = [...(dataTransfer?.items ?? [])].filter((i) => i.kind === 'file');
  const entries = items.map((i) => i.webkitGetAsEntry?.()).filter(Boolean);
  return { entries, files: [...(dataTransfer?.files ?? [])], folder: entries.some((e) => e.isDirectory) };
}

/**
 * Every file under the dropped entries (folders read to the end), each with _webkitRelativePath (its path in the drop,
 * which @niivue/dcm2niix reads like a webkitdirectory input's paths); the dropped files when there are no entries.
 * Precondition: dropped is dropEntries' result.
 */
export async function entryFiles({ entries, files }) {
  if (!entries.length) return files;
  const out = [];
  const walk = async (entry) => {
    if (entry.isFile) {
      const f = await new Promise((resolve, reject) => entry.file(resolve, reject));
      Object.defineProperty(f, '_webkitRelativePath', { value: entry.fullPath.replace(/^\//, '') });
      out.push(f);
    } else if (entry.isDirectory) {
      const reader = entry.createReader();
      for (;;) {
        const batch = await new Promise((resolve, reject) => reader.readEntries(resolve, reject));
        if (!batch.length) break;
        for (const e of batch) await walk(e);
      }
    }
  };
  for (const e of entries) await walk(e);
  return out;
}

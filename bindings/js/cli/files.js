// The command line's files: reading inputs and network specs, and writing outputs all or nothing (a temp file
// next to each target, renamed into place), so that a file on disk is complete.
import fs from 'node:fs';
import path from 'node:path';
import zlib from 'node:zlib';
import { readNiftiHeader } from '../io/nifti.js';
import { CliError, EXIT_ERROR } from './errors.js';

/** Whether a path names a NIfTI file (.nii or .nii.gz). */
export const niftiName = (p) => /\.nii(\.gz)?$/i.test(p);

/** A file's bytes as a plain Uint8Array: readNifti misreads node Buffers (Buffer#slice is a view, not a copy). */
export async function readBytes(file, what, signal) {
  try {
    const b = await fs.promises.readFile(file, { signal });
    return new Uint8Array(b.buffer, b.byteOffset, b.byteLength);
  } catch (e) {
    if (e.name === 'AbortError') throw e;
    throw new CliError(`could not read the ${what} ${file}: ${e.code === 'ENOENT' ? 'no such file' : e.message}`, EXIT_ERROR, 'ReadFailed');
  }
}

/** The most bytes read for a header: a NIfTI-2 header is 540 bytes; a .nii.gz needs some of its deflate stream. */
const HEADER_PREFIX_BYTES = 64 * 1024;

/**
 * A NIfTI file's header alone (io/nifti.js readNiftiHeader), read from the file's first bytes without its image: the
 * dims, echoes, datatype and geometry a run is planned (or refused) from before the data is read. multiEcho: as
 * readNiftiHeader. A file that is not a NIfTI header is refused as the full read would (CliError, InvalidNifti).
 */
export async function readHeader(file, what, { multiEcho = true, signal } = {}) {
  let prefix;
  try {
    const fh = await fs.promises.open(file, 'r');
    try {
      const { bytesRead, buffer } = await fh.read({ buffer: Buffer.alloc(HEADER_PREFIX_BYTES), position: 0 });
      prefix = buffer.subarray(0, bytesRead);
    } finally {
      await fh.close();
    }
  } catch (e) {
    throw new CliError(`could not read the ${what} ${file}: ${e.code === 'ENOENT' ? 'no such file' : e.message}`, EXIT_ERROR, 'ReadFailed');
  }
  signal?.throwIfAborted();
  try {
    // A .nii.gz: what the prefix's deflate stream yields (a sync flush takes a stream cut anywhere).
    const bytes = prefix.length >= 2 && prefix[0] === 0x1f && prefix[1] === 0x8b
      ? zlib.gunzipSync(prefix, { finishFlush: zlib.constants.Z_SYNC_FLUSH })
      : prefix;
    return readNiftiHeader(new Uint8Array(bytes.buffer, bytes.byteOffset, bytes.byteLength), { multiEcho });
  } catch (e) {
    throw new CliError(`the ${what} ${file} is not a NIfTI volume Tessera reads: ${e.message}`, EXIT_ERROR, 'InvalidNifti');
  }
}

/**
 * Reads a JSON file of the command line; its errors name it as `the ${what} ${file}`.
 * fix: what to do about a file that is not JSON ('' or '; ...'); code: the error's code.
 */
async function readJson(file, what, fix, code, signal) {
  const text = new TextDecoder().decode(await readBytes(file, what, signal));
  try {
    return JSON.parse(text);
  } catch (e) {
    throw new CliError(`the ${what} ${file} is not valid JSON: ${e.message}${fix}`, EXIT_ERROR, code);
  }
}

/** Reads a --spec file: a JSON object (its keys and values are checked against the request schema by checkSpec). */
export async function readSpec(file, signal) {
  const spec = await readJson(file, 'network spec', '', 'InvalidSpec', signal);
  if (spec === null || typeof spec !== 'object' || Array.isArray(spec)) {
    throw new CliError(`the network spec ${file} must be a JSON object such as {"divisor": 8, "bytesPerVoxel": 1100}`, EXIT_ERROR, 'InvalidSpec');
  }
  return spec;
}

/** How a --context file is made, for its errors. */
const CONTEXT_HOW = '; write it with `tessera-qsm receptive-field (--model ID | --spec net.json --weights FILE) --probe --json > FILE`';

/**
 * A --context file: a network's reach measured earlier (`tessera-qsm receptive-field --probe --json`'s output, or its
 * probe alone). Returns {probe (within[] and the radii), weightsSha256 (the sha256s of the weights it was measured on,
 * or null when the file does not say)}. C++ checks the profile's values when the plan takes it.
 */
export async function readContext(file, signal) {
  const json = await readJson(file, 'context', CONTEXT_HOW, 'InvalidArgument', signal);
  const probe = json?.probe ?? json;
  if (!Array.isArray(probe?.within) || probe.within.length === 0 || !probe.within.every((w) => typeof w === 'number')) {
    throw new CliError(`the context ${file} holds no measured reach (probe.within, an array of fractions)${CONTEXT_HOW}`, EXIT_ERROR, 'InvalidArgument');
  }
  const sha = json?.weightsSha256;
  return { probe, weightsSha256: Array.isArray(sha) && sha.length > 0 ? sha : null };
}

/**
 * A --spec against the request schema (C++, tessera.schema()): known keys only, finite numbers, the schema's
 * defaults filled in. schema is what tessera.schema() returned.
 */
export function checkSpec(spec, schema, file) {
  if (spec === undefined) return undefined;
  const options = schema.filter((x) => x.name.startsWith('spec.'));
  const known = options.map((x) => x.name.slice(5));
  for (const [k, v] of Object.entries(spec)) {
    if (!known.includes(k)) {
      throw new CliError(`the network spec ${file} has an unknown key '${k}' (allowed: ${known.join(', ')})`, EXIT_ERROR, 'InvalidSpec');
    }
    if (typeof v !== 'number' || !Number.isFinite(v)) {
      throw new CliError(`the network spec ${file}: '${k}' must be a finite number, got ${JSON.stringify(v)}`, EXIT_ERROR, 'InvalidSpec');
    }
  }
  // Only numeric defaults are filled in: an option whose default is a rule ("derived from the ONNX graph") stays absent.
  const defaults = options.filter((x) => typeof x.default === 'number').map((x) => [x.name.slice(5), x.default]);
  return { ...Object.fromEntries(defaults), ...spec };
}

/** Fails early (before a long run) when a file cannot be created in its directory. */
export function checkWritable(file, flag) {
  const dir = path.dirname(path.resolve(file));
  try {
    fs.accessSync(dir, fs.constants.W_OK);
  } catch (e) {
    const why = { ENOENT: 'does not exist', EROFS: 'is on a read-only file system', EACCES: 'is not writable (permission denied)' }[e.code] ?? `is not writable (${e.code})`;
    throw new CliError(`cannot write --${flag} ${file}: the directory ${dir} ${why}`, EXIT_ERROR, 'WriteFailed');
  }
}

// Output files are written next to their target as `.<name>.<pid>.partial` and renamed into place, so a
// target is either absent, its old version, or complete. The temp files of this process are tracked: a hard
// exit (a second Ctrl-C) removes them; one left by a killed process (SIGKILL, power loss) is removed by the
// next run that writes the same target (removeStalePartials), once its process is gone.
const partials = new Set();
const partialName = (file) => path.join(path.dirname(path.resolve(file)), `.${path.basename(file)}.${process.pid}.partial`);

/** Whether the process pid is alive (EPERM: alive, another user's). */
function alive(pid) {
  try {
    process.kill(pid, 0);
    return true;
  } catch (e) {
    return e.code === 'EPERM';
  }
}

/** Removes `.<name>.<pid>.partial` files of this target left by processes that no longer run. */
export function removeStalePartials(file) {
  const dir = path.dirname(path.resolve(file));
  const prefix = `.${path.basename(file)}.`;
  let names = [];
  try {
    names = fs.readdirSync(dir);
  } catch {
    return;
  }
  for (const name of names) {
    if (!name.startsWith(prefix) || !name.endsWith('.partial')) continue;
    const pid = name.slice(prefix.length, -'.partial'.length);
    if (!/^\d+$/.test(pid) || Number(pid) === process.pid || alive(Number(pid))) continue;
    fs.rmSync(path.join(dir, name), { force: true });
  }
}

/** Removes this process's temp files at once (before a hard exit). */
export function removeOwnPartials() {
  for (const tmp of partials) fs.rmSync(tmp, { force: true });
  partials.clear();
}

/**
 * Writes several outputs all or nothing: every temp file first, then the renames, the first entry (the main
 * output) last, after removing its old version, so a main output on disk always comes with the files named
 * before it in this call (never an old χ beside a new report, nor the reverse).
 * A cancel (signal) that arrives before the renames removes the temp files and throws the AbortError: a cancelled run
 * writes nothing.
 * @param {{file: string, bytes: Uint8Array|string}[]} outputs main output first
 * @param {AbortSignal} [signal]
 */
export async function writeAtomic(outputs, signal) {
  const tmps = outputs.map(({ file }) => partialName(file));
  let current = outputs[0].file;
  try {
    for (let i = 0; i < outputs.length; i++) {
      current = outputs[i].file;
      partials.add(tmps[i]);
      await fs.promises.writeFile(tmps[i], outputs[i].bytes);
    }
    signal?.throwIfAborted();
    if (outputs.length > 1) await fs.promises.rm(outputs[0].file, { force: true });
    for (let i = outputs.length - 1; i >= 0; i--) {
      current = outputs[i].file;
      await fs.promises.rename(tmps[i], outputs[i].file);
      partials.delete(tmps[i]);
    }
  } catch (e) {
    for (const tmp of tmps) {
      await fs.promises.rm(tmp, { force: true }).catch(() => {});
      partials.delete(tmp);
    }
    if (e?.name === 'AbortError') throw e;
    const fix = { ENOSPC: 'free space there or write elsewhere', EDQUOT: 'free space there or write elsewhere', EROFS: 'write elsewhere', EACCES: 'write elsewhere', EPERM: 'write elsewhere' }[e?.code];
    throw new CliError(`could not write ${current}: ${e.message}${fix ? ` (${fix})` : ''}`, EXIT_ERROR, 'WriteFailed');
  }
}

#!/usr/bin/env node
// The plan of one `tessera-qsm pipeline` run, for cohort/Snakefile's job resources (`tessera-qsm plan` does not
// plan pipelines): the API's tessera.plan({pipeline: true, geometry, te, b0, mask?, magnitude?, method, ...}) →
// {moduleHeapBytes, peakBytes, stages, threads}, and with a network (model) on the local field also that network's
// plan on the same volume and mask (tessera.plan({geometry, mask, model})): the local mask is only known after the
// run, so the given mask, or with none the whole volume, stands for it (never smaller than the run's).
// Prints nothing; writes {pipeline, network} as JSON (a temp file, renamed). Errors: "error: ..." on stderr, exit 1.
//
//   node cohort/lib/pipeline-plan.js (--phase echo1.nii.gz --te 0.004,0.008 | --total-field map.nii.gz --units hz |
//        --phase-difference pd.nii.gz --te1 S --te2 S) --b0 3 [--mask m.nii.gz] [--magnitude]
//        --request '{"method": "rts", "params": {...}, "options": {"vsharp.maxRadius": 4}}' | '{"model": "xqsm", ...}'
//        --cores N --out plan.json
import fs from 'node:fs';
import path from 'node:path';
import zlib from 'node:zlib';
import { fileURLToPath, pathToFileURL } from 'node:url';

const root = fileURLToPath(new URL('../../', import.meta.url));
const { createTessera, readEchoes, readMask } = await import(pathToFileURL(path.join(root, 'bindings/js/index.js')).href);
const { planForFile } = await import(pathToFileURL(path.join(root, 'bindings/js/cli/format.js')).href);

const bytesOf = (file) => {
  const b = fs.readFileSync(file);
  const raw = b[0] === 0x1f && b[1] === 0x8b ? zlib.gunzipSync(b) : b;
  return new Uint8Array(raw.buffer, raw.byteOffset, raw.byteLength);
};

/** {'vsharp.maxRadius': 4, unwrap: 'laplacian'} → {vsharp: {maxRadius: 4}, unwrap: 'laplacian'} (the API's request). */
export function nest(options) {
  const out = {};
  for (const [k, v] of Object.entries(options ?? {})) {
    const [group, key] = k.split('.');
    if (key === undefined) out[group] = v;
    else (out[group] ??= {})[key] = v;
  }
  return out;
}

/** The plans of a pipeline run: {pipeline, network: null | the network's plan}. */
export async function planPipeline({ phase, mask, magnitude, te, b0, request, cores, totalFieldUnits, deltaTE }) {
  const vol = readEchoes(bytesOf(phase)); // 3D (one echo of a BIDS series) or 4D
  const geometry = { dims: vol.dims.slice(0, 3), voxelMm: vol.voxelMm.slice(0, 3), b0Dir: vol.b0Dir };
  const m = mask ? readMask(bytesOf(mask)).mask : undefined;
  const tessera = await createTessera({ workers: 1, hardwareThreads: cores });
  try {
    // A total field map plans with its units and no TE; a phase difference with its ΔTE.
    const source = totalFieldUnits ? { totalFieldUnits } : deltaTE ? { deltaTE } : { te };
    const r = { pipeline: true, geometry, ...source, b0, mask: m, magnitude: magnitude || undefined, ...nest(request.options) };
    if (request.method) {
      r.method = request.method;
      if (Object.keys(request.params ?? {}).length) r[request.method] = request.params;
    }
    const pipeline = await tessera.plan(r);
    if (!pipeline.feasible) return { pipeline, network: null };
    const network = request.model ? await tessera.plan({ geometry, mask: m, model: request.model }) : null;
    return { pipeline, network };
  } finally {
    await tessera.terminate();
  }
}

if (process.argv[1] && path.resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  const args = process.argv.slice(2);
  const o = {};
  for (let i = 0; i < args.length; i++) {
    const k = args[i].replace(/^--/, '');
    if (k === 'magnitude') o.magnitude = true;
    else o[k] = args[++i];
  }
  let code = 0;
  try {
    const plan = await planPipeline({
      phase: o.phase ?? o['total-field'] ?? o['phase-difference'], mask: o.mask, magnitude: o.magnitude, te: o.te?.split(',').map(Number), b0: Number(o.b0),
      totalFieldUnits: o['total-field'] !== undefined ? o.units : undefined,
      deltaTE: o['phase-difference'] !== undefined ? Number(o.te2) - Number(o.te1) : undefined,
      request: JSON.parse(o.request), cores: o.cores ? Number(o.cores) : undefined,
    });
    const tmp = path.join(path.dirname(path.resolve(o.out)), `.${path.basename(o.out)}.${process.pid}.partial`);
    fs.mkdirSync(path.dirname(path.resolve(o.out)), { recursive: true });
    try {
      fs.writeFileSync(tmp, `${JSON.stringify({ pipeline: planForFile(plan.pipeline), network: planForFile(plan.network) }, null, 2)}\n`);
      fs.renameSync(tmp, o.out);
    } finally {
      fs.rmSync(tmp, { force: true });
    }
  } catch (e) {
    process.stderr.write(`error: ${e.message}\n`);
    code = 1;
  }
  process.exit(code);
}

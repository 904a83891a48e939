// Helpers shared by the benchmark scripts.
import fs from 'node:fs';
import os from 'node:os';
import { qsmnetStandin, qsmnetDivisor } from '../scripts/standins.js';

/** The benches' deep stand-in: a QSMnet-shaped 4-level U-Net of 5³ kernels, base 8, random weights, declared at
 * 1,100 B/voxel (an xQSM-like cost, so that its whole volume is over the single-patch limit on the phantoms). */
export const DEEP_SPEC = { divisor: qsmnetDivisor(4), bytesPerVoxel: 1100 };
export const deepStandin = () => qsmnetStandin({ base: 8, levels: 4, kernel: 5 });

/** The stand-in network's path; exits with the command that makes it when the file is missing. */
export function requireStandin(path) {
  if (!fs.existsSync(path)) {
    console.error(`${path} not found: run  node scripts/make_standins.js /tmp/standins  first`);
    process.exit(2);
  }
  return path;
}

/** The stand-in network's bytes (see requireStandin). */
export function readStandin(path) {
  return new Uint8Array(fs.readFileSync(requireStandin(path)));
}

/** The 1, 5 and 15 minute load averages, for the record of a run on a shared machine. */
export const loadavg = () => os.loadavg().map((x) => x.toFixed(2)).join(' ');

/**
 * A request's run through Tessera's own plan, gather and scatter (the Embind FieldRun that invert() drives), with the
 * network in onnxruntime-node: { chi, seconds (network only), plan }. request.spec stands in for a registry network at
 * 1 B/voxel (specOf) so that no wasm budget stands in the way of a native run.
 */
export async function runNative(M, ortNode, session, geometry, field, mask, request) {
  const volume = new M.Volume(geometry, 1);
  volume.fieldView().set(field);
  volume.maskView().set(mask);
  const handle = M.plan(geometry, mask, request, field); // the held plan the run obeys (as invert's)
  const plan = handle.view();
  if (!plan.feasible) {
    handle.delete();
    volume.delete();
    throw new Error(plan.message);
  }
  const fr = M.startFieldRun(volume, handle);
  let seconds = 0;
  try {
    for (let p; (p = fr.next()) !== null; ) {
      const input = new Float32Array(p.input);
      const t0 = performance.now();
      const out = await session.run({ [session.inputNames[0]]: new ortNode.Tensor('float32', input, p.dims) });
      seconds += (performance.now() - t0) / 1000;
      fr.finish(p.job, out[session.outputNames[0]].data);
    }
    fr.report();
    return { chi: fr.result(), seconds, plan };
  } finally {
    fr.delete();
    volume.delete();
    handle.delete();
  }
}

/** A registry network as a spec at 1 B/voxel: the same divisor, masking and normalisation, no wasm budget. */
export function specOf(M, model) {
  const m = M.model(model);
  const n = m.normalization;
  return { divisor: m.divisor, bytesPerVoxel: 1, maskedInput: m.maskedInput, inputMean: n.inputMean, inputStd: n.inputStd, outputMean: n.outputMean, outputStd: n.outputStd };
}

// r and NRMSE inside the mask (browser-safe, so it lives with the Web half of bench/speed.js).
export { agreement } from './speed-web.js';

/** onnxruntime-node from a directory it was installed in (not a repository dependency; see bench/native-ort.js). */
export function requireOrtNode(dir, createRequire, path) {
  try {
    return createRequire(path.join(path.resolve(dir), 'package.json'))('onnxruntime-node');
  } catch (e) {
    console.error(`onnxruntime-node not found under ${dir} (${e.message.split('\n')[0]}): install it there:\n` +
      `  mkdir -p ${dir} && cd ${dir} && npm init -y && npm install onnxruntime-node@1.30.0 --onnxruntime-node-install=skip`);
    process.exit(2);
  }
}

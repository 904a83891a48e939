// What the crop to the mask's support costs in fidelity (tessera/crop.h; issue #12): each network × phantom is run on
// the whole volume and on the box an automatic plan crops to, for several margins (request cropMargin), through
// Tessera's own plan, gather and scatter (the FieldRun invert() drives) with the network in onnxruntime-node
// (2 threads), so that the large boxes run in seconds. Prints r and NRMSE against the whole-volume χ inside the mask,
// the box and its share of the volume, and the network seconds of both runs.
//
// onnxruntime-node is NOT a dependency of the repository (see bench/native-ort.js); the xQSM-shaped stand-in comes from
// scripts/make_standins.js.
// Usage:
//   node --no-experimental-fetch bench/crop-fidelity.js [--nets demo,xqsm] [--dims 160,160,128/256,256,176]
//        [--margins 0,4,8,16] [--ortnode /tmp/ortnode] [--standins /tmp/standins] [--json out.json]
import { parseArgs } from 'node:util';
import fs from 'node:fs';
import path from 'node:path';
import { createRequire } from 'node:module';
import { loadTesseraModule } from '../bindings/js/debug.js';
import { agreement, loadavg, readStandin, requireOrtNode, runNative, specOf } from './common.js';

const { values: a } = parseArgs({
  options: {
    nets: { type: 'string', default: 'demo,xqsm' },
    dims: { type: 'string', default: '160,160,128/256,256,176' },
    margins: { type: 'string', default: '0,4,8,16' },
    ortnode: { type: 'string', default: '/tmp/ortnode' },
    standins: { type: 'string', default: '/tmp/standins' },
    json: { type: 'string' },
  },
});
const ortNode = requireOrtNode(a.ortnode, createRequire, path);
const NETS = {
  demo: { model: 'demo-unet', weights: () => new Uint8Array(fs.readFileSync('web/models/demo-unet.onnx')) },
  xqsm: { model: 'xqsm', weights: () => readStandin(path.join(a.standins, 'xqsm-standin.onnx')) },
};
const M = await loadTesseraModule({ pthreadPoolSize: 2 });
console.log(`crop fidelity; load ${loadavg()}`);
console.log('| network | phantom | margin | box (padded) | share of volume | r vs whole | NRMSE vs whole | box s | whole s |');
console.log('|---|---|---:|---|---:|---:|---:|---:|---:|');
const rows = [];
for (const net of a.nets.split(',')) {
  const { model } = NETS[net];
  const session = await ortNode.InferenceSession.create(NETS[net].weights(), { executionProviders: ['cpu'], intraOpNumThreads: 2, interOpNumThreads: 1 });
  const spec = specOf(M, model);
  for (const d of a.dims.split('/')) {
    const dims = d.split(',').map(Number);
    const geometry = { dims, voxelMm: [1, 1, 1], b0Dir: [0, 0, 1] };
    const nvox = dims[0] * dims[1] * dims[2];
    const { field, mask } = M.phantom(geometry, { seed: 1, threads: 2 });
    const whole = await runNative(M, ortNode, session, geometry, field, mask, { spec, whole: true });
    for (const margin of a.margins.split(',').map(Number)) {
      // At 1 B/voxel the box always fits: the automatic plan is the crop whenever the box is smaller than the volume.
      const box = await runNative(M, ortNode, session, geometry, field, mask, { spec, cropMargin: margin, hardwareThreads: 2 });
      const c = box.plan.crop;
      if (!c) {
        console.log(`| ${net} | ${dims.join('×')} | ${margin} | the whole volume (no crop) | 1.00 | 1 | 0 | - | ${whole.seconds.toFixed(1)} |`);
        continue;
      }
      const g = agreement(box.chi, whole.chi, mask);
      const share = c.patchDims.reduce((x, y) => x * y) / nvox;
      rows.push({ net, dims, margin, crop: c, share, r: g.r, nrmse: g.nrmse, boxSeconds: box.seconds, wholeSeconds: whole.seconds });
      console.log(`| ${net} | ${dims.join('×')} | ${margin} | ${c.patchDims.join('×')} at [${c.patchLo.join(', ')}] | ${share.toFixed(2)} | ` +
        `${g.r.toFixed(5)} | ${g.nrmse.toFixed(4)} | ${box.seconds.toFixed(1)} | ${whole.seconds.toFixed(1)} |`);
    }
  }
  await session.release();
}
console.log(`load at end ${loadavg()}`);
if (a.json) fs.writeFileSync(a.json, JSON.stringify(rows, null, 1));
process.exit(0);

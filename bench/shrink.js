// Tiled patches shrunk to the mask voxels their cores serve (src/tiling.cpp shrink_patch; issue #24 item 1), before
// vs after: the same requests through two builds of the module, the one before the shrink and the one after. Per
// network × phantom × config it prints the patch voxels the run hands out ÷ the volume's voxels, r and NRMSE of χ
// against the whole-volume run inside the mask, and the run's wall seconds (report.wallSeconds, the driver's loop).
// Configs: default (the planner's default plan), CORE/HALO (a fixed tiling, crop-and-stitch), fast (tile 'auto',
// quality 'fast': the planner's fastest tiling). Each build runs in its own runtime (2 ORT workers × 1 thread unless
// the plan says otherwise); the voxels run are the plan's voxelsRun (a build before it: edge³ per active tile, as it ran).
// A build folder holds tessera.js/.wasm/.worker.js and a package.json {"type":"commonjs"}.
//
// Usage:
//   node --no-experimental-fetch bench/shrink.js --before build/h-shrink-before/node --after build/h-shrink-after/node
//        [--dims 160,160,128/160,192,144] [--configs default,32/8,fast] [--json out.json]
import { parseArgs } from 'node:util';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { createTessera } from '../bindings/js/index.js';
import { agreement, loadavg } from './common.js';
import { planText, voxelsRun } from './speed-web.js';

const { values: a } = parseArgs({
  options: {
    before: { type: 'string' },
    after: { type: 'string', default: 'dist/wasm/node' },
    dims: { type: 'string', default: '160,160,128/160,192,144' },
    configs: { type: 'string', default: 'default,32/8,fast' },
    model: { type: 'string', default: 'demo-unet' },
    onnx: { type: 'string', default: 'web/models/demo-unet.onnx' },
    json: { type: 'string' },
  },
});
const builds = [['before', a.before], ['after', a.after]].filter(([, dir]) => dir).map(([name, dir]) => [name, path.resolve(dir)]);
if (!builds.length) {
  console.error('give --before and/or --after: the node folders of the builds to compare');
  process.exit(2);
}
const weights = new Uint8Array(fs.readFileSync(a.onnx));

/** The request of a config: default, CORE/HALO or fast. */
function requestOf(config) {
  if (config === 'default') return {};
  if (config === 'fast') return { tile: 'auto', quality: 'fast' };
  const [core, halo] = config.split('/').map(Number);
  if (!(core > 0 && halo >= 0)) throw new Error(`config '${config}': use default, fast or CORE/HALO (e.g. 32/8)`);
  return { tile: { core, halo } };
}

console.log(`shrink bench: node ${process.version}, ${os.cpus()[0].model} × ${os.cpus().length}, network ${a.model}; load ${loadavg()}`);
console.log('| network | phantom | config | build | plan | voxels run ÷ volume | r vs whole | NRMSE vs whole | run s | load |');
console.log('|---|---|---|---|---|---:|---:|---:|---:|---|');
const rows = [];
for (const d of a.dims.split('/')) {
  const dims = d.split(',').map(Number);
  const geometry = { dims, voxelMm: [1, 1, 1], b0Dir: [0, 0, 1] };
  const nvox = dims[0] * dims[1] * dims[2];
  for (const [build, wasmBase] of builds) {
    const tessera = await createTessera({ workers: 2, hardwareThreads: 2, threadsPerWorker: 1, wasmBase });
    try {
      const { field, mask } = await tessera.phantom({ geometry, seed: 1 });
      const base = { geometry, field, mask, model: a.model, weights };
      const whole = await tessera.invert({ keepInputs: true, ...base, whole: true, crop: 'off', workers: 1, threadsPerWorker: 2 });
      for (const config of a.configs.split(',')) {
        const { chi: { data: chi }, report } = await tessera.invert({ keepInputs: true, ...base, ...requestOf(config) });
        const g = agreement(chi, whole.chi.data, mask);
        const share = voxelsRun(report.plan) / nvox;
        const row = { network: a.model, dims, config, build, plan: planText(report.plan, nvox), share, r: g.r, nrmse: g.nrmse,
          seconds: report.wallSeconds, load: loadavg() };
        rows.push(row);
        console.log(`| ${a.model} | ${dims.join('×')} | ${config} | ${build} | ${row.plan} | ${share.toFixed(3)} | ${g.r.toFixed(5)} | ` +
          `${g.nrmse.toFixed(4)} | ${row.seconds.toFixed(1)} | ${row.load} |`);
      }
    } finally {
      await tessera.terminate();
    }
  }
}
console.log(`load at end ${loadavg()}`);
if (a.json) fs.writeFileSync(a.json, JSON.stringify(rows, null, 1));
process.exit(0);

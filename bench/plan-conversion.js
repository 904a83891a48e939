// What plan() costs JavaScript as the grid grows: the module's plan() call (the C++ plan and its conversion to a JS
// object by the Embind value types of bindings/wasm/value_types.cpp, most of it the grid's tiles) and the size of the
// object. A custom network without a receptive radius, an explicit tile and no mask keep the planner's own work small
// (no fidelity prediction, no mask scan), so the figures are mostly the conversion. Run it against two builds of the
// module (--wasm-base) to compare conversions; both print the same object sizes when the shapes agree.
// Usage:
//   node --no-experimental-fetch bench/plan-conversion.js [--wasm-base dist/wasm/node] [--repeat 7] [--dims 256,256,256]
//        [--cores 32,16,8,4]
import { parseArgs } from 'node:util';
import { performance } from 'node:perf_hooks';
import { loadTesseraModule } from '../bindings/js/debug.js';

const { values: a } = parseArgs({
  options: {
    'wasm-base': { type: 'string' },
    repeat: { type: 'string', default: '7' },
    dims: { type: 'string', default: '256,256,256' },
    cores: { type: 'string', default: '32,16,8,4' },
  },
});
const dims = a.dims.split(',').map(Number);
const repeat = Math.max(1, Number(a.repeat));
const M = await loadTesseraModule({ pthreadPoolSize: 1, wasmBase: a['wasm-base'] });
const geometry = { dims, voxelMm: [1, 1, 1], b0Dir: [0, 0, 1] };

console.log(`plan() of ${dims.join('×')}, no mask, custom network (divisor 1), median of ${repeat}; module ${a['wasm-base'] ?? 'dist/wasm/node'}`);
console.log('core  tiles    plan() ms   µs/tile   JSON bytes');
for (const core of a.cores.split(',').map(Number)) {
  const request = { spec: { divisor: 1 }, tile: { core, halo: 2 } };
  const ms = [];
  let plan;
  for (let i = 0; i < repeat; i++) {
    const t0 = performance.now();
    plan = M.plan(geometry, undefined, request);
    ms.push(performance.now() - t0);
  }
  if (!plan.feasible) throw new Error(`core ${core}: ${plan.message}`);
  ms.sort((x, y) => x - y);
  const median = ms[Math.floor(ms.length / 2)];
  const tiles = plan.grid.tiles.length;
  console.log(
    `${String(core).padStart(4)}  ${String(tiles).padStart(6)}  ${median.toFixed(1).padStart(10)}  ${((median * 1000) / tiles).toFixed(2).padStart(8)}  ${String(JSON.stringify(plan).length).padStart(11)}`,
  );
}
process.exit(0);

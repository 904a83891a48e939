// Fits the tiling-fidelity model (src/fidelity_model.h) to the study (bench/fidelity-study.js): for every measured
// configuration, the C++ planner's deficit (plan().predictedFidelity.deficit) under the network's context profile,
// then alpha (NRMSE = alpha · deficit, least squares through the origin on log scale) and gamma (1 − r = gamma ·
// NRMSE², median), and the measured / predicted table. A second study checks the fit on another network.
// Usage:
//   node --no-experimental-fetch bench/fit-fidelity.js --study /tmp/study-demo.json --profile /tmp/probe/demo.json
//        [--radius 48] [--check /tmp/study-net2.json --check-profile /tmp/probe/net2.json --check-radius 12]
// --profile: a probe result ({within: [...]}, as receptiveField().probe gives); --radius: use the theoretical radius's
// dipole profile instead.
import { parseArgs } from 'node:util';
import fs from 'node:fs';
import { loadTesseraModule } from '../bindings/js/module.js';

const { values: a } = parseArgs({
  options: {
    study: { type: 'string' }, profile: { type: 'string' }, radius: { type: 'string' },
    check: { type: 'string' }, 'check-profile': { type: 'string' }, 'check-radius': { type: 'string' },
  },
});
const M = await loadTesseraModule({ pthreadPoolSize: 2 });

function deficits(studyPath, profilePath, radius) {
  const study = JSON.parse(fs.readFileSync(studyPath, 'utf8'));
  const geometry = { dims: study.dims, voxelMm: [1, 1, 1], b0Dir: [0, 0, 1] };
  const { mask } = M.phantom(geometry, { seed: study.seed ?? 1, threads: 2 });
  const context = profilePath ? { within: JSON.parse(fs.readFileSync(profilePath, 'utf8')).within } : undefined;
  const spec = { divisor: study.divisor, bytesPerVoxel: 1, ...(radius && { receptiveRadius: Number(radius) }) };
  return study.rows.map((row) => {
    const plan = M.plan(geometry, mask, { spec, context, tile: { core: row.core, halo: row.halo, stride: row.stride, blend: row.blend }, workers: 1 });
    return { ...row, deficit: plan.predictedFidelity.deficit };
  });
}

const median = (v) => { const s = [...v].sort((x, y) => x - y); return s[Math.floor(s.length / 2)]; };
const rows = deficits(a.study, a.profile, a.radius);
// log NRMSE = log alpha + log deficit: alpha = exp(mean(log nrmse − log deficit)).
const alpha = Math.exp(rows.reduce((s, r) => s + Math.log(r.nrmse / r.deficit), 0) / rows.length);
const gamma = median(rows.map((r) => (1 - r.r) / (r.nrmse * r.nrmse)));
function table(title, rs) {
  console.log(`\n${title}\n| core | halo | stride | blend | patch voxels ÷ volume | deficit | NRMSE measured | NRMSE predicted | r measured | r predicted |\n|---|---|---|---|---|---|---|---|---|---|`);
  let worst = 0;
  for (const r of rs) {
    const n = alpha * r.deficit, rp = 1 - gamma * n * n;
    worst = Math.max(worst, Math.abs(Math.log(n / r.nrmse)));
    console.log(`| ${r.core} | ${r.halo} | ${r.stride} | ${r.blend} | ${r.overhead.toFixed(2)} | ${r.deficit.toFixed(4)} | ${r.nrmse.toFixed(3)} | ${n.toFixed(3)} | ${r.r.toFixed(4)} | ${rp.toFixed(4)} |`);
  }
  console.log(`worst NRMSE prediction off by ×${Math.exp(worst).toFixed(2)}`);
}
console.log(`fit on ${a.study}: alpha ${alpha.toFixed(3)}, gamma ${gamma.toFixed(3)} (${a.profile ? 'measured profile' : `dipole profile, radius ${a.radius}`})`);
table('fit', rows);
if (a.check) table(`check on ${a.check}`, deficits(a.check, a['check-profile'], a['check-radius']));
process.exit(0);

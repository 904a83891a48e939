// Fits the tiling-fidelity model (src/fidelity_model.h) to the study (bench/fidelity-study.js): for every measured
// configuration on the pooling grid, the C++ planner's deficit (plan().predictedFidelity.deficit) under the network's
// context profile, then alpha and beta (NRMSE = alpha · deficit^beta, least squares on log scale) and gamma (1 − r =
// gamma · NRMSE², median), and the measured / predicted table. Further studies (--check, repeatable with their
// profiles) check the fit on other networks; --joint fits one alpha, beta over all studies.
// Usage:
//   node --no-experimental-fetch bench/fit-fidelity.js --study /tmp/study-demo.json --profile /tmp/probe/demo.json
//        [--radius 48] [--check /tmp/study-net2.json --check-profile /tmp/probe/net2.json --check-radius 12]
// --profile: a probe result ({within: [...]}, as receptiveField().probe gives); --radius: use the theoretical radius's
// dipole profile instead.
import { parseArgs } from 'node:util';
import fs from 'node:fs';
import { loadTesseraModule } from '../bindings/js/debug.js';

const { values: a } = parseArgs({
  options: {
    study: { type: 'string' }, profile: { type: 'string' }, radius: { type: 'string' },
    check: { type: 'string', multiple: true }, 'check-profile': { type: 'string', multiple: true },
    joint: { type: 'boolean' }, 'only-aligned': { type: 'boolean', default: true },
    alpha: { type: 'string' }, beta: { type: 'string' }, // evaluate these constants instead of fitting
    'check-radius': { type: 'string', multiple: true },
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
    return { ...row, deficit: plan.predictedFidelity.deficit, aligned: plan.grid.misaligned === 0 };
  });
}

const median = (v) => { const s = [...v].sort((x, y) => x - y); return s[Math.floor(s.length / 2)]; };
// Rows whose patches sit on the pooling grid (the planner's candidates), as the plan says.
const studies = [[a.study, a.profile, a.radius], ...(a.check ?? []).map((c, i) => [c, a['check-profile']?.[i], a['check-radius']?.[i]])];
const sets = studies.map(([s, p, r]) => ({ name: s, rows: deficits(s, p, r).filter((row) => !a['only-aligned'] || row.aligned) }));
const fitRows = a.joint ? sets.flatMap((x) => x.rows) : sets[0].rows;
// log NRMSE = log alpha + beta · log deficit.
const X = fitRows.map((r) => Math.log(r.deficit)), Y = fitRows.map((r) => Math.log(r.nrmse));
const mx = X.reduce((p, q) => p + q, 0) / X.length, my = Y.reduce((p, q) => p + q, 0) / Y.length;
const beta = a.beta !== undefined ? Number(a.beta) : X.reduce((p, x, i) => p + (x - mx) * (Y[i] - my), 0) / X.reduce((p, x) => p + (x - mx) ** 2, 0);
const alpha = a.alpha !== undefined ? Number(a.alpha) : Math.exp(my - beta * mx);
const gamma = median(fitRows.map((r) => (1 - r.r) / (r.nrmse * r.nrmse)));
function table(title, rs) {
  console.log(`\n${title}\n| core | halo | stride | blend | patch voxels ÷ volume | deficit | NRMSE measured | NRMSE predicted | predicted ÷ measured | r measured | r predicted |\n|---|---|---|---|---|---|---|---|---|---|---|`);
  let worst = 0;
  const ratios = [];
  for (const r of rs) {
    const n = alpha * r.deficit ** beta, rp = 1 - gamma * n * n;
    worst = Math.max(worst, Math.abs(Math.log(n / r.nrmse)));
    ratios.push(n / r.nrmse);
    console.log(`| ${r.core} | ${r.halo} | ${r.stride} | ${r.blend} | ${r.overhead.toFixed(2)} | ${r.deficit.toFixed(4)} | ${r.nrmse.toFixed(3)} | ${n.toFixed(3)} | ${(n / r.nrmse).toFixed(2)} | ${r.r.toFixed(4)} | ${rp.toFixed(4)} |`);
  }
  const sorted = [...ratios].sort((x, y) => x - y);
  console.log(`predicted ÷ measured NRMSE: min ${sorted[0].toFixed(2)}, median ${median(sorted).toFixed(2)}, max ${sorted[sorted.length - 1].toFixed(2)}; worst off by ×${Math.exp(worst).toFixed(2)}`);
}
console.log(`${a.alpha !== undefined ? 'given' : 'fit'} on ${a.joint ? 'all studies' : a.study}: NRMSE = ${alpha.toFixed(3)} · deficit^${beta.toFixed(3)}, 1 − r = ${gamma.toFixed(3)} · NRMSE² (${fitRows.length} configs on the pooling grid)`);
for (const x of sets) table(x.name, x.rows);
process.exit(0);

// The command line's commands that describe: the registry (models), the classical methods and their parameters
// (methods), a network's memory cost (calibrate) and reach (receptive-field).
import { EXIT_OK, usageError } from './errors.js';
import { readSpec, checkSpec } from './files.js';
import { MB, size, table } from './format.js';
import { rangeText, defaultText } from './help.js';
import { loadNetworkWeights, weightsShas } from './network.js';
import { wholeNumber } from './values.js';

/** `tessera-qsm methods`: the classical methods and their parameters, from the C++ schema. */
export async function cmdMethods(o, ctx) {
  const tessera = await ctx.start({});
  const schema = await tessera.schema();
  const names = schema.find((x) => x.name === 'method').choices;
  const list = names.map((m) => ({ method: m, params: schema.filter((x) => x.name.startsWith(`${m}.`)).map((x) => ({ ...x, name: x.name.slice(m.length + 1) })) }));
  if (o.json) {
    ctx.out(`${JSON.stringify(list, null, 2)}\n`);
    return EXIT_OK;
  }
  const range = (x) => (x.choices.length ? x.choices.join('|') : rangeText(x));
  const lines = [];
  for (const { method, params } of list) {
    lines.push(`${method}`);
    for (const x of params) lines.push(`  --param ${`${x.name}=${defaultText(x)}`.padEnd(28)} ${range(x).padEnd(22)} ${x.help}`);
  }
  ctx.out(`${lines.join('\n')}\n`);
  return EXIT_OK;
}

/** `tessera-qsm models`: the registry's networks, one row each (or JSON). */
export async function cmdModels(o, ctx) {
  const tessera = await ctx.start({});
  const models = await tessera.registry();
  if (o.json) {
    ctx.out(`${JSON.stringify(models, null, 2)}\n`);
    return EXIT_OK;
  }
  const rows = [['id', 'kind', 'inputs', 'divisor', 'reach', 'memory per worker', 'weights', 'licence']];
  for (const m of models) {
    rows.push([
      m.id,
      m.kind,
      m.inputs.join(','),
      String(m.divisor),
      m.receptiveRadius ? `±${m.receptiveRadius}` : '-',
      `${m.fixedBytes ? `${MB(m.fixedBytes)} + ` : ''}${m.bytesPerVoxel} B/voxel ${m.costProvisional ? '(provisional)' : '(measured)'}`,
      m.weights.map((w) => (w.bytes ? `${w.file} ${MB(w.bytes)}` : w.file)).join(' + '),
      m.licence,
    ]);
  }
  const widths = rows[0].map((_, c) => Math.max(...rows.map((r) => r[c].length)));
  ctx.out(`${rows.map((r) => r.map((v, c) => (c === r.length - 1 ? v : v.padEnd(widths[c]))).join('  ')).join('\n')}\n`);
  return EXIT_OK;
}

/** `tessera-qsm calibrate`: a network's memory cost measured in ONNX Runtime workers, and what to declare. */
export async function cmdCalibrate(o, ctx) {
  const see = 'see `tessera-qsm calibrate --help`';
  if (o.model !== undefined && o.spec !== undefined) throw usageError(`give at most one of --model ID or --spec net.json; ${see}`);
  if (!o.weights?.length) throw usageError(`calibrate needs --weights FILE|URL (the ONNX network); ${see}`);
  const threads = wholeNumber(o.threads, 'threads', 1);
  const rawSpec = o.spec !== undefined ? await readSpec(o.spec, ctx.signal) : undefined;
  const tessera = await ctx.start({ workers: 1, threadsPerWorker: threads });
  const spec = checkSpec(rawSpec, await tessera.schema(), o.spec);
  const entry = o.model !== undefined ? await tessera.model(o.model) : undefined;
  const { weights } = await loadNetworkWeights(o, entry, tessera, ctx);
  const c = await tessera.calibrate({
    weights, spec, model: entry?.id, threadsPerWorker: threads, signal: ctx.signal,
    onProgress: (p) => ctx.progress.line(`calibrate: patch ${p.edge}³: heap ${size(p.heapBytes)}`),
  });
  if (o.json) {
    ctx.out(`${JSON.stringify(c, null, 2)}\n`);
    return EXIT_OK;
  }
  const f = c.fit;
  const rows = c.points.map((p) => [`patch ${p.edge}³`, `heap ${size(p.heapBytes)} (after session ${size(p.afterSessionBytes)}), ${p.seconds.toFixed(2)} s`]);
  rows.push(
    ['fit', f.slopeMeasured ? `${size(f.fittedFixedBytes)} + ${f.fittedBytesPerVoxel.toFixed(1)} B/voxel (least squares, r² ${f.r2.toFixed(4)})` : 'no slope: the heap did not grow with the patch'],
    ['cost', `${size(c.fixedBytes)} + ${c.bytesPerVoxel} B/voxel per worker (${c.threads} thread${c.threads > 1 ? 's' : ''}; every measured heap under it)`],
    ['how', f.note],
    ['declare', `"fixedBytes": ${c.fixedBytes}, "bytesPerVoxel": ${c.bytesPerVoxel}   (in a --spec file; or leave them out and plan/invert calibrate)`],
    ['time', `${c.seconds.toFixed(1)} s`],
  );
  ctx.out(`${table(rows)}\n`);
  return EXIT_OK;
}

/** `tessera-qsm receptive-field`: how far a network looks, from its graph (and --probe: measured). */
export async function cmdReceptiveField(o, ctx) {
  if ((o.model === undefined) === (o.spec === undefined)) throw usageError('give exactly one of --model ID or --spec net.json; see `tessera-qsm receptive-field --help`');
  const rawSpec = o.spec !== undefined ? await readSpec(o.spec, ctx.signal) : undefined;
  const tessera = await ctx.start({ workers: 1 });
  const spec = checkSpec(rawSpec, await tessera.schema(), o.spec);
  const entry = o.model !== undefined ? await tessera.model(o.model) : undefined;
  const loaded = await loadNetworkWeights(o, entry, tessera, ctx);
  const { weights } = loaded;
  const first = Array.isArray(weights) ? weights[0] : weights;
  const rf = o.probe
    ? await tessera.receptiveField({ weights: first, model: entry?.id, spec, probe: true, signal: ctx.signal })
    : await tessera.receptiveField({ weights: first, model: entry?.id, spec });
  if (o.json) {
    // The weights it was measured on: invert and plan --context FILE refuse the file for others.
    ctx.out(`${JSON.stringify({ ...rf, weightsSha256: weightsShas(entry, loaded) }, null, 2)}\n`);
    return EXIT_OK;
  }
  const g = rf.graph;
  const rows = [
    ['graph', g.global ? 'global: an operation mixes the whole extent (no finite radius)' : `receptive radius ${g.radius.join(' × ')} voxels (below ${g.below.join(', ')}; above ${g.above.join(', ')})`],
    ['operations', Object.entries(g.ops).map(([k, v]) => `${k} ${v}`).join(', ')],
  ];
  if (g.unknownOps.length) rows.push(['not followed', `${g.unknownOps.join(', ')}: the radius may be larger`]);
  if (rf.probe) {
    const p = rf.probe;
    rows.push(['probe', `${p.edge}³ phantom patch, ±${p.epsilon} ppm at the centre, ${p.seconds.toFixed(1)} s`]);
    rows.push(['measured', `90 % of the response within ${p.radius90} voxels, 99 % within ${p.radius99}`]);
  }
  ctx.out(`${table(rows)}\n`);
  return EXIT_OK;
}

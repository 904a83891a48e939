// Compiled with `tsc --strict` (npm run typecheck): the declarations must describe real usage.
import { createTessera, TesseraError, readNifti, readEchoes, phaseToRadians, writeNifti, hzToPpm, type Geometry, type Plan, type Progress } from 'tessera-qsm';

export async function example(fieldBytes: Uint8Array, weights: Uint8Array): Promise<number> {
  const tessera = await createTessera({ workers: 2, threadsPerWorker: 1 });
  try {
    const nii = readNifti(fieldBytes);
    const geometry = { dims: nii.dims, voxelMm: nii.voxelMm, b0Dir: nii.b0Dir };
    const plan: Plan = await tessera.plan({ geometry, model: 'xqsm', tile: { core: 56, halo: 4 } });
    if (!plan.feasible) throw new TesseraError(plan.message, 'BudgetExceeded');
    const controller = new AbortController();
    const { chi, report } = await tessera.invert({
      field: hzToPpm(nii.data, 3),
      geometry,
      model: 'xqsm',
      weights,
      tile: { core: 56, halo: 4 },
      signal: controller.signal,
      onProgress: (p: Progress) => {
        if (p.etaSeconds !== null && p.etaSeconds > 3600) controller.abort();
      },
    });
    const out: Uint8Array = await writeNifti(chi.data, nii, { gzip: true });
    const models = await tessera.registry();
    return out.length + report.tilesRun + models.length + report.memory.workerHeapHighWater.length;
  } catch (e) {
    if (e instanceof TesseraError) return e.code.length;
    throw e;
  } finally {
    await tessera.terminate();
  }
}

// The phase networks: wrapped phase of several echoes in, χ (or iQFM's local field) out.
export async function phaseExample(phaseBytes: Uint8Array, magnitude: Float32Array, weights: Uint8Array): Promise<number> {
  const nii = readEchoes(phaseBytes);
  const { phase } = phaseToRadians(nii, { units: 'scanner' });
  if (nii.echoes !== 2) return -2;
  const tessera = await createTessera();
  try {
    const geometry: Geometry = { dims: [160, 160, 128], voxelMm: [1, 1, 1], b0Dir: [0, 0.2, 0.98] };
    const te = [0.004, 0.008];
    const plan = await tessera.plan({ geometry, model: 'iqsm-plus', te, b0: 3, erodeRadius: 3 });
    if (!plan.feasible) return -1;
    const iqsm = await tessera.model('iqsm-plus');
    const roles: string[] = iqsm.inputs;
    const r = await tessera.invert({
      model: 'iqfm', phase, magnitude, geometry, te, b0: 3, phaseSign: -1, weights,
      inputNames: { phase: 'wphs', b0_dir: 'z_prjs' },
    });
    const field: Float32Array | undefined = r.quantity === 'local-field' ? r.localField?.data : r.chi.data;
    return (field?.length ?? 0) + roles.length + iqsm.cropMargin + (r.report.pool[0].inputBinding?.phase.length ?? 0);
  } finally {
    await tessera.terminate();
  }
}

// The README's "Using it": Volumes from the input loader, a plan handed back, the schema.
export async function readmeExample(fieldBytes: Uint8Array, maskBytes: Uint8Array): Promise<number> {
  const { createTessera: create, loadInputs, writeNifti: write } = await import('tessera-qsm');
  const tessera = await create({ workers: 2, threadsPerWorker: 1 });
  const { field, mask, input } = await loadInputs({ field: fieldBytes, mask: maskBytes }, { units: 'ppm' });
  if (!field || !mask) throw new Error('no field');
  const request = { field, mask, model: 'xqsm' };
  const plan = await tessera.plan(request);
  if (!plan.feasible) throw new Error(plan.message);
  const tiles: number = plan.grid.tiles.filter((t) => !t.skipped).length;
  const [weights] = await tessera.loadWeights('xqsm');
  const { chi } = await tessera.invert({ ...request, weights, plan });
  const out = await write(chi.data, input, { gzip: true });
  const schema = await tessera.schema();
  await tessera.terminate();
  return out.length + tiles + schema.length;
}

// Fidelity: the quality target, the predicted fidelity beside the estimate, the self-check, the network's reach.
export async function fidelityExample(field: Float32Array, mask: Uint8Array, weights: Uint8Array): Promise<number> {
  const tessera = await createTessera();
  try {
    const geometry: Geometry = { dims: [160, 192, 144], voxelMm: [1, 1, 1] };
    const quality = (await tessera.schema()).find((o) => o.name === 'quality')?.choices[0] === 'faithful' ? 'faithful' : 'balanced';
    const { graph, probe } = await tessera.receptiveField({ weights, model: 'demo-unet', probe: true });
    const plan = await tessera.plan({ geometry, mask, model: 'demo-unet', quality, verify: true, context: probe, weights });
    const predicted: number = plan.predictedFidelity?.r ?? 0;
    const warned: boolean = plan.fidelityWarning !== '';
    const reach: number = plan.context?.measured ? plan.context.radius90 : (plan.context?.radius ?? graph.radiusMax);
    const stride: number | undefined = plan.tile.stride;
    const { report } = await tessera.invert({ field, mask, geometry, model: 'demo-unet', weights, plan, verify: true, quality: 'fast',
      onProgress: (p: Progress) => p.stage === 'verify' });
    const v = report.verify;
    const verified: number = v?.possible ? (v.r ?? 0) - (v.predicted?.r ?? 0) + (v.dataConsistency ?? 0) : v?.exact ? 1 : 0;
    return predicted + Number(warned) + reach + (stride ?? 0) + verified + (plan.verify?.possible ? plan.verify.margin : 0);
  } finally {
    await tessera.terminate();
  }
}

// Memory that tells the truth: a custom network calibrated, the plan saying so, a run's heaps against its plan.
export async function calibrationExample(field: Float32Array, mask: Uint8Array, weights: Uint8Array): Promise<string> {
  const tessera = await createTessera({ workerHeapGuardBytes: 3.5e9 });
  try {
    const geometry: Geometry = { dims: [96, 96, 96], voxelMm: [1, 1, 1] };
    const c = await tessera.calibrate({ weights, spec: { divisor: 8 }, onProgress: (p) => p.edge > 0 });
    const safe: boolean = c.points.every((p) => p.heapBytes <= c.fixedBytes + c.bytesPerVoxel * p.voxels);
    const plan = await tessera.plan({ geometry, mask, spec: { divisor: 8 }, weights });
    const calibrated: boolean = plan.cost.source === 'calibrated' && plan.cost.bytesPerVoxel === c.bytesPerVoxel;
    const { report } = await tessera.invert({ field, mask, geometry, spec: { divisor: 8 }, weights, plan });
    const guard: number = (await tessera.limits()).workerHeapGuardBytes;
    return `${safe} ${calibrated} ${report.memory.workerHeapVsPlan} ${report.memory.warning ?? ''} ${c.fit.note} ${guard}`;
  } finally {
    await tessera.terminate();
  }
}

// Execution providers: the option, the pure selection, and what the report and progress say.
export async function executionProviders(weights: Uint8Array, field: Float32Array, geometry: Geometry): Promise<string> {
  const { selectExecutionProvider, graphOperators, platformProviders } = await import('tessera-qsm');
  const choice = selectExecutionProvider({ preference: ['webgpu', 'wasm'], platform: platformProviders(), ops: graphOperators(weights) });
  const tessera = await createTessera({ executionProviders: ['webgpu', 'wasm'], ortGpuModuleUrl: '/ort.all.min.mjs' });
  try {
    let seen: string[] = [];
    const { report } = await tessera.invert({ field, geometry, spec: { divisor: 1 }, weights, executionProviders: ['wasm'],
      onProgress: (p: Progress) => { seen = p.executionProvider ?? []; } });
    const ep = report.executionProvider[0];
    return `${choice.provider} ${ep.provider} ${ep.skipped.map((s) => s.reason).join()} ${ep.fallback ?? ''} ${seen.join()}`;
  } finally {
    await tessera.terminate();
  }
}

// Classical methods and the pipeline from phase.
export async function classical(t: Awaited<ReturnType<typeof createTessera>>, field: Float32Array, mask: Uint8Array, phase: Float32Array, geometry: Geometry) {
  const plan = await t.plan({ geometry, mask, method: 'tv', tv: { maxIterations: 100 } });
  const out = await t.invert({ field, mask, geometry, method: 'tv', tv: { lambda: 2e-4 }, plan, keepInputs: true });
  const r: number = out.report.memory.moduleHeapVsPlan + out.chi.affine[0] + out.chi.data.length;
  const tkd: Float32Array = (await t.tkd({ field, mask, geometry })).data;
  const p = await t.pipeline({ phase, te: [0.004, 0.008], geometry, method: 'rts', background: 'pdf', pdf: { maxIterations: 20 } });
  const chi = p.chi?.data;
  const scan = await t.phantomScan({ geometry, te: [0.004, 0.008], snr: 100 });
  return [r, chi, tkd, scan.localField] as const;
}

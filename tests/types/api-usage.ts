// Compiled with `tsc --strict` (npm run typecheck): the declarations must describe real usage.
import { createTessera, TesseraError, readNifti, writeNifti, hzToPpm, type Plan, type Progress } from 'tessera-qsm';

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
    const out: Uint8Array = await writeNifti(chi, nii, { gzip: true });
    const models = await tessera.registry();
    return out.length + report.tilesRun + models.length + report.memory.workerHeapHighWater.length;
  } catch (e) {
    if (e instanceof TesseraError) return e.code.length;
    throw e;
  } finally {
    await tessera.terminate();
  }
}

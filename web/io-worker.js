// File work off the page's main thread: NIfTI decoding (.nii/.nii.gz), magnitude thresholding and
// writing χ as .nii.gz. A tiny request/response protocol: {id, op, args} → {id, result} | {id, error}.
import { readNiftiAsync, thresholdMask, writeNifti, hzToPpm } from '../bindings/js/nifti.js';

const ops = {
  async read({ bytes, units, b0 }) {
    const img = await readNiftiAsync(bytes);
    if (units === 'hz') img.data = hzToPpm(img.data, b0);
    return img;
  },
  async mask({ bytes }) {
    // readMask's rule (1 where the scaled value is finite and nonzero), after an async decode: readMask
    // itself is synchronous and cannot gunzip in a worker without nifti-reader-js.
    const img = await readNiftiAsync(bytes);
    const mask = new Uint8Array(img.data.length);
    for (let i = 0; i < mask.length; i++) mask[i] = img.data[i] !== 0 && Number.isFinite(img.data[i]) ? 1 : 0;
    return { dims: img.dims, mask };
  },
  async threshold({ bytes, fraction }) {
    const img = await readNiftiAsync(bytes);
    return { dims: img.dims, mask: thresholdMask(img.data, fraction) };
  },
  async write({ data, like, gzip }) {
    return writeNifti(data, like, { gzip, description: 'Tessera QSM chi (ppm)' });
  },
};

self.addEventListener('message', async (e) => {
  const { id, op, args } = e.data;
  try {
    const result = await ops[op](args);
    const transfer = [];
    if (result?.data?.buffer) transfer.push(result.data.buffer);
    if (result?.mask?.buffer) transfer.push(result.mask.buffer);
    if (result instanceof Uint8Array) transfer.push(result.buffer);
    self.postMessage({ id, result }, transfer);
  } catch (err) {
    self.postMessage({ id, error: { message: err?.message ?? String(err), code: err?.code } });
  }
});

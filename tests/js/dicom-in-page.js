// DICOM folders converted by the page's own converter (web/dicom.js convertDicom: dcm2niix compiled to wasm, in a
// Chromium page served by scripts/serve.js), their NIfTI outputs and BIDS sidecars written to a folder: what a user gets
// from the page, for tests that take real vendor DICOM on to the CLI or the cohort workflow.
import fs from 'node:fs';

/**
 * dcm2niix's outputs of a folder, converted in the page as its DICOM input does, written to dir as <name>.nii.
 * Returns {name: sidecar} (dcm2niix's BIDS sidecar of each output).
 * Precondition: page shows the Tessera page (/web/) of a served checkout; folder is a local folder of DICOM files.
 * @param {import('playwright-core').Page} page
 * @param {string} folder
 * @param {string} dir
 */
export async function convertInPage(page, folder, dir) {
  await page.evaluate(() => {
    if (document.querySelector('#probeDir')) return;
    const i = Object.assign(document.createElement('input'), { type: 'file', multiple: true, id: 'probeDir', hidden: true });
    i.webkitdirectory = true;
    document.body.append(i);
  });
  await page.setInputFiles('#probeDir', folder);
  const outs = await page.evaluate(async () => {
    const { convertDicom } = await import('/web/dicom.js');
    const outputs = await convertDicom([...document.querySelector('#probeDir').files]);
    const b64 = async (f) => {
      const u = new Uint8Array(await f.arrayBuffer());
      let s = '';
      for (let k = 0; k < u.length; k += 0x8000) s += String.fromCharCode(...u.subarray(k, k + 0x8000));
      return btoa(s);
    };
    return Promise.all(outputs.map(async (o) => ({ name: o.name, sidecar: o.sidecar, nii: await b64(o.nii) })));
  });
  fs.mkdirSync(dir, { recursive: true });
  const sidecars = {};
  for (const o of outs) {
    fs.writeFileSync(`${dir}/${o.name}.nii`, Buffer.from(o.nii, 'base64'));
    sidecars[o.name] = o.sidecar;
  }
  return sidecars;
}

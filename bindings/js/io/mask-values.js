// The rule a mask's values are read by, defined once for files (io/nifti.js) and arrays handed to the API
// (runtime/requests.js): a finite value > 0 is inside. No dependency, so the driver worker imports it in any browser.

/**
 * A mask from a file's values, by one rule: a finite value > 0 is inside; 0, negatives (a mask of −1 outside), NaN and
 * ±Inf are outside. Returns 0/1 bytes.
 * @param {ArrayLike<number>} data
 * @returns {Uint8Array}
 */
export function maskFromValues(data) {
  const mask = new Uint8Array(data.length);
  for (let i = 0; i < data.length; i++) {
    const v = data[i];
    mask[i] = v > 0 && Number.isFinite(v) ? 1 : 0;
  }
  return mask;
}

/**
 * The warning for a mask file that holds values other than 0 and 1 (what maskFromValues assumed), or ''.
 * @param {ArrayLike<number>} data
 * @returns {string}
 */
export function maskValuesWarning(data) {
  let other = 0;
  let lo = Infinity;
  let hi = -Infinity;
  for (let i = 0; i < data.length; i++) {
    const v = data[i];
    if (v === 0 || v === 1) continue;
    other++;
    if (v < lo) lo = v;
    if (v > hi) hi = v;
  }
  if (!other) return '';
  return `the mask holds ${other} value(s) other than 0 and 1 (in [${lo}, ${hi}]): read as inside where > 0, outside where 0, negative or not finite`;
}

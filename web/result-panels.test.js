// web/result-panels.js: where a slice's voxels land on the screen (axial: right to the right, anterior up, as the
// viewer's NiiVue shows it with the neurological convention), their colours, and the colormaps (NiiVue's tables). The
// panels themselves are drawn in Chromium by web/page.test.js, page-classical.test.js and viewer.test.js.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { cmapper } from '@niivue/niivue';
import { sliceRgba, colormapNames } from './result-panels.js';

/** A row-major 4x4 affine whose columns are the voxel axes' world directions (RAS), times 1.5 mm. */
const affine = (cols) => [0, 1, 2].flatMap((r) => [...cols.map((c) => 1.5 * c[r]), 0]).concat([0, 0, 0, 1]);

test('sliceRgba: the voxel most right and anterior (in a non-axial slice: toward + of its axes, superior up) is drawn top right, whatever the voxel axes; the window maps through the colormap; NaN is transparent', () => {
  const dims = [4, 3, 2];
  const gray = cmapper.colormap('gray');
  // Each case: the voxel axes' directions, and the voxel (i, j) to be drawn top right.
  const cases = [
    ['RAS (no affine)', undefined, [3, 2]],
    ['RAS', affine([[1, 0, 0], [0, 1, 0], [0, 0, 1]]), [3, 2]],
    ['LAS (x runs left)', affine([[-1, 0, 0], [0, 1, 0], [0, 0, 1]]), [0, 2]],
    ['RPS (y runs posterior)', affine([[1, 0, 0], [0, -1, 0], [0, 0, 1]]), [3, 0]],
    ['ARS (x anterior, y right)', affine([[0, 1, 0], [1, 0, 0], [0, 0, 1]]), [3, 2]],
    ['PLS (x posterior, y left)', affine([[0, -1, 0], [-1, 0, 0], [0, 0, 1]]), [0, 0]],
    ['RAS turned 10° about S', affine([[0.985, 0.174, 0], [-0.174, 0.985, 0], [0, 0, 1]]), [3, 2]],
    // Not axial: slice z as stored, the more superior in-plane axis up, the other to the right (toward + each).
    ['coronal slices (x right, y superior)', affine([[1, 0, 0], [0, 0, 1], [0, 1, 0]]), [3, 2]],
    ['sagittal slices (x posterior, y superior)', affine([[0, -1, 0], [0, 0, 1], [1, 0, 0]]), [0, 2]],
  ];
  for (const [name, aff, [i, j]] of cases) {
    // Slice 1 is 0 but for 1 at (i, j) and NaN at the opposite corner; slice 0 is all 1 (not drawn).
    const data = new Float32Array(24).fill(1);
    data.fill(0, 12);
    data[12 + i + 4 * j] = 1;
    data[12 + (3 - i) + 4 * (2 - j)] = NaN;
    const { width, height, rgba } = sliceRgba(data, dims, 1, aff, gray, [0, 1]);
    assert.equal(width * height, 12, name);
    const at = (c, r) => [...rgba.subarray(4 * (c + width * r), 4 * (c + width * r) + 4)];
    assert.deepEqual(at(width - 1, 0), [...gray.subarray(4 * 255, 4 * 255 + 3), 255], `${name}: top right is the window's top`);
    assert.deepEqual(at(0, height - 1), [0, 0, 0, 0], `${name}: bottom left (NaN) is transparent`);
    assert.deepEqual(at(1, 1).slice(0, 3), [...gray.subarray(0, 3)], `${name}: a 0 is the window's bottom`);
  }
});

test('colormapNames are NiiVue\'s, gray among them', () => {
  const names = colormapNames();
  assert.ok(names.includes('gray') && names.includes('hot') && names.length > 10, names.join(' '));
});

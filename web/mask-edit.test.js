// web/mask-edit.js against independent, brute-force definitions: erosion and dilation by a ball in mm (anisotropic
// voxels, random masks, edges), holes filled (a closed shell, a cavity open to the edge), the largest component, the
// brush's ball and the undo history's counts.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { ballOffsets, dilate, erode, fillHoles, largestComponent, brush, difference, countSet, MaskHistory } from './mask-edit.js';

/** A deterministic random mask (xorshift), about `p` set. */
function randomMask(n, p, seed) {
  let s = seed >>> 0 || 1;
  return Uint8Array.from({ length: n }, () => {
    s ^= s << 13; s >>>= 0; s ^= s >>> 17; s ^= s << 5; s >>>= 0;
    return s / 2 ** 32 < p ? 1 : 0;
  });
}

/** Brute force: for every voxel, every voxel within radius mm (distance from voxel centres), bounds checked. */
function bruteMorph(mask, dims, vox, rMm, mode) {
  const [nx, ny, nz] = dims;
  const out = new Uint8Array(mask.length);
  const R = Math.ceil(rMm / Math.min(...vox)) + 1;
  for (let z = 0; z < nz; z++)
    for (let y = 0; y < ny; y++)
      for (let x = 0; x < nx; x++) {
        let any = false, all = true;
        for (let c = z - R; c <= z + R; c++)
          for (let b = y - R; b <= y + R; b++)
            for (let a = x - R; a <= x + R; a++) {
              const d = Math.hypot((a - x) * vox[0], (b - y) * vox[1], (c - z) * vox[2]);
              if (d > rMm + 1e-6) continue;
              const inside = a >= 0 && b >= 0 && c >= 0 && a < nx && b < ny && c < nz;
              const v = inside ? mask[a + b * nx + c * nx * ny] : 0;
              if (v) any = true;
              else all = false;
            }
        out[x + y * nx + z * nx * ny] = mode === 'dilate' ? +any : +all;
      }
  return out;
}

test('erode and dilate equal a brute-force ball in mm, on anisotropic voxels and at the volume edges', () => {
  const cases = [
    { dims: [9, 8, 7], vox: [1, 1, 1], r: 1, p: 0.6, seed: 1 },
    { dims: [10, 9, 6], vox: [0.8, 1, 2], r: 2, p: 0.7, seed: 2 },
    { dims: [7, 11, 8], vox: [1.5, 1.5, 1.5], r: 3.1, p: 0.8, seed: 3 },
    { dims: [8, 8, 8], vox: [1, 1, 1], r: 0.5, p: 0.5, seed: 4 },
  ];
  for (const c of cases) {
    const m = randomMask(c.dims[0] * c.dims[1] * c.dims[2], c.p, c.seed);
    const d = dilate(m, c.dims, c.vox, c.r);
    const e = erode(m, c.dims, c.vox, c.r);
    assert.deepEqual(d, bruteMorph(m, c.dims, c.vox, c.r, 'dilate'), `dilate ${JSON.stringify(c)}`);
    assert.deepEqual(e, bruteMorph(m, c.dims, c.vox, c.r, 'erode'), `erode ${JSON.stringify(c)}`);
    if (c.r >= Math.min(...c.vox)) {
      assert.ok(countSet(d) > countSet(m));
      assert.ok(countSet(e) < countSet(m));
    } else assert.deepEqual([d, e], [m, m], 'a ball of the centre only');
  }
  // A radius under every voxel size is the identity.
  const m = randomMask(5 * 5 * 5, 0.5, 9);
  assert.deepEqual(dilate(m, [5, 5, 5], [1, 1, 1], 0.4), m);
});

test('ballOffsets: a 1 mm ball on 1 mm voxels is the centre and its 6 faces; on 1×1×2 mm voxels radius 2 mm is 27', () => {
  assert.equal(ballOffsets([1, 1, 1], 1).length, 7);
  // In plane: the 13 offsets with dx²+dy² <= 4; along z ±1 (2 mm) only at dx = dy = 0: 13 + 2.
  assert.equal(ballOffsets([1, 1, 2], 2).length, 15);
  assert.throws(() => ballOffsets([1, 1, 1], -1), /radius must be >= 0 mm/);
});

test('fillHoles fills a closed cavity and leaves a cavity open to the volume edge', () => {
  const dims = [12, 12, 12];
  const [nx, ny] = dims;
  const at = (x, y, z) => x + y * nx + z * nx * ny;
  const m = new Uint8Array(12 ** 3);
  // A hollow cube shell 2..8 (cavity 3..7) and a U-shaped cup whose cavity opens at x = 11.
  for (let z = 2; z <= 8; z++)
    for (let y = 2; y <= 8; y++)
      for (let x = 2; x <= 8; x++) if (x === 2 || x === 8 || y === 2 || y === 8 || z === 2 || z === 8) m[at(x, y, z)] = 1;
  const f = fillHoles(m, dims);
  for (let z = 3; z <= 7; z++) for (let y = 3; y <= 7; y++) for (let x = 3; x <= 7; x++) assert.equal(f[at(x, y, z)], 1);
  assert.equal(countSet(f), 7 ** 3);
  // Open the shell's face x = 8 at one voxel: the cavity now connects to the outside and stays unset.
  m[at(8, 5, 5)] = 0;
  const g = fillHoles(m, dims);
  assert.deepEqual(g, m);
});

test('largestComponent keeps the biggest 6-connected blob (diagonal contact does not join)', () => {
  const dims = [10, 10, 10];
  const at = (x, y, z) => x + y * 10 + z * 100;
  const m = new Uint8Array(1000);
  for (let z = 0; z < 3; z++) for (let y = 0; y < 3; y++) for (let x = 0; x < 3; x++) m[at(x, y, z)] = 1; // 27
  for (let z = 5; z < 9; z++) for (let y = 5; y < 9; y++) for (let x = 5; x < 8; x++) m[at(x, y, z)] = 1; // 48
  m[at(3, 3, 3)] = 1; // touches the 27-block only at a corner
  const l = largestComponent(m, dims);
  assert.equal(countSet(l), 48);
  assert.equal(l[at(5, 5, 5)], 1);
  assert.equal(l[at(0, 0, 0)], 0);
  assert.equal(countSet(largestComponent(new Uint8Array(8), [2, 2, 2])), 0);
});

test('brush paints and erases the voxels within the radius (mm) of the centre, counted; the history undoes and counts', () => {
  const dims = [16, 16, 8], vox = [1, 1, 2];
  const base = new Uint8Array(16 * 16 * 8);
  const c = [8, 8, 4];
  const a = brush(base, dims, vox, c, 3, 1);
  // Independent count: voxels whose centre lies within 3 mm of the centre's.
  let want = 0;
  for (let z = 0; z < 8; z++)
    for (let y = 0; y < 16; y++)
      for (let x = 0; x < 16; x++) {
        const inBall = Math.hypot(x - c[0], y - c[1], 2 * (z - c[2])) <= 3;
        want += inBall;
        assert.equal(a.mask[x + 16 * y + 256 * z], +inBall);
      }
  assert.equal(a.changed, want);
  assert.equal(countSet(base), 0, 'the input mask is not changed');
  const h = new MaskHistory(base, 'the file');
  h.push(a.mask, 'brush add');
  const e = brush(h.mask, dims, vox, [8, 8, 4], 1, 0);
  h.push(e.mask, 'brush remove');
  assert.equal(e.changed, 5); // the centre and its four in-plane neighbours (z is 2 mm away)
  assert.deepEqual(h.changes(), { added: want - 5, removed: 0 });
  assert.deepEqual(h.ops, ['brush add', 'brush remove']);
  assert.equal(h.undo(), true);
  assert.deepEqual(h.mask, a.mask);
  assert.equal(h.undo(), true);
  assert.deepEqual(h.mask, base);
  assert.equal(h.undo(), false);
  assert.deepEqual(difference(Uint8Array.of(1, 1, 0, 0), Uint8Array.of(1, 0, 1, 1)), { added: 2, removed: 1 });
});

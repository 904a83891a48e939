// Mask editing for the page, in plain JS (no DOM; the magnitude's threshold is the package's thresholdMask): erode and dilate by a ball in mm, fill holes,
// keep the largest component, paint or erase a ball (the brush), and an undo history that counts the voxels added and
// removed against the mask the editing started from. Masks are Uint8Array (0/1), x fastest, dims [nx, ny, nz].

/** The offsets [dx, dy, dz] of a ball of radius `radiusMm` on voxels of size voxelMm (the centre included). */
export function ballOffsets(voxelMm, radiusMm) {
  if (!(radiusMm >= 0)) throw new RangeError(`radius must be >= 0 mm, got ${radiusMm}`);
  const r = voxelMm.map((v) => Math.floor(radiusMm / v + 1e-9));
  const r2 = radiusMm * radiusMm * (1 + 1e-9);
  const out = [];
  for (let dz = -r[2]; dz <= r[2]; dz++)
    for (let dy = -r[1]; dy <= r[1]; dy++)
      for (let dx = -r[0]; dx <= r[0]; dx++) {
        if ((dx * voxelMm[0]) ** 2 + (dy * voxelMm[1]) ** 2 + (dz * voxelMm[2]) ** 2 <= r2) out.push([dx, dy, dz]);
      }
  return out;
}

/** Sets to `value` every voxel of the ball (offsets) around each (x, y, z) that `pick(i)` selects; in place. */
function stampFrom(out, src, dims, offsets, pick, value) {
  const [nx, ny, nz] = dims;
  const nxy = nx * ny;
  for (let z = 0, i = 0; z < nz; z++)
    for (let y = 0; y < ny; y++)
      for (let x = 0; x < nx; x++, i++) {
        if (!pick(src[i])) continue;
        for (const [dx, dy, dz] of offsets) {
          const a = x + dx, b = y + dy, c = z + dz;
          if (a < 0 || b < 0 || c < 0 || a >= nx || b >= ny || c >= nz) continue;
          out[a + b * nx + c * nxy] = value;
        }
      }
}

/** The mask dilated by a ball of radius `radiusMm`: a voxel is set when any voxel of the ball around it is. */
export function dilate(mask, dims, voxelMm, radiusMm) {
  const out = Uint8Array.from(mask, (v) => (v ? 1 : 0));
  stampFrom(out, mask, dims, ballOffsets(voxelMm, radiusMm), (v) => !!v, 1);
  return out;
}

/**
 * The mask eroded by a ball of radius `radiusMm`: a voxel stays set when every voxel of the ball around it is set;
 * outside the volume counts as unset.
 */
export function erode(mask, dims, voxelMm, radiusMm) {
  const offsets = ballOffsets(voxelMm, radiusMm);
  const out = Uint8Array.from(mask, (v) => (v ? 1 : 0));
  stampFrom(out, mask, dims, offsets, (v) => !v, 0);
  // The ball reaches r[k] voxels along axis k: voxels nearer the edge than that see outside the volume.
  const r = [0, 1, 2].map((k) => Math.max(...offsets.map((o) => o[k])));
  const [nx, ny, nz] = dims;
  for (let z = 0, i = 0; z < nz; z++)
    for (let y = 0; y < ny; y++)
      for (let x = 0; x < nx; x++, i++) {
        if (x < r[0] || y < r[1] || z < r[2] || x >= nx - r[0] || y >= ny - r[1] || z >= nz - r[2]) out[i] = 0;
      }
  return out;
}

/**
 * Labels the 6-connected components of the voxels where `inside(i)` holds: { labels: Int32Array (0 = not inside,
 * 1… component), sizes: [0, size of 1, …], touchesEdge: [false, …] }.
 */
export function components(dims, inside) {
  const [nx, ny, nz] = dims;
  const n = nx * ny * nz, nxy = nx * ny;
  const labels = new Int32Array(n);
  const sizes = [0], touchesEdge = [false];
  const stack = new Int32Array(n);
  for (let s = 0; s < n; s++) {
    if (labels[s] || !inside(s)) continue;
    const id = sizes.length;
    let top = 0, size = 0, edge = false;
    labels[s] = id;
    stack[top++] = s;
    while (top) {
      const i = stack[--top];
      size++;
      const x = i % nx, y = Math.floor(i / nx) % ny, z = Math.floor(i / nxy);
      if (x === 0 || y === 0 || z === 0 || x === nx - 1 || y === ny - 1 || z === nz - 1) edge = true;
      const push = (j) => {
        if (!labels[j] && inside(j)) {
          labels[j] = id;
          stack[top++] = j;
        }
      };
      if (x > 0) push(i - 1);
      if (x < nx - 1) push(i + 1);
      if (y > 0) push(i - nx);
      if (y < ny - 1) push(i + nx);
      if (z > 0) push(i - nxy);
      if (z < nz - 1) push(i + nxy);
    }
    sizes.push(size);
    touchesEdge.push(edge);
  }
  return { labels, sizes, touchesEdge };
}

/** The mask with its holes filled: unset regions (6-connected) that do not reach the volume's edge become set. */
export function fillHoles(mask, dims) {
  const { labels, touchesEdge } = components(dims, (i) => !mask[i]);
  return Uint8Array.from(mask, (v, i) => (v || !touchesEdge[labels[i]] ? 1 : 0));
}

/** The mask's largest 6-connected component (the first found of equal sizes); an empty mask stays empty. */
export function largestComponent(mask, dims) {
  const { labels, sizes } = components(dims, (i) => !!mask[i]);
  let best = 0;
  for (let k = 1; k < sizes.length; k++) if (sizes[k] > sizes[best]) best = k;
  return Uint8Array.from(labels, (l) => (best && l === best ? 1 : 0));
}

/**
 * A copy of the mask with a ball of radius `radiusMm` around voxel `center` ([x, y, z]) set to `value` (1 paints, 0
 * erases); the voxels changed are counted.
 */
export function brush(mask, dims, voxelMm, center, radiusMm, value) {
  const out = mask.slice();
  const [nx, ny, nz] = dims;
  let changed = 0;
  for (const [dx, dy, dz] of ballOffsets(voxelMm, radiusMm)) {
    const x = center[0] + dx, y = center[1] + dy, z = center[2] + dz;
    if (x < 0 || y < 0 || z < 0 || x >= nx || y >= ny || z >= nz) continue;
    const i = x + y * nx + z * nx * ny;
    if (out[i] !== value) changed++;
    out[i] = value;
  }
  return { mask: out, changed };
}

/** Voxels set in b and not in a (added), set in a and not in b (removed). */
export function difference(a, b) {
  let added = 0, removed = 0;
  for (let i = 0; i < a.length; i++) {
    if (b[i] && !a[i]) added++;
    else if (a[i] && !b[i]) removed++;
  }
  return { added, removed };
}

/** Voxels set. */
export function countSet(m) {
  let n = 0;
  for (let i = 0; i < m.length; i++) n += m[i] ? 1 : 0;
  return n;
}

/**
 * An editing session on one mask: the mask it started from (`base`, and where it came from), the current mask, the
 * operations applied in order, and undo. Masks handed in are not copied: the caller hands fresh arrays.
 */
export class MaskHistory {
  constructor(base, source) {
    this.base = base;
    this.source = source;
    this.stack = [{ mask: base, op: source }];
  }

  get mask() {
    return this.stack.at(-1).mask;
  }

  /** The operations applied since the base, in order (undone ones left out). */
  get ops() {
    return this.stack.slice(1).map((s) => s.op);
  }

  /** Applies an edit: `mask` becomes the current mask, `op` names it. */
  push(mask, op) {
    this.stack.push({ mask, op });
  }

  /** Replaces the current mask without a new undo step (a threshold slider moving live replaces its own step). */
  replace(mask, op) {
    if (this.stack.length === 1) this.push(mask, op);
    else this.stack[this.stack.length - 1] = { mask, op };
  }

  /** Undoes the last edit; false when there is none. */
  undo() {
    if (this.stack.length === 1) return false;
    this.stack.pop();
    return true;
  }

  /** Voxels added and removed against the base. */
  changes() {
    return difference(this.base, this.mask);
  }
}

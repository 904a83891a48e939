// graphCost: a network's multiply-accumulates per input voxel, counted by hand for the test networks.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { graphCost } from './graph-cost.js';
import { convStack, unet, wrongShape } from '../../tests/js/networks.js';

test('a stack of 3×3×3 convolutions: 27 · (input · output channels) per layer, at full resolution', () => {
  // 1 → 4, 4 → 4, 4 → 1 channels.
  assert.deepEqual(graphCost(convStack({ layers: 3, channels: 4 })), { macsPerVoxel: 27 * (4 + 16 + 4), convolutions: 3, unscaled: [] });
});

test('a U-Net: each level counted at its resolution (max pooling 2³ divides by 8, a transposed convolution multiplies back)', () => {
  for (const base of [2, 4, 8]) {
    const b = base;
    // Encoder: the first conv at full resolution, then one conv per level at 1/8, 1/64, 1/512 of the voxels.
    const encoder = 27 * b + (27 * b * 2 * b) / 8 + (27 * 2 * b * 4 * b) / 64 + (27 * 4 * b * 8 * b) / 512;
    // Decoder: per level a 2³ transposed convolution (per voxel of its coarser input) and a 3³ conv of the concatenation.
    const decoder =
      (8 * 8 * b * 4 * b) / 512 + (27 * 8 * b * 4 * b) / 64 +
      (8 * 4 * b * 2 * b) / 64 + (27 * 4 * b * 2 * b) / 8 +
      (8 * 2 * b * b) / 8 + 27 * 2 * b * b;
    const cost = graphCost(unet({ base }));
    assert.equal(cost.convolutions, 11);
    assert.ok(Math.abs(cost.macsPerVoxel - (encoder + decoder + b)) < 1e-9, `base ${base}: ${cost.macsPerVoxel} vs ${encoder + decoder + b}`);
  }
});

test('a strided convolution costs per output voxel: 27 MACs for every 8 input voxels', () => {
  assert.equal(graphCost(wrongShape()).macsPerVoxel, 27 / 8);
});

test('bytes that are not an ONNX model are refused by name', () => {
  assert.throws(() => graphCost(new Uint8Array([1, 2, 3, 4])), /ONNX|graph/);
});

test('the registry\'s work per voxel is its networks\' graph: the shipped demo weights, xQSM and QSMnet at their published shapes', { timeout: 120000 }, async () => {
  const fs = await import('node:fs');
  const { createTessera } = await import('./index.js');
  const { STANDINS } = await import('../../scripts/standins.js');
  const t = await createTessera({ workers: 1 });
  let registry;
  try {
    registry = new Map((await t.registry()).map((m) => [m.id, m]));
  } finally {
    await t.terminate();
  }
  const demo = new Uint8Array(fs.readFileSync(new URL('../../web/models/demo-unet.onnx', import.meta.url)));
  assert.equal(registry.get('demo-unet').macsPerVoxel, graphCost(demo).macsPerVoxel);
  assert.equal(registry.get('xqsm').macsPerVoxel, graphCost(STANDINS.xqsm.build()).macsPerVoxel);
  // QSMnet's stand-in is its published size (about 400 MB): built once, for both of its registry entries.
  const qsmnet = graphCost(STANDINS.qsmnet.build()).macsPerVoxel;
  assert.equal(registry.get('qsmnet').macsPerVoxel, qsmnet);
  assert.equal(registry.get('qsmnet-plus').macsPerVoxel, qsmnet);
});

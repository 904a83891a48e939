// Binding a multi-input network's roles to an export's input names, and fitting tensor ranks to declared shapes.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { bindInputs, fitDims } from './input-binding.js';

const IQSM = ['phase', 'mask', 'te', 'b0', 'border'];
const PLUS = ['phase', 'mask', 'te', 'b0', 'b0_dir', 'border'];

test('roles bind to equal names, then to the one name matching their pattern', () => {
  assert.deepEqual(bindInputs(IQSM, ['border', 'b0', 'te', 'mask', 'phase']), {
    binding: { phase: 'phase', mask: 'mask', te: 'te', b0: 'b0', border: 'border' },
    how: 'names',
  });
  const upstream = bindInputs(PLUS, ['wphs', 'masks', 'TEs', 'B0', 'z_prjs', 'border_shell']);
  assert.deepEqual(upstream.binding, { phase: 'wphs', mask: 'masks', te: 'TEs', b0: 'B0', b0_dir: 'z_prjs', border: 'border_shell' });
  // 'b0_dir' is never taken for B0.
  assert.equal(bindInputs(PLUS, ['phi', 'brain_mask', 'echo_time', 'b0_dir', 'B0_T', 'edge']).binding.b0, 'B0_T');
});

test('names that say nothing bind in the reference order; partial or ambiguous names are errors with the fix', () => {
  assert.deepEqual(bindInputs(IQSM, ['input.1', 'input.2', 'input.3', 'input.4', 'input.5']), {
    binding: { phase: 'input.1', mask: 'input.2', te: 'input.3', b0: 'input.4', border: 'input.5' },
    how: 'order',
  });
  assert.throws(() => bindInputs(IQSM, ['phase', 'x1', 'te', 'b0', 'x2']), /cannot tell which of the network's inputs x1, x2 is mask, border.*inputNames: \{phase: '<input name>'/);
  assert.throws(() => bindInputs(IQSM, ['phase', 'mask_a', 'mask_b', 'te', 'b0']), /mask_a, mask_b could each be 'mask'/);
  assert.throws(() => bindInputs(IQSM, ['phase', 'mask']), /the network has 2 input\(s\) \(phase, mask\) but the model needs 5 inputs/);
});

test('explicit names win and are checked', () => {
  const names = ['a', 'b', 'c', 'd', 'e'];
  const explicit = { phase: 'e', mask: 'd', te: 'c', b0: 'b', border: 'a' };
  assert.deepEqual(bindInputs(IQSM, names, explicit).binding, explicit);
  assert.throws(() => bindInputs(IQSM, names, { phase: 'zz' }), /no free input 'zz'/);
  assert.throws(() => bindInputs(IQSM, names, { b0_dir: 'a' }), /'b0_dir' is not an input of this model/);
});

test('tensor dims follow a declared shape of another rank with the same element count', () => {
  assert.deepEqual(fitDims([1], []), []);
  assert.deepEqual(fitDims([1], [1, 1]), [1, 1]);
  assert.deepEqual(fitDims([1, 1, 3], [1, 3]), [1, 3]);
  assert.deepEqual(fitDims([1, 1, 3], [1, 1, 3]), [1, 1, 3]);
  assert.deepEqual(fitDims([1, 1, 3], ['batch', 3]), [1, 1, 3]); // symbolic: keep ours, ORT decides
  assert.deepEqual(fitDims([1, 1, 3], [4]), [1, 1, 3]); // counts differ: ORT reports the mismatch
  assert.deepEqual(fitDims([1, 1, 8, 8, 8], undefined), [1, 1, 8, 8, 8]);
});

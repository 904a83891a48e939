// The phase workflow's acquisition check (node --test web/workflows/phase.test.js): TE in seconds like the API and
// the CLI, one per echo, a value above 1 s refused as probably milliseconds; B0 and erosion ranges.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { checkAcquisition } from './phase.js';

const form = (te, o = {}) => ({ te, b0: '3', erode: '3', sign: '-1', ...o });

test('echo times in seconds, one per echo, separated by commas, semicolons or spaces', () => {
  assert.deepEqual(checkAcquisition(form('0.02'), 1), { te: [0.02], b0: 3, erodeRadius: 3, phaseSign: -1, echoes: 1, problem: null });
  assert.deepEqual(checkAcquisition(form('0.004, 0.008;0.012 1e-2'), 4).te, [0.004, 0.008, 0.012, 0.01]);
  assert.deepEqual(checkAcquisition(form('1'), null).te, [1], '1 s is the largest accepted, as on the CLI');
  assert.equal(checkAcquisition(form('0.02', { sign: '1' }), 1).phaseSign, 1);
  // Before a phase is loaded any count is accepted.
  assert.deepEqual(checkAcquisition(form('0.02 0.03'), null).te, [0.02, 0.03]);
});

test('a TE above 1 s is refused as probably milliseconds, with the value in seconds to type', () => {
  const r = checkAcquisition(form('20'), 1);
  assert.equal(r.te, null);
  assert.equal(r.problem, 'TE 20 s is implausible for an echo time (probably milliseconds): give TE in seconds, not milliseconds (20 ms = 0.02: type 0.02).');
  assert.match(checkAcquisition(form('0.004, 8, 12'), 3).problem, /TE 8, 12 s is implausible .*type 0\.004, 0\.008, 0\.012\)/);
});

test('missing, malformed and miscounted echo times are refused in words', () => {
  assert.equal(checkAcquisition(form(''), 1).problem, 'Type the echo time TE in seconds, e.g. 0.02.');
  assert.equal(checkAcquisition(form('  '), 3).problem, 'Type the echo times TE in seconds, one per echo (3 echoes), comma-separated, e.g. 0.02, 0.03, 0.04.');
  assert.match(checkAcquisition(form('0.02, abc'), 2).problem, /^“abc” is not an echo time: type TE in seconds/);
  assert.match(checkAcquisition(form('-0.02'), 1).problem, /^“-0\.02” is not an echo time/);
  assert.match(checkAcquisition(form('0'), 1).problem, /^“0” is not an echo time/);
  assert.equal(
    checkAcquisition(form('0.02, 0.03'), 1).problem,
    'The phase holds 1 echo but 2 echo times were given: give one TE per echo, in seconds, comma-separated (e.g. 0.02).',
  );
  assert.match(checkAcquisition(form('0.02'), 2).problem, /^The phase holds 2 echoes but 1 echo time was given/);
});

test('B0 in (0, 30] T and a whole-number erosion in [0, 20]', () => {
  for (const b0 of ['0', '-3', '31', 'x', '']) assert.equal(checkAcquisition(form('0.02', { b0 }), 1).problem, 'Give the field strength B0 in tesla (e.g. 3).', b0);
  assert.equal(checkAcquisition(form('0.02', { b0: '7' }), 1).b0, 7);
  for (const erode of ['-1', '21', '2.5', 'x']) assert.match(checkAcquisition(form('0.02', { erode }), 1).problem, /whole number of voxels from 0 to 20/, erode);
  assert.equal(checkAcquisition(form('0.02', { erode: '0' }), 1).erodeRadius, 0);
  // The TE problem is named first.
  assert.match(checkAcquisition(form('', { b0: '0' }), 1).problem, /^Type the echo time/);
});

// The phase workflow's acquisition check (node --test web/workflows/phase.test.js): TE in seconds like the API and
// the CLI, one per echo, a value above 1 s refused as probably milliseconds; B0 and erosion ranges.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { checkAcquisition } from './phase.js';
import { createTessera } from '../../bindings/js/index.js';

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

test('B0 and the erosion in the C++ schema\'s ranges, worded from it', async () => {
  const t = await createTessera();
  let schema;
  try {
    schema = new Map((await t.schema()).map((o) => [o.name, o]));
  } finally {
    await t.terminate();
  }
  const options = { b0: schema.get('b0'), erode: schema.get('erodeRadius') };
  const { b0: b, erode: r } = options;
  const check = (o) => checkAcquisition(form('0.02', o), 1, options);
  const b0Words = `Give the field strength B0 in tesla, in ${b.minExclusive ? '(' : '['}${b.min}, ${b.max}] (e.g. ${b.defaultValue}).`;
  for (const b0 of [String(b.min), '-3', String(b.max + 1), 'x', '']) assert.equal(check({ b0 }).problem, b0Words, b0);
  assert.equal(check({ b0: String(b.max) }).b0, b.max);
  assert.equal(check({ b0: '7' }).b0, 7);
  for (const erode of [String(r.min - 1), String(r.max + 1), '2.5', 'x']) {
    assert.equal(check({ erode }).problem, `The mask erosion is a whole number of voxels from ${r.min} to ${r.max} (the reference uses ${r.defaultValue}).`, erode);
  }
  assert.equal(check({ erode: String(r.max) }).erodeRadius, r.max);
  assert.equal(check({ erode: '0' }).erodeRadius, 0);
  // The TE problem is named first; before the schema is known only non-numbers are refused here (C++ checks ranges).
  assert.match(checkAcquisition(form('', { b0: '0' }), 1, options).problem, /^Type the echo time/);
  assert.equal(checkAcquisition(form('0.02', { b0: 'x' }), 1, {}).problem, 'Give the field strength B0 in tesla.');
  assert.equal(checkAcquisition(form('0.02', { b0: '99' }), 1, {}).problem, null);
});

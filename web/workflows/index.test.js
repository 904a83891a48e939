// Which workflow each network takes (node --no-experimental-fetch --test web/workflows/index.test.js): decided from
// the registry's input roles, checked against the real registry of the runtime.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createTessera } from '../../bindings/js/index.js';
import { workflowFor, WORKFLOWS } from './index.js';

test('the phase networks take wrapped phase, every other network (and a custom one) a field map', async () => {
  const t = await createTessera({ workers: 1 });
  try {
    const registry = await t.registry();
    const kinds = Object.fromEntries(registry.map((m) => [m.id, workflowFor(m).kind]));
    for (const id of ['iqsm', 'iqfm', 'iqsm-plus']) assert.equal(kinds[id], 'phase', id);
    for (const id of ['demo-unet', 'xqsm', 'qsmnet']) assert.equal(kinds[id], 'field', id);
    for (const m of registry) assert.equal(workflowFor(m).kind === 'phase', m.inputs.includes('phase'), m.id);
    assert.equal(workflowFor(undefined).kind, 'field', 'a custom network');
    // Only whole-volume networks take the phase: the phase workflow has no tile settings.
    for (const m of registry.filter((x) => workflowFor(x).kind === 'phase')) assert.equal(m.tileable, false, m.id);
  } finally {
    await t.terminate();
  }
  assert.deepEqual(WORKFLOWS.map((w) => w.kind), ['field', 'phase', 'pipeline']);
  for (const w of WORKFLOWS) assert.equal(typeof w.fileInput, 'string');
});

// The page's classical-method inputs from the real C++ schema (node --no-experimental-fetch --test
// web/workflows/method.test.js): one input per <method>.<param> option with its default, range, unit and help; a
// worded option becomes a select; a typed value becomes the request's value, and the C++ plan accepts the defaults
// and refuses an out-of-range value in its own words (which the page shows as is).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createTessera } from '../../bindings/js/index.js';
import { methodNames, methodParams, readParam, paramLabel, rangeText, methodHeapLimit } from './method.js';

test('every method of the schema: inputs from its options, the defaults plan, TKD out of range is refused in C++ words', async () => {
  const t = await createTessera({ workers: 1 });
  try {
    const schema = await t.schema();
    const names = methodNames(schema);
    assert.ok(names.includes('tkd'), `methods: ${names}`);
    assert.deepEqual(methodNames(new Map(schema.map((o) => [o.name, o]))), names, 'the page keeps the schema as a Map');
    const geometry = { dims: [16, 16, 16], voxelMm: [1, 1, 1], b0Dir: [0, 0, 1] };
    for (const m of names) {
      const fields = methodParams(schema, m);
      const options = schema.filter((o) => o.name.startsWith(`${m}.`));
      assert.deepEqual(fields.map((f) => f.name), options.map((o) => o.name), m);
      const params = {};
      for (const [i, f] of fields.entries()) {
        const o = options[i];
        assert.equal(f.kind, o.choices.length ? 'select' : 'number', f.name);
        if (f.kind === 'select') assert.deepEqual(f.choices, o.choices);
        if (typeof o.default === 'number') assert.equal(f.value, String(o.default), f.name);
        assert.equal(f.help, o.help);
        const r = readParam(f, f.value);
        assert.equal(r.problem, undefined, f.name);
        if (r.value !== undefined) params[f.param] = r.value;
      }
      // The defaults as the page sends them plan (a method that needs a magnitude says so instead).
      const plan = await t.plan({ geometry, method: m, [m]: params }).catch((e) => ({ error: e.message }));
      if (plan.error) assert.match(plan.error, /magnitude/i, `${m}: ${plan.error}`);
      else if (!plan.feasible && /needs the magnitude/.test(plan.message)) assert.ok(['medi', 'tfi'].includes(m), `${m}: ${plan.message}`);
      else assert.equal(plan.feasible, true, `${m}: ${plan.message}`);
    }
    const [th] = methodParams(schema, 'tkd');
    assert.equal(th.label, 'Threshold');
    assert.equal(th.range, '(0, 0.667]');
    assert.deepEqual(readParam(th, ' 0.25 '), { value: 0.25 });
    assert.match(readParam(th, '').problem, /^Type a value for tkd\.threshold in \(0, 0\.667\]/);
    assert.match(readParam(th, 'abc').problem, /not a number/);
    await assert.rejects(t.plan({ geometry, method: 'tkd', tkd: { threshold: readParam(th, '0.9').value } }), /^Error: tkd\.threshold must be in \(0, 0\.6+7\], got 0\.9|tkd\.threshold must be in/);
    assert.equal(methodHeapLimit(await t.limits()) > 0, true);
  } finally {
    await t.terminate();
  }
});

test('labels and ranges in words', () => {
  assert.equal(paramLabel('maxIter'), 'Max iter');
  assert.equal(paramLabel('lambda'), 'Lambda');
  assert.equal(paramLabel('cg_tolerance'), 'Cg tolerance');
  assert.equal(rangeText({ min: 1, max: 1e15, minExclusive: false }), '≥ 1');
  assert.equal(rangeText({ min: 0, max: 1, minExclusive: true }), '(0, 1]');
  assert.equal(rangeText({ min: -1e15, max: 1e15 }), '');
  const words = { name: 'x.mode', choices: ['a', 'b'], default: 'b', help: '', unit: '' };
  const [f] = methodParams([words], 'x');
  assert.deepEqual([f.kind, f.value, f.choices], ['select', 'b', ['a', 'b']]);
  assert.deepEqual(readParam(f, 'a'), { value: 'a' });
  const auto = { name: 'x.iters', default: 'from the field', defaultValue: 0, min: 1, max: 1000, integer: true, help: '', unit: '' };
  const [g] = methodParams([auto], 'x');
  assert.deepEqual([g.value, g.placeholder, g.step], ['', 'from the field', '1']);
  assert.deepEqual(readParam(g, ''), { value: undefined }, 'left out: the default applies');
});

// The plans this runtime holds: plan() keeps the C++ plan (the request as C++ read it, what identifies the volume it was
// made for, the plan itself) under an id and returns its view with the id; invert({plan}) runs the held plan. The last
// HELD_PLANS plans are held, the oldest dropped.
import { TesseraError } from '../errors.js';
import { call } from './context.js';

/** Plans held at once (plan() calls beyond it drop the oldest). */
export const HELD_PLANS = 16;

/** Names this runtime in every id it gives, so that a plan of another runtime is told apart from a dropped one. */
const runtimeId = (() => {
  const b = crypto.getRandomValues(new Uint8Array(6));
  return [...b].map((x) => x.toString(16).padStart(2, '0')).join('');
})();
let next = 1;
const held = new Map(); // id → {handle: an M.Plan, view}, oldest first

/**
 * Holds handle (an M.Plan, now owned here) with its view (plan()'s object); returns the view with its id.
 * Precondition: view is handle.view() with what the driver adds (cost).
 */
export function holdPlan(handle, view) {
  const id = `${runtimeId}-${next++}`;
  const out = { ...view, id };
  held.set(id, { handle, view: out });
  for (const [oldest, e] of held) {
    if (held.size <= HELD_PLANS) break;
    held.delete(oldest);
    e.handle.delete(); // a run of it holds its own reference (takePlan)
  }
  return out;
}

/**
 * The held plan of a plan handed back (plan()'s object, or {id}): {handle (a new reference: delete it after the run),
 * view}. Refused in words (TesseraError InvalidArgument) when it is not plan()'s object, is another runtime's or is no
 * longer held.
 */
export function takePlan(plan) {
  if (plan === null || typeof plan !== 'object' || typeof plan.id !== 'string') {
    throw new TesseraError('plan must be the object plan() returned, which carries the id of the plan the runtime holds: call plan() and hand back what it returns', 'InvalidArgument');
  }
  const e = held.get(plan.id);
  if (!e) {
    if (!plan.id.startsWith(`${runtimeId}-`)) throw new TesseraError('this plan was made by another Tessera runtime: call plan() on the runtime that runs it', 'InvalidArgument');
    throw new TesseraError(`this plan is no longer held by the runtime (it holds the last ${HELD_PLANS}): call plan() again`, 'InvalidArgument');
  }
  return { handle: call(() => e.handle.clone()), view: e.view };
}

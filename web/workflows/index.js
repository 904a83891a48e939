// Which workflow a network takes, decided in one place from the registry: a network whose registry entry lists
// the input role 'phase' (iQSM, iQFM, iQSM+) reconstructs from the wrapped phase; every other network (the
// registry's field → χ networks, the demo, a custom .onnx) takes a local field map.
import { fieldWorkflow } from './field.js';
import { phaseWorkflow } from './phase.js';

export { fieldWorkflow, phaseWorkflow };

/** Every workflow the page offers. */
export const WORKFLOWS = [fieldWorkflow, phaseWorkflow];

/**
 * The workflow of a network.
 * Preconditions: `model` is a registry entry (tessera.registry()) or undefined (a custom network).
 */
export function workflowFor(model) {
  return model?.inputs?.includes('phase') ? phaseWorkflow : fieldWorkflow;
}

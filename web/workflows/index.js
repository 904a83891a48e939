// Which workflow a network takes, decided in one place from the registry: a network whose registry entry lists
// the input role 'phase' (iQSM, iQFM, iQSM+) reconstructs from the wrapped phase; every other network (the
// registry's field → χ networks, the demo, a custom .onnx) takes a local field map.
import { fieldWorkflow } from './field.js';
import { phaseWorkflow } from './phase.js';
import { pipelineWorkflow } from './pipeline.js';

export { fieldWorkflow, phaseWorkflow, pipelineWorkflow };

/** Every workflow the page offers (From phase, the pipeline, is chosen with the page's "Start from"). */
export const WORKFLOWS = [fieldWorkflow, phaseWorkflow, pipelineWorkflow];

/**
 * The workflow of a network.
 * Preconditions: `model` is a registry entry (tessera.registry()) or undefined (a custom network).
 */
export function workflowFor(model) {
  return model?.inputs?.includes('phase') ? phaseWorkflow : fieldWorkflow;
}

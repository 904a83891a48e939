// Binding a multi-input network's inputs (the iQSM family: phase, mask, te, b0, border, b0_dir) to the names
// an ONNX export gave them. The published networks document their inputs and order but not the exported names, so each
// role is found by: the caller's explicit name, then a name equal to the role, then one name matching the role's
// pattern (e.g. 'wphs' → phase, 'TEs' → te, 'z_prjs' → b0_dir), and only when no name says anything, the
// reference order. Anything ambiguous is an error that names the inputs and how to bind them.

/** Name patterns per role, tried in this order (b0_dir before b0: 'b0_dir' must not be taken for B0). */
const PATTERNS = [
  ['b0_dir', /dir|prj|orient|z_?proj/i],
  ['border', /border|shell|edge|boundary/i],
  ['mask', /mask|msk/i],
  ['phase', /phase|phs|phi|wph/i],
  ['te', /(^|[^a-z])tes?([^a-z]|$)|echo/i],
  ['b0', /(^|[^a-z])b0(?![a-z]|_?dir)|tesla|field_?strength/i],
];

/**
 * Binds roles to network input names.
 * roles: the model's input roles in the reference order; names: the session's input names (in the graph's order);
 * explicit: optional {role: name} from the caller.
 * Returns {binding: {role: name}, how: 'names'|'order'}; throws Error naming the inputs when it cannot bind.
 * @param {string[]} roles
 * @param {readonly string[]} names
 * @param {Object<string,string>} [explicit]
 */
export function bindInputs(roles, names, explicit = {}) {
  const want = `the model needs ${roles.length} inputs (${roles.join(', ')})`;
  const fix = `; name them with inputNames: {${roles.map((r) => `${r}: '<input name>'`).join(', ')}}`;
  if (names.length !== roles.length) {
    throw new Error(`the network has ${names.length} input(s) (${names.join(', ')}) but ${want}`);
  }
  const binding = {};
  const free = new Set(names);
  const take = (role, name) => {
    binding[role] = name;
    free.delete(name);
  };
  for (const [role, name] of Object.entries(explicit ?? {})) {
    if (!roles.includes(role)) throw new Error(`inputNames: '${role}' is not an input of this model (${roles.join(', ')})`);
    if (!free.has(name)) throw new Error(`inputNames: the network has no free input '${name}' (inputs: ${names.join(', ')})`);
    take(role, name);
  }
  for (const role of roles) {
    if (binding[role]) continue;
    const same = [...free].find((n) => n.toLowerCase() === role.toLowerCase());
    if (same) take(role, same);
  }
  let byName = Object.keys(binding).length > 0;
  for (const [role, re] of PATTERNS) {
    if (!roles.includes(role) || binding[role]) continue;
    const hits = [...free].filter((n) => re.test(n));
    if (hits.length === 1) {
      take(role, hits[0]);
      byName = true;
    } else if (hits.length > 1) {
      throw new Error(`the network's inputs ${hits.join(', ')} could each be '${role}'${fix}`);
    }
  }
  const left = roles.filter((r) => !binding[r]);
  if (left.length === 0) return { binding, how: 'names' };
  if (!byName) {
    // Nothing in the names: the reference order (the export keeps the forward() argument order).
    roles.forEach((r, i) => take(r, names[i]));
    return { binding, how: 'order' };
  }
  throw new Error(`cannot tell which of the network's inputs ${[...free].join(', ')} is ${left.join(', ')}: ${want}${fix}`);
}

/**
 * The dims to give ORT for a tensor: ours, or the network's declared shape when only the rank differs (a scalar
 * declared as [] or [1, 1], a direction as [1, 3]) and the element counts agree.
 * @param {number[]} dims
 * @param {readonly (number|string)[]|undefined} declared
 */
export function fitDims(dims, declared) {
  if (!declared || declared.length === dims.length) return dims;
  if (!declared.every((d) => typeof d === 'number' && d > 0)) return dims;
  const count = (a) => a.reduce((x, y) => x * y, 1);
  return count(declared) === count(dims) ? [...declared] : dims;
}

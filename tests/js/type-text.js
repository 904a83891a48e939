// Reading TypeScript type texts in tests (index.d.ts, value-types.d.ts), without a TypeScript parser.

/**
 * The top-level members of a union type text: "'a' | { b: 1 | 2 } | X[]" → ["'a'", "{ b: 1 | 2 }", "X[]"].
 * Precondition: type's brackets balance ('=>' of a function type is not a closing bracket).
 */
export function unionMembers(type) {
  const parts = [];
  let depth = 0;
  let start = 0;
  for (let i = 0; i <= type.length; i++) {
    const c = type[i];
    if (c !== undefined && '{(<['.includes(c)) depth++;
    else if (c !== undefined && '})>]'.includes(c) && type[i - 1] !== '=') depth--;
    else if ((c === '|' || c === undefined) && depth === 0) {
      parts.push(type.slice(start, i).trim());
      start = i + 1;
    }
  }
  return parts.filter(Boolean);
}

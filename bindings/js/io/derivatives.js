// The pipeline's optional outputs as files (also: ['swi', 'r2star']): for each key of pipeline()'s result, its BIDS
// derivative suffix, the `also` choice that makes it, its units, what it is and the methods text's stage that made it.
// Defined once for the CLI (files next to χ), the cohort workflow (BIDS derivatives) and the page (downloads).
// Dependency-free: the page imports it as it is.

export const ALSO_OUTPUTS = Object.freeze([
  { key: 'swi', suffix: 'swi', also: 'swi', units: 'arbitrary', stage: 'SWI', label: 'SWI',
    description: 'susceptibility-weighted image (magnitude x phase mask^power)' },
  { key: 'minIp', suffix: 'minIP', also: 'swi', units: 'arbitrary', stage: 'minIP', label: 'SWI minIP',
    description: 'minimum-intensity projection of the SWI over a sliding slab along the slice axis' },
  { key: 'r2star', suffix: 'R2starmap', also: 'r2star', units: '1/s', stage: 'R2*', label: 'R2* 1/s',
    description: 'R2* map, mono-exponential decay over the echoes' },
  { key: 't2star', suffix: 'T2starmap', also: 'r2star', units: 's', stage: 'R2*', label: 'T2* s',
    description: 'T2* map, 1/R2* (1 s where R2* < 1/s)' },
]);

/** The output of this result key, or undefined. */
export const alsoOutput = (key) => ALSO_OUTPUTS.find((o) => o.key === key);

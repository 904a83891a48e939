// Byte counts in words, the one rule of the package (the CLI, the pool's and the runtime's messages): decimal units.

/** b bytes in GB (2 decimals). */
export const gbText = (b) => `${(b / 1e9).toFixed(2)} GB`;
/** b bytes in MB (1 decimal). */
export const mbText = (b) => `${(b / 1e6).toFixed(1)} MB`;
/** b bytes in GB from 1 GB up, else in MB. */
export const bytesText = (b) => (b >= 1e9 ? gbText(b) : mbText(b));

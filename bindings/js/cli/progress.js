// The command line's progress on stderr: a redrawn bar on a terminal, one line per 10% otherwise.
import { duration, MB } from './format.js';

/** Progress on stderr: a redrawn bar on a terminal, one line per 10% otherwise, nothing when quiet. */
export class Progress {
  constructor({ quiet, stream = process.stderr }) {
    this.quiet = quiet;
    this.stream = stream;
    this.tty = !!stream.isTTY;
    this.open = false; // a bar line is on screen without its newline
    this.lastDraw = 0;
    this.lastDecile = 0;
  }
  /** A message line (closing any bar first). */
  line(text) {
    if (this.quiet) return;
    this.close();
    this.stream.write(`${text}\n`);
  }
  close() {
    if (this.open) this.stream.write('\n');
    this.open = false;
  }
  bar(fraction, text) {
    const width = 24;
    const n = Math.max(0, Math.min(width, Math.round(fraction * width)));
    this.stream.write(`\r\x1b[K[${'#'.repeat(n)}${'.'.repeat(width - n)}] ${text}`);
    this.open = true;
  }
  /** Tile progress from invert's onProgress: {done, total, tilesPerSecond, etaSeconds}. */
  tiles(p, unit = 'tiles') {
    if (this.quiet || !(p.total > 0)) return;
    const rate = p.tilesPerSecond > 0 ? `${p.tilesPerSecond.toFixed(p.tilesPerSecond < 10 ? 2 : 1)} ${unit}/s` : `- ${unit}/s`;
    const eta = p.done >= p.total ? `done in ${duration(p.elapsedSeconds)}` : `ETA ${duration(p.etaSeconds)}`;
    const text = `${p.stage ? `${p.stage}: ` : ''}${p.done}/${p.total} ${unit}  ${rate}  ${eta}`;
    if (this.tty) {
      const now = Date.now();
      if (p.done < p.total && now - this.lastDraw < 100) return;
      this.lastDraw = now;
      this.bar(p.done / p.total, text);
      if (p.done >= p.total) this.close();
      return;
    }
    const decile = Math.floor((10 * p.done) / p.total);
    if (decile > this.lastDecile) {
      this.lastDecile = decile;
      this.stream.write(`progress ${String(decile * 10).padStart(3)}%  ${text}\n`);
    }
  }
  /** Weights download/read progress: {loaded, total, file}. */
  bytes(p) {
    if (this.quiet || !this.tty) return;
    const now = Date.now();
    const finished = p.total !== undefined && p.loaded >= p.total;
    if (!finished && now - this.lastDraw < 100) return;
    this.lastDraw = now;
    this.bar(p.total ? p.loaded / p.total : 0, `${p.file}  ${MB(p.loaded)}${p.total ? ` / ${MB(p.total)}` : ''}`);
    if (finished) this.close();
  }
}

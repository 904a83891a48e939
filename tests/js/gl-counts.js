// The WebGL work a page asks for, counted in the page by an init script (from its next document on), per canvas id:
// whether the canvas made a WebGL context, the slices NiiVue computed into 3D textures (one framebufferTextureLayer
// call per slice per pass: NiiVue recomputes every layer of a volume on each addVolume, removeVolume and
// updateGLVolume), and the draw calls. web/viewer.test.js checks the page with it; bench/page-drawing.js reports it.

/** Installs the counters on `page` (playwright). */
export function countWebGl(page) {
  return page.addInitScript(() => {
    const gl = (window.glCounts = { contexts: [], slices: {}, draws: {} });
    const add = (table, canvas) => (table[canvas.id] = (table[canvas.id] ?? 0) + 1);
    const getContext = HTMLCanvasElement.prototype.getContext;
    HTMLCanvasElement.prototype.getContext = function (type, ...rest) {
      const c = getContext.call(this, type, ...rest);
      if (c && /webgl/.test(type) && !gl.contexts.includes(this.id)) gl.contexts.push(this.id);
      return c;
    };
    const P = WebGL2RenderingContext.prototype;
    const layer = P.framebufferTextureLayer;
    P.framebufferTextureLayer = function (...a) {
      add(gl.slices, this.canvas);
      return layer.apply(this, a);
    };
    for (const m of ['drawArrays', 'drawElements']) {
      const draw = P[m];
      P[m] = function (...a) {
        add(gl.draws, this.canvas);
        return draw.apply(this, a);
      };
    }
  });
}

/** The counts of the page's current document: {contexts: [canvas ids, in the order made], slices: {id: n}, draws: {id: n}}. */
export const webGlCounts = (page) => page.evaluate(() => structuredClone(window.glCounts));

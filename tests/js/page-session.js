// What the browser page's tests (web/page.test.js, web/page-classical.test.js) read from the page and wait for, through
// its DOM only: <body data-state>, the data-* attributes its panels publish, #error; and what it must not do (watchPage).

/** The data-* keys that hold comma-separated lists. */
export const DATA_LISTS = ['dims', 'voxelMm', 'phaseRange', 'runningTiles', 'shown', 'verifyLo', 'verifyHi', 'boxLo', 'boxHi', 'compareLo', 'compareHi'];

/**
 * The helpers on the page that page() returns (a function: the page is opened in a `before`, after this is called).
 * @param {() => import('playwright-core').Page} page
 */
export function pageSession(page) {
  const T = (expr) => page().evaluate(expr);
  return {
    T,
    /** Waits until <body data-state> is one of states. */
    waitState: (states, timeout) => page().waitForFunction((s) => s.includes(document.body.dataset.state), states, { timeout, polling: 100 }),
    /** An element's data-* as an object: 'true'/'false' and numbers parsed, the DATA_LISTS keys as arrays. */
    readData: (selector) =>
      page().$eval(
        selector,
        (e, lists) => {
          const parse = (x) => (x === 'true' ? true : x === 'false' ? false : x !== '' && Number.isFinite(Number(x)) ? Number(x) : x);
          const out = {};
          for (const [k, v] of Object.entries(e.dataset)) out[k] = lists.includes(k) ? (v === '' ? [] : v.split(',').map(parse)) : parse(v);
          return out;
        },
        DATA_LISTS,
      ),
    pageState: () => T(() => document.body.dataset.state),
    /** The error box's text, '' while it is hidden. */
    errorText: async () => ((await page().isHidden('#error')) ? '' : await page().textContent('#error')),
    /** Waits until #planReadout's data-* satisfy every key of `want` (a new plan for the request just made). */
    planWith: (want, timeout = 20000) =>
      page().waitForFunction((w) => Object.entries(w).every(([k, v]) => document.querySelector('#planReadout').dataset[k] === String(v)), want, { timeout, polling: 50 }),
  };
}

/**
 * Records what a page must not do: console errors and uncaught exceptions (into consoleErrors), and requests to any
 * origin but the test server's (into foreignRequests; data: and blob: URLs are the page's own).
 */
export function watchPage(page, serverUrl, { consoleErrors, foreignRequests }) {
  page.on('console', (m) => {
    if (m.type() === 'error') consoleErrors.push(m.text());
  });
  page.on('pageerror', (e) => consoleErrors.push(`uncaught: ${e.message}`));
  page.on('request', (r) => {
    if (!r.url().startsWith(serverUrl) && !/^(data|blob):/.test(r.url())) foreignRequests.push(r.url());
  });
}

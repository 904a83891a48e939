// Headless Debian Chromium for the browser tests and benchmarks (playwright-core; its own browser download
// does not work here). The background-networking flags keep Chromium off a closed network.
export const CHROMIUM_ARGS = ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
  '--disable-background-networking', '--disable-component-update', '--disable-sync'];

/**
 * A persistent headless context in userDir.
 * userDir is an empty folder; executablePath is a Chromium binary; options are more context options.
 */
export async function launchChromium(userDir, executablePath = '/usr/bin/chromium', options = {}) {
  const { chromium } = await import('playwright-core');
  return chromium.launchPersistentContext(userDir, { ...options, executablePath, headless: true, args: CHROMIUM_ARGS });
}

/**
 * The context's page, with the page's console errors echoed to stderr (benchmarks watch them as they run).
 * context comes from launchChromium.
 */
export async function benchPage(context) {
  const page = context.pages()[0] ?? (await context.newPage());
  page.on('console', (m) => {
    if (m.type() === 'error') console.error(`  [page] ${m.text()}`);
  });
  return page;
}

/** Whether node's fetch globals are missing (`node --no-experimental-fetch`): playwright-core needs them at import. */
export const NO_FETCH_GLOBALS = typeof globalThis.Headers === 'undefined' || typeof globalThis.Request === 'undefined';

/**
 * Registers one test that runs the test file at fileUrl again in a child node with the fetch globals and reports the
 * child's result (its output echoed, a failure if it failed or passed fewer than minPassed tests).
 * Call it only when NO_FETCH_GLOBALS; name, skip and timeout are the test's.
 */
export async function testInChildWithFetchGlobals(fileUrl, name, { skip = false, timeout = 600000, minPassed = 1 } = {}) {
  const [{ test }, { default: assert }, { spawn }, { fileURLToPath }] = await Promise.all([
    import('node:test'), import('node:assert/strict'), import('node:child_process'), import('node:url'),
  ]);
  test(name, { skip, timeout }, async () => {
    const env = { ...process.env };
    delete env.NODE_TEST_CONTEXT; // else the child believes it is the runner's own child and runs nothing
    const root = fileURLToPath(new URL('../', import.meta.url));
    const child = spawn(process.execPath, ['--test', '--test-force-exit', '--test-reporter=spec', fileURLToPath(fileUrl)], { cwd: root, env, stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    child.stdout.on('data', (d) => (out += d));
    child.stderr.on('data', (d) => (out += d));
    const code = await new Promise((r) => child.on('close', r));
    for (const line of out.split('\n')) if (line.trim()) console.log(line);
    assert.equal(code, 0, `${name}: the child's tests failed (see above)`);
    const passed = Number(/pass (\d+)/.exec(out)?.[1] ?? 0);
    assert.ok(passed >= minPassed, `${name}: the child ran ${passed} tests, expected at least ${minPassed}`);
  });
}

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

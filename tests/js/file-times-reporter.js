// A node --test reporter of each test file's wall time, a line a file as it ends: "start end seconds file", in seconds
// from the run's start (start: the runner takes the file from its queue). Lines are written as files end, since
// --test-force-exit may end the run before a reporter's last words. scripts/test.sh prints the longest, so that a slow
// run says which files its time went to.
export default async function* fileTimes(source) {
  const t0 = Date.now();
  const started = new Map();
  for await (const event of source) {
    const { file, name } = event.data ?? {};
    if (!file || name !== file) continue; // the file's own entry, not one of its tests
    const now = (Date.now() - t0) / 1000;
    if (event.type === 'test:dequeue') started.set(file, now);
    if (event.type === 'test:complete') {
      const first = started.get(file) ?? now;
      yield `${first.toFixed(0).padStart(4)} ${now.toFixed(0).padStart(4)} ${(now - first).toFixed(0).padStart(4)} ${file.replace(`${process.cwd()}/`, '')}\n`;
    }
  }
}

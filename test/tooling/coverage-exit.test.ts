import { fork } from 'node:child_process';
import { mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { expect } from 'chai';

/** test/support/coverage-exit.ts: a worker told to stop while it writes its coverage still writes all of it. */
describe('coverage of a test worker stopped as it exits', () => {
  it('is written whole though SIGTERM arrives during the write', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'coverage-exit-'));
    try {
      const child = join(dir, 'worker.mjs');
      writeFileSync(
        child,
        `await import(${JSON.stringify(new URL('../support/coverage-exit.js', import.meta.url).href)});
        await import(${JSON.stringify(import.meta.resolve('oidc-provider'))});
        process.on('message', () => { process.send('exiting'); process.exit(0); });
        process.send('ready');`,
      );
      const worker = fork(child, { cwd: process.cwd(), env: { ...process.env, NODE_V8_COVERAGE: join(dir, 'cov') } });
      let signals: NodeJS.Timeout | undefined;
      const exited = new Promise<number | null>((resolve) => worker.once('exit', (code) => resolve(code)));
      worker.on('message', (message) => {
        if (message === 'ready') worker.send('exit');
        // As the pool does once its second is up, and again until the worker is gone.
        else signals = setInterval(() => worker.kill('SIGTERM'), 1);
      });
      const code = await exited;
      clearInterval(signals);
      expect(code).to.equal(0);
      const files = readdirSync(join(dir, 'cov'));
      expect(files).to.have.length(1);
      expect(() => JSON.parse(readFileSync(join(dir, 'cov', files[0]!), 'utf8'))).not.to.throw();
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

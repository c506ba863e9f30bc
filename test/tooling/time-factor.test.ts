import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { expect } from 'chai';

/** The root hook of test/support/time.ts: a busy machine's bounds scale, every timeout of every suite with them. */
describe('timeouts on a busy machine', () => {
  it('multiplies every hook and test timeout by TEST_TIME_FACTOR', () => {
    const dir = mkdtempSync(join(tmpdir(), 'time-factor-'));
    try {
      const spec = join(dir, 'spec.cjs');
      writeFileSync(
        spec,
        `describe('s', function () {
          this.timeout(1000);
          let hook;
          before(function () { hook = this.timeout(); });
          it('t', function () { console.log('timeouts', hook, this.timeout()); });
          it('u', function () { console.log('own', this.test.timeout()); }).timeout(50);
        });`,
      );
      const hooks = new URL('../support/time.js', import.meta.url).pathname;
      const mocha = createRequire(import.meta.url).resolve('mocha/bin/mocha.js');
      const { stdout, status } = spawnSync(process.execPath, [mocha, '--no-config', '--require', hooks, spec], {
        env: { ...process.env, TEST_TIME_FACTOR: '3' },
        encoding: 'utf8',
      });
      expect(status, stdout).to.equal(0);
      expect(stdout).to.include('timeouts 3000 3000').and.include('own 150');
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

import { availableParallelism, loadavg } from 'node:os';

/**
 * How many times slower than an idle machine this one runs: TEST_TIME_FACTOR when set, else
 * the load per core (1 to 10). Every bound a test waits for is multiplied by it.
 */
export function timeFactor(): number {
  const set = Number(process.env['TEST_TIME_FACTOR']);
  if (set > 0) return set;
  return Math.min(10, Math.max(1, loadavg()[0]! / availableParallelism()));
}

/** `ms` on this machine now. */
export function scaled(ms: number): number {
  return Math.round(ms * timeFactor());
}

interface Runnable {
  timeout(ms?: number): unknown;
}
interface Suite {
  suites: Suite[];
  tests: Runnable[];
  _beforeAll: Runnable[];
  _beforeEach: Runnable[];
  _afterEach: Runnable[];
  _afterAll: Runnable[];
}

/** Mocha root hooks (.mocharc.json `require`): every test's and hook's timeout multiplied by the factor (a suite's would reset its tests'). */
export const mochaHooks = {
  beforeAll(this: { test: { parent: Suite } }): void {
    const factor = timeFactor();
    const scale = (runnable: Runnable) => {
      const ms = runnable.timeout() as number;
      if (ms > 0) runnable.timeout(Math.round(ms * factor));
    };
    const walk = (suite: Suite) => {
      for (const runnable of [
        ...suite._beforeAll,
        ...suite._beforeEach,
        ...suite._afterEach,
        ...suite._afterAll,
        ...suite.tests,
      ])
        scale(runnable);
      suite.suites.forEach(walk);
    };
    if (factor !== 1) walk(this.test.parent);
  },
};

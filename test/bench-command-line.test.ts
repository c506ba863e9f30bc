import { expect } from 'chai';
import { parseSettings } from '../bench/command-line.js';

/** The configurations a command line picks, as `store · deployment` names. */
function picked(...argv: string[]): string[] {
  return parseSettings(argv, {}).configurations.map((configuration) => configuration.name);
}

describe('bench command line', () => {
  it('--smoke alone runs the four smoke configurations, as CI runs it', () => {
    expect(picked('--smoke')).to.deep.equal(['memory · deployment', 'redis', 'postgres', 'memory+pg-audit']);
  });

  for (const [flag, store] of [
    ['--memory-only', 'memory'],
    ['--redis-only', 'redis'],
    ['--postgres-only', 'postgres'],
    ['--audit-only', 'memory+pg-audit'],
  ] as const) {
    it(`--smoke ${flag} runs ${store} alone`, () => {
      expect(picked('--smoke', flag)).to.deep.equal([store, `${store} · deployment`]);
    });
  }

  it('--smoke --no-deployment runs no provider set up as a deployment', () => {
    expect(picked('--smoke', '--no-deployment')).to.deep.equal(['memory', 'redis', 'postgres', 'memory+pg-audit']);
  });

  it('flags are read when parseSettings is called: the smoke run keeps its short windows', () => {
    const settings = parseSettings(['--smoke', '--postgres-only'], {});
    expect(settings).to.include({ smoke: true, rounds: 1, duration: 1, warmup: 0 });
  });
});

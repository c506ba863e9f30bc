import { execFile } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { expect } from 'chai';

const SCRIPT = fileURLToPath(new URL('./provider-lifetime-process.js', import.meta.url));

/** provider-lifetime-process.ts in a process of its own, with gc() exposed and nothing else on its heap. */
async function measure<T>(mode: string): Promise<T> {
  const { stdout } = await promisify(execFile)(process.execPath, ['--expose-gc', SCRIPT, mode], { timeout: 60_000 });
  return JSON.parse(stdout) as T;
}

describe('a provider with the plugin: what it costs and how it ends', () => {
  it('installs the quick start in a few milliseconds and well under a megabyte', async () => {
    const { installs } = await measure<{ installs: Array<[number, number]> }>('cost');
    const median = (values: number[]) => [...values].sort((a, b) => a - b)[values.length >> 1]!;
    const ms = median(installs.map(([time]) => time));
    const bytes = median(installs.map(([, size]) => size));
    expect(bytes, `${bytes} bytes kept per install`).to.be.below(1024 * 1024);
    expect(ms, `${ms} ms per install`).to.be.below(50);
  });

  it('frees a provider with webhooks and SSF dropped without stop()', async () => {
    expect(await measure('collect')).to.deep.equal({ collected: true });
  });

  it('keeps a provider, and its delivery loop, while its impersonation object or only its webhooks() handle is kept', async () => {
    expect(await measure('kept')).to.deep.equal({ byImpersonation: true, byWebhooks: true });
  });
});

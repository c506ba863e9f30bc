import { execFile } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { expect } from 'chai';

const SCRIPT = fileURLToPath(new URL('./memory-session-heap-process.js', import.meta.url));

describe('the memory adapter: what a session keeps', () => {
  it('keeps a session alone at its second of expiry, with its five index entries, in under 1,200 bytes', async () => {
    const { stdout } = await promisify(execFile)(process.execPath, ['--expose-gc', SCRIPT], { timeout: 60_000 });
    const { bytes } = JSON.parse(stdout) as { bytes: number };
    // An expiry's group of one is its entry: no array, no slot in a map of groups (about 1.3 KiB more each).
    expect(bytes, `${Math.round(bytes)} bytes per session`).to.be.below(1200);
  });
});

import { expect } from 'chai';
import { lineOutput } from '../../demo/line-output.js';

/** Longer than the 20 ms a line waits for others. */
const turn = (): Promise<void> => new Promise((resolve) => setTimeout(resolve, 50));

describe("demo: the console's lines (demo/line-output.ts)", () => {
  it('writes the lines of a few milliseconds together, in order', async () => {
    const writes: string[] = [];
    const output = lineOutput({ write: (text) => writes.push(text) });
    output.line('first');
    output.line('second');
    expect(writes).to.deep.equal([]);
    await turn();
    expect(writes).to.deep.equal(['first\nsecond\n']);
    output.line('third');
    await turn();
    expect(writes).to.deep.equal(['first\nsecond\n', 'third\n']);
  });

  it('writes at once when the queue reaches its bound, and what is queued on flush()', async () => {
    const writes: string[] = [];
    const output = lineOutput({ write: (text) => writes.push(text) }, 10);
    output.line('0123456789');
    expect(writes).to.deep.equal(['0123456789\n']);
    output.line('last');
    output.flush();
    expect(writes).to.deep.equal(['0123456789\n', 'last\n']);
    await turn();
    expect(writes).to.have.length(2);
  });
});

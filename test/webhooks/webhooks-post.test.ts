import { getEventListeners } from 'node:events';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { expect } from 'chai';
import { createPoster, type Poster } from '../../lib/webhooks/post.js';
import { scaled } from '../support/time.js';

/** A receiver on 127.0.0.1 that answers as `handle` says. */
async function receiver(handle: (request: IncomingMessage, response: ServerResponse) => void): Promise<{
  url: string;
  close(): Promise<void>;
}> {
  const server: Server = createServer(handle);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}/hooks`,
    close: async () => {
      server.closeAllConnections();
      await new Promise((resolve) => server.close(resolve));
    },
  };
}

describe('outbox delivery: one POST to a receiver', function () {
  this.timeout(20_000);
  let poster: Poster;
  const open: { close(): Promise<void> }[] = [];
  beforeEach(() => {
    poster = createPoster();
  });
  afterEach(async () => {
    poster.close();
    await Promise.all(open.splice(0).map((thing) => thing.close()));
  });

  async function started(handle: Parameters<typeof receiver>[0]) {
    const server = await receiver(handle);
    open.push(server);
    return server;
  }

  it('sends a whole batch at once: none waits for a connection beyond its timeout', async () => {
    const server = await started((request, response) => {
      request.resume();
      setTimeout(() => response.writeHead(204).end(), 200);
    });
    const signal = new AbortController().signal;
    const answers = await Promise.all(
      Array.from({ length: 40 }, () => poster.post(server.url, {}, '{}', { timeoutMs: 1500, signal })),
    );
    expect(answers.map((answer) => answer.status)).to.deep.equal(Array(40).fill(204));
  });

  it("listens to a batch's shared stop signal once, not once per POST, and stops every POST of the batch with it", async () => {
    const server = await started((request, response) => {
      request.resume();
      setTimeout(() => response.writeHead(204).end(), 100);
    });
    const loop = new AbortController();
    const warnings: Error[] = [];
    const warned = (warning: Error) => warnings.push(warning);
    process.on('warning', warned);
    try {
      const batch = Promise.all(
        Array.from({ length: 40 }, () => poster.post(server.url, {}, '{}', { timeoutMs: 1500, signal: loop.signal })),
      );
      expect(getEventListeners(loop.signal, 'abort')).to.have.length(1);
      expect((await batch).map((answer) => answer.status)).to.deep.equal(Array(40).fill(204));
      expect(getEventListeners(loop.signal, 'abort')).to.have.length(0);

      // Stopped in the middle: every POST of the batch settles at once, without an answer.
      const stopped = Promise.all(
        Array.from({ length: 40 }, () => poster.post(server.url, {}, '{}', { timeoutMs: 10_000, signal: loop.signal })),
      );
      setTimeout(() => loop.abort(), 20);
      expect((await stopped).map((answer) => answer.status)).to.deep.equal(Array(40).fill(0));
      expect(getEventListeners(loop.signal, 'abort')).to.have.length(0);
      await new Promise((resolve) => setImmediate(resolve)); // a warning is emitted on the next tick
    } finally {
      process.off('warning', warned);
    }
    expect(warnings.map((warning) => warning.name)).to.not.include('MaxListenersExceededWarning');
  });

  it('settles on the status: a body that never ends holds nothing up', async () => {
    const server = await started((request, response) => {
      request.resume();
      response.writeHead(200, { 'retry-after': '7' });
      response.write('x');
      // The body never ends.
    });
    const began = Date.now();
    const answer = await poster.post(server.url, {}, '{}', { timeoutMs: 3000, signal: new AbortController().signal });
    expect(answer).to.include({ status: 200, retryAfter: '7' });
    expect(Date.now() - began).to.be.below(scaled(1000));
  });

  it('reads at most readBytes of a body, however long it is', async () => {
    const server = await started((request, response) => {
      request.resume();
      response.writeHead(400, { 'content-type': 'application/json' });
      response.write(`{"err":"invalid_key","description":"${'y'.repeat(100_000)}`);
      // Never ends either: the reader stops at its bound.
    });
    const answer = await poster.post(server.url, {}, 'a.b.c', {
      timeoutMs: 3000,
      signal: new AbortController().signal,
      readBytes: 4096,
    });
    expect(answer.status).to.equal(400);
    expect(answer.text).to.have.length(4096);
    expect(answer.text.startsWith('{"err":"invalid_key"')).to.equal(true);
  });

  it('answers status 0, never rejects, when no answer comes in time, when stopped, or when nothing listens', async () => {
    const server = await started(() => {
      // Never answers.
    });
    const stop = new AbortController();
    const late = poster.post(server.url, {}, '{}', { timeoutMs: 300, signal: new AbortController().signal });
    const stopped = poster.post(server.url, {}, '{}', { timeoutMs: 10_000, signal: stop.signal });
    setTimeout(() => stop.abort(), 100);
    expect((await late).status).to.equal(0);
    expect((await stopped).status).to.equal(0);
    const closed = await receiver(() => {});
    await closed.close();
    expect((await poster.post(closed.url, {}, '{}', { timeoutMs: 1000, signal: stop.signal })).status).to.equal(0);
    expect(
      (await poster.post(closed.url, {}, '{}', { timeoutMs: 1000, signal: new AbortController().signal })).status,
    ).to.equal(0);
    // A header node:http refuses is no answer either, not a thrown error.
    const refused = await poster.post(server.url, { 'x-bad': 'a\r\nb' }, '{}', {
      timeoutMs: 1000,
      signal: new AbortController().signal,
    });
    expect(refused.status).to.equal(0);
  });
});

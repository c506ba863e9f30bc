import { once } from 'node:events';
import net from 'node:net';
import { Worker } from 'node:worker_threads';
import { expect } from 'chai';
import { startBackend } from '../../demo/backend.js';
import { startDemo, type Demo } from '../../demo/demo.js';
import { freePort } from '../../demo/http.js';
import { TcpRelay } from '../support/relay.js';
import { quiet, REQUEST_TIMEOUT } from './helpers.js';
import type { KnockAnswer, KnockMessage, KnockOrders } from './knock.js';

/** Starts knocking on `urls` from another thread; resolves once it knocks, with the answers to come. */
async function knockFromAnotherThread(urls: string[]): Promise<{ answers: Promise<KnockAnswer[]>; stop(): void }> {
  const orders: KnockOrders = { urls, answerWithinMs: REQUEST_TIMEOUT };
  const worker = new Worker(new URL('./knock.js', import.meta.url), { workerData: orders });
  const answers = new Promise<KnockAnswer[]>((resolve, reject) => {
    worker.on('message', (message: KnockMessage) => {
      if ('answers' in message) resolve(message.answers);
    });
    worker.once('error', reject);
  });
  const [first] = (await once(worker, 'message')) as [KnockMessage];
  expect(first).to.deep.equal({ knocking: true });
  return { answers, stop: () => void worker.terminate() };
}

/** When a connection to `port` is first accepted, on this thread's clock; tried every few milliseconds. */
async function firstAccepted(port: number): Promise<number> {
  for (;;) {
    const accepted = await new Promise<boolean>((resolve) => {
      const socket = net.connect(port, '127.0.0.1');
      socket.once('connect', () => {
        socket.destroy();
        resolve(true);
      });
      socket.once('error', () => resolve(false));
    });
    if (accepted) return performance.now();
    await new Promise((resolve) => setTimeout(resolve, 5));
  }
}

describe('demo: start-up', function () {
  this.timeout(30_000);

  it('accepts no connection it cannot answer: a request sent as soon as each server accepts is answered in full', async () => {
    const [identityPort, backendPort] = [await freePort(), await freePort()];
    const urls = [
      `http://127.0.0.1:${identityPort}/oidc/.well-known/openid-configuration`,
      `http://127.0.0.1:${identityPort}/interaction/unknown`,
      `http://127.0.0.1:${backendPort}/`,
      `http://127.0.0.1:${backendPort}/console.js`,
    ];
    const knocker = await knockFromAnotherThread(urls);
    let demo: Demo | undefined;
    try {
      demo = await startDemo({ identityPort, backendPort, log: quiet });
      // The sign-in page of an interaction that does not exist is the identity service's own route, not the provider's.
      expect(await knocker.answers).to.deep.equal([
        { url: urls[0], status: 200 },
        { url: urls[1], status: 400 },
        { url: urls[2], status: 200 },
        { url: urls[3], status: 200 },
      ]);
    } finally {
      knocker.stop();
      await demo?.close();
    }
  });

  it('has the backend listen only once its resource API has read the revocation feed, or found it unreadable', async () => {
    const demo = await startDemo({ identityPort: 0, backendPort: 0, log: quiet });
    // The feed behind a relay that passes nothing: its first read fails when its time is up (2 s).
    const relay = new TcpRelay(demo.identity.baseUrl, 80);
    relay.frozen = true;
    await relay.start();
    const backendPort = await freePort();
    let feedGivenUpAt = Infinity;
    const lines: string[] = [];
    const accepted = firstAccepted(backendPort);
    const backend = await startBackend({
      port: backendPort,
      issuer: demo.identity.issuer,
      revocationsUrl: new URL('/api/impersonations/revocations', relay.url).href,
      revocationSource: 'feed',
      log: (line) => {
        lines.push(line);
        if (line.includes('revocation feed')) feedGivenUpAt = Math.min(feedGivenUpAt, performance.now());
      },
    });
    try {
      expect(lines.join('\n')).to.match(/^\[backend\] the revocation feed is not readable yet: /);
      expect(await accepted).to.be.above(feedGivenUpAt);
      const page = await fetch(`${backend.url}/`, { signal: AbortSignal.timeout(REQUEST_TIMEOUT) });
      expect(page.status).to.equal(200);
    } finally {
      await backend.close();
      await relay.stop();
      await demo.close();
    }
  });
});

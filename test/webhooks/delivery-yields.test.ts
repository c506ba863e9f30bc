import { EventEmitter } from 'node:events';
import { expect } from 'chai';
import type { Provider } from 'oidc-provider';
import { createMemoryOutbox } from '../../lib/outbox/memory.js';
import { resolveWebhookOptions } from '../../lib/webhooks/options.js';
import { startDelivery } from '../../lib/webhooks/worker.js';
import { startReceiver, webhookSecret } from '../support/webhook-receiver.js';

const POLL_MS = 20;

/** Keeps the event loop busy in slices of 10 ms, as a process serving requests back to back does, until `ms` passed. */
async function busyFor(ms: number): Promise<void> {
  const until = Date.now() + ms;
  while (Date.now() < until) {
    const slice = Date.now() + 10;
    while (Date.now() < slice) {
      // Spinning: the loop's work, as a request's would be.
    }
    await new Promise((resolve) => setImmediate(resolve));
  }
}

describe('webhook delivery yields to the requests the process serves', function () {
  this.timeout(20_000);

  /** A delivery loop on a memory outbox to a receiver that notes when the first message came, and every claim's time. */
  async function deliveryUnderTest() {
    const receiver = await startReceiver();
    let receivedAt: number | undefined;
    receiver.answer = () => {
      receivedAt ??= Date.now();
      return { status: 204 };
    };
    const provider = new EventEmitter();
    provider.on('error', () => {});
    const requests = { count: 0 };
    const outbox = createMemoryOutbox();
    const claims: number[] = [];
    const claim = outbox.claim.bind(outbox);
    outbox.claim = (...args) => {
      claims.push(Date.now());
      return claim(...args);
    };
    const delivery = startDelivery(
      provider as unknown as Provider,
      outbox,
      resolveWebhookOptions({
        subscriptions: [
          { id: 'crm', url: receiver.url, events: ['impersonation.exchange.succeeded'], secret: webhookSecret('crm') },
        ],
        pollInterval: POLL_MS,
        timeout: 1000,
      }),
      { requests },
    );
    // Idle first: the loop's looks found nothing.
    await new Promise((resolve) => setTimeout(resolve, 5 * POLL_MS));
    return {
      requests,
      claims,
      receivedAt: () => receivedAt,
      append: async () => {
        const appendedAt = Date.now();
        await outbox.append([{ id: 'msg_1', subject: 'bob', subscription: 'crm', body: '{}' }], 100, appendedAt);
        return appendedAt;
      },
      waitForDelivery: () => receiver.waitFor(1, 5000),
      close: async () => {
        await delivery.stop();
        await receiver.close();
      },
    };
  }

  it('waits while the process answers requests, even waiting on its store: a due entry is delivered after four poll intervals at most, not at once', async () => {
    const loop = await deliveryUnderTest();
    const { requests } = loop;
    try {
      // A request in flight from the append on, as the provider's first middleware counts it, the
      // loop idle meanwhile (the request waits on its store): the count alone holds delivery back.
      requests.count += 1;
      const appendedAt = await loop.append();
      try {
        await new Promise((resolve) => setTimeout(resolve, 1500));
      } finally {
        requests.count -= 1;
      }
      await loop.waitForDelivery();
      const waited = loop.receivedAt()! - appendedAt;
      // The first look that fell due waited for a quiet moment; after four poll intervals
      // (80 ms) it looked anyway, long before the load ended.
      expect(waited, `delivered ${waited} ms after the append`).to.be.at.least(3 * POLL_MS);
      expect(waited, `delivered ${waited} ms after the append`).to.be.below(1000);
    } finally {
      await loop.close();
    }
  });

  it('waits while the event loop is busy with other work: under load that never lets up, one look every four poll intervals', async () => {
    const loop = await deliveryUnderTest();
    try {
      const busySince = Date.now();
      const appendedAt = await loop.append();
      await busyFor(1500);
      await loop.waitForDelivery();
      expect(loop.receivedAt()! - appendedAt).to.be.below(1000);
      // Once a look's window of the loop's utilisation lies within the load (after the first
      // look), every look waits for a quiet moment, then looks anyway: no two claims a poll apart.
      const underLoad = loop.claims.filter((at) => at >= busySince + 2 * POLL_MS && at <= busySince + 1500);
      expect(
        underLoad.length,
        `claims under load at ${underLoad.map((at) => at - busySince).join(', ')} ms`,
      ).to.be.at.least(5);
      const gaps = underLoad.slice(1).map((at, index) => at - underLoad[index]!);
      expect(Math.min(...gaps), `gaps between claims: ${gaps.join(', ')} ms`).to.be.at.least(3 * POLL_MS);
    } finally {
      await loop.close();
    }
  });
});

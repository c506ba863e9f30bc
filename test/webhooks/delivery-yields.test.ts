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

  it('looks at the outbox in what requests leave idle: while the loop is busy, a due entry waits, at most four poll intervals', async () => {
    const receiver = await startReceiver();
    let receivedAt: number | undefined;
    receiver.answer = () => {
      receivedAt ??= Date.now();
      return { status: 204 };
    };
    const provider = new EventEmitter();
    provider.on('error', () => {});
    const outbox = createMemoryOutbox();
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
    );
    try {
      // Idle first: the loop's looks found nothing.
      await new Promise((resolve) => setTimeout(resolve, 5 * POLL_MS));
      const appendedAt = Date.now();
      await outbox.append([{ id: 'msg_1', subscription: 'crm', subject: 'bob', body: '{}' }], 100, appendedAt);
      await busyFor(1500);
      await receiver.waitFor(1, 5000);
      const waited = receivedAt! - appendedAt;
      // A look that fell due in the busy loop waited for a quiet moment; after four poll
      // intervals (80 ms) it looked anyway, long before the load ended.
      expect(waited, `delivered ${waited} ms after the append`).to.be.at.least(3 * POLL_MS);
      expect(waited, `delivered ${waited} ms after the append`).to.be.below(1000);
    } finally {
      await delivery.stop();
      await receiver.close();
    }
  });
});

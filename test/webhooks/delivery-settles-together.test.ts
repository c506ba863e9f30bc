import { EventEmitter } from 'node:events';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { expect } from 'chai';
import type { Provider } from 'oidc-provider';
import type { OutboxStore } from '../../lib/outbox/contract.js';
import { createMemoryOutbox } from '../../lib/outbox/memory.js';
import { resolveWebhookOptions } from '../../lib/webhooks/options.js';
import { startDelivery } from '../../lib/webhooks/worker.js';
import { webhookSecret } from '../support/webhook-receiver.js';

/**
 * A receiver that holds every delivery until all `count` have arrived, however slowly a busy machine
 * sends them, then answers 204 to entry `msg_<n>` after `delayOf(n)` ms.
 */
async function delayingReceiver(
  count: number,
  delayOf: (n: number) => number,
): Promise<{ url: string; server: Server }> {
  const held: (() => void)[] = [];
  const server = createServer((request, response) => {
    const n = Number(String(request.headers['webhook-id']).replace('msg_', ''));
    request.resume();
    request.on('end', () => {
      held.push(() => setTimeout(() => response.writeHead(204).end(), delayOf(n)));
      if (held.length === count) for (const answer of held) answer();
    });
  });
  await new Promise<void>((listening) => server.listen(0, '127.0.0.1', listening));
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/`, server };
}

/**
 * The memory outbox with a `settleAll` that settles each entry as `settle`
 * does and records the ids of every batch it is asked for: what a store
 * that settles together (PostgreSQL) is sent.
 */
function recordingOutbox(): { outbox: OutboxStore; batches: string[][] } {
  const memory = createMemoryOutbox();
  const batches: string[][] = [];
  const outbox: OutboxStore = {
    ...memory,
    async settleAll(settlements, now) {
      batches.push(settlements.map(({ entry }) => entry.id));
      return Promise.all(settlements.map(({ entry, settlement }) => memory.settle(entry, settlement, now)));
    },
  };
  return { outbox, batches };
}

/**
 * A store's work for a settlement follows its trips, not its entries: the
 * delivery loop settles the answers to one look together, waiting up to
 * 20 ms for the deliveries still under way, never longer for a receiver
 * that takes its time.
 */
describe('webhook delivery settles the answers to one look together', function () {
  this.timeout(10_000);

  async function deliverEight(delayOf: (n: number) => number): Promise<string[][]> {
    const receiver = await delayingReceiver(8, delayOf);
    const provider = new EventEmitter();
    provider.on('error', () => {});
    const { outbox, batches } = recordingOutbox();
    const entries = Array.from({ length: 8 }, (_, n) => ({
      id: `msg_${n}`,
      subscription: 'crm',
      subject: `customer-${n}`,
      body: '{}',
    }));
    await outbox.append(entries, 100, Date.now());
    const delivery = startDelivery(
      provider as unknown as Provider,
      outbox,
      resolveWebhookOptions({
        subscriptions: [
          { id: 'crm', url: receiver.url, events: ['impersonation.exchange.succeeded'], secret: webhookSecret('crm') },
        ],
        pollInterval: 50,
        timeout: 2000,
      }),
    );
    try {
      const until = Date.now() + 5000;
      while (batches.flat().length < entries.length && Date.now() < until) {
        await new Promise((resolve) => setTimeout(resolve, 10));
      }
      return batches;
    } finally {
      await delivery.stop();
      receiver.server.closeAllConnections();
      receiver.server.close();
    }
  }

  it('in one settlement when the answers come within a few milliseconds of each other', async () => {
    const batches = await deliverEight((n) => n);
    expect(batches).to.have.length(1);
    expect(batches[0]).to.have.members(['msg_0', 'msg_1', 'msg_2', 'msg_3', 'msg_4', 'msg_5', 'msg_6', 'msg_7']);
  });

  it('without waiting for a receiver that takes its time: the others are settled first', async () => {
    const batches = await deliverEight((n) => (n === 7 ? 400 : 0));
    expect(batches).to.have.length(2);
    expect(batches[0]).to.have.members(['msg_0', 'msg_1', 'msg_2', 'msg_3', 'msg_4', 'msg_5', 'msg_6']);
    expect(batches[1]).to.deep.equal(['msg_7']);
  });
});

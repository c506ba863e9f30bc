import { expect } from 'chai';
import type { SsfStreamAdapter } from '../../lib/adapters/contracts/ssf.js';
import type { OutboxCapable } from '../../lib/outbox/contract.js';
import { SSF_MODEL } from '../../lib/adapters/models.js';
import { StreamStore } from '../../lib/ssf/store.js';
import { ADAPTERS } from '../support/adapters.js';
import { POLL, pollUntil, PUSH, receiverToken, ssfRequest, startSsfProvider, STREAMS } from '../support/ssf.js';
import { inMemoryTelemetry } from '../support/telemetry.js';
import { startReceiver } from '../support/webhook-receiver.js';

const ROUNDS = 8;

for (const kind of ADAPTERS) {
  describe(`SSF: a deleted stream leaves nothing behind, on the ${kind.name} store`, function () {
    this.timeout(120_000);

    it('create/verify/delete rounds (paused, polled, refused pushes) leave no outbox entry, queued SET or metric series of their own', async () => {
      const telemetry = inMemoryTelemetry();
      const refusing = await startReceiver();
      refusing.answer = () => ({ status: 400, headers: { 'content-type': 'application/json' } });
      const Adapter = await kind.open();
      const tp = await startSsfProvider(kind, {}, { telemetry: telemetry.options }, Adapter);
      const queues = new StreamStore(new Adapter(SSF_MODEL) as unknown as SsfStreamAdapter);
      const series = new Set<unknown>();
      const deleted: string[] = [];
      try {
        const token = await receiverToken(tp);
        const call = async (method: string, path: string, body?: unknown, status = 204) => {
          const reply = await ssfRequest(tp, method, path, token, body);
          expect(reply.status, JSON.stringify(reply.body)).to.equal(status);
          return reply.body;
        };
        /** One round: a stream created, `before` done to it, verified, `after` awaited, the gauges read, then deleted. */
        const round = async (
          delivery: object,
          before: (id: string) => Promise<unknown>,
          after: (id: string, endpoint: string) => Promise<unknown>,
        ) => {
          const created = await call('POST', STREAMS, { delivery }, 201);
          const id = created['stream_id'] as string;
          await before(id);
          await call('POST', '/ssf/verify', { stream_id: id });
          await after(id, (created['delivery'] as { endpoint_url: string }).endpoint_url);
          await readSeries(telemetry, series);
          await call('DELETE', `${STREAMS}?stream_id=${id}`);
          deleted.push(id);
        };
        const nothing = async () => {};
        for (let i = 0; i < ROUNDS; i++) {
          // Paused: the verification SET waits in the outbox.
          await round(
            { method: POLL },
            (id) => call('POST', '/ssf/status', { stream_id: id, status: 'paused' }, 200),
            async (id) => {
              expect((await tp.impersonation.ssf().stats()).subscriptions[`ssf:${id}`]?.pending).to.equal(1);
            },
          );
          // Polled: the SET reaches the stream's poll queue, unacknowledged.
          await round({ method: POLL }, nothing, async (_id, endpoint) => {
            expect(Object.keys(await pollUntil(tp, endpoint, token, 5000))).to.have.length(1);
          });
          // Pushed to a receiver that refuses it: a dead letter.
          await round({ method: PUSH, endpoint_url: refusing.url }, nothing, (id) =>
            until(async () => (await tp.impersonation.ssf().stats()).subscriptions[`ssf:${id}`]?.dead === 1),
          );
        }
        // A SET appended as its stream was deleted is forgotten when its delivery finds no stream, not dead-lettered.
        const outbox = (new Adapter('SsfOutboxWriter') as unknown as OutboxCapable).outbox();
        const late = { id: 'late-set', subscription: `ssf:${deleted[0]}`, subject: `stream:${deleted[0]}`, body: '{}' };
        await outbox.append([late], 10, Date.now());
        await until(async () => !(await outbox.waits!(late.subscription)));
        const stats = await tp.impersonation.ssf().stats();
        expect(stats.subscriptions).to.deep.equal({});
        expect(stats.oldest).to.deep.equal({});
        expect(await tp.impersonation.ssf().deadLetters()).to.deep.equal([]);
        for (const id of deleted) expect((await queues.queued(id, 10)).sets.size, id).to.equal(0);
        // Every stream read as the one series of SSF, however many were created.
        await readSeries(telemetry, series);
        expect([...series]).to.deep.equal(['ssf']);
      } finally {
        await Promise.all([tp.close(), refusing.close()]);
        await telemetry.close();
      }
    });
  });
}

/** Adds the subscriptions the outbox gauges read now to `seen`. */
async function readSeries(telemetry: ReturnType<typeof inMemoryTelemetry>, seen: Set<unknown>): Promise<void> {
  for (const metric of await telemetry.metrics()) {
    if (!['impersonation.outbox.backlog', 'impersonation.outbox.oldest_age'].includes(metric.descriptor.name)) continue;
    for (const { attributes } of metric.dataPoints) seen.add(attributes['impersonation.delivery.subscription']);
  }
}

async function until(done: () => Promise<boolean>): Promise<void> {
  const deadline = Date.now() + 10_000;
  while (!(await done())) {
    expect(Date.now(), 'waited 10 s').to.be.below(deadline);
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}

import { expect } from 'chai';
import type { MetricData } from '@opentelemetry/sdk-metrics';
import type { ReadableSpan } from '@opentelemetry/sdk-trace-base';
import { createMemoryAuditLog, EVENTS } from '../../lib/index.js';
import { openTelemetry } from '../../lib/telemetry/telemetry.js';
import { FIXTURE_CLIENTS } from '../../fixtures/provider.js';
import { ADAPTERS } from '../support/adapters.js';
import { CUSTOMER_API } from '../support/approvals.js';
import { apiRequest, exchange, subjectToken, userAccessToken } from '../support/http.js';
import { adminToken, impersonate, revokeSession } from '../support/impersonations.js';
import { API, CLIENTS, CUSTOMER_SCOPE, startProvider, type TestProvider } from '../support/provider.js';
import {
  LOOPBACK_RECEIVERS,
  PUSH,
  receiverToken,
  SESSION_REVOKED,
  SSF_RECEIVER_CLIENTS,
  ssfRequest,
  STREAMS,
} from '../support/ssf.js';
import { documentedNames, inMemoryTelemetry, type InMemoryTelemetry } from '../support/telemetry.js';
import { startReceiver, webhookSecret, type Receiver } from '../support/webhook-receiver.js';
import { scaled } from '../support/time.js';

const SUBJECT = { userId: 'bob', context: { ticket: 'SUP-42' } };

for (const kind of ADAPTERS) {
  describe(`OpenTelemetry spans and metrics on the ${kind.name} store`, function () {
    this.timeout(60_000);
    let telemetry: InMemoryTelemetry;
    let tp: TestProvider;
    let hooks: Receiver;
    let pushed: Receiver;
    /** The OAuth error of the refused exchange. */
    let refusal: string;

    before(async () => {
      telemetry = inMemoryTelemetry();
      hooks = await startReceiver();
      pushed = await startReceiver();
      pushed.answer = () => ({ status: 202 });
      tp = await startProvider(
        {
          plugin: {
            telemetry: telemetry.options,
            auditLog: createMemoryAuditLog(),
            getCustomJwtClaims: () => ({ tier: 'gold' }),
            approvals: { customerResource: CUSTOMER_API, require: () => 'none' },
            webhooks: {
              subscriptions: [
                { id: 'crm', url: hooks.url, events: [EVENTS.sessionRevoked], secret: webhookSecret('crm') },
              ],
              pollInterval: 20,
              timeout: 1000,
            },
            ssf: { pollInterval: 20, timeout: 1000, pushAllowList: LOOPBACK_RECEIVERS },
          },
          configuration: { clients: [...FIXTURE_CLIENTS, ...SSF_RECEIVER_CLIENTS] },
        },
        kind,
      );
      // The flow: an SSF stream, an exchange and a refusal, the customer's API, a stop delivered to both receivers.
      const stream = await ssfRequest(tp, 'POST', STREAMS, await receiverToken(tp), {
        delivery: { method: PUSH, endpoint_url: pushed.url },
        events_requested: [SESSION_REVOKED],
      });
      expect(stream.status, JSON.stringify(stream.body)).to.equal(201);
      const started = await impersonate(tp, { actorToken: await userAccessToken(tp, 'alice'), subject: SUBJECT });
      // A subject token redeemed twice: the second exchange is refused.
      const once = await subjectToken(tp, SUBJECT);
      expect((await exchange(tp, { subject_token: once, resource: API })).status).to.equal(200);
      const again = await exchange(tp, { subject_token: once, resource: API });
      expect(again.status).to.equal(400);
      refusal = again.body['error'] as string;
      const customer = await userAccessToken(tp, 'bob', {
        client: CLIENTS.customer,
        scope: `openid ${CUSTOMER_SCOPE}`,
        resource: CUSTOMER_API,
      });
      expect((await apiRequest(tp, 'GET', '/api/support-access/grants', customer)).status).to.equal(200);
      expect((await revokeSession(tp, await adminToken(tp), started.session)).status).to.equal(204);
      await Promise.all([hooks.waitFor(1), pushed.waitFor(1)]);
      // The settlements follow the receivers' answers.
      await waitUntil(
        () => telemetry.spans().filter((span) => span.name === 'impersonation.outbox.deliver').length >= 2,
      );
    });

    after(async () => {
      await Promise.all([tp?.close(), hooks?.close(), pushed?.close()]);
      await telemetry?.close();
    });

    const spansNamed = (name: string): ReadableSpan[] => telemetry.spans().filter((span) => span.name === name);
    const metric = async (name: string): Promise<MetricData> => {
      const found = (await telemetry.metrics()).find((each) => each.descriptor.name === name);
      expect(found, name).to.not.equal(undefined);
      return found!;
    };

    it('records every span docs/operations.md names', () => {
      const seen = new Set(telemetry.spans().map((span) => span.name));
      for (const name of documentedNames('### Spans').filter((name) => name.startsWith('impersonation.')))
        expect(seen.has(name), `span ${name}`).to.equal(true);
    });

    it('records every metric docs/operations.md names', async () => {
      const seen = new Set((await telemetry.metrics()).map((each) => each.descriptor.name));
      for (const name of documentedNames('### Metrics')) expect(seen.has(name), `metric ${name}`).to.equal(true);
    });

    it('traces each exchange, its outcome and its steps as its children; counts exchanges by outcome and error', async () => {
      const exchanges = spansNamed('impersonation.token_exchange');
      const issued = exchanges.find((span) => span.attributes['impersonation.outcome'] === 'issued')!;
      expect(issued.attributes).to.deep.include({
        'impersonation.client_id': CLIENTS.console.client_id,
        'http.response.status_code': 200,
      });
      const refused = exchanges.find((span) => span.attributes['impersonation.outcome'] === 'refused')!;
      expect(refused.attributes).to.deep.include({ 'error.type': refusal, 'http.response.status_code': 400 });
      expect(refused.status.code).to.equal(2);
      for (const step of ['subject', 'policy', 'claims', 'commit']) {
        const children = spansNamed(`impersonation.token_exchange.${step}`);
        expect(
          children.some((child) => child.parentSpanContext?.spanId === issued.spanContext().spanId),
          step,
        ).to.equal(true);
      }
      const counted = await metric('impersonation.token_exchange.requests');
      const points = withoutInstance(counted);
      expect(points).to.deep.include({ attributes: { 'impersonation.outcome': 'issued' }, value: 2 });
      expect(points).to.deep.include({
        attributes: { 'impersonation.outcome': 'refused', 'error.type': refusal },
        value: 1,
      });
    });

    it('names each API request by its route, never by the ids in its path', () => {
      const api = telemetry.spans().filter((span) => span.attributes['impersonation.api'] !== undefined);
      const byApi = (name: string) => api.filter((span) => span.attributes['impersonation.api'] === name);
      expect(byApi('management').map((span) => span.name)).to.include.members([
        'POST /api/subject-tokens',
        'DELETE /api/impersonations/:id',
      ]);
      expect(byApi('customer').map((span) => span.name)).to.include('GET /api/support-access/grants');
      expect(byApi('ssf').map((span) => span.name)).to.include('POST /ssf/streams');
      const revoked = api.find((span) => span.name === 'DELETE /api/impersonations/:id')!;
      expect(revoked.attributes).to.deep.include({
        'http.request.method': 'DELETE',
        'http.route': '/api/impersonations/:id',
        'http.response.status_code': 204,
      });
    });

    it('traces each delivery and measures the time from the stop to its webhook and its SET', async () => {
      const deliveries = spansNamed('impersonation.outbox.deliver');
      expect(deliveries.map((span) => span.attributes['impersonation.delivery.kind']).sort()).to.include.members([
        'ssf',
        'webhook',
      ]);
      for (const span of deliveries) expect(span.attributes['impersonation.outcome']).to.equal('delivered');
      const delay = await metric('impersonation.outbox.delivery.delay');
      const events = delay.dataPoints.map(({ attributes }) => attributes['impersonation.event']);
      expect(events).to.include.members([EVENTS.sessionRevoked, SESSION_REVOKED]);
    });

    it('reads the outbox backlog, the sessions active and the trail appends', async () => {
      const backlog = await metric('impersonation.outbox.backlog');
      expect(backlog.dataPoints.map(({ attributes }) => attributes['impersonation.delivery.subscription'])).to.include(
        'crm',
      );
      // Two sessions issued, one stopped.
      const sessions = await metric('impersonation.sessions.active');
      expect(sessions.dataPoints[0]!.value).to.equal(1);
      const appends = await metric('impersonation.audit.append.duration');
      const count = appends.dataPoints.reduce((sum, point) => sum + (point.value as { count: number }).count, 0);
      expect(count).to.be.at.least(3);
    });

    it('buckets the durations below a second: an append of 0.1 ms and a delivery of 10 ms each have their own bucket', async () => {
      const edges = async (name: string) =>
        ((await metric(name)).dataPoints[0]!.value as { buckets: { boundaries: number[] } }).buckets.boundaries;
      expect((await edges('impersonation.audit.append.duration')).slice(0, 4)).to.deep.equal([
        0.0001, 0.00025, 0.0005, 0.001,
      ]);
      const delay = await edges('impersonation.outbox.delivery.delay');
      expect(delay.slice(0, 3)).to.deep.equal([0.01, 0.025, 0.05]);
      expect(delay.at(-1)).to.equal(3600);
    });

    it('puts no subject token in any span', async () => {
      const token = await subjectToken(tp, SUBJECT);
      await exchange(tp, { subject_token: token, resource: 'https://unknown.example' });
      expect(JSON.stringify(telemetry.spans().map((span) => span.attributes))).to.not.include(token);
    });
  });
}

for (const kind of ADAPTERS) {
  describe(`OpenTelemetry: the age of the outbox's oldest entry on the ${kind.name} store`, function () {
    this.timeout(60_000);
    let telemetry: InMemoryTelemetry;
    let tp: TestProvider;
    let down: Receiver;
    let up: Receiver;

    before(async () => {
      telemetry = inMemoryTelemetry();
      [down, up] = await Promise.all([startReceiver(), startReceiver()]);
      // Down: every delivery answered 503, tried again at once.
      down.answer = () => ({ status: 503, headers: { 'retry-after': '0' } });
      const subscription = (id: string, receiver: Receiver) => ({
        id,
        url: receiver.url,
        events: [EVENTS.exchangeSucceeded],
        secret: webhookSecret(id),
      });
      tp = await startProvider(
        {
          plugin: {
            telemetry: telemetry.options,
            webhooks: {
              subscriptions: [subscription('ledger', down), subscription('crm', up)],
              pollInterval: 20,
              timeout: 1000,
              maxAttempts: 100,
            },
          },
        },
        kind,
      );
    });

    after(async () => {
      await Promise.all([tp?.close(), down?.close(), up?.close()]);
      await telemetry?.close();
    });

    const ages = async (): Promise<Record<string, number>> => {
      const found = (await telemetry.metrics()).find(
        (each) => each.descriptor.name === 'impersonation.outbox.oldest_age',
      );
      expect(found, 'impersonation.outbox.oldest_age').to.not.equal(undefined);
      expect(found!.descriptor.unit).to.equal('s');
      return Object.fromEntries(
        found!.dataPoints.map(({ attributes, value }) => [
          String(attributes['impersonation.delivery.subscription']),
          value as number,
        ]),
      );
    };

    /** The ages, read again until `settled` holds of them (a delivery is settled a moment after its receiver answers). */
    const agesOnce = async (settled: (read: Record<string, number>) => boolean): Promise<Record<string, number>> => {
      const until = Date.now() + scaled(10_000);
      let read = await ages();
      while (!settled(read) && Date.now() < until) {
        await new Promise((resolve) => setTimeout(resolve, 20));
        read = await ages();
      }
      return read;
    };

    it('reads every subscription at zero while nothing waits', async () => {
      expect(await ages()).to.deep.equal({ ledger: 0, crm: 0 });
    });

    it('reads the age of the oldest entry a receiver that is down leaves waiting, and zero once it is delivered', async () => {
      const before = Date.now();
      await impersonate(tp, { actorToken: await userAccessToken(tp, 'alice'), subject: SUBJECT });
      await up.waitFor(1);
      await waitUntil(() => down.deliveries.length >= 2);
      await impersonate(tp, { actorToken: await userAccessToken(tp, 'alice'), subject: { userId: 'carol' } });
      await up.waitFor(2);
      const read = await agesOnce((ages) => ages['crm'] === 0);
      // The first entry, not the second: its age runs from before the first exchange answered.
      expect(read['ledger'])
        .to.be.above(0)
        .and.at.most((Date.now() - before) / 1000);
      expect(read['crm']).to.equal(0);
      await new Promise((resolve) => setTimeout(resolve, 200));
      expect((await ages())['ledger']).to.be.at.least(read['ledger']! + 0.2);
      const backlog = (await telemetry.metrics()).find(
        (each) => each.descriptor.name === 'impersonation.outbox.backlog',
      );
      expect(
        backlog!.dataPoints.find(
          ({ attributes }) =>
            attributes['impersonation.delivery.subscription'] === 'ledger' &&
            attributes['impersonation.state'] === 'pending',
        )?.value,
      ).to.equal(2);
      // The receiver is back: both entries are delivered, and nothing waits.
      down.answer = () => ({ status: 204 });
      await down.waitFor(2);
      expect(await agesOnce((ages) => ages['ledger'] === 0)).to.deep.equal({ ledger: 0, crm: 0 });
    });
  });
}

describe('OpenTelemetry: two instances in one process, on one meter provider', function () {
  this.timeout(60_000);
  it('reads each instance apart: their exchanges and sessions add up', async () => {
    const telemetry = inMemoryTelemetry();
    const providers: TestProvider[] = [];
    try {
      for (const count of [1, 2]) {
        const tp = await startProvider({ plugin: { telemetry: telemetry.options } });
        providers.push(tp);
        for (let i = 0; i < count; i++)
          await impersonate(tp, { actorToken: await userAccessToken(tp, 'alice'), subject: SUBJECT });
      }
      const read = async (name: string) =>
        (await telemetry.metrics()).find((each) => each.descriptor.name === name)!.dataPoints;
      const sessions = await read('impersonation.sessions.active');
      expect(sessions.map(({ value }) => value).sort()).to.deep.equal([1, 2]);
      expect(new Set(sessions.map(({ attributes }) => attributes['impersonation.instance'])).size).to.equal(2);
      const issued = (await read('impersonation.token_exchange.requests')).map(({ value }) => value as number);
      expect(issued.reduce((sum, value) => sum + value, 0)).to.equal(3);
    } finally {
      await Promise.all(providers.map((tp) => tp.close()));
      await telemetry.close();
    }
  });
});

describe('OpenTelemetry: the exchanges counted', () => {
  it('counts each outcome and error type apart, up to a bound past which refusals count as _OTHER', async () => {
    const telemetry = inMemoryTelemetry();
    try {
      const counting = openTelemetry(telemetry.options)!;
      for (let i = 0; i < 100; i++) counting.countExchange('refused', `type_${i}`);
      counting.countExchange('issued');
      counting.countExchange('issued');
      const counted = (await telemetry.metrics()).find(
        (each) => each.descriptor.name === 'impersonation.token_exchange.requests',
      )!;
      const points = withoutInstance(counted);
      expect(points.reduce((sum, { value }) => sum + (value as number), 0)).to.equal(102);
      expect(points).to.deep.include({ attributes: { 'impersonation.outcome': 'issued' }, value: 2 });
      expect(points).to.deep.include({
        attributes: { 'impersonation.outcome': 'refused', 'error.type': 'type_0' },
        value: 1,
      });
      // 64 attribute sets of refusals at most, then one for the rest, beside the issued.
      expect(points).to.have.length(66);
      expect(points).to.deep.include({
        attributes: { 'impersonation.outcome': 'refused', 'error.type': '_OTHER' },
        value: 36,
      });
    } finally {
      await telemetry.close();
    }
  });
});

/** A metric's points, each instance's attribute left out. */
function withoutInstance(metric: MetricData): Array<{ attributes: Record<string, unknown>; value: unknown }> {
  return metric.dataPoints.map(({ attributes: { 'impersonation.instance': instance, ...attributes }, value }) => {
    expect(instance).to.be.a('string');
    return { attributes, value };
  });
}

async function waitUntil(done: () => boolean, ms = 10_000): Promise<void> {
  const until = Date.now() + scaled(ms);
  while (!done()) {
    if (Date.now() > until) throw new Error('timed out');
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}

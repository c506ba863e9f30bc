import { expect } from 'chai';
import type { AdapterSource } from '../../lib/adapters/contracts/entries.js';
import { EVENTS, onImpersonationEvent } from '../../lib/index.js';
import { exchange, m2mToken, managementRequest, subjectToken, type Reply } from './http.js';
import { API, OPAQUE_API, startProvider, type TestProvider } from './provider.js';
import type { TcpRelay } from './relay.js';

/** A store reached through a relay that the tests cut, and how long its client takes to notice. */
export interface OutageStore {
  /** The store's name, as the titles say it: `Redis`, `PostgreSQL`. */
  name: string;
  /** The relay to the store: the contract starts it, cuts it, freezes it and restores it. */
  relay: TcpRelay;
  /** The adapter the provider uses, reaching the store through `relay.url` (called once the relay listens). */
  adapter(): AdapterSource | Promise<AdapterSource>;
  /** When the store stops answering on an open connection. */
  stalled: {
    /** An exchange fails within this time, */
    failsWithinMs: number;
    /** because of this, */
    because: string;
    /** and exchanges succeed again within this time once the store answers. */
    recoversWithinMs: number;
  };
}

/**
 * A provider whose store goes away: creations are answered 503, exchanges
 * 500 without issuing anything nor spending the subject token, whether the
 * store is gone before the exchange, stops answering, or goes away between
 * the checks and the redemption; all work again once it is back. Called
 * inside a describe block; its hooks own the relay, and tests the block adds
 * after it may use it too.
 */
export function storeOutageContract(store: OutageStore): void {
  const { name, relay, stalled } = store;
  let tp: TestProvider;
  let issued = 0;
  /** Set by a test: the exchange policy cuts the store, i.e. after every check and before the redemption. */
  let cutAtPolicy = false;

  before(async () => {
    await relay.start();
    tp = await startProvider({
      adapter: await store.adapter(),
      plugin: {
        canExchange: async () => {
          if (cutAtPolicy) {
            cutAtPolicy = false;
            await relay.stop();
          }
          return true;
        },
      },
    });
    onImpersonationEvent(tp.provider, EVENTS.exchangeSucceeded, () => {
      issued += 1;
    });
  });
  afterEach(() => {
    relay.frozen = false;
    return relay.start();
  });
  after(async () => {
    await tp?.close();
    await relay.stop();
  });

  it(`answers a creation with 503 temporarily_unavailable, and creates again as soon as ${name} is back`, async () => {
    const m2m = await m2mToken(tp);
    await relay.stop();
    const started = Date.now();
    const failed = await managementRequest(tp, { userId: 'bob' }, m2m);
    expect(Date.now() - started, 'fails fast').to.be.below(3000);
    expect(failed.status).to.equal(503);
    expect(failed.body).to.deep.equal({
      error: 'temporarily_unavailable',
      error_description: 'the identity service cannot reach its store; retry shortly',
    });
    expect(failed.headers.get('cache-control')).to.equal('no-store');

    await relay.start();
    const created = await managementRequest(tp, { userId: 'bob' }, m2m);
    expect(created.status).to.equal(201);
    expect(await exchangeStatus(created.body['subjectToken'] as string)).to.equal(200);
  });

  it('answers an exchange with 500 server_error, issues nothing and keeps the subject token', async () => {
    const token = await subjectToken(tp);
    const before = issued;
    await relay.stop();
    const failed = await redeem(token, API);
    expectServerError(failed);
    expect(issued).to.equal(before);

    await relay.start();
    expect(await exchangeStatus(token), 'the same subject token still works').to.equal(200);
    expect(await exchangeStatus(token), 'and only once').to.equal(400);
  });

  it(`fails within ${stalled.failsWithinMs / 1000} s when ${name} stops answering on an open connection, and recovers when it answers again`, async () => {
    const token = await subjectToken(tp);
    const before = issued;
    relay.frozen = true;
    const started = Date.now();
    expectServerError(await redeem(token, API));
    expect(Date.now() - started, stalled.because).to.be.below(stalled.failsWithinMs);
    expect(issued).to.equal(before);

    relay.frozen = false;
    // The client drops the connections opened or used while frozen as their calls time out (see `stalled`).
    const deadline = Date.now() + stalled.recoversWithinMs;
    let reply = await redeem(token, API);
    while (reply.status >= 500 && Date.now() < deadline) {
      await new Promise((resolve) => setTimeout(resolve, 250));
      reply = await redeem(token, API);
    }
    expect(reply.status, JSON.stringify(reply.body)).to.equal(200);
    expect(issued).to.equal(before + 1);
  });

  for (const resource of [API, OPAQUE_API]) {
    it(`keeps the subject token when ${name} goes away after the checks, before the redemption (${resource === API ? 'JWT' : 'opaque'} token)`, async () => {
      const token = await subjectToken(tp);
      const before = issued;
      cutAtPolicy = true;
      const failed = await redeem(token, resource);
      expect(cutAtPolicy, `the policy ran and cut ${name}`).to.equal(false);
      expectServerError(failed);
      expect(issued).to.equal(before);

      await relay.start();
      const redeemed = await redeem(token, resource);
      expect(redeemed.status).to.equal(200);
      expect(redeemed.body['access_token']).to.be.a('string');
      expect(issued).to.equal(before + 1);
    });
  }

  async function redeem(token: string, resource: string): Promise<Reply> {
    return exchange(tp, { subject_token: token, resource, scope: resource === API ? 'profile:read' : 'read' });
  }

  async function exchangeStatus(token: string): Promise<number> {
    return (await redeem(token, API)).status;
  }
}

function expectServerError(reply: Reply): void {
  expect(reply.status).to.equal(500);
  expect(reply.body['error']).to.equal('server_error');
  expect(reply.body).to.not.have.property('access_token');
  expect(reply.headers.get('cache-control')).to.equal('no-store');
}

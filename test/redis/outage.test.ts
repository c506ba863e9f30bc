import { expect } from 'chai';
import { EVENTS, onImpersonationEvent } from '../../lib/index.js';
import { assertRedisReachable, REDIS_URL, redisTestAdapter } from '../support/adapter.js';
import { exchange, m2mToken, managementRequest, subjectToken, type Reply } from '../support/http.js';
import { API, OPAQUE_API, startProvider, type TestProvider } from '../support/provider.js';
import { TcpRelay } from '../support/relay.js';

describe('Redis adapter: Redis unreachable', function () {
  this.timeout(30_000);
  const relay = new TcpRelay(REDIS_URL, 6379);
  let tp: TestProvider;
  let issued = 0;
  /** Set by a test: the exchange policy cuts Redis, i.e. after every check and before the redemption. */
  let cutAtPolicy = false;

  before(async () => {
    await assertRedisReachable();
    await relay.start();
    tp = await startProvider({
      adapter: redisTestAdapter({ url: relay.url }),
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

  it('answers a creation with 503 temporarily_unavailable, and creates again as soon as Redis is back', async () => {
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

  it('fails fast when Redis stops answering on an open connection, and recovers when it answers again', async () => {
    const token = await subjectToken(tp);
    const before = issued;
    relay.frozen = true;
    const started = Date.now();
    expectServerError(await redeem(token, API));
    expect(Date.now() - started, 'the dead connection is dropped, not waited on').to.be.below(4000);
    expect(issued).to.equal(before);

    relay.frozen = false;
    // A connection attempt made while frozen is itself dropped after the socket timeout.
    const deadline = Date.now() + 5000;
    let reply = await redeem(token, API);
    while (reply.status >= 500 && Date.now() < deadline) {
      await new Promise((resolve) => setTimeout(resolve, 250));
      reply = await redeem(token, API);
    }
    expect(reply.status, JSON.stringify(reply.body)).to.equal(200);
    expect(issued).to.equal(before + 1);
  });

  for (const resource of [API, OPAQUE_API]) {
    it(`keeps the subject token when Redis goes away after the checks, before the redemption (${resource === API ? 'JWT' : 'opaque'} token)`, async () => {
      const token = await subjectToken(tp);
      const before = issued;
      cutAtPolicy = true;
      const failed = await redeem(token, resource);
      expect(cutAtPolicy, 'the policy ran and cut Redis').to.equal(false);
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
});

function expectServerError(reply: Reply): void {
  expect(reply.status).to.equal(500);
  expect(reply.body['error']).to.equal('server_error');
  expect(reply.body).to.not.have.property('access_token');
  expect(reply.headers.get('cache-control')).to.equal('no-store');
}

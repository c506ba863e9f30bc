import { expect } from 'chai';
import pg from 'pg';
import { EVENTS, onImpersonationEvent } from '../../lib/index.js';
import type { PostgresAdapterClass } from '../../lib/adapters/postgres.js';
import { exchange, m2mToken, managementRequest, subjectToken, type Reply } from '../support/http.js';
import { DATABASE_URL } from '../support/postgres.js';
import { postgresRunSchema, postgresTestAdapter, testTable } from '../support/postgres-adapter.js';
import { API, OPAQUE_API, startProvider, type TestProvider } from '../support/provider.js';
import { TcpRelay } from '../support/relay.js';

describe('PostgreSQL adapter: PostgreSQL unreachable', function () {
  this.timeout(30_000);
  const relay = new TcpRelay(DATABASE_URL, 5432);
  let tp: TestProvider;
  let Adapter: PostgresAdapterClass;
  let issued = 0;
  /** Set by a test: the exchange policy cuts PostgreSQL, i.e. after every check and before the redemption. */
  let cutAtPolicy = false;

  before(async () => {
    await relay.start();
    Adapter = await postgresTestAdapter({ connectionString: relay.url });
    tp = await startProvider({
      adapter: Adapter,
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

  it('answers a creation with 503 temporarily_unavailable, and creates again as soon as PostgreSQL is back', async () => {
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

  it('fails when PostgreSQL stops answering on an open connection, and recovers when it answers again', async () => {
    const token = await subjectToken(tp);
    const before = issued;
    relay.frozen = true;
    const started = Date.now();
    expectServerError(await redeem(token, API));
    expect(Date.now() - started, 'the query times out, the request does not hang').to.be.below(8000);
    expect(issued).to.equal(before);

    relay.frozen = false;
    // Connections opened or used while frozen are discarded as their calls time out.
    const deadline = Date.now() + 10_000;
    let reply = await redeem(token, API);
    while (reply.status >= 500 && Date.now() < deadline) {
      await new Promise((resolve) => setTimeout(resolve, 250));
      reply = await redeem(token, API);
    }
    expect(reply.status, JSON.stringify(reply.body)).to.equal(200);
    expect(issued).to.equal(before + 1);
  });

  for (const resource of [API, OPAQUE_API]) {
    it(`keeps the subject token when PostgreSQL goes away after the checks, before the redemption (${resource === API ? 'JWT' : 'opaque'} token)`, async () => {
      const token = await subjectToken(tp);
      const before = issued;
      cutAtPolicy = true;
      const failed = await redeem(token, resource);
      expect(cutAtPolicy, 'the policy ran and cut PostgreSQL').to.equal(false);
      expectServerError(failed);
      expect(issued).to.equal(before);

      await relay.start();
      const redeemed = await redeem(token, resource);
      expect(redeemed.status).to.equal(200);
      expect(redeemed.body['access_token']).to.be.a('string');
      expect(issued).to.equal(before + 1);
    });
  }

  it('keeps sweeping after an outage: sweeps that fail are tried again on their timer, with no restart', async () => {
    const table = testTable();
    const Swept = await postgresTestAdapter({ connectionString: relay.url, table, cleanupInterval: 100 });
    await new Swept('AccessToken').upsert('expires-soon', { jti: 'expires-soon' }, 0.05);
    await relay.stop();
    await expectRejection(Swept.cleanup());
    // Several sweeps fail on the timer meanwhile; none may take the process down.
    await sleep(350);
    expect(await rowsOf(table)).to.equal(1);

    await relay.start();
    const deadline = Date.now() + 5000;
    while ((await rowsOf(table)) > 0 && Date.now() < deadline) await sleep(100);
    expect(await rowsOf(table), 'the expired row was swept once PostgreSQL was back').to.equal(0);
  });

  async function redeem(token: string, resource: string): Promise<Reply> {
    return exchange(tp, { subject_token: token, resource, scope: resource === API ? 'profile:read' : 'read' });
  }

  async function exchangeStatus(token: string): Promise<number> {
    return (await redeem(token, API)).status;
  }
});

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** Rows of the store's table, read directly (not through the relay). */
async function rowsOf(table: string): Promise<number> {
  const client = new pg.Client({ connectionString: DATABASE_URL });
  await client.connect();
  try {
    const { rows } = await client.query(`SELECT count(*)::int AS n FROM "${await postgresRunSchema()}"."${table}"`);
    return (rows[0] as { n: number }).n;
  } finally {
    await client.end();
  }
}

async function expectRejection(promise: Promise<unknown>): Promise<void> {
  let outcome: unknown = 'resolved';
  try {
    outcome = await promise;
  } catch (error) {
    expect(error).to.be.instanceOf(Error);
    return;
  }
  expect.fail(`expected a rejection, got ${JSON.stringify(outcome)}`);
}

function expectServerError(reply: Reply): void {
  expect(reply.status).to.equal(500);
  expect(reply.body['error']).to.equal('server_error');
  expect(reply.body).to.not.have.property('access_token');
  expect(reply.headers.get('cache-control')).to.equal('no-store');
}

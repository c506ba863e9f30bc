import { expect } from 'chai';
import pg from 'pg';
import { DATABASE_URL } from '../support/postgres.js';
import { postgresRunSchema, postgresTestAdapter, testTable } from '../support/postgres-adapter.js';
import { storeOutageContract } from '../support/outage.js';
import { TcpRelay } from '../support/relay.js';
import { scaled } from '../support/time.js';

describe('PostgreSQL adapter: PostgreSQL unreachable', function () {
  this.timeout(30_000);
  const relay = new TcpRelay(DATABASE_URL, 5432);

  storeOutageContract({
    name: 'PostgreSQL',
    relay,
    adapter: () => postgresTestAdapter({ connectionString: relay.url }),
    // Connections opened or used while frozen are discarded as their calls time out.
    stalled: {
      failsWithinMs: 8000,
      because: 'the query times out, the request does not hang',
      recoversWithinMs: 10_000,
    },
  });

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
    const deadline = Date.now() + scaled(5000);
    while ((await rowsOf(table)) > 0 && Date.now() < deadline) await sleep(100);
    expect(await rowsOf(table), 'the expired row was swept once PostgreSQL was back').to.equal(0);
  });
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

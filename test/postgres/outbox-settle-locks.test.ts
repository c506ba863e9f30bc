import { expect } from 'chai';
import pg from 'pg';
import { hasOutbox, type OutboxStore } from '../../lib/outbox/contract.js';
import { DATABASE_URL } from '../support/postgres.js';
import { postgresRunSchema, postgresTestAdapter, testTable } from '../support/postgres-adapter.js';

const LEASE = 30_000;

/**
 * An append locks the last waiting row of each stream it appends to, in the
 * order of its entries' subscriptions, not of the rows; a round's settlement
 * locks several rows at once. Should the settlement wait for one row while it
 * holds another, the two could wait for each other until PostgreSQL aborts
 * one (the exchange's commit, as likely as not).
 */
describe('PostgreSQL outbox: a round settled together never waits for a row while holding another', function () {
  this.timeout(20_000);
  let client: pg.Client | undefined;
  afterEach(async () => {
    await client?.query('ROLLBACK').catch(() => {});
    await client?.end();
    client = undefined;
  });

  it('settles the rows it can lock at once, and each row an append holds once it is free', async () => {
    const table = testTable();
    const Adapter = await postgresTestAdapter({ table });
    const adapter = new Adapter('ImpersonationOutbox');
    if (!hasOutbox(adapter)) throw new Error('the PostgreSQL adapter has no outbox');
    const outbox: OutboxStore = adapter.outbox();
    const now = Date.now();
    // Two streams' heads: the first row (lower seq) and the second.
    await outbox.append([{ id: 'a', subscription: 'crm', subject: 'alice', body: '{}' }], 100, now);
    await outbox.append([{ id: 'b', subscription: 'crm', subject: 'bob', body: '{}' }], 100, now);
    const claimed = await outbox.claim(10, LEASE, now, 0);
    expect(claimed.map((entry) => entry.id)).to.have.members(['a', 'b']);

    // An append that took the second row first, and is about to take the first.
    client = new pg.Client({ connectionString: DATABASE_URL });
    await client.connect();
    const entries = `"${await postgresRunSchema()}"."${table}_outbox"`;
    await client.query('BEGIN');
    await client.query(`SELECT seq FROM ${entries} WHERE id = 'b' FOR KEY SHARE`);

    const settling = outbox.settleAll!(
      claimed.map((entry) => ({ entry, settlement: { outcome: 'delivered' as const } })),
      now,
    );
    // The first row is settled at once; the second waits for the append.
    await new Promise((resolve) => setTimeout(resolve, 300));
    const firstLeft = await client.query(`SELECT seq FROM ${entries} WHERE id = 'a' FOR KEY SHARE`);
    expect(firstLeft.rows).to.have.length(0);
    await client.query('COMMIT');
    expect(await settling).to.deep.equal(claimed.map(() => true));
    expect((await outbox.stats()).subscriptions['crm'] ?? { pending: 0 }).to.include({ pending: 0 });
  });
});

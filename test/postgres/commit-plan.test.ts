import { expect } from 'chai';
import type { PostgresAdapterClass } from '../../lib/adapters/postgres.js';
import type { ReadAheadAdapter } from '../../lib/adapters/contracts/read-ahead.js';
import type { OutboxStore } from '../../lib/outbox/contract.js';
import { explainingAdapter as explaining, mostFiltered, type ExplainingAdapter } from '../support/postgres-plans.js';
import { sessionCommit } from '../support/postgres-adapter.js';

/** Stored sessions and subject tokens besides the guards: what a model-wide read would go through. */
const STORED = 3000;

/**
 * A connection keeps a generic plan of the commit after five calls, chosen
 * without the values. The guards (and quota counters) are looked up by their
 * ids in the primary key (model, id): written as `id = ANY(…)`, a generic
 * plan could read every entry of the model and filter them, a cost that grew
 * with the sessions stored.
 */
describe('PostgreSQL adapter: the commit reads its guards by id, however many sessions are stored', function () {
  this.timeout(30_000);
  let explained: ExplainingAdapter | undefined;
  afterEach(async () => {
    await explained?.close();
    explained = undefined;
  });

  /** An explaining adapter (test/support/postgres-plans.ts), its plans into `plans`, with sessions and subject tokens stored. */
  async function explainingAdapter(plans: string[]): Promise<PostgresAdapterClass> {
    explained = await explaining(plans);
    await explained.pool.query(
      `INSERT INTO ${explained.entries} (model, id, payload, expires_at)
       SELECT 'ImpersonationSession', 'stored-' || n, '{}'::json, now() + interval '1 hour'
       FROM generate_series(1, ${STORED}) AS n UNION ALL
       SELECT 'SubjectToken', 'stored-' || n, '{}'::json, now() + interval '1 hour'
       FROM generate_series(1, ${STORED}) AS n`,
    );
    return explained.Adapter;
  }

  it('probes each guard and counter by its id in the generic plan', async () => {
    const plans: string[] = [];
    const Store = await explainingAdapter(plans);
    const tokens = new Store('SubjectToken');
    const records = new Store('ImpersonationSession');
    for (const n of [1, 2, 3]) {
      await tokens.upsert(`st-${n}`, { kind: 'SubjectToken', id: `st-${n}` }, 600);
      const outcome = await records.commitOnce({
        ...sessionCommit(String(n), ['mark:grant:g-alice', 'mark:session:u-alice']),
        quotas: [{ key: 'quota:alice', max: 100, expiresAt: Date.now() + 60_000 }],
      });
      expect(outcome.outcome).to.equal('committed');
    }
    const commits = plans.filter((plan) => plan.includes('redeemed AS'));
    expect(commits, 'the commits were planned and explained').to.have.length.greaterThan(0);
    for (const plan of commits) {
      // Rows of the model read and then dropped by a filter on their ids: a read of the model, not a probe.
      expect(mostFiltered(plan), plan).to.be.below(STORED);
    }
  });

  /**
   * Three rounds of three commits asked for together (so sent as one statement), each
   * redeeming a subject token of its own; `notify` gives each its notification; `prefix` starts their ids.
   */
  async function commitInRounds(Store: PostgresAdapterClass, notify?: { now: number }, prefix = ''): Promise<void> {
    const tokens = new Store('SubjectToken');
    const records = new Store('ImpersonationSession');
    for (const round of [1, 2, 3]) {
      const ids = [1, 2, 3].map((n) => `${prefix}${round}-${n}`);
      for (const id of ids) await tokens.upsert(`st-${id}`, { kind: 'SubjectToken', id: `st-${id}` }, 600);
      const outcomes = await Promise.all(
        ids.map((id) =>
          records.commitOnce({
            ...sessionCommit(id, ['mark:grant:g-alice', 'mark:session:u-alice']),
            ...(notify && {
              outbox: {
                entries: [{ id: `m-${id}`, subscription: 'crm', subject: `bob-${id}`, body: '{}' }],
                maxPending: 10_000,
                now: notify.now,
              },
            }),
          }),
        ),
      );
      expect(outcomes.map((outcome) => outcome.outcome)).to.deep.equal(['committed', 'committed', 'committed']);
    }
  }

  it('probes each guard and each entry it consumes by its key when commits go out together', async () => {
    const plans: string[] = [];
    await commitInRounds(await explainingAdapter(plans));
    const commits = plans.filter((plan) => plan.includes('redeemed AS') && plan.includes('unnest($9::text[]'));
    expect(commits, 'the batched commits were planned and explained').to.have.length.greaterThan(0);
    for (const plan of commits) expect(mostFiltered(plan), plan).to.be.below(STORED);
  });

  /**
   * A deployment starts on empty tables: the plans a connection keeps are made then, and PostgreSQL makes
   * them again only after an ANALYZE or a VACUUM (which a server without autovacuum never runs). Joined to
   * the entries, a key from the commit's own rows can be planned as a scan of the table, whose cost grows
   * with every session stored: each lookup is a LATERAL probe of the primary key, whatever the table holds.
   */
  it('probes by key once the table grows, with the plans made while it was empty', async () => {
    const plans: string[] = [];
    explained = await explaining(plans);
    const Store = explained.Adapter;
    await commitInRounds(Store, undefined, 'before');
    await readActorToken(Store, 'before');
    await withdraw(Store, 'before');
    await explained.pool.query(
      `INSERT INTO ${explained.entries} (model, id, payload, expires_at)
       SELECT model, 'stored-' || n, '{}'::json, now() + interval '1 hour'
       FROM generate_series(1, ${STORED}) AS n, unnest(ARRAY['ImpersonationSession', 'SubjectToken']) AS model`,
    );
    plans.length = 0;
    await commitInRounds(Store, undefined, 'after');
    await readActorToken(Store, 'after');
    await withdraw(Store, 'after');
    const readsAhead = plans.filter((plan) => plan.includes('UNION ALL'));
    expect(readsAhead, 'the reads ahead were explained').to.have.length.greaterThan(0);
    const commits = plans.filter((plan) => plan.includes('redeemed AS'));
    expect(commits, 'the commits after the growth were explained').to.have.length.greaterThan(0);
    for (const plan of plans) {
      expect(mostFiltered(plan), plan).to.be.below(STORED);
      expect(plan, 'no table read whole').to.not.match(/Seq Scan on/);
    }
  });

  /** An access token, its Session and its Grant, written, then read as the exchange reads an actor token. */
  async function readActorToken(Store: PostgresAdapterClass, prefix: string): Promise<void> {
    const [tokens, sessions, grants] = ['AccessToken', 'Session', 'Grant'].map((model) => new Store(model));
    await sessions!.upsert(`s-${prefix}`, { uid: `u-${prefix}` }, 600);
    await grants!.upsert(`g-${prefix}`, { accountId: 'alice' }, 600);
    await tokens!.upsert(`at-${prefix}`, { grantId: `g-${prefix}`, sessionUid: `u-${prefix}` }, 600);
    await (tokens as ReadAheadAdapter).readAhead!(`at-${prefix}`);
    const found = await Promise.all([tokens!.find(`at-${prefix}`), sessions!.findByUid(`u-${prefix}`)]);
    expect(found.map((payload) => payload?.['grantId'] ?? payload?.['uid'])).to.deep.equal([
      `g-${prefix}`,
      `u-${prefix}`,
    ]);
  }

  /** A subject token written, then redeemed on its own (as a withdrawal does). */
  async function withdraw(Store: PostgresAdapterClass, prefix: string): Promise<void> {
    const tokens = new Store('SubjectToken');
    await tokens.upsert(`withdrawn-${prefix}`, { kind: 'SubjectToken' }, 600);
    expect(await tokens.consumeOnce(`withdrawn-${prefix}`)).to.equal(true);
  }

  it('reads the outbox by index when commits that notify go out together, however many entries wait', async () => {
    const plans: string[] = [];
    const Store = await explainingAdapter(plans);
    const outbox = (new Store('ImpersonationSession') as unknown as { outbox(): OutboxStore }).outbox();
    const now = Date.now();
    const waiting = Array.from({ length: STORED }, (_, n) => ({
      id: `w-${n}`,
      subscription: 'mail',
      subject: `customer-${n}`,
      body: '{}',
    }));
    await outbox.append(waiting, STORED + 1, now);
    await commitInRounds(Store, { now });
    const commits = plans.filter((plan) => plan.includes('redeemed AS') && plan.includes('unnest($15::text[]'));
    expect(commits, 'the batched commits were planned and explained').to.have.length.greaterThan(0);
    for (const plan of commits) {
      expect(mostFiltered(plan), plan).to.be.below(STORED);
      expect(plan, 'no table read whole').to.not.match(/Seq Scan on/);
    }
  });
});

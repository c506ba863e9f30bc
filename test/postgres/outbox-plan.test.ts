import { expect } from 'chai';
import type { LeasedEntry, OutboxStore } from '../../lib/outbox/contract.js';
import { explainingAdapter, mostFiltered, type ExplainingAdapter } from '../support/postgres-plans.js';

/** Customers with entries waiting, each with a second entry behind its first (not ready until it is settled). */
const CUSTOMERS = 1500;

/**
 * The delivery loop asks the outbox for a claim and a settlement several
 * times a second on every instance: each statement is prepared once per
 * connection (an unnamed statement is planned on every call, and the claim's
 * planning took about as long as running it), and its generic plan, the one a
 * connection keeps, reads the entries it hands out or settles by index,
 * however many wait behind them.
 */
describe('PostgreSQL outbox: claims and settlements prepared once, read by index under a backlog', function () {
  this.timeout(30_000);
  let explained: ExplainingAdapter | undefined;
  afterEach(async () => {
    await explained?.close();
    explained = undefined;
  });

  /** An explaining adapter's outbox with CUSTOMERS × 2 entries waiting for subscription `crm`. */
  async function backlog(): Promise<{ outbox: OutboxStore; now: number }> {
    explained = await explainingAdapter();
    const outbox = (new explained.Adapter('ImpersonationSession') as unknown as { outbox(): OutboxStore }).outbox();
    const now = Date.now();
    for (const turn of [1, 2]) {
      const entries = Array.from({ length: CUSTOMERS }, (_, n) => ({
        id: `e-${turn}-${n}`,
        subscription: 'crm',
        subject: `customer-${n}`,
        body: '{}',
      }));
      await outbox.append(entries, 2 * CUSTOMERS + 1, now);
    }
    return { outbox, now };
  }

  /** Three looks as the delivery loop makes them: a claim, then its entries settled (delivered, retried, dead). */
  async function deliverThrice(outbox: OutboxStore, now: number): Promise<LeasedEntry[]> {
    const claimed: LeasedEntry[] = [];
    for (const look of [0, 1, 2]) {
      const at = now + look;
      const batch = await outbox.claim(32, 30_000, at, at - 86_400_000, { each: 16, out: new Map() });
      expect(batch, 'a claim hands out entries').to.have.length(16);
      claimed.push(...batch);
      const held = await outbox.settleAll!(
        batch.map((entry, n) => ({
          entry,
          settlement:
            n === 0
              ? { outcome: 'retry' as const, at: at + 60_000 }
              : n === 1
                ? { outcome: 'dead' as const, reason: 'attempts' }
                : { outcome: 'delivered' as const },
        })),
        at,
      );
      expect(held.every(Boolean), 'every settlement held').to.equal(true);
    }
    return claimed;
  }

  it('prepares the claim and the settlements once on a connection', async () => {
    const { outbox, now } = await backlog();
    await deliverThrice(outbox, now);
    const { rows } = await explained!.pool.query<{ name: string }>('SELECT name FROM pg_prepared_statements');
    const names = rows.map((row) => row.name.replace(/^oidc_imp_[0-9a-f]+_/, ''));
    expect(names).to.include.members([
      'outbox_append',
      'outbox_claim',
      'outbox_retryMany',
      'outbox_lockMany',
      'outbox_settleMany',
    ]);
  });

  it('reads by index in the generic plans of the claim and the settlements, however many entries wait', async () => {
    const { outbox, now } = await backlog();
    explained!.plans.length = 0;
    await deliverThrice(outbox, now);
    const plans = explained!.plans.filter((plan) => plan.includes('_outbox'));
    const of = (marker: string) => plans.filter((plan) => plan.includes(marker));
    expect(of('waiting AS ('), 'the claims').to.have.length(3);
    expect(of('FOR UPDATE OF e SKIP LOCKED'), 'the settlements locking their entries').to.have.length(3);
    expect(of('deleted AS'), 'the settlements').to.have.length(3);
    expect(of('next_at = v.at'), 'the retries').to.have.length(3);
    for (const plan of plans) {
      expect(plan, 'no table read whole').to.not.match(/Seq Scan on/);
      expect(mostFiltered(plan), plan).to.be.below(CUSTOMERS);
    }
  });
});

/**
 * `node build/bench/postgres-exchange-cost.js [--exchanges N] [--concurrency C] [--adapter PATH]`:
 * what one exchange with an opaque actor token costs PostgreSQL as the store,
 * apart from the provider and the rest of the machine.
 *
 * The PostgreSQL adapter alone, in a schema of its own, asked for what an
 * exchange asks of it, `concurrency` exchanges at a time: the subject token
 * and the actor's access token, then the token's Session (by uid) and Grant,
 * as oidc-provider asks for them, then the commit (the redemption, the
 * session record, its five index members, its two guards). Every exchange
 * uses the same actor token, as the bench's do, so that all of them share
 * the sign-in's guards. It prints the statements sent per exchange, the
 * CPU the run's own backends used per exchange (from /proc, by their pids:
 * other clients of the same server are not counted; the WAL writer, shared
 * with them, is left out), the rows written, and the exchanges per second.
 * `--adapter` names another build's lib/adapters/postgres.js, to compare;
 * `--indexes`, `--guards` and `--reads-only` leave parts of the commit out.
 * `--outbox` adds a webhook notification to each commit (1,000 customers in
 * turn, as bench/requests.ts), and `--drain` delivers them meanwhile as the
 * delivery loop asks the store (claims of 32, each settled delivered at once,
 * no HTTP), so that what the outbox costs the commit shows apart from
 * the POSTs, with the table's churn.
 */
import { randomUUID } from 'node:crypto';
import { resolve } from 'node:path';
import { pathToFileURL } from 'node:url';
import pg from 'pg';
import type { OutboxAdapter } from '../lib/adapters/contracts/outbox.js';
import type { PostgresAdapterClass, PostgresAdapterOptions } from '../lib/adapters/postgres.js';
import { readStat } from './proc-stat.js';
import { serviceUrls } from './stores.js';

function flag(name: string, fallback: string): string {
  const at = process.argv.indexOf(`--${name}`);
  return at === -1 ? fallback : process.argv[at + 1]!;
}

const EXCHANGES = Number(flag('exchanges', '4000'));
const CONCURRENCY = Number(flag('concurrency', '16'));
const ADAPTER = flag('adapter', '');
/** What the commit is asked for, to see what each part costs: `--indexes 0..5`, `--guards 0..2`, `--reads-only`. */
const INDEXES = ['active', 'subject:customer', 'actor:alice', 'origin:grant:g-alice', 'origin:session:u-alice'].slice(
  0,
  Number(flag('indexes', '5')),
);
const GUARDS = ['mark:grant:g-alice', 'mark:session:u-alice'].slice(0, Number(flag('guards', '2')));
const READS_ONLY = process.argv.includes('--reads-only');
const OUTBOX = ['--outbox', '--drain', '--drain-between'].some((name) => process.argv.includes(name));
const DRAIN = process.argv.includes('--drain');
const DRAIN_BETWEEN = process.argv.includes('--drain-between');
/** With --drain-between: exchanges per window, about what one of the bench's 3-second windows makes on PostgreSQL. */
const WINDOW = 1500;
const CUSTOMERS = 1000;
/** A webhook payload of the size an exchange's notification has. */
const NOTIFICATION = JSON.stringify({ type: 'impersonation.exchange.succeeded', data: { padding: 'x'.repeat(400) } });

async function main(): Promise<void> {
  const { createPostgresAdapter } = (await import(
    ADAPTER ? pathToFileURL(resolve(ADAPTER)).href : '../lib/adapters/postgres.js'
  )) as { createPostgresAdapter: (options: PostgresAdapterOptions) => PostgresAdapterClass };
  const { databaseUrl } = serviceUrls();
  const schema = `cost_${randomUUID().replace(/-/g, '').slice(0, 12)}`;
  const application = `exchange-cost-${schema}`;
  const admin = new pg.Client({ connectionString: databaseUrl });
  await admin.connect();
  await admin.query(`CREATE SCHEMA "${schema}"`);
  const pool = new pg.Pool({
    connectionString: databaseUrl,
    max: 10,
    application_name: application,
    ...(process.argv.includes('--generic') ? { options: '-c plan_cache_mode=force_generic_plan' } : {}),
  });
  let sent = 0;
  const query = pool.query.bind(pool) as (...args: unknown[]) => Promise<pg.QueryResult>;
  (pool as unknown as { query: typeof query }).query = (...args: unknown[]) => {
    sent += 1;
    return query(...args);
  };
  const Adapter = createPostgresAdapter({ pool, schema, cleanupInterval: 0 });
  try {
    await Adapter.migrate();
    const tokens = new Adapter('AccessToken');
    const sessions = new Adapter('Session');
    const grants = new Adapter('Grant');
    const subjectTokens = new Adapter('SubjectToken');
    const records = new Adapter('ImpersonationSession');
    await Promise.all([
      tokens.upsert(
        'opaque-actor-token',
        {
          jti: 'opaque-actor-token',
          accountId: 'alice',
          clientId: 'console',
          grantId: 'g-alice',
          sessionUid: 'u-alice',
        },
        3600,
      ),
      sessions.upsert(
        's-alice',
        { uid: 'u-alice', accountId: 'alice', authorizations: { console: { grantId: 'g-alice' } } },
        3600,
      ),
      grants.upsert('g-alice', { accountId: 'alice', clientId: 'console', openid: { scope: 'openid' } }, 3600),
    ]);
    const subjects = Array.from({ length: EXCHANGES + 100 }, (_, n) => `st-${n}`);
    for (let at = 0; at < subjects.length; at += 200) {
      await Promise.all(
        subjects
          .slice(at, at + 200)
          .map((id) =>
            subjectTokens.upsert(
              id,
              { kind: 'SubjectToken', id, subject: 'customer', context: { ticketId: 'T-1' } },
              3600,
            ),
          ),
      );
    }

    let next = 0;
    const exchange = async (): Promise<void> => {
      const n = next++;
      const id = subjects[n]!;
      const [subject, token] = await Promise.all([subjectTokens.find(id), tokens.find('opaque-actor-token')]);
      const [session, grant] = await Promise.all([
        sessions.findByUid(token!['sessionUid'] as string),
        grants.find(token!['grantId'] as string),
      ]);
      if (!subject || !session || !grant) throw new Error('an entry is missing');
      if (READS_ONLY) return;
      const record = `imp-${id}`;
      const expiresAt = Date.now() + 900_000;
      const outcome = await records.commitOnce({
        consume: { model: 'SubjectToken', id },
        write: {
          model: 'ImpersonationSession',
          id: record,
          payload: { kind: 'ImpersonationSession', id: record, subject: 'customer', actor: 'alice', exp: expiresAt },
          expiresIn: 960,
        },
        indexes: INDEXES,
        expiresAt,
        guards: GUARDS,
        ...(OUTBOX
          ? {
              outbox: {
                entries: [
                  { id: `evt-${id}`, subscription: 'bench', subject: `customer-${n % CUSTOMERS}`, body: NOTIFICATION },
                ],
                maxPending: 10_000,
                now: Date.now(),
              },
            }
          : {}),
      });
      if (outcome.outcome !== 'committed') throw new Error(`not committed: ${outcome.outcome}`);
    };
    const outbox = DRAIN || DRAIN_BETWEEN ? (new Adapter('Outbox') as unknown as OutboxAdapter).outbox() : undefined;
    let delivered = 0;
    /** One look at the outbox, as the delivery loop's (lib/webhooks/worker.ts): a claim of 32, each settled delivered. */
    const deliverOnce = async (): Promise<number> => {
      const now = Date.now();
      const claimed = await outbox!.claim(32, 30_000, now, now - 86_400_000, { each: 16, out: new Map() });
      if (claimed.length) {
        await outbox!.settleAll!(
          claimed.map((entry) => ({ entry, settlement: { outcome: 'delivered' as const } })),
          Date.now(),
        );
      }
      delivered += claimed.length;
      return claimed.length;
    };
    /** Delivers what the commits append until `done()`. */
    const drain = async (done: () => boolean): Promise<void> => {
      while (outbox && !done()) {
        if ((await deliverOnce()) === 0) await new Promise((resolve) => setTimeout(resolve, 5));
      }
    };
    /** Delivers until the outbox is empty. */
    const drainAll = async (): Promise<void> => {
      while ((await deliverOnce()) > 0);
    };
    const run = async (count: number): Promise<void> => {
      const stop = next + count;
      let finished = !DRAIN;
      const draining = drain(() => finished);
      await Promise.all(
        Array.from({ length: CONCURRENCY }, async () => {
          while (next < stop) await exchange();
        }),
      );
      finished = true;
      await draining;
    };

    await run(100); // warm-up: connections opened, statements prepared
    const { rows } = await admin.query<{ pid: number }>(
      'SELECT pid FROM pg_stat_activity WHERE application_name = $1',
      [application],
    );
    const backends = rows.map((row) => row.pid);
    const cpu = () => backends.reduce((sum, pid) => sum + readStat(`/proc/${pid}/stat`).cpuSeconds, 0);
    const walBefore = await admin.query<{ lsn: string }>('SELECT pg_current_wal_lsn()::text AS lsn');
    sent = 0;
    delivered = 0;
    let cpuSeconds = 0;
    let seconds = 0;
    // --drain-between: the exchanges in windows of WINDOW, the outbox drained between them (untimed), as the
    // bench's provider that delivers its own outbox drains it between its windows.
    const window = DRAIN_BETWEEN ? WINDOW : EXCHANGES;
    for (let done = 0; done < EXCHANGES; done += window) {
      const cpuBefore = cpu();
      const started = process.hrtime.bigint();
      await run(Math.min(window, EXCHANGES - done));
      seconds += Number(process.hrtime.bigint() - started) / 1e9;
      cpuSeconds += cpu() - cpuBefore;
      if (DRAIN_BETWEEN) await drainAll();
    }
    const { rows: wal } = await admin.query<{ bytes: string }>(
      'SELECT pg_wal_lsn_diff(pg_current_wal_lsn(), $1::pg_lsn)::bigint AS bytes',
      [walBefore.rows[0]!.lsn],
    );
    const notes = OUTBOX ? `, a notification each${DRAIN ? ` (${delivered} delivered meanwhile)` : ''}` : '';
    console.log(
      `${ADAPTER || 'this tree'}${READS_ONLY ? ', reads only' : `, ${INDEXES.length} index members, ${GUARDS.length} guards${notes}`}: ${EXCHANGES} exchanges at ${CONCURRENCY} at a time, ${backends.length} backends: ` +
        `${(sent / EXCHANGES).toFixed(2)} statements per exchange, ` +
        `${((cpuSeconds / EXCHANGES) * 1e6).toFixed(0)} µs of backend CPU per exchange, ` +
        `${(Number(wal[0]!.bytes) / EXCHANGES / 1024).toFixed(1)} KiB of WAL per exchange (the server's, others' included), ` +
        `${(EXCHANGES / seconds).toFixed(0)} exchanges/s`,
    );
  } finally {
    await Adapter.close();
    await pool.end();
    await admin.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`);
    await admin.end();
  }
}

await main();

/** The outbox on PostgreSQL: tables of entries and counters beside the adapter's (Invariants 14, 15). */
import { randomUUID } from 'node:crypto';
import { streamOf, type DeadLetter, type LeasedEntry, type NewOutboxEntry, type SettledEntry } from './contract.js';
import type { OutboxStats, OutboxStore } from './contract.js';
import type { Statement } from '../postgres/statement.js';

type Row = Record<string, unknown>;
/** Runs one statement (the adapter's pool, error mapping and migration). */
type RunStatement = (statement: Statement, values: unknown[], operation: string) => Promise<{ rows: Row[] }>;

export interface OutboxTables {
  /** What the outbox's statement names start with: its adapter's, unique to its table. */
  statementPrefix: string;
  /** Qualified names of the entries' and the counters' tables. */
  entries: string;
  drops: string;
  /** Index names, unqualified (PostgreSQL creates an index in its table's schema). */
  streamIndex: string;
  subscriptionIndex: string;
  readyIndex: string;
  deadIndex: string;
}

/** Runs statements in one transaction on one connection: committed when `work` resolves, rolled back when it throws. */
export type RunTransaction = <T>(work: (run: RunStatement) => Promise<T>, operation: string) => Promise<T>;

/**
 * The append as CTEs ending in `refused`: per entry from `$first` on, its id, subscription, subject, stream, body, time
 * (ms), bound and owner, where row `i` meets `gate`; at the bound, dropped. `input`'s LIMIT gives the planner the row
 * count; `counted` counts a subscription's waiting entries only when they could reach the bound, so that an append's
 * cost never follows the backlog of a receiver catching up.
 */
export function appendCtes(tables: Pick<OutboxTables, 'entries' | 'drops'>, first: number, gate: string): string {
  const { entries, drops } = tables;
  const $ = (offset: number) => `$${first + offset}`;
  return `input AS (
        SELECT * FROM unnest(${$(0)}::text[], ${$(1)}::text[], ${$(2)}::text[], ${$(3)}::text[], ${$(4)}::text[],
          ${$(5)}::bigint[], ${$(6)}::bigint[], ${$(7)}::int[])
          WITH ORDINALITY AS i(id, subscription, subject, stream, body, now, max_pending, n, ord)
        WHERE ${gate}
        LIMIT cardinality(${$(0)}::text[])),
      ranked AS (
        SELECT i.*, row_number() OVER (PARTITION BY i.subscription ORDER BY i.ord) - 1 AS ahead FROM input AS i),
      counted AS (
        SELECT r.*, r.ahead + CASE
            WHEN coalesce((SELECT max(seq) FROM ${entries})
                          - (SELECT min(e.seq) FROM ${entries} AS e
                             WHERE e.subscription = r.subscription AND e.dead_at IS NULL) + 1, 0) + r.ahead < r.max_pending
              THEN 0
            ELSE (SELECT count(*) FROM (SELECT 1 FROM ${entries} AS e
                                        WHERE e.subscription = r.subscription AND e.dead_at IS NULL
                                        LIMIT r.max_pending) AS bounded)
          END AS waiting
        FROM ranked AS r),
      appended AS (
        INSERT INTO ${entries} (id, subscription, subject, stream, body, created_at, next_at, ready)
        SELECT c.id, c.subscription, c.subject, c.stream, c.body, c.now, c.now, latest.seq IS NULL
        FROM counted AS c LEFT JOIN LATERAL (
          SELECT e.seq FROM ${entries} AS e WHERE e.stream = c.stream AND e.dead_at IS NULL
          ORDER BY e.seq DESC LIMIT 1
          FOR KEY SHARE
        ) AS latest ON true
        WHERE c.waiting < c.max_pending
        ORDER BY c.ord),
      refused AS (
        INSERT INTO ${drops} (subscription, dropped)
        SELECT subscription, count(*) FROM counted WHERE waiting >= max_pending GROUP BY subscription
        ORDER BY subscription
        ON CONFLICT (subscription) DO UPDATE SET dropped = ${drops}.dropped + EXCLUDED.dropped)`;
}

const APPEND_COLUMNS = ['id', 'subscription', 'subject', 'stream', 'body', 'now', 'maxPending', 'n'] as const;

/** appendCtes' values, in order: per entry, its time (ms), its subscription's bound and its owner (`n` in a commit, else 1). */
export function appendValues(
  toAppend: ReadonlyArray<{ entry: NewOutboxEntry; now: number; maxPending: number; n: number }>,
): unknown[] {
  const rows = toAppend.map(({ entry, ...rest }) => ({ ...entry, stream: streamOf(entry), ...rest }));
  return APPEND_COLUMNS.map((column) => rows.map((row) => row[column]));
}

/** When a ready row may be claimed: its next attempt, or when its lease runs out. */
const DUE = 'GREATEST(next_at, lease_until)';

/** The DDL of the outbox's tables, run with the adapter's migration. */
export function outboxDdl(tables: OutboxTables): string {
  return `
    CREATE TABLE IF NOT EXISTS ${tables.entries} (
      seq bigserial PRIMARY KEY,
      id text COLLATE "C" NOT NULL,
      subscription text COLLATE "C" NOT NULL,
      subject text COLLATE "C" NOT NULL,
      stream text COLLATE "C" NOT NULL,
      body text NOT NULL,
      created_at bigint NOT NULL,
      attempts integer NOT NULL DEFAULT 0,
      next_at bigint NOT NULL,
      lease text COLLATE "C",
      lease_until bigint NOT NULL DEFAULT 0,
      dead_at bigint,
      dead_reason text,
      ready boolean NOT NULL DEFAULT true
    );
    CREATE INDEX IF NOT EXISTS ${tables.streamIndex} ON ${tables.entries} (stream, seq) WHERE dead_at IS NULL;
    CREATE INDEX IF NOT EXISTS ${tables.subscriptionIndex} ON ${tables.entries} (subscription, seq) WHERE dead_at IS NULL;
    CREATE INDEX IF NOT EXISTS ${tables.readyIndex} ON ${tables.entries} (subscription, (${DUE}), seq)
      WHERE ready AND dead_at IS NULL;
    CREATE INDEX IF NOT EXISTS ${tables.deadIndex} ON ${tables.entries} (dead_at) WHERE dead_at IS NOT NULL;
    CREATE TABLE IF NOT EXISTS ${tables.drops} (
      subscription text COLLATE "C" PRIMARY KEY,
      dropped bigint NOT NULL
    );
  `;
}

/** The outbox's statements, each prepared once per connection (see Statement). */
function outboxStatements(tables: OutboxTables) {
  const { entries, drops } = tables;
  // Entries whose lease still holds, locked in seq order.
  const lock = `SELECT e.seq FROM ${entries} e
             JOIN unnest($1::bigint[], $2::text[]) AS v(seq, lease) ON e.seq = v.seq AND e.lease = v.lease
             WHERE e.dead_at IS NULL ORDER BY e.seq FOR UPDATE OF e`;
  const texts = {
    append: `WITH ${appendCtes(tables, 1, 'true')}
         SELECT subscription FROM counted WHERE waiting >= max_pending ORDER BY ord`,
    claim: claimStatement(entries),
    retryMany: `UPDATE ${entries} e SET lease = NULL, lease_until = 0, next_at = v.at
           FROM unnest($1::bigint[], $2::text[], $3::bigint[]) AS v(seq, lease, at)
           WHERE e.seq = v.seq AND e.lease = v.lease AND e.dead_at IS NULL
           RETURNING e.seq`,
    lockWaiting: lock,
    lockMany: `${lock} SKIP LOCKED`,
    settleMany: `WITH v AS (
               SELECT * FROM unnest($1::bigint[], $2::text[], $3::text[]) AS v(seq, outcome, reason)
             ), deleted AS (
               DELETE FROM ${entries} e USING v WHERE e.seq = v.seq AND v.outcome = 'delivered'
               RETURNING e.seq, e.stream
             ), killed AS (
               UPDATE ${entries} e SET lease = NULL, lease_until = 0, dead_at = $4, dead_reason = v.reason
               FROM v WHERE e.seq = v.seq AND v.outcome = 'dead'
               RETURNING e.seq, e.stream
             ), settled AS (
               SELECT * FROM deleted UNION ALL SELECT * FROM killed
             )
             UPDATE ${entries} SET ready = true
             WHERE seq IN (
               SELECT (SELECT min(e.seq) FROM ${entries} e
                       WHERE e.stream = s.stream AND e.seq > s.seq AND e.seq <> ALL($1) AND e.dead_at IS NULL)
               FROM settled s
             ) AND NOT ready`,
    waits: `SELECT 1 FROM ${entries} WHERE subscription = $1 AND dead_at IS NULL LIMIT 1`,
    // The oldest waiting entry per subscription, as the first row from (subscription, 0): `ORDER BY seq` walked the primary key.
    counts: `SELECT c.subscription, c.pending, c.dead,
                  (SELECT f.created_at FROM (
                     SELECT e.subscription, e.created_at FROM ${entries} e
                     WHERE e.dead_at IS NULL AND (e.subscription, e.seq) > (c.subscription, 0)
                     ORDER BY e.subscription, e.seq LIMIT 1
                   ) f WHERE f.subscription = c.subscription) AS oldest_at
           FROM (SELECT subscription, count(*) FILTER (WHERE dead_at IS NULL) AS pending,
                        count(*) FILTER (WHERE dead_at IS NOT NULL) AS dead
                 FROM ${entries} GROUP BY subscription) c`,
    drops: `SELECT subscription, dropped FROM ${drops}`,
    // Waiting and dead rows apart: each is read through its partial index.
    forget: `WITH waiting AS (DELETE FROM ${entries} WHERE subscription = $1 AND dead_at IS NULL),
           dead AS (DELETE FROM ${entries} WHERE dead_at IS NOT NULL AND subscription = $1)
           DELETE FROM ${drops} WHERE subscription = $1`,
    deadLetters: `SELECT id, subscription, subject, body, created_at, attempts, dead_at, dead_reason FROM ${entries}
         WHERE dead_at IS NOT NULL ORDER BY dead_at DESC, seq DESC LIMIT $1`,
  };
  return Object.fromEntries(
    Object.entries(texts).map(([part, text]) => [part, { name: `${tables.statementPrefix}outbox_${part}`, text }]),
  ) as Record<keyof typeof texts, Statement>;
}

export function createPostgresOutbox(tables: OutboxTables, run: RunStatement, transaction: RunTransaction) {
  const statements = outboxStatements(tables);

  /** Retries, then the other settlements under the locks `lock` takes: resolves the entries held. */
  async function settleLocked(lock: Statement, settlements: readonly SettledEntry[], now: number) {
    const held = new Set<number>();
    const retries = settlements.filter(({ settlement }) => settlement.outcome === 'retry');
    const final = settlements.filter(({ settlement }) => settlement.outcome !== 'retry');
    const seqs = (of: readonly SettledEntry[]) => of.map(({ entry }) => seqOf(entry));
    const leased = (of: readonly SettledEntry[]) => [seqs(of), of.map(({ entry }) => entry.lease)];
    if (retries.length) {
      const at = retries.map(({ settlement }) => (settlement as { at: number }).at);
      const { rows } = await run(statements.retryMany, [...leased(retries), at], 'outbox settle');
      for (const row of rows) held.add(Number(row['seq']));
    }
    if (final.length) {
      await transaction(async (inTransaction) => {
        const { rows } = await inTransaction(lock, leased(final), 'outbox settle');
        const locked = new Set(rows.map((row) => Number(row['seq'])));
        const mine = final.filter(({ entry }) => locked.has(seqOf(entry)));
        if (!mine.length) return;
        const outcomes = mine.map(({ settlement }) => settlement.outcome);
        const reasons = mine.map(({ settlement }) => (settlement.outcome === 'dead' ? settlement.reason : null));
        // Invariant 14: a later statement sees the appends that waited for the lock. Each stream has one entry
        // leased at a time: the settled entries are of different streams.
        await inTransaction(statements.settleMany, [seqs(mine), outcomes, reasons, now], 'outbox settle');
        for (const seq of locked) held.add(seq);
      }, 'outbox settle');
    }
    return held;
  }

  const store: OutboxStore = {
    async append(toAppend, maxPending, now) {
      if (!toAppend.length) return [];
      const values = appendValues(toAppend.map((entry) => ({ entry, now, maxPending, n: 1 })));
      const { rows } = await run(statements.append, values, 'outbox append');
      return rows.map((row) => String(row['subscription']));
    },

    async claim(limit, leaseMs, now, deadBefore, bound) {
      const out = [...(bound?.out ?? [])];
      const outColumns = [out.map(([subscription]) => subscription), out.map(([, count]) => count)];
      const values = [now, limit, randomUUID(), leaseMs, bound?.each ?? limit, ...outColumns, deadBefore];
      const { rows } = await run(statements.claim, values, 'outbox claim');
      return rows
        .map((row): LeasedEntry => ({
          ...storedEntryOf(row),
          lease: String(row['lease']),
          leaseUntil: Number(row['lease_until']),
        }))
        .sort((a, b) => seqOf(a) - seqOf(b));
    },

    async settle(entry, settlement, now) {
      // Invariant 14: waits for an append holding the row (its stream's last).
      return (await settleLocked(statements.lockWaiting, [{ entry, settlement }], now)).has(seqOf(entry));
    },

    async settleAll(settlements, now) {
      // Invariant 14, as settle; a row an append holds is skipped (waiting could close a cycle) and settled alone below.
      const held = await settleLocked(statements.lockMany, settlements, now);
      // Final settlements not held: rows an append held a moment, or leases that ran out; settle says which.
      for (const { entry, settlement } of settlements) {
        if (settlement.outcome === 'retry' || held.has(seqOf(entry))) continue;
        if (await store.settle(entry, settlement, now)) held.add(seqOf(entry));
      }
      return settlements.map(({ entry }) => held.has(seqOf(entry)));
    },

    async waits(subscription) {
      return (await run(statements.waits, [subscription], 'outbox waits')).rows.length > 0;
    },

    async stats() {
      const [counts, dropped] = await Promise.all([
        run(statements.counts, [], 'outbox stats'),
        run(statements.drops, [], 'outbox stats'),
      ]);
      const subscriptions: OutboxStats['subscriptions'] = {};
      const of = (name: unknown) => (subscriptions[String(name)] ??= { pending: 0, dead: 0, dropped: 0 });
      const oldest: OutboxStats['oldest'] = {};
      for (const row of counts.rows) {
        of(row['subscription']).pending = Number(row['pending']);
        of(row['subscription']).dead = Number(row['dead']);
        if (row['oldest_at'] !== null) oldest[String(row['subscription'])] = Number(row['oldest_at']);
      }
      for (const row of dropped.rows) of(row['subscription']).dropped = Number(row['dropped']);
      return { subscriptions, oldest };
    },

    async forget(subscription) {
      await run(statements.forget, [subscription], 'outbox forget');
    },

    async deadLetters(limit) {
      const { rows } = await run(statements.deadLetters, [limit], 'outbox dead letters');
      return rows.map((row): DeadLetter => ({
        ...storedEntryOf(row),
        deadAt: Number(row['dead_at']),
        reason: String(row['dead_reason']),
      }));
    },
  };
  return store;
}

/**
 * A claim: $1 now, $2 limit, $3 name, $4 lease (ms), $5 room, $6 and $7 subscriptions out, $8 dead-letter cutoff
 * (Invariant 15). `due` takes at most $2 rows of each subscription; `chosen` keeps each subscription's room.
 */
export function claimStatement(entries: string): string {
  return `WITH RECURSIVE forgotten AS (
           DELETE FROM ${entries} WHERE dead_at < $8
         ), waiting AS (
           (SELECT e.subscription FROM ${entries} e WHERE e.ready AND e.dead_at IS NULL
            ORDER BY e.subscription LIMIT 1)
           UNION ALL
           SELECT (SELECT e.subscription FROM ${entries} e
                   WHERE e.ready AND e.dead_at IS NULL AND e.subscription > w.subscription
                   ORDER BY e.subscription LIMIT 1)
           FROM waiting w WHERE w.subscription IS NOT NULL
         ), room AS (
           SELECT w.subscription, LEAST($2::bigint, $5::bigint - coalesce(o.out, 0)) AS room
           FROM waiting w LEFT JOIN unnest($6::text[], $7::bigint[]) AS o(subscription, out)
             ON o.subscription = w.subscription
           WHERE w.subscription IS NOT NULL AND $5::bigint - coalesce(o.out, 0) > 0
         ), due AS (
           SELECT d.seq, d.at, r.subscription, r.room FROM room r CROSS JOIN LATERAL (
             SELECT e.seq, ${DUE} AS at FROM ${entries} e
             WHERE e.subscription = r.subscription AND e.ready AND e.dead_at IS NULL AND ${DUE} <= $1
               AND NOT EXISTS (
                 SELECT 1 FROM ${entries} p WHERE p.stream = e.stream AND p.seq < e.seq AND p.dead_at IS NULL
               )
             ORDER BY ${DUE}, e.seq LIMIT $2
             FOR NO KEY UPDATE OF e SKIP LOCKED
           ) d
         ), chosen AS (
           SELECT ranked.seq FROM (
             SELECT due.seq, due.at, due.room,
                    row_number() OVER (PARTITION BY due.subscription ORDER BY due.at, due.seq) AS n
             FROM due
           ) ranked
           WHERE ranked.n <= ranked.room
           ORDER BY ranked.at, ranked.seq LIMIT $2
         )
         UPDATE ${entries} e SET lease = $3 || ':' || e.seq, lease_until = $1 + $4, attempts = e.attempts + 1
         FROM chosen WHERE e.seq = chosen.seq AND e.lease_until <= $1 AND e.dead_at IS NULL
         RETURNING e.id, e.subscription, e.subject, e.body, e.created_at, e.attempts, e.lease, e.lease_until`;
}

/** What a row of the entries' table holds of every entry it hands out. */
function storedEntryOf(row: Row) {
  return {
    id: String(row['id']),
    subscription: String(row['subscription']),
    subject: String(row['subject']),
    body: String(row['body']),
    createdAt: Number(row['created_at']),
    attempts: Number(row['attempts']),
  };
}

/** The row's sequence number, carried in the lease's name (`<claim>:<seq>`). */
function seqOf(entry: LeasedEntry): number {
  return Number(entry.lease.slice(entry.lease.lastIndexOf(':') + 1));
}

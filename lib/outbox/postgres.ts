/**
 * The outbox on PostgreSQL: one table of entries and one of counters beside
 * the adapter's. A claim locks the first waiting row of each stream with
 * `FOR UPDATE SKIP LOCKED`, so instances claiming together take different
 * rows, and its UPDATE checks the lease again on the row's latest version, so
 * an entry claimed and committed by another instance meanwhile is not taken.
 */
import { randomUUID } from 'node:crypto';
import { streamOf, type DeadLetter, type LeasedEntry, type OutboxStats, type OutboxStore } from './contract.js';

/** Runs one statement (the adapter's pool, error mapping and migration). */
export type RunStatement = (
  text: string,
  values: unknown[],
  operation: string,
) => Promise<{ rows: Record<string, unknown>[] }>;

export interface OutboxTables {
  /** Qualified names of the entries' and the counters' tables. */
  entries: string;
  drops: string;
  /** Index names, unqualified (PostgreSQL creates an index in its table's schema). */
  streamIndex: string;
  subscriptionIndex: string;
}

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
      dead_reason text
    );
    CREATE INDEX IF NOT EXISTS ${tables.streamIndex} ON ${tables.entries} (stream, seq) WHERE dead_at IS NULL;
    CREATE INDEX IF NOT EXISTS ${tables.subscriptionIndex} ON ${tables.entries} (subscription) WHERE dead_at IS NULL;
    CREATE TABLE IF NOT EXISTS ${tables.drops} (
      subscription text COLLATE "C" PRIMARY KEY,
      dropped bigint NOT NULL
    );
  `;
}

export function createPostgresOutbox(tables: OutboxTables, run: RunStatement): OutboxStore {
  const { entries, drops } = tables;
  return {
    async append(toAppend, maxPending, now) {
      if (!toAppend.length) return [];
      const { rows } = await run(
        `WITH input AS (
           SELECT * FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::text[])
             AS i(id, subscription, subject, stream, body)
         ), counted AS (
           SELECT i.*, (SELECT count(*) FROM ${entries} e
                        WHERE e.subscription = i.subscription AND e.dead_at IS NULL) AS waiting
           FROM input i
         ), appended AS (
           INSERT INTO ${entries} (id, subscription, subject, stream, body, created_at, next_at)
           SELECT id, subscription, subject, stream, body, $6, $6 FROM counted WHERE waiting < $7
         ), refused AS (
           INSERT INTO ${drops} (subscription, dropped)
           SELECT subscription, 1 FROM counted WHERE waiting >= $7
           ON CONFLICT (subscription) DO UPDATE SET dropped = ${drops}.dropped + 1
           RETURNING subscription
         )
         SELECT subscription FROM refused`,
        [
          toAppend.map((entry) => entry.id),
          toAppend.map((entry) => entry.subscription),
          toAppend.map((entry) => entry.subject),
          toAppend.map((entry) => streamOf(entry)),
          toAppend.map((entry) => entry.body),
          now,
          maxPending,
        ],
        'outbox append',
      );
      return rows.map((row) => String(row['subscription']));
    },

    async claim(limit, leaseMs, now, deadBefore) {
      await run(`DELETE FROM ${entries} WHERE dead_at < $1`, [deadBefore], 'outbox cleanup');
      const { rows } = await run(
        `WITH heads AS (
           SELECT DISTINCT ON (stream) seq FROM ${entries} WHERE dead_at IS NULL ORDER BY stream, seq
         ), due AS (
           SELECT e.seq FROM ${entries} e JOIN heads h ON e.seq = h.seq
           WHERE e.next_at <= $1 AND e.lease_until <= $1
           ORDER BY e.seq LIMIT $2
           FOR UPDATE OF e SKIP LOCKED
         )
         UPDATE ${entries} e SET lease = $3 || ':' || e.seq, lease_until = $1 + $4, attempts = e.attempts + 1
         FROM due WHERE e.seq = due.seq AND e.lease_until <= $1 AND e.dead_at IS NULL
         RETURNING e.id, e.subscription, e.subject, e.body, e.created_at, e.attempts, e.lease, e.lease_until`,
        [now, limit, randomUUID(), leaseMs],
        'outbox claim',
      );
      return rows
        .map((row): LeasedEntry => ({
          id: String(row['id']),
          subscription: String(row['subscription']),
          subject: String(row['subject']),
          body: String(row['body']),
          createdAt: Number(row['created_at']),
          attempts: Number(row['attempts']),
          lease: String(row['lease']),
          leaseUntil: Number(row['lease_until']),
        }))
        .sort((a, b) => seqOf(a) - seqOf(b));
    },

    async settle(entry, settlement, now) {
      const seq = seqOf(entry);
      const { rows } =
        settlement.outcome === 'delivered'
          ? await run(
              `DELETE FROM ${entries} WHERE seq = $1 AND lease = $2 RETURNING seq`,
              [seq, entry.lease],
              'outbox settle',
            )
          : settlement.outcome === 'retry'
            ? await run(
                `UPDATE ${entries} SET lease = NULL, lease_until = 0, next_at = $3
                 WHERE seq = $1 AND lease = $2 AND dead_at IS NULL RETURNING seq`,
                [seq, entry.lease, settlement.at],
                'outbox settle',
              )
            : await run(
                `UPDATE ${entries} SET lease = NULL, lease_until = 0, dead_at = $3, dead_reason = $4
                 WHERE seq = $1 AND lease = $2 AND dead_at IS NULL RETURNING seq`,
                [seq, entry.lease, now, settlement.reason],
                'outbox settle',
              );
      return rows.length === 1;
    },

    async stats() {
      const [counts, dropped] = await Promise.all([
        run(
          `SELECT subscription, count(*) FILTER (WHERE dead_at IS NULL) AS pending,
                  count(*) FILTER (WHERE dead_at IS NOT NULL) AS dead
           FROM ${entries} GROUP BY subscription`,
          [],
          'outbox stats',
        ),
        run(`SELECT subscription, dropped FROM ${drops}`, [], 'outbox stats'),
      ]);
      const subscriptions: OutboxStats['subscriptions'] = {};
      const of = (name: unknown) => (subscriptions[String(name)] ??= { pending: 0, dead: 0, dropped: 0 });
      for (const row of counts.rows) {
        of(row['subscription']).pending = Number(row['pending']);
        of(row['subscription']).dead = Number(row['dead']);
      }
      for (const row of dropped.rows) of(row['subscription']).dropped = Number(row['dropped']);
      return { subscriptions };
    },

    async deadLetters(limit) {
      const { rows } = await run(
        `SELECT id, subscription, subject, body, created_at, attempts, dead_at, dead_reason FROM ${entries}
         WHERE dead_at IS NOT NULL ORDER BY dead_at DESC, seq DESC LIMIT $1`,
        [limit],
        'outbox dead letters',
      );
      return rows.map((row): DeadLetter => ({
        id: String(row['id']),
        subscription: String(row['subscription']),
        subject: String(row['subject']),
        body: String(row['body']),
        createdAt: Number(row['created_at']),
        attempts: Number(row['attempts']),
        deadAt: Number(row['dead_at']),
        reason: String(row['dead_reason']),
      }));
    },
  };
}

/** The row's sequence number, carried in the lease's name (`<claim>:<seq>`). */
function seqOf(entry: LeasedEntry): number {
  return Number(entry.lease.slice(entry.lease.lastIndexOf(':') + 1));
}

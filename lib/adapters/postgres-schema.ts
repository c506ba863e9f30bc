import { createHash } from 'node:crypto';
import type pg from 'pg';
import { migrateUnderLock } from '../postgres/migration.js';
import { appendCtes, type OutboxTables } from '../outbox/postgres.js';
import { GUARD_KIND, QUOTA_KIND } from './contracts/commit.js';
import type { Statement } from '../postgres/statement.js';

/** The PostgreSQL adapter's tables, migration and statements, each prepared once per connection under its own name. */

type StoreNames = ReturnType<typeof storeNames>;

const INDEX_SUFFIXES = ['uid', 'user_code', 'grant', 'expires', 'index_order', 'index_expires'];

export function storeNames(schema: string | undefined, table: string) {
  const qualify = (name: string) => (schema ? `"${schema}"."${name}"` : `"${name}"`);
  // Index names are unqualified: PostgreSQL creates an index in its table's schema.
  const index = (suffix: string) => `"${table}_${suffix}"`;
  // Key of the advisory lock that serialises migrations of these tables.
  const lock = `oidc-provider-impersonation:${schema ?? ''}.${table}`;
  const statementPrefix = `oidc_imp_${createHash('sha256').update(lock).digest('hex').slice(0, 12)}_`;
  return {
    // Every table and index the migration creates, qualified as `to_regclass()` reads them.
    objects: [table, `${table}_index`, ...INDEX_SUFFIXES.map((suffix) => `${table}_${suffix}`)].map(qualify),
    // One row per model and id; the sorted indexes, one row per model, index and member.
    entries: qualify(table),
    indexes: qualify(`${table}_index`),
    lock,
    statementPrefix,
    index,
    outbox: {
      statementPrefix,
      entries: qualify(`${table}_outbox`),
      drops: qualify(`${table}_outbox_drops`),
      streamIndex: index('outbox_stream'),
      // (subscription, seq): an append reads a subscription's oldest waiting entry from it.
      subscriptionIndex: index('outbox_subscription_seq'),
      // By subscription and due time.
      readyIndex: index('outbox_ready_by_subscription'),
      deadIndex: index('outbox_dead'),
    },
  };
}

/**
 * Creates what is missing, from any number of instances (an advisory lock makes them take turns); when all is
 * there it only looks, so a role without CREATE starts. Keys are COLLATE "C": byte order, as JavaScript orders ids.
 */
export async function migrateStore(pool: pg.Pool, names: StoreNames): Promise<void> {
  const { rows } = await pool.query<{ missing: number }>(
    'SELECT count(*) FILTER (WHERE to_regclass(name) IS NULL)::int AS missing FROM unnest($1::text[]) AS name',
    [names.objects],
  );
  if (rows[0]?.missing === 0) return;
  await migrateUnderLock(
    pool,
    names.lock,
    `
    CREATE TABLE IF NOT EXISTS ${names.entries} (
      model text COLLATE "C" NOT NULL,
      id text COLLATE "C" NOT NULL,
      payload json NOT NULL,
      consumed json,
      grant_id text COLLATE "C",
      uid text COLLATE "C",
      user_code text COLLATE "C",
      expires_at timestamptz,
      PRIMARY KEY (model, id)
    ) WITH (fillfactor = 90);
    CREATE INDEX IF NOT EXISTS ${names.index('uid')} ON ${names.entries} (model, uid) WHERE uid IS NOT NULL;
    CREATE INDEX IF NOT EXISTS ${names.index('user_code')} ON ${names.entries} (model, user_code) WHERE user_code IS NOT NULL;
    CREATE INDEX IF NOT EXISTS ${names.index('grant')} ON ${names.entries} (grant_id) WHERE grant_id IS NOT NULL;
    CREATE INDEX IF NOT EXISTS ${names.index('expires')} ON ${names.entries} (expires_at) WHERE expires_at IS NOT NULL;
    CREATE TABLE IF NOT EXISTS ${names.indexes} (
      model text COLLATE "C" NOT NULL,
      name text COLLATE "C" NOT NULL,
      member text COLLATE "C" NOT NULL,
      expires_at bigint NOT NULL,
      PRIMARY KEY (model, name, member)
    );
    CREATE INDEX IF NOT EXISTS ${names.index('index_order')} ON ${names.indexes} (model, name, expires_at, member);
    CREATE INDEX IF NOT EXISTS ${names.index('index_expires')} ON ${names.indexes} (expires_at);
  `,
  );
}

/** An entry is live while it has no expiry or its expiry is still ahead: no query ever returns another. */
const LIVE = '(expires_at IS NULL OR expires_at > now())';
const UNCONSUMED = `AND consumed IS NULL AND ${LIVE}`;

/** Invariants 1–3: each (model, id) of `keys` probed by primary key in byte order, whatever the plan; its row locked. */
function probed(entries: string, keys: string, lock: string, { columns = 'model, id', where = '', limit = '' } = {}) {
  return `FROM (SELECT DISTINCT model COLLATE "C" AS model, id COLLATE "C" AS id FROM ${keys} ORDER BY 1, 2 ${limit}) AS k
        CROSS JOIN LATERAL (SELECT ${columns} FROM ${entries} WHERE model = k.model AND id = k.id ${where} ${lock}) AS e`;
}

// The commit, named after what it writes besides the exchanges' rows: with `notifying` their notifications
// ($19–$26), with `appendFunction` (a trail in the same database) their trail rows (one text[] after those).
export function commitWith(names: StoreNames, appendFunction: string | undefined, notifying: boolean): Statement {
  const outbox = notifying ? names.outbox : undefined;
  const variant = `${appendFunction ?? ''}\n${outbox ? outbox.entries : ''}`;
  const suffix = createHash('sha256').update(variant).digest('hex').slice(0, 12);
  return { name: `${names.statementPrefix}commit_${suffix}`, text: commitText(names, outbox, appendFunction) };
}

// Invariants 1–5, 11: the commits of one turn in one statement, each decided on its own. Row n of $1–$8: entry
// to consume (or NULL), consumed value, entry, payload, lifetime (ms), members' expiry; $9–$11 guards' models,
// ids, owners n, $12 a created guard's lifetime (ms); $13, $14 index names and owners n; $15–$18 quota
// counters' ids, bounds, lifetimes (ms) and owners n (entries of the owner's model).
function commitText({ entries, indexes }: StoreNames, outbox?: OutboxTables, appendFunction?: string): string {
  const notes = outbox ? `,\n      ${appendCtes(outbox, 19, 'i.n IN (SELECT n FROM allowed)')}` : '';
  const dropped = outbox
    ? `(SELECT json_agg(c.subscription) FROM counted AS c WHERE c.n = q.n AND c.waiting >= c.max_pending)`
    : 'NULL::json';
  const journal = appendFunction ? `,\n      ${journalManyCtes(appendFunction, outbox ? 27 : 19)}` : '';
  const journaled = appendFunction
    ? `(SELECT json_agg(json_build_object('seq', o.seq::text, 'hash', o.hash) ORDER BY o.seq)
          FROM journaled AS o JOIN journal_input AS i ON i.pos = o.pos WHERE i.n = q.n)`
    : 'NULL::json';
  const live = '(e.expires_at IS NULL OR e.expires_at > now())';
  const toRedeem = '(SELECT consume_model AS model, consume_id AS id FROM open WHERE consume_id IS NOT NULL) AS c';
  return `WITH q AS (
        SELECT * FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::text[], $6::text[], $7::float8[],
          $8::bigint[]) WITH ORDINALITY AS q(consume_model, consume_id, consumed, model, id, payload, lifetime,
          member_expiry, n)),
      g AS (SELECT * FROM unnest($9::text[], $10::text[], $11::int[]) AS g(model, id, n)),
      created AS (
        INSERT INTO ${entries} (model, id, payload, expires_at)
        SELECT d.model, d.id, json_build_object('kind', '${GUARD_KIND}'), now() + $12::float8 * interval '1 millisecond'
        FROM (SELECT DISTINCT model, id FROM g) AS d ORDER BY d.model, d.id
        ON CONFLICT (model, id) DO NOTHING
        RETURNING model, id),
      locked AS (
        SELECT e.model, e.id, e.payload
        ${probed(entries, 'g', 'FOR SHARE', { columns: 'model, id, payload', limit: 'LIMIT cardinality($10::text[])' })}),
      ended AS (
        SELECT g.n, min(l.id) AS id FROM g JOIN locked AS l ON l.model = g.model AND l.id = g.id
        WHERE l.payload->>'ended' IS NOT NULL GROUP BY g.n),
      w AS (
        SELECT w.*, q.model FROM unnest($15::text[], $16::int[], $17::float8[], $18::int[]) WITH ORDINALITY
          AS w(id, max, lifetime, n, ord) JOIN q ON q.n = w.n),
      quota_created AS (
        INSERT INTO ${entries} (model, id, payload, expires_at)
        SELECT w.model, w.id, json_build_object('kind', '${QUOTA_KIND}', 'count', 0),
          now() + w.lifetime * interval '1 millisecond'
        FROM w ORDER BY w.model, w.id
        ON CONFLICT (model, id) DO NOTHING),
      quota_locked AS (
        SELECT e.model, e.id, CASE WHEN ${live} THEN (e.payload->>'count')::int ELSE 0 END AS count
        ${probed(entries, 'w', 'FOR UPDATE', {
          columns: 'model, id, payload, expires_at',
          limit: 'LIMIT cardinality($15::text[])',
        })}),
      spent AS (
        SELECT DISTINCT ON (w.n) w.n, w.id FROM w JOIN quota_locked AS l ON l.model = w.model AND l.id = w.id
        WHERE l.count >= w.max ORDER BY w.n, w.ord),
      unsettled AS (
        SELECT g.n FROM g
        WHERE (g.model, g.id) NOT IN (SELECT model, id FROM created)
          AND (g.model, g.id) NOT IN (SELECT model, id FROM locked)
        UNION
        SELECT w.n FROM w WHERE (w.model, w.id) NOT IN (SELECT model, id FROM quota_locked)),
      open AS (
        SELECT q.* FROM q
        WHERE q.n NOT IN (SELECT n FROM ended) AND q.n NOT IN (SELECT n FROM unsettled)
          AND q.n NOT IN (SELECT n FROM spent)),
      target AS (
        SELECT e.model, e.id
        ${probed(entries, toRedeem, 'FOR UPDATE', {
          where: UNCONSUMED,
          limit: 'LIMIT cardinality($2::text[])',
        })}),
      redeemed AS (
        UPDATE ${entries} AS e SET consumed = o.consumed::json
        FROM open AS o JOIN target AS t ON t.model = o.consume_model AND t.id = o.consume_id
        WHERE e.model = t.model AND e.id = t.id AND e.consumed IS NULL
        RETURNING o.n),
      allowed AS (
        SELECT n FROM redeemed
        UNION ALL
        SELECT n FROM open WHERE consume_id IS NULL),
      charged AS (
        UPDATE ${entries} AS e SET
          payload = json_build_object('kind', '${QUOTA_KIND}',
            'count', CASE WHEN ${live} THEN (e.payload->>'count')::int + 1 ELSE 1 END),
          expires_at = CASE WHEN ${live} THEN e.expires_at ELSE now() + w.lifetime * interval '1 millisecond' END
        FROM w JOIN allowed AS a ON a.n = w.n
        WHERE e.model = w.model AND e.id = w.id),
      written AS (
        INSERT INTO ${entries} (model, id, payload, consumed, grant_id, uid, user_code, expires_at)
        SELECT q.model, q.id, q.payload::json, NULL, NULL, NULL, NULL, now() + q.lifetime * interval '1 millisecond'
        FROM q JOIN allowed AS a ON a.n = q.n
        ON CONFLICT (model, id) DO UPDATE SET payload = EXCLUDED.payload, consumed = NULL, grant_id = NULL,
          uid = NULL, user_code = NULL, expires_at = EXCLUDED.expires_at),
      indexed AS (
        INSERT INTO ${indexes} (model, name, member, expires_at)
        SELECT q.model, x.name, q.id, q.member_expiry
        FROM unnest($13::text[], $14::int[]) AS x(name, n) JOIN q ON q.n = x.n JOIN allowed AS a ON a.n = q.n
        ON CONFLICT (model, name, member) DO UPDATE SET expires_at = EXCLUDED.expires_at)${notes}${journal}
      SELECT q.n, EXISTS (SELECT 1 FROM allowed AS a WHERE a.n = q.n) AS committed,
        (SELECT id FROM ended WHERE ended.n = q.n) AS guard, (SELECT id FROM spent WHERE spent.n = q.n) AS spent,
        EXISTS (SELECT 1 FROM unsettled AS u WHERE u.n = q.n) AS unsettled, ${dropped} AS dropped,
        ${journaled} AS journaled
      FROM q ORDER BY q.n`;
}

// A batch's trail rows ($first: per exchange n, a JSON array), in one call in a CTE, which PostgreSQL runs once whatever the plan.
function journalManyCtes(appendFunction: string, first: number): string {
  return `journal_input AS MATERIALIZED (
        SELECT j.n, e.value, row_number() OVER (ORDER BY j.n, e.ord) AS pos
        FROM unnest($${first}::text[]) WITH ORDINALITY AS j(rows, n)
        JOIN allowed AS a ON a.n = j.n
        CROSS JOIN LATERAL jsonb_array_elements(j.rows::jsonb) WITH ORDINALITY AS e(value, ord)),
      journaled AS (
        SELECT r.seq, r.hash, r.pos
        FROM (SELECT jsonb_agg(value ORDER BY pos) AS rows FROM journal_input HAVING count(*) > 0) AS x
        CROSS JOIN LATERAL ${appendFunction}(x.rows) WITH ORDINALITY AS r(seq, hash, pos))`;
}

export function storeStatements(names: StoreNames) {
  const { entries, indexes } = names;
  // Entries by id (`q.by_uid` false) or by uid, any number at once; `n` says which lookup a row answers.
  const lookup = (columns: string) => `CROSS JOIN LATERAL (
        SELECT ${columns} FROM ${entries} WHERE NOT q.by_uid AND model = q.model AND id = q.key AND ${LIVE}
        UNION ALL
        SELECT ${columns} FROM ${entries} WHERE q.by_uid AND model = q.model AND uid = q.key AND ${LIVE}
        LIMIT 1) AS e`;
  // A found entry's live Session or Grant, one per entry (a uid may name two rows): `via` and `key` name it.
  const followed = (model: string, column: string, value: string) => `SELECT DISTINCT ON (f.n) f.n, e.payload,
      e.consumed, '${model}', e.${column} FROM found AS f JOIN ${entries} AS e ON e.model = '${model}' AND e.${column} = ${value}
      WHERE f.follow AND ${LIVE}`;
  const texts = {
    findMany: `SELECT q.n, e.payload, e.consumed
      FROM unnest($1::text[], $2::bool[], $3::text[]) WITH ORDINALITY AS q(model, by_uid, key, n)
      ${lookup('payload, consumed')}`,
    // As findMany; for readAhead's ($4) also the Session (by uid) and Grant (by grant_id): `via` and `key` name them.
    findManyAhead: `WITH found AS (
        SELECT q.n, q.follow, e.payload, e.consumed, e.grant_id
        FROM unnest($1::text[], $2::bool[], $3::text[], $4::bool[]) WITH ORDINALITY AS q(model, by_uid, key, follow, n)
        ${lookup('payload, consumed, grant_id')})
      SELECT f.n, f.payload, f.consumed, NULL::text AS via, NULL::text AS key FROM found AS f
      UNION ALL ${followed('Session', 'uid', "f.payload->>'sessionUid'")}
      UNION ALL ${followed('Grant', 'id', 'f.grant_id')}`,
    findByUserCode: `SELECT payload, consumed FROM ${entries} WHERE model = $1 AND user_code = $2 AND ${LIVE} LIMIT 1`,
    // Replaces whole entries, so an earlier `consumed` cannot survive; $8 lifetimes (ms), NULL never expires.
    upsertMany: `INSERT INTO ${entries} AS e (model, id, payload, consumed, grant_id, uid, user_code, expires_at)
      SELECT t.model, t.id, t.payload::json, t.consumed::json, t.grant_id, t.uid, t.user_code,
        now() + t.lifetime * interval '1 millisecond'
      FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::text[], $6::text[], $7::text[], $8::float8[])
        AS t(model, id, payload, consumed, grant_id, uid, user_code, lifetime)
      ON CONFLICT (model, id) DO UPDATE SET payload = EXCLUDED.payload, consumed = EXCLUDED.consumed,
        grant_id = EXCLUDED.grant_id, uid = EXCLUDED.uid, user_code = EXCLUDED.user_code, expires_at = EXCLUDED.expires_at`,
    // The update joined to the keys too: probed by key, each row re-checked on its latest version.
    consumeMany: `WITH target AS (
        SELECT e.model, e.id
        ${probed(entries, 'unnest($1::text[], $2::text[]) AS u(model, id)', 'FOR UPDATE', { where: UNCONSUMED })})
      UPDATE ${entries} AS e SET consumed = $3
      FROM target JOIN unnest($1::text[], $2::text[]) AS k(model, id) ON k.model = target.model AND k.id = target.id
      WHERE e.model = target.model AND e.id = target.id RETURNING e.model, e.id`,
    release: `UPDATE ${entries} SET consumed = NULL
      WHERE model = $1 AND id = $2 AND consumed::jsonb = $3::jsonb AND ${LIVE}`,
    destroy: `DELETE FROM ${entries} WHERE model = $1 AND id = $2`,
    // Only the grantable models' rows carry a grant id.
    revokeByGrantId: `DELETE FROM ${entries} WHERE grant_id = $1`,
    // A member is added to all of its indexes, or to none.
    indexAddMany: `INSERT INTO ${indexes} (model, name, member, expires_at)
      SELECT * FROM unnest($1::text[], $2::text[], $3::text[], $4::bigint[])
      ON CONFLICT (model, name, member) DO UPDATE SET expires_at = EXCLUDED.expires_at`,
    // Invariant 6: one advisory lock per index ($1 lock name, $2 model, $3 names), in lock-key order.
    indexLock: `SELECT pg_advisory_xact_lock(hashtext($1), k.key)
      FROM (SELECT DISTINCT hashtext($2 || E'\\n' || name) AS key FROM unnest($3::text[]) AS name) AS k
      ORDER BY k.key`,
    // Invariant 6: adds $3 to indexes $2 (expiries $5, bounds $6) when none is full at $4 (ms); returns the first full.
    indexAddWithin: `WITH wanted AS (
        SELECT * FROM unnest($2::text[], $5::bigint[], $6::int[]) WITH ORDINALITY AS w(name, expires_at, bound, n)),
      full_index AS (
        SELECT w.name FROM wanted AS w
        WHERE (SELECT count(*) FROM ${indexes} AS i
          WHERE i.model = $1 AND i.name = w.name AND i.expires_at > $4 AND i.member <> $3) >= w.bound
        ORDER BY w.n LIMIT 1),
      added AS (
        INSERT INTO ${indexes} (model, name, member, expires_at)
        SELECT $1, w.name, $3, w.expires_at FROM wanted AS w WHERE NOT EXISTS (SELECT 1 FROM full_index)
        ON CONFLICT (model, name, member) DO UPDATE SET expires_at = EXCLUDED.expires_at)
      SELECT (SELECT name FROM full_index) AS full_index`,
    indexRemove: `DELETE FROM ${indexes} AS i USING unnest($2::text[]) AS n(name)
      WHERE i.model = $1 AND i.name = n.name AND i.member = $3`,
    // $3 is the caller's clock (ms): members expire by the time the caller gave them.
    indexAfter: `SELECT member, expires_at FROM ${indexes} WHERE model = $1 AND name = $2 AND expires_at > $3
      AND (expires_at, member) < ($5, $6) ORDER BY expires_at DESC, member DESC LIMIT $4`,
    // Rows another instance is deleting right now are skipped, never waited on.
    cleanEntries: `DELETE FROM ${entries} WHERE ctid = ANY(ARRAY(
      SELECT ctid FROM ${entries} WHERE expires_at <= now() LIMIT $1 FOR UPDATE SKIP LOCKED))`,
    cleanIndexes: `DELETE FROM ${indexes} WHERE ctid = ANY(ARRAY(
      SELECT ctid FROM ${indexes} WHERE expires_at <= $2 LIMIT $1 FOR UPDATE SKIP LOCKED))`,
  };
  return Object.fromEntries(
    Object.entries(texts).map(([name, text]) => [name, { name: `${names.statementPrefix}${name}`, text }]),
  ) as Record<keyof typeof texts, Statement>;
}

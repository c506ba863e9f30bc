/** `oidc-provider-impersonation/audit-postgres`: a tamper-evident trail in PostgreSQL (Invariants 27–30); `pg` is an optional peer. */
import type pg from 'pg';
import { StatementBatch } from '../postgres/batch.js';
import { assertPlainIdentifiers } from '../postgres/identifier.js';
import { INVALID_SCHEMA_NAME, migrateUnderLock } from '../postgres/migration.js';
import { openPool, POOL_SOURCE_NAMES, type PoolSource } from '../postgres/pool.js';
import { optionChecks } from '../config/checks.js';
import type { ImpersonationEvent, ImpersonationEventName } from '../event-types.js';
import { JOURNAL, type Journal, type JournaledSink } from '../audit/journal.js';
import type { AuditLog, AuditPage } from '../audit/sink.js';
import type { AuditQueryFilter } from '../core-options.js';
import {
  canonicalContent,
  checkSignatures,
  FIELDS,
  GENESIS,
  limitOf,
  pageOf,
  publishedHeadFailure,
  rowOf,
  seqOfCursor,
  walkChain,
  type AuditEntry,
  type AuditRow,
  type ChainedRow,
  type SignatureCheck,
  type VerifyResult,
} from '../audit/chain.js';
import { signHead, type HeadPublisher, type SignedHead } from '../audit/head.js';
import { checkpointText, signerOf, type SigningKey, type VerificationKey } from '../audit/signing.js';
import { invalidOption, missingAuditTable, missingSchema, unavailable } from '../errors/standalone.js';
import { columnOf, missingTables, namesOf, readingOnly, type Names } from './tables.js';

export interface PostgresAuditLogOptions extends PoolSource {
  /** Schema of the tables. Default: the connection's search path. */
  schema?: string | undefined;
  /** Table name. Default `impersonation_audit` (with `_head` and `_checkpoints` beside it). */
  table?: string | undefined;
  /** Default true: a failed append rejects (no token without its record); false: best effort, counted in `failures`. */
  failClosed?: boolean | undefined;
  onFailure?: ((error: unknown) => void) | undefined;
  /** Signs a checkpoint every `checkpointEvery` rows: `{ hmac: secret }` or `{ ed25519: private key (PEM or KeyObject) }`. */
  signingKey?: SigningKey | undefined;
  /** Rows between signed checkpoints. Default 100. */
  checkpointEvery?: number | undefined;
  /** Needs `signingKey`: receives each checkpoint's signed head; a rejection fails the append (docs/audit.md). */
  publishHead?: HeadPublisher | undefined;
}

export type { SignatureAlgorithm, SigningKey, VerificationKey } from '../audit/signing.js';
export type { HeadPublisher, SignedHead } from '../audit/head.js';
export { appendHeadsToFile, readLastHead } from '../audit/head-file.js';

export type { AuditEntry, VerifyCheck, VerifyResult } from '../audit/chain.js';
export { POSTGRES_POOL_OPTIONS, type PoolSource } from '../postgres/pool.js';

export interface VerifyOptions {
  /** Checks the signed checkpoints, and the heads given. */
  key?: VerificationKey | undefined;
  /** Every multiple of `checkpointEvery` up to the chain's length must have its checkpoint. Needs `key`. */
  requireCheckpoints?: boolean | undefined;
  /** The last published head(s): the chain must still reach each with the hash it pins. Needs `key`. */
  head?: SignedHead | readonly SignedHead[] | undefined;
}

/** `since` inclusive, `until` exclusive; `limit` default 50, at most 500; `cursor` from a previous page's `nextCursor`. */
export type AuditQuery = AuditQueryFilter;

export interface PostgresAuditLog extends AuditLog {
  /** Creates the tables and the append function if they are missing; safe to run from several instances at once. */
  migrate(): Promise<void>;
  /** Walks the chain; with a key, checks checkpoints and heads too. Reads only (a READ ONLY transaction). */
  verify(options?: VerifyOptions): Promise<VerifyResult>;
  /** Pages through the trail, newest first; reads only, and rejects naming a missing table. */
  query(filter?: AuditQuery): Promise<AuditPage>;
  /** Appends that failed in best-effort mode. */
  readonly failures: number;
  /** Ends the pool it opened (a pool passed in is left to its owner); closing twice is harmless. */
  close(): Promise<void>;
}

/** The append function's argument: the rows with their canonical content. */
function rowsArgument(rows: readonly AuditRow[]): string {
  return JSON.stringify(rows.map((row) => ({ ...row, content: canonicalContent(row) })));
}

/** Most rows one group commit writes. */
const MAX_BATCH_ROWS = 200;

const AUDIT_LOG_OPTION_NAMES = [
  ...POOL_SOURCE_NAMES,
  ...Object.keys({
    schema: true,
    table: true,
    failClosed: true,
    onFailure: true,
    signingKey: true,
    checkpointEvery: true,
    publishHead: true,
  } satisfies Record<Exclude<keyof PostgresAuditLogOptions, keyof PoolSource>, true>),
];

export function createPostgresAuditLog(options: PostgresAuditLogOptions): PostgresAuditLog {
  const check = optionChecks('createPostgresAuditLog');
  check.known(options, AUDIT_LOG_OPTION_NAMES);
  const table = options.table ?? 'impersonation_audit';
  assertPlainIdentifiers('createPostgresAuditLog', { table, schema: options.schema });
  const checkpointEvery = check.positive('checkpointEvery', options.checkpointEvery ?? 100);
  const signer = options.signingKey ? signerOf(options.signingKey, 'createPostgresAuditLog') : undefined;
  const failClosed = options.failClosed ?? true;
  if (options.publishHead !== undefined && (typeof options.publishHead !== 'function' || !signer))
    check.fail('publishHead', 'must be a function, and needs "signingKey"');
  const publishHead = options.publishHead
    ? (seq: string, hash: string) => options.publishHead!(signHead(signer!, Number(seq), hash))
    : undefined;

  const { pool, end } = openPool('createPostgresAuditLog', options);
  const names = namesOf(options.schema, table);
  let migrated: Promise<void> | undefined;
  let failures = 0;
  /** Checkpoints (and heads) whose rows committed but which could not be written yet; retried with the next batch. */
  const unsigned: { seq: string; hash: string }[] = [];

  function migrate(): Promise<void> {
    return (migrated ??= runMigration(pool, names).catch((error: unknown) => {
      migrated = undefined; // retried on the next call: the database may be back, or the schema created
      if (options.schema !== undefined && (error as { code?: unknown }).code === INVALID_SCHEMA_NAME)
        throw missingSchema('createPostgresAuditLog', options.schema, error);
      throw error;
    }));
  }

  // Invariant 29: group commit, refused rows alone.
  const appends = new StatementBatch<AuditRow, void>(
    async (batch) => {
      await migrate();
      const { rows } = await pool.query<{ seq: string; hash: string }>(
        `SELECT seq, hash FROM ${names.append}($1::jsonb)`,
        [rowsArgument(batch)],
      );
      await signDue(rows);
      return Array.from({ length: batch.length });
    },
    { max: MAX_BATCH_ROWS, oneInFlight: true },
  );

  /** Signs (and publishes) the checkpoints that fell due among rows just committed, and any left from before. */
  async function signDue(rows: readonly { seq: string; hash: string }[]): Promise<void> {
    if (!signer) return;
    // Invariant 30: checkpoints sign their committed rows.
    const due = [...unsigned.splice(0), ...rows.filter(({ seq }) => Number(seq) % checkpointEvery === 0)];
    for (const [at, { seq, hash }] of due.entries()) {
      try {
        await pool.query(
          `INSERT INTO ${names.checkpoints} (seq, hash, key_id, signature) VALUES ($1, $2, $3, $4) ON CONFLICT (seq) DO NOTHING`,
          [seq, hash, signer.kind, signer.sign(checkpointText(seq, hash))],
        );
        await publishHead?.(seq, hash);
      } catch (error) {
        // Invariant 30: never sign a hash read back.
        unsigned.push(...due.slice(at));
        // The rows are written: this failure must not read as the batch's data error (which would write them again).
        throw unavailable('the audit checkpoint or its published head could not be written', error);
      }
    }
  }

  async function append(name: ImpersonationEventName, event: ImpersonationEvent): Promise<void> {
    const row = rowOf(name, event);
    try {
      await appends.add(row);
    } catch (error) {
      if (failClosed) throw error;
      failures += 1;
      options.onFailure?.(error);
    }
  }

  const log: PostgresAuditLog & JournaledSink = {
    append,
    migrate,
    get failures() {
      return failures;
    },
    verify: async (verifyOptions = {}) => {
      const heads = verifyOptions.head === undefined ? [] : [verifyOptions.head].flat();
      const { key } = verifyOptions;
      if (heads.length && !key)
        throw invalidOption('verify', 'head', 'needs "key": a published head is checked with the key');
      if (verifyOptions.requireCheckpoints && !key)
        throw invalidOption('verify', 'requireCheckpoints', 'needs "key": the checkpoints are checked with the key');
      if (!key) return verifyChain(pool, names, undefined);
      const signatures = { key, heads, checkpointEvery, requireCheckpoints: verifyOptions.requireCheckpoints ?? false };
      return publishedHeadFailure(key, heads) ?? verifyChain(pool, names, signatures);
    },
    query: async (filter = {}) => {
      // Reads only; a migration this log's own appends started is waited for.
      await migrated?.catch(() => {});
      return queryTrail(pool, names, filter);
    },
    close: end,
  };
  // Only a trail that fails closed writes inside a store's transaction: a best-effort one must never fail an exchange.
  if (failClosed) {
    const journal: Journal = {
      sink: log,
      database: pool,
      ready: migrate,
      appendFunction: names.append,
      rows: (name, event) => rowsArgument([rowOf(name, event)]),
      // Invariant 30: signed with the next rows.
      committed: (rows) => signDue(rows).catch(() => {}),
    };
    Object.defineProperty(log, JOURNAL, { value: journal });
  }
  return log;
}

/** Idempotent, and serialised by an advisory lock so that instances starting together do not race. */
async function runMigration(pool: pg.Pool, names: Names): Promise<void> {
  await migrateUnderLock(
    pool,
    names.lock,
    `
    CREATE TABLE IF NOT EXISTS ${names.table} (
      seq bigint PRIMARY KEY,
      at timestamptz NOT NULL,
      event text NOT NULL,
      subject text, actor text, client_id text, resource text, scope text,
      context jsonb,
      subject_token_id text, session_id text, access_token_id text,
      outcome text NOT NULL,
      reason text,
      content text NOT NULL,
      prev_hash text NOT NULL,
      hash text NOT NULL
    );
    CREATE INDEX IF NOT EXISTS ${names.subjectIndex} ON ${names.table} (subject, seq);
    CREATE INDEX IF NOT EXISTS ${names.actorIndex} ON ${names.table} (actor, seq);
    CREATE TABLE IF NOT EXISTS ${names.head} (
      id smallint PRIMARY KEY CHECK (id = 1),
      seq bigint NOT NULL,
      hash text NOT NULL
    );
    INSERT INTO ${names.head} (id, seq, hash) VALUES (1, 0, '${GENESIS}') ON CONFLICT (id) DO NOTHING;
    CREATE TABLE IF NOT EXISTS ${names.checkpoints} (
      seq bigint PRIMARY KEY,
      hash text NOT NULL,
      key_id text NOT NULL,
      signature text NOT NULL,
      at timestamptz NOT NULL DEFAULT now()
    );
    CREATE OR REPLACE FUNCTION ${names.append}(p_rows jsonb) RETURNS TABLE (seq bigint, hash text) LANGUAGE plpgsql AS $fn$
    DECLARE
      head_seq bigint;
      head_hash text;
      r jsonb;
    BEGIN
      SELECT h.seq, h.hash INTO head_seq, head_hash FROM ${names.head} h WHERE h.id = 1 FOR UPDATE;
      FOR r IN SELECT value FROM jsonb_array_elements(p_rows) LOOP
        seq := head_seq + 1;
        hash := encode(sha256(convert_to(head_hash || ':' || seq::text || ':' || (r->>'content'), 'UTF8')), 'hex');
        INSERT INTO ${names.table} (seq, at, event, subject, actor, client_id, resource, scope, context,
          subject_token_id, session_id, access_token_id, outcome, reason, content, prev_hash, hash)
        VALUES (seq, (r->>'at')::timestamptz, r->>'event', r->>'subject', r->>'actor', r->>'clientId', r->>'resource',
          r->>'scope', CASE WHEN jsonb_typeof(r->'context') = 'null' THEN NULL ELSE r->'context' END,
          r->>'subjectTokenId', r->>'sessionId', r->>'accessTokenId', r->>'outcome', r->>'reason', r->>'content', head_hash, hash);
        head_seq := seq;
        head_hash := hash;
        RETURN NEXT;
      END LOOP;
      UPDATE ${names.head} h SET seq = head_seq, hash = head_hash WHERE h.id = 1;
    END
    $fn$;
  `,
  );
}

/** A row's columns as a query answers them, `seq` and `hash` first; `seq` is a bigint's text, `at` a Date. */
const ENTRY_COLUMNS = ['seq', 'hash', ...FIELDS.map((field) => `${columnOf(field)} AS "${field}"`)].join(', ');
type StoredEntry = Omit<AuditEntry, 'seq' | 'at'> & { seq: string; at: Date };

function entryOf<Row extends StoredEntry>(stored: Row): Omit<Row, 'seq' | 'at'> & { seq: number; at: string } {
  return { ...stored, seq: Number(stored.seq), at: stored.at.toISOString() };
}

const VERIFY_BATCH = 1000;

async function* storedBatches(client: pg.ClientBase, names: Names): AsyncGenerator<ChainedRow[]> {
  let after = 0;
  for (;;) {
    const { rows } = await client.query<StoredEntry & { content: string; prevHash: string }>(
      `SELECT ${ENTRY_COLUMNS}, content, prev_hash AS "prevHash" FROM ${names.table} WHERE seq > $1 ORDER BY seq LIMIT ${VERIFY_BATCH}`,
      [after],
    );
    yield rows.map(entryOf);
    if (rows.length < VERIFY_BATCH) return;
    after = Number(rows.at(-1)!.seq);
  }
}

/** Walks the chain, then what it signed, in one READ ONLY, REPEATABLE READ transaction: one instant, no write. */
async function verifyChain(
  pool: pg.Pool,
  names: Names,
  signatures: Omit<SignatureCheck, 'checkpoints'> | undefined,
): Promise<VerifyResult> {
  return readingOnly(pool, async (client) => {
    const missing = await missingTables(client, names, 'all');
    if (missing) return { ok: false, count: 0, seq: 1, problem: missing, check: 'tables' };
    const walk = await walkChain(
      storedBatches(client, names),
      async () => {
        const {
          rows: [head],
        } = await client.query<{ seq: string; hash: string }>(`SELECT seq, hash FROM ${names.head} WHERE id = 1`);
        return head ? { seq: Number(head.seq), hash: head.hash } : undefined;
      },
      signatures !== undefined,
    );
    if (!signatures) return walk.ok ? { ok: true, count: walk.count, checkpoints: 0 } : walk.failure;
    const { rows } = await client.query<{ seq: string; hash: string; keyId: string; signature: string }>(
      `SELECT seq, hash, key_id AS "keyId", signature FROM ${names.checkpoints} ORDER BY seq`,
    );
    const checkpoints = rows.map((row) => ({ ...row, seq: Number(row.seq) }));
    return checkSignatures(walk, { ...signatures, checkpoints });
  });
}

async function queryTrail(pool: pg.Pool, names: Names, filter: AuditQuery): Promise<AuditPage> {
  const limit = limitOf(filter.limit);
  const conditions: string[] = [];
  const values: unknown[] = [];
  const add = (condition: string, value: unknown) => {
    values.push(value);
    conditions.push(condition.replace('?', `$${values.length}`));
  };
  if (filter.subject !== undefined) add('subject = ?', filter.subject);
  if (filter.actor !== undefined) add('actor = ?', filter.actor);
  if (filter.events !== undefined) add('event = ANY(?)', [...filter.events]);
  if (filter.since !== undefined) add('at >= ?', filter.since);
  if (filter.until !== undefined) add('at < ?', filter.until);
  if (filter.cursor !== undefined) add('seq < ?', seqOfCursor(filter.cursor));
  const where = conditions.length ? `WHERE ${conditions.join(' AND ')}` : '';
  const rows = await readingOnly(pool, async (client) => {
    const missing = await missingTables(client, names, 'trail');
    if (missing) {
      throw missingAuditTable(
        `the audit log cannot be queried: ${missing}; check its "schema" and "table" options, or create the tables with migrate()`,
      );
    }
    const page = `SELECT ${ENTRY_COLUMNS} FROM ${names.table} ${where} ORDER BY seq DESC LIMIT ${limit}`;
    return (await client.query<StoredEntry>(page, values)).rows;
  });
  return pageOf(rows.map(entryOf), limit);
}

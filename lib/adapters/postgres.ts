import { createHash } from 'node:crypto';
import type pg from 'pg';
import type { AdapterPayload } from 'oidc-provider';
import { entryLifetimeMs, GRANTABLE_MODELS } from './contracts/entries.js';
import type { BoundedIndexAdd, IndexEntry } from './contracts/indexes.js';
import type { CommitOutcome, CommitWrite } from './contracts/commit.js';
import type { EveryDomainAdapter, ImpersonationAdapterClass } from './contract.js';
import { DerivedOperations } from './quotas.js';
import { streamOf, type NewOutboxEntry, type OutboxStore } from '../outbox/contract.js';
import { appendValues, createPostgresOutbox, outboxDdl, type RunTransaction } from '../outbox/postgres.js';
import { migrateUnderLock } from '../postgres/migration.js';
import { lastByKey, StatementBatch } from '../postgres/batch.js';
import { assertPlainIdentifiers } from '../postgres/identifier.js';
import { openPool, POOL_SOURCE_NAMES, type PoolSource } from '../postgres/pool.js';
import { optionChecks, type OptionChecks } from '../config/checks.js';
import type { ReadAheadAdapter } from './contracts/read-ahead.js';
import { PLUGIN_MODELS } from './models.js';
import { commitWith, migrateStore, storeNames, storeStatements } from './postgres-schema.js';
import { ReadAheads } from './read-aheads.js';
import type { Statement } from '../postgres/statement.js';
import { invalidArgument, invalidCall, postgresFailed, unavailable, unstorableValue } from '../errors/standalone.js';

export interface PostgresAdapterOptions extends PoolSource {
  /** Schema of the tables. Default: the connection's search path. */
  schema?: string | undefined;
  /** Table of the entries. Default `oidc_provider_store`; the sorted indexes go in `<table>_index`. */
  table?: string | undefined;
  /** How often (ms) expired rows are deleted, in the background. Default 60,000; 0 turns the sweep off. */
  cleanupInterval?: number | undefined;
  /** Most rows one cleanup statement deletes. Default 500. */
  cleanupBatch?: number | undefined;
}

export interface PostgresAdapterClass extends ImpersonationAdapterClass {
  /** Creates the missing tables and indexes (the first call does too): at start-up it surfaces a misconfiguration early. */
  migrate(): Promise<void>;
  /** Deletes expired rows now, in batches, as the background sweep does; resolves with how many went. */
  cleanup(): Promise<{ entries: number; indexMembers: number }>;
  /** Stops the sweep, waits for one in progress and ends a pool opened from `connectionString`; later calls reject. */
  close(): Promise<void>;
  /** @deprecated The same as `close()`, the name every store of the package closes with. */
  disconnect(): Promise<void>;
}

export { POSTGRES_POOL_OPTIONS } from '../postgres/pool.js';
export type { PoolSource } from '../postgres/pool.js';

const DEFAULT_CLEANUP_INTERVAL_MS = 60_000;
const DEFAULT_CLEANUP_BATCH = 500;
/** Most statements one sweep sends per table; what is left waits for the next sweep. */
const CLEANUP_BATCHES_PER_SWEEP = 100;

/** Text PostgreSQL cannot hold (NUL, a lone surrogate), starting with the reserved character, or too long for a btree key. */
// eslint-disable-next-line no-control-regex -- NUL and U+0001 are exactly what is looked for
const UNSTORABLE = /[\0\u0001]|\p{Cs}/u;
const LONGEST_KEY = 256;

/** A key column's value: `value` itself when storable, else a digest behind a character no stored value starts with. */
function keyOf(value: string): string {
  if (value.length <= LONGEST_KEY && !UNSTORABLE.test(value)) return value;
  return `\u0001${createHash('sha256').update(value, 'utf16le').digest('base64url')}`;
}

type Row = { payload: AdapterPayload; consumed: unknown };

/** How long a guard row a commit created is kept (ms): longer than any exchange, so a racing mark finds it. */
const GUARD_LIFETIME_MS = 10 * 60 * 1000;

/** The commit's answer for one exchange (`commitText`). */
interface CommitRow {
  n: string;
  committed: boolean;
  guard: string | null;
  /** The first quota counter that had taken its bound. */
  spent: string | null;
  /** Invariant 4: guards or counters created by another statement meanwhile; nothing committed, sent again. */
  unsettled: boolean;
  dropped: string[] | null;
  journaled: Array<{ seq: string; hash: string }> | null;
}

/** Times a commit is sent while its guards are being created by other statements (a quota write, its counters). */
const MAX_COMMIT_ATTEMPTS = 3;

const BIGINT_MAX = '9223372036854775807';
/** The longest lifetime stored, in ms (about 300 years): a longer one would overflow PostgreSQL's interval and fail its whole batch. */
const LONGEST_LIFETIME_MS = 1e13;

/** One exchange's commit row, as `commitText` takes it: its texts (or null) and lifetimes (ms), by COMMIT_COLUMNS. */
type CommitColumns = { model: string; id: string } & Record<(typeof COMMIT_COLUMNS)[number], string | number | null>;

/** One exchange's commit, as `commitText` takes it. */
interface PlainCommit extends CommitColumns {
  indexes: string[];
  guards: string[];
  /** Quota counters' ids (entries of `model`), bounds and lifetimes (ms). */
  quotas: Array<{ id: string; max: number; lifetime: number }>;
  /** The exchange's notifications, appended with it (`commitWith`). */
  notes?: { entries: readonly NewOutboxEntry[]; maxPending: number; now: number } | undefined;
  /** The exchange's trail rows (a JSON array), appended with it by the trail's function. */
  journal?: string | undefined;
}

/** The values of `keys` of `rows`, one array per key: the columns of an `unnest`. */
function columnsOf<Row, Key extends keyof Row>(rows: readonly Row[], keys: readonly Key[]): Array<Array<Row[Key]>> {
  return keys.map((key) => rows.map((row) => row[key]));
}

/** `commitText`'s $1–$8. */
const COMMIT_COLUMNS = [
  'consumeModel',
  'consumeId',
  'consumed',
  'model',
  'id',
  'payload',
  'lifetime',
  'memberExpiry',
] as const;

function commitManyValues(commits: readonly PlainCommit[]): unknown[] {
  // Each commit's distinct guards and index names, with its model and its number n.
  const owned = (list: (commit: PlainCommit) => readonly string[]) =>
    commits.flatMap((commit, at) =>
      [...new Set(list(commit))].map((value) => ({ value, model: commit.model, n: at + 1 })),
    );
  const guards = owned((commit) => commit.guards);
  const indexes = owned((commit) => commit.indexes);
  const quotas = commits.flatMap((commit, at) => commit.quotas.map((quota) => ({ ...quota, n: at + 1 })));
  const notes = commits.flatMap(({ notes }, at) =>
    (notes?.entries ?? []).map((entry) => ({ entry, now: notes!.now, maxPending: notes!.maxPending, n: at + 1 })),
  );
  return [
    ...columnsOf(commits, COMMIT_COLUMNS),
    ...columnsOf(guards, ['model', 'value', 'n']),
    GUARD_LIFETIME_MS,
    ...columnsOf(indexes, ['value', 'n']),
    ...columnsOf(quotas, ['id', 'max', 'lifetime', 'n']),
    ...(notes.length ? appendValues(notes) : []),
    // A batch's commits are of one kind: all carry trail rows, or none does.
    ...(commits[0]?.journal === undefined ? [] : [commits.map((commit) => commit.journal ?? '[]')]),
  ];
}

/** `items` cut, in order, into runs in which no two share a key (Invariant 11). */
function runsOfDistinct<Item>(items: readonly Item[], keysOf: (item: Item) => readonly string[]): Item[][] {
  const runs: Item[][] = [];
  let held = new Set<string>();
  for (const item of items) {
    const keys = keysOf(item);
    if (!runs.length || keys.some((key) => held.has(key))) {
      runs.push([]);
      held = new Set();
    }
    runs.at(-1)!.push(item);
    for (const key of keys) held.add(key);
  }
  return runs;
}

/** What one batch must not hold twice: the entry a commit writes, its quota counters, and the streams it notifies. */
function commitKeys(commit: PlainCommit): string[] {
  return [
    `entry\u0000${commit.model}\u0000${commit.id}`,
    ...commit.quotas.map((quota) => `entry\u0000${commit.model}\u0000${quota.id}`),
    ...(commit.notes?.entries ?? []).map((entry) => `stream\u0000${streamOf(entry)}`),
  ];
}

interface Lookup {
  model: string;
  byUid: boolean;
  key: string;
  /** readAhead's: the entry's Session and Grant are read in the same statement, and all three left for the finds. */
  follow?: boolean;
}

/** `upsertMany`'s columns. */
const ENTRY_COLUMNS = ['model', 'id', 'payload', 'consumed', 'grantId', 'uid', 'userCode', 'lifetimeMs'] as const;
/** One entry to write: its key, its texts (or null) and its lifetime (ms, or null), by column. */
type EntryWrite = { model: string; id: string } & Record<(typeof ENTRY_COLUMNS)[number], string | number | null>;

interface IndexWrite {
  model: string;
  names: string[];
  member: string;
  expiresAt: number;
}

const check: OptionChecks = optionChecks('createPostgresAdapter');

/** The options' values, checked: every one names its option when refused. */
function checkedOptions(options: PostgresAdapterOptions) {
  if (options === null || typeof options !== 'object')
    throw invalidArgument('createPostgresAdapter', 'options', 'must be an object');
  check.known(options, [
    ...POOL_SOURCE_NAMES,
    ...Object.keys({
      schema: true,
      table: true,
      cleanupInterval: true,
      cleanupBatch: true,
    } satisfies Record<Exclude<keyof PostgresAdapterOptions, keyof PoolSource>, true>),
  ]);
  const table = options.table ?? 'oidc_provider_store';
  assertPlainIdentifiers('createPostgresAdapter', { table, schema: options.schema });
  const cleanupInterval = options.cleanupInterval ?? DEFAULT_CLEANUP_INTERVAL_MS;
  if (!Number.isSafeInteger(cleanupInterval) || cleanupInterval < 0)
    check.fail('cleanupInterval', 'must be a whole number of milliseconds (0 turns the sweep off)');
  const cleanupBatch = check.positive('cleanupBatch', options.cleanupBatch ?? DEFAULT_CLEANUP_BATCH);

  return { table, cleanupInterval, cleanupBatch };
}

/** Runs one statement of `operation` on the adapter's pool, its tables ready; `keeps`: what was read ahead stays (52). */
type Run = (statement: Statement, values: unknown[], operation: string, keeps?: boolean) => Promise<pg.QueryResult>;

const READ_OPERATIONS = new Set(['find', 'findByUid', 'findByUserCode']);
/** Invariant 6: the bounded index additions' isolation, whatever the pool's default. */
const READ_COMMITTED = 'BEGIN ISOLATION LEVEL READ COMMITTED';

/** Invariant 10: finds, consumptions, writes and index additions of one turn go out as one statement each. */
function entryBatches(
  run: Run,
  statements: ReturnType<typeof storeStatements>,
  readAheads: ReadAheads<AdapterPayload | undefined>,
) {
  const aheadKey = ({ model, byUid, key }: Lookup) => `${model}\u0000${byUid}\u0000${key}`;

  const lookups = new StatementBatch<Lookup, AdapterPayload | undefined>(async (items) => {
    const following = items.some((item) => item.follow);
    const values = columnsOf(items, ['model', 'byUid', 'key']);
    const asked = readAheads.forgotten;
    const { rows } = await run(
      following ? statements.findManyAhead : statements.findMany,
      following ? [...values, items.map((item) => item.follow === true)] : values,
      items.length === 1 && items[0]!.byUid ? 'findByUid' : 'find',
    );
    const found: Array<AdapterPayload | undefined> = Array.from({ length: items.length });
    // A write answered meanwhile may have changed what this read: nothing of it is left for later finds.
    const leave = (item: Lookup, payload: AdapterPayload | undefined) =>
      readAheads.leave(aheadKey(item), payload, asked);
    for (const row of rows as Array<Row & { n: string; via?: 'Session' | 'Grant' | null; key?: string }>) {
      // A Session or Grant is left under its stored key: only a find of that same key takes it.
      if (row.via) leave({ model: row.via, byUid: row.via === 'Session', key: row.key! }, payloadOf(row));
      else found[Number(row.n) - 1] = payloadOf(row);
    }
    for (const [at, item] of items.entries()) if (item.follow) leave(item, found[at]);
    return found;
  });

  /** A find's answer: one that a readAhead left for it (one per readAhead), taken, or else read. */
  const lookup = (item: Lookup): Promise<AdapterPayload | undefined> => {
    const ahead = readAheads.take(aheadKey(item));
    return ahead ? Promise.resolve(ahead.answer) : lookups.add(item);
  };

  const entryKey = (row: { model: string; id: string }) => `${row.model}\u0000${row.id}`;
  const consumptions = new StatementBatch<{ model: string; id: string }, boolean>(async (items) => {
    const consumedAt = String(Math.floor(Date.now() / 1000));
    const values = [...columnsOf(lastByKey(items, entryKey), ['model', 'id']), consumedAt];
    const { rows } = await run(statements.consumeMany, values, 'consumeOnce');
    // Invariant 11: of several callers for one row, the first wins.
    const won = new Set((rows as Array<{ model: string; id: string }>).map(entryKey));
    return items.map((item) => won.delete(entryKey(item)));
  });

  const entryWrites = new StatementBatch<EntryWrite, void>(async (items) => {
    // Invariant 3.
    await run(statements.upsertMany, columnsOf(lastByKey(items, entryKey), ENTRY_COLUMNS), 'upsert');
    return Array.from({ length: items.length });
  });

  const indexWrites = new StatementBatch<IndexWrite, void>(async (items) => {
    const members = items.flatMap((item) =>
      item.names.map((name) => ({ model: item.model, name, member: item.member, expiresAt: item.expiresAt })),
    );
    const rows = lastByKey(members, (row) => `${row.model}\u0000${row.name}\u0000${row.member}`);
    await run(statements.indexAddMany, columnsOf(rows, ['model', 'name', 'member', 'expiresAt']), 'indexAdd');
    return Array.from({ length: items.length });
  });

  return { lookups, lookup, consumptions, entryWrites, indexWrites };
}

const GROUP_COMMIT = { oneInFlight: true };
const ofPluginRecords = ({ model, consumeModel }: PlainCommit) =>
  PLUGIN_MODELS.has(model) && (consumeModel === null || PLUGIN_MODELS.has(String(consumeModel)));
/** Invariant 11: a group commit, one statement in flight per kind (notifying or not, with a trail's rows or not); those asked for meanwhile share the next. */
function commitBatches(run: Run, names: Parameters<typeof commitWith>[0]) {
  const batches = new Map<string, StatementBatch<PlainCommit, CommitRow>>();
  return (appendFunction: string | undefined, notifying: boolean): StatementBatch<PlainCommit, CommitRow> => {
    const key = `${appendFunction ?? ''}\n${notifying}`;
    let batch = batches.get(key);
    if (!batch) {
      const statement = commitWith(names, appendFunction, notifying);
      batch = new StatementBatch<PlainCommit, CommitRow>(async (items) => {
        const answers = new Map<PlainCommit, CommitRow>();
        for (const sent of runsOfDistinct(items, commitKeys)) {
          const { rows } = await run(statement, commitManyValues(sent), 'commitOnce', sent.every(ofPluginRecords));
          for (const row of rows as CommitRow[]) answers.set(sent[Number(row.n) - 1]!, row);
        }
        return items.map((item) => answers.get(item)!);
      }, GROUP_COMMIT);
      batches.set(key, batch);
    }
    return batch;
  };
}

/** An oidc-provider adapter on PostgreSQL for every model and domain; nothing is evicted (the disk is the bound). */
export function createPostgresAdapter(options: PostgresAdapterOptions): PostgresAdapterClass {
  const { table, cleanupInterval, cleanupBatch } = checkedOptions(options);
  const { pool, end } = openPool('createPostgresAdapter', options);
  const names = storeNames(options.schema, table);
  const statements = storeStatements(names);

  let migrated = false;
  let closed = false;
  let sweeping: Promise<{ entries: number; indexMembers: number }> | undefined;
  let timer: NodeJS.Timeout | undefined;

  /** Runs `make` until it first succeeds (again after a failure: the database may be back); refused once closed. */
  const madeOnce = (make: () => Promise<void>) => {
    let making: Promise<void> | undefined;
    return (): Promise<void> => {
      if (closed) return Promise.reject(unavailable('the PostgreSQL adapter is disconnected'));
      return (making ??= make().catch((error: unknown) => {
        making = undefined;
        throw storeError('migration', error);
      }));
    };
  };
  const migrate = madeOnce(async () => {
    await migrateStore(pool, names);
    migrated = true;
    // The sweep never keeps a process alive that has nothing else to do.
    if (cleanupInterval && !closed) timer = setInterval(() => void cleanup().catch(() => {}), cleanupInterval).unref();
  });
  /** The outbox's tables are made on its first use: a deployment without webhooks never has them. */
  const outboxReady = madeOnce(() => migrateUnderLock(pool, names.lock, outboxDdl(names.outbox)));

  /** The store's tables, made on the first call; undefined once they are, so that a statement goes out in this turn. */
  const storeReady = (): Promise<void> | undefined => (closed || !migrated ? migrate() : undefined);
  /** Runs one statement once `ready`; every caller sends exactly one per operation (the first also migrates). */
  const runOn =
    (ready: () => Promise<void> | undefined): Run =>
    async (statement, values, operation, keeps = false) => {
      const waiting = ready();
      if (waiting) await waiting;
      const answer = answered(pool.query({ name: statement.name, text: statement.text, values }), operation);
      return READ_OPERATIONS.has(operation) || keeps ? answer : answer.finally(() => readAheads.forget());
    };
  // Invariant 52: a write answered, here or in another store, drops what was read ahead before it.
  const readAheads = new ReadAheads<AdapterPayload | undefined>();
  const run = runOn(storeReady);
  const { lookups, lookup, consumptions, entryWrites, indexWrites } = entryBatches(run, statements, readAheads);
  const commitBatch = commitBatches(run, names);

  function cleanup(): Promise<{ entries: number; indexMembers: number }> {
    // One sweep at a time per adapter; several instances skip each other's rows.
    sweeping ??= (async () => {
      try {
        const entries = await sweepTable(statements.cleanEntries, () => [cleanupBatch]);
        const indexMembers = await sweepTable(statements.cleanIndexes, () => [cleanupBatch, Date.now()]);
        return { entries, indexMembers };
      } finally {
        sweeping = undefined;
      }
    })();
    return sweeping;
  }

  // Short statements, each its own transaction: a request waits at most for one batch's row locks.
  async function sweepTable(statement: Statement, values: () => unknown[]): Promise<number> {
    let deleted = 0;
    for (let batch = 0; batch < CLEANUP_BATCHES_PER_SWEEP && !closed; batch += 1) {
      const { rowCount } = await run(statement, values(), 'cleanup');
      deleted += rowCount ?? 0;
      if ((rowCount ?? 0) < cleanupBatch) break;
    }
    return deleted;
  }

  let outbox: OutboxStore | undefined;
  const runOutbox = runOn(outboxReady);
  const runOutboxTransaction: RunTransaction = (work, operation) => transaction(outboxReady, 'BEGIN', operation, work);

  /** Runs `work` in one transaction (opened by `begin`) on one connection of the pool; any failure rolls it back. */
  async function transaction<T>(
    ready: () => Promise<void> | undefined,
    begin: string,
    operation: string,
    work: (run: Run) => Promise<T>,
  ): Promise<T> {
    await ready();
    const client = await answered(pool.connect(), operation);
    let broken: Error | undefined;
    const inTransaction: Run = (statement, values, step) =>
      answered(client.query({ name: statement.name, text: statement.text, values }), step);
    try {
      await answered(client.query(begin), operation);
      const result = await work(inTransaction);
      await answered(client.query('COMMIT'), operation);
      return result;
    } catch (error) {
      await client.query('ROLLBACK').catch((rollback: unknown) => {
        // A connection that cannot roll back is not handed out again.
        broken =
          rollback instanceof Error ? rollback : unavailable('the PostgreSQL transaction could not be rolled back');
      });
      throw error;
    } finally {
      client.release(broken);
      readAheads.forget();
    }
  }

  class PostgresAdapter
    extends DerivedOperations
    implements EveryDomainAdapter, Required<Pick<ReadAheadAdapter, 'readAhead' | 'forgetReadAheads'>>
  {
    readonly #name: string;

    constructor(name: string) {
      super();
      this.#name = name;
    }

    static migrate(): Promise<void> {
      return migrate();
    }

    static cleanup(): Promise<{ entries: number; indexMembers: number }> {
      return cleanup();
    }

    static async close(): Promise<void> {
      if (closed) return;
      closed = true;
      clearInterval(timer);
      await sweeping?.catch(() => {});
      await end();
    }

    static disconnect(): Promise<void> {
      return PostgresAdapter.close();
    }

    /** The webhooks' outbox, one per createPostgresAdapter(), in `<table>_outbox` and `<table>_outbox_drops`. */
    outbox(): OutboxStore {
      return (outbox ??= createPostgresOutbox(names.outbox, runOutbox, runOutboxTransaction));
    }

    async upsert(id: string, payload: AdapterPayload, expiresIn?: number): Promise<void> {
      const { consumed, ...stored } = payload;
      await entryWrites.add({
        model: this.#name,
        id: keyOf(id),
        payload: JSON.stringify(stored),
        consumed: consumed ? JSON.stringify(consumed) : null,
        grantId: payload.grantId && GRANTABLE_MODELS.has(this.#name) ? keyOf(payload.grantId) : null,
        uid: payload.uid ? keyOf(payload.uid) : null,
        userCode: payload.userCode ? keyOf(payload.userCode) : null,
        lifetimeMs: lifetimeMs(expiresIn),
      });
    }

    async find(id: string): Promise<AdapterPayload | undefined> {
      return lookup({ model: this.#name, byUid: false, key: keyOf(id) });
    }

    async findByUid(uid: string): Promise<AdapterPayload | undefined> {
      return lookup({ model: this.#name, byUid: true, key: keyOf(uid) });
    }

    /** Invariant 52: the entry, its Session and its Grant in one statement, each left for the next find of it. */
    async readAhead(id: string): Promise<void> {
      await lookups.add({ model: this.#name, byUid: false, key: keyOf(id), follow: true });
    }

    forgetReadAheads(): void {
      readAheads.forget();
    }

    async findByUserCode(userCode: string): Promise<AdapterPayload | undefined> {
      const { rows } = await run(statements.findByUserCode, [this.#name, keyOf(userCode)], 'findByUserCode');
      return rows[0] ? payloadOf(rows[0] as Row) : undefined;
    }

    async consumeOnce(id: string): Promise<boolean> {
      return consumptions.add({ model: this.#name, id: keyOf(id) });
    }

    sharesDatabase(database: object): boolean {
      return database === pool;
    }

    async commitOnce(requested: CommitWrite): Promise<CommitOutcome> {
      const { consume, write, indexes, expiresAt, guards, quotas = [], journal, outbox: notes } = requested;
      const lifetime = lifetimeMs(write.expiresIn);
      if (lifetime === null || lifetime === 0) throw invalidCall('commitOnce', 'the entry to write needs a lifetime');
      assertMember(write.id);
      const memberExpiry = storedExpiry(expiresAt);
      const notifying = notes !== undefined && notes.entries.length > 0;
      if (notifying) await outboxReady();
      const { consumed: _consumed, ...stored } = write.payload;
      const guardIds = guards.map(keyOf);
      const quotaIds = quotas.map((quota) => keyOf(quota.key));
      const now = Date.now();
      const commit: PlainCommit = {
        consumeModel: consume ? consume.model : null,
        consumeId: consume ? keyOf(consume.id) : null,
        consumed: JSON.stringify(write.id),
        model: write.model,
        id: keyOf(write.id),
        payload: JSON.stringify(stored),
        lifetime,
        memberExpiry,
        indexes: indexes.map(keyOf),
        guards: guardIds,
        quotas: quotas.map((quota, at) => ({
          id: quotaIds[at]!,
          max: quota.max,
          lifetime: Math.max(1, Math.min(quota.expiresAt - now, LONGEST_LIFETIME_MS)),
        })),
        notes: notifying ? notes : undefined,
        journal: journal?.rows,
      };
      const batch = commitBatch(journal?.appendFunction, notifying);
      let answer: CommitRow;
      // Invariant 4: a row created meanwhile is not seen by this statement; sent again, it is.
      for (let attempt = 1; ; attempt += 1) {
        answer = await batch.add(commit);
        if (!answer.unsettled || answer.guard !== null || answer.spent !== null || answer.committed) break;
        if (attempt === MAX_COMMIT_ATTEMPTS)
          throw unavailable('the exchange could not be committed: its guards or quota counters kept changing');
      }
      const { committed, guard, spent, journaled, dropped } = answer;
      if (guard !== null) return { outcome: 'guarded', guard: guards[guardIds.indexOf(guard)] ?? guard };
      if (spent !== null) return { outcome: 'spent', key: quotas[quotaIds.indexOf(spent)]?.key ?? spent };
      if (!committed) return { outcome: 'consumed' };
      return {
        outcome: 'committed',
        ...(journaled ? { journaled } : {}),
        ...(notifying ? { dropped: dropped ?? [] } : {}),
      };
    }

    async releaseConsumed({ model, id }: { model: string; id: string }, by: string): Promise<boolean> {
      const { rowCount } = await run(statements.release, [model, keyOf(id), JSON.stringify(by)], 'releaseConsumed');
      return rowCount === 1;
    }

    async destroy(id: string): Promise<void> {
      await run(statements.destroy, [this.#name, keyOf(id)], 'destroy');
    }

    async revokeByGrantId(grantId: string): Promise<void> {
      await run(statements.revokeByGrantId, [keyOf(grantId)], 'revokeByGrantId');
    }

    async indexAdd(indexes: readonly string[], member: string, expiresAt: number): Promise<void> {
      if (!indexes.length) return;
      assertMember(member);
      await indexWrites.add({
        model: this.#name,
        names: indexes.map(keyOf),
        member,
        expiresAt: storedExpiry(expiresAt),
      });
    }

    /** Invariant 6: the advisory locks, then the count and addition in a later statement. */
    async indexAddWithin(adds: readonly BoundedIndexAdd[], member: string): Promise<string | undefined> {
      if (!adds.length) return undefined;
      assertMember(member);
      const expiries = adds.map((add) => storedExpiry(add.expiresAt));
      const indexNames = adds.map((add) => keyOf(add.index));
      const bounds = adds.map((add) => add.bound);
      const { rows } = await transaction(storeReady, READ_COMMITTED, 'indexAddWithin', async (query) => {
        await query(statements.indexLock, [names.lock, this.#name, indexNames], 'indexAddWithin');
        const values = [this.#name, indexNames, member, Date.now(), expiries, bounds];
        return query(statements.indexAddWithin, values, 'indexAddWithin');
      });
      const full = (rows[0] as { full_index: string | null } | undefined)?.full_index ?? null;
      return full === null ? undefined : adds[indexNames.indexOf(full)]!.index;
    }

    async indexRemove(indexes: readonly string[], member: string): Promise<void> {
      // A member that could not have been added is in no index.
      if (!indexes.length || !isStorableMember(member)) return;
      await run(statements.indexRemove, [this.#name, indexes.map(keyOf), member], 'indexRemove');
    }

    async indexRange(index: string, after: IndexEntry | undefined, limit: number): Promise<IndexEntry[]> {
      // The first page is the one after bigint's largest value, which no expiry reaches.
      const position = after ? [Math.round(after.expiresAt), positionOf(after.member)] : [BIGINT_MAX, ''];
      const values = [this.#name, keyOf(index), Date.now(), limit, ...position];
      const { rows } = await run(statements.indexAfter, values, 'indexRange');
      return rows.map((row: { member: string; expires_at: string }) => ({
        member: row.member,
        expiresAt: Number(row.expires_at),
      }));
    }
  }

  return PostgresAdapter;
}

function payloadOf(row: Row): AdapterPayload {
  const { payload } = row;
  if (row.consumed !== null && row.consumed !== undefined) payload.consumed = row.consumed;
  return payload;
}

/** An entry's lifetime as stored: null for one that never expires; 0 for one already expired, kept until the sweep. */
function lifetimeMs(expiresIn: number | undefined): number | null {
  const lifetime = entryLifetimeMs(expiresIn);
  return lifetime === undefined ? null : Math.min(lifetime, LONGEST_LIFETIME_MS);
}

/** An index expiry as stored, in whole ms: a number beyond bigint (1e300 is finite) would be refused by PostgreSQL. */
function storedExpiry(expiresAt: number): number {
  const rounded = Math.round(expiresAt);
  if (!Number.isSafeInteger(rounded))
    throw unstorableValue('the PostgreSQL adapter', 'an index expiry must be a finite number of ms, at most 2^53');
  return rounded;
}

function isStorableMember(member: string): boolean {
  return member.length <= LONGEST_KEY && !UNSTORABLE.test(member);
}

/** Members are returned as stored and ordered byte by byte, so they must be plain, short text (the plugin's are ids). */
function assertMember(member: string): void {
  if (!isStorableMember(member)) {
    throw unstorableValue(
      'the PostgreSQL adapter',
      'an index member must be at most 256 characters, without NUL, U+0001 or lone surrogates',
    );
  }
}

/** A position to page after as comparable text: an unstorable member becomes its longest storable prefix + U+0001. */
function positionOf(member: string): string {
  const bad = member.slice(0, LONGEST_KEY + 1).search(UNSTORABLE);
  if (bad === -1 && member.length <= LONGEST_KEY) return member;
  const end = bad === -1 ? LONGEST_KEY : bad;
  return `${member.slice(0, end)}\u0001`;
}

/** What `query` resolves, or its failure as a store error of `operation`. */
function answered<T>(query: Promise<T>, operation: string): Promise<T> {
  return query.catch((error: unknown) => {
    throw storeError(operation, error);
  });
}

/** Invariant 12: names the operation and SQLSTATE, never a value (a key can be a token). */
function storeError(operation: string, error: unknown): Error {
  const { code, message } = error as { code?: unknown; message?: unknown };
  const sqlState = typeof code === 'string' && /^[0-9A-Z]{5}$/.test(code) ? code : undefined;
  const reason = sqlState ? `SQLSTATE ${sqlState}` : typeof message === 'string' ? message : 'unknown error';
  // The SQLSTATE tells a value PostgreSQL refused (isDataError) from an outage.
  return postgresFailed(operation, reason, sqlState);
}

import { SESSION_MODEL } from '../adapters/models.js';
import { LRUCache } from 'lru-cache';
import type { AdapterPayload } from 'oidc-provider';
import { GUARD_KIND, type CommitOutcome, type CommitWrite } from '../adapters/contracts/commit.js';
import type { QuotaCharge } from '../capacity.js';
import type { IndexEntry } from '../adapters/contracts/indexes.js';
import type { SessionAdapter } from '../adapters/contracts/sessions.js';
import { recordOf, recordPayload } from '../adapters/records.js';
import { stateOf, type SessionRecord } from './record.js';

export { SESSION_MODEL };

/** How long an origin's end mark is kept (seconds); Invariant 22. */
const MARK_SECONDS = 300;

/** How long after its write an announcement stands: kept MARK_SECONDS, past the deadline (120 s) of any exchange begun since. */
const ANNOUNCEMENT_STANDS_MS = 120_000;

/** How long a record outlives its tokens, so that it can still be read and told apart from an unknown id. */
const KEPT_AFTER_EXPIRY = 3600;

/** Most members one index read returns; listing and the feed page through more. */
const MAX_BATCH = 1000;
/** Index batches one listing page reads at most, so that a filter matching little stays bounded. */
const MAX_BATCHES_PER_PAGE = 10;

const ACTIVE = 'active';
const ENDED = 'ended:';
const REVOKED = 'revoked';
const bySubject = (subject: string) => `subject:${subject}`;
const byActor = (actor: string) => `actor:${actor}`;
const byDelegationKey = (key: string) => `delegation:${key}`;

export interface SessionFilter {
  subject?: string;
  actor?: string;
  clientId?: string;
}

export interface SessionPage {
  items: SessionRecord[];
  /** Where the next page starts; absent when this page reached the end. */
  next?: IndexEntry;
}

/** A change that closes a session: a revocation or an end. */
export type Closing = Pick<SessionRecord, 'revoked'> | Pick<SessionRecord, 'ended'>;

/** Impersonation sessions on an adapter with sorted indexes: by id, subject, actor, origin, and closed for the feed. */
export class SessionStore {
  readonly #adapter: SessionAdapter;
  /** The announcements this store wrote: when it sent each, and when the store confirmed it. */
  readonly #announced = new LRUCache<string, { sentAt: number; confirmedAt: number }>({ max: 10_000 });

  constructor(adapter: SessionAdapter) {
    this.#adapter = adapter;
  }

  /** The active delegation of `delegationKey` lasting until `until` (s), record and end mark read together (Invariant 26). */
  async liveDelegation(delegationKey: string, until: number): Promise<SessionRecord | undefined> {
    const [latest] = await this.#adapter.indexRange(byDelegationKey(delegationKey), undefined, 1);
    if (!latest || latest.expiresAt < until * 1000) return undefined;
    const [record, marked] = await Promise.all([
      this.find(latest.member),
      this.hasEnded({ parentSessionId: latest.member }),
    ]);
    return record && !marked && stateOf(record) === 'active' && record.delegationKey === delegationKey
      ? record
      : undefined;
  }

  /** Lists the session, redeems `redeem` and charges `quotas` in one store operation, unless an origin was marked since it was read. */
  commit(
    record: SessionRecord,
    redeem: { model: string; id: string } | undefined,
    { journal, outbox, quotas }: Pick<CommitWrite, 'journal' | 'outbox' | 'quotas'> = {},
  ): Promise<CommitOutcome> {
    const origins = originsOf(record).map(indexOf);
    const payload = recordPayload(SESSION_MODEL, record);
    return this.#adapter.commitOnce({
      consume: redeem,
      write: { model: SESSION_MODEL, id: record.id, payload, expiresIn: keptFor(record) },
      indexes: activeIndexesOf(record).concat(origins),
      expiresAt: record.expiresAt * 1000,
      guards: origins.map((index) => `${ENDED}${index}`),
      quotas,
      journal,
      outbox,
    });
  }

  /** Gives back what the commit of session `sessionId` redeemed, unless it is gone or expired. */
  release(redeemed: { model: string; id: string }, sessionId: string): Promise<boolean> {
    return this.#adapter.releaseConsumed(redeemed, sessionId);
  }

  /** The first of `quotas` already at its bound, as read now; the commit checks and charges them again, atomically. */
  async spentQuota(quotas: readonly QuotaCharge[]): Promise<string | undefined> {
    const counters = await Promise.all(quotas.map((quota) => this.#adapter.find(quota.key)));
    const spent = quotas.find((quota, at) => {
      const count = (counters[at] as { count?: unknown } | undefined)?.count;
      return typeof count === 'number' && count >= quota.max;
    });
    return spent?.key;
  }

  /** Whether the store is `database` (a trail's pool): its commit can then carry the trail's row. */
  sharesDatabase(database: object): boolean {
    return this.#adapter.sharesDatabase?.(database) ?? false;
  }

  /** Whether `origin` was marked ended (within the marks' lifetime). */
  async hasEnded(origin: Origin): Promise<boolean> {
    const mark = (await this.#adapter.find(markOf(origin))) as { ended?: unknown } | undefined;
    return mark?.ended !== undefined;
  }

  /** Marks an origin ended before its sessions are looked up (Invariant 23); what a user ends only `ifAnnounced`. */
  async markEnded(origin: Origin, ifAnnounced = false): Promise<void> {
    if (ifAnnounced && !(await this.#adapter.find(announcementOf(origin)))) return;
    const payload = { kind: GUARD_KIND, ended: Math.floor(Date.now() / 1000) } as unknown as AdapterPayload;
    await this.#adapter.upsert(markOf(origin), payload, MARK_SECONDS);
  }

  /** Marks an origin ended for `seconds`, charged to `quota` in the same write: false, nothing written, once it is spent. */
  async markEndedWithin(origin: Origin, seconds: number, quota: QuotaCharge): Promise<boolean> {
    const payload = { kind: GUARD_KIND, ended: Math.floor(Date.now() / 1000) } as unknown as AdapterPayload;
    const write = { model: SESSION_MODEL, id: markOf(origin), payload, expiresIn: seconds };
    const expiresAt = Date.now() + seconds * 1000;
    const saved = await this.#adapter.saveWithinQuotas({ write, indexes: [], expiresAt, quotas: [quota] });
    return saved.outcome === 'saved';
  }

  /** Announces `record`'s origins (Invariant 23); nothing written, nor to wait for, when each stands from before `readSince`. */
  announce(record: SessionRecord, readSince = -Infinity): Promise<void> | undefined {
    const origins = originsOf(record).filter((origin) => !('accessGrantId' in origin || 'parentSessionId' in origin));
    const ids = origins.map(announcementOf);
    if (ids.every((id) => this.#confirmedBefore(id, readSince))) return undefined;
    const sentAt = Date.now();
    const payload = { kind: GUARD_KIND } as unknown as AdapterPayload;
    return Promise.all(ids.map((id) => this.#adapter.upsert(id, payload, MARK_SECONDS))).then(() => {
      for (const id of ids) this.#announced.set(id, { sentAt, confirmedAt: Date.now() });
    });
  }

  #confirmedBefore(id: string, readSince: number): boolean {
    const times = this.#announced.get(id);
    return !!times && times.confirmedAt < readSince && times.sentAt > readSince - ANNOUNCEMENT_STANDS_MS;
  }

  async find(id: string): Promise<SessionRecord | undefined> {
    const found = recordOf<SessionRecord>(SESSION_MODEL, await this.#adapter.find(id), { expiresAt: 'number' });
    if (!found) return undefined;
    const { consumed: _closed, ...record } = found;
    return record;
  }

  /** Closes a session once (Invariant 31). */
  async close(record: SessionRecord, closing: Closing): Promise<{ record: SessionRecord; closedNow: boolean }> {
    await this.#adapter.indexAdd([REVOKED], record.id, record.expiresAt * 1000);
    const won = await this.#adapter.consumeOnce(record.id);
    if (!won) {
      const current = await this.find(record.id);
      if (current && stateOf(current) !== 'active') return { record: current, closedNow: false };
    }
    const closed: SessionRecord = { ...record, ...closing };
    const payload = recordPayload(SESSION_MODEL, { ...closed, consumed: Math.floor(Date.now() / 1000) });
    await Promise.all([
      this.#adapter.upsert(closed.id, payload, keptFor(closed)),
      this.#adapter.indexRemove(activeIndexesOf(record), record.id),
    ]);
    return { record: closed, closedNow: won };
  }

  /** Active sessions, latest expiry first, from the narrowest index; a short page may still have a next one. */
  async list(filter: SessionFilter, limit: number, after: IndexEntry | undefined): Promise<SessionPage> {
    // A client filter alone reads all active sessions: clients are few, subjects and actors many.
    const index =
      filter.subject !== undefined
        ? bySubject(filter.subject)
        : filter.actor !== undefined
          ? byActor(filter.actor)
          : ACTIVE;
    const items: SessionRecord[] = [];
    let position = after;
    for (let batches = 0; batches < MAX_BATCHES_PER_PAGE; batches += 1) {
      const size = Math.min(MAX_BATCH, limit - items.length);
      const entries = await this.#adapter.indexRange(index, position, size);
      const records = await Promise.all(entries.map((entry) => this.find(entry.member)));
      for (const [at, record] of records.entries()) {
        position = entries[at];
        if (record && stateOf(record) === 'active' && matches(record, filter)) items.push(record);
      }
      if (entries.length < size) return { items };
      if (items.length >= limit) break;
    }
    return { items, ...(position ? { next: position } : {}) };
  }

  /** Closed sessions whose tokens have not expired yet, latest expiry first. */
  closedSince(after: IndexEntry | undefined, limit: number): Promise<IndexEntry[]> {
    return this.#adapter.indexRange(REVOKED, after, Math.min(limit, MAX_BATCH));
  }

  /** Sessions, tokens unexpired, started from this actor Grant or sign-in, customer grant, or parent session. */
  async startedWith(origin: Origin): Promise<string[]> {
    const index = indexOf(origin);
    const ids: string[] = [];
    let position: IndexEntry | undefined;
    for (;;) {
      const entries = await this.#adapter.indexRange(index, position, MAX_BATCH);
      ids.push(...entries.map((entry) => entry.member));
      if (entries.length < MAX_BATCH) return ids;
      position = entries.at(-1);
    }
  }
}

/** What a session was started from, whose end ends it: the actor token's Grant or sign-in, the customer's access grant, the session it delegates from, a redeemed ID-JAG's session at its issuer. */
export type Origin =
  | { grantId: string }
  | { sessionUid: string }
  | { accessGrantId: string }
  | { parentSessionId: string }
  | { subjectTokenId: string }
  | { issuerSession: string };

function indexOf(origin: Origin): string {
  if ('grantId' in origin) return `actor-grant:${origin.grantId}`;
  if ('issuerSession' in origin) return `issuer-session:${origin.issuerSession}`;
  if ('subjectTokenId' in origin) return `subject-token:${origin.subjectTokenId}`;
  if ('sessionUid' in origin) return `actor-session:${origin.sessionUid}`;
  if ('parentSessionId' in origin) return `parent-session:${origin.parentSessionId}`;
  return `access-grant:${origin.accessGrantId}`;
}

/** Which origin's end mark a commit was refused by (an actor's sign-in or Grant when none of the others). */
export function endedOrigin(
  guard: string,
): 'accessGrant' | 'parentSession' | 'subjectToken' | 'issuerSession' | 'actor' {
  if (guard.startsWith(markOf({ accessGrantId: '' }))) return 'accessGrant';
  if (guard.startsWith(markOf({ issuerSession: '' }))) return 'issuerSession';
  if (guard.startsWith(markOf({ parentSessionId: '' }))) return 'parentSession';
  if (guard.startsWith(markOf({ subjectTokenId: '' }))) return 'subjectToken';
  return 'actor';
}

/** The id of an origin's end mark: never a session id (those start with `imp_`). */
function markOf(origin: Origin): string {
  return `${ENDED}${indexOf(origin)}`;
}

/** The id of an exchange's announcement that it is committing from `origin`. */
function announcementOf(origin: Origin): string {
  return `announced:${indexOf(origin)}`;
}

function originsOf(record: SessionRecord): Origin[] {
  const origins: Origin[] = [];
  if (record.actorGrantId !== undefined) origins.push({ grantId: record.actorGrantId });
  if (record.actorSessionUid !== undefined) origins.push({ sessionUid: record.actorSessionUid });
  if (record.accessGrantId !== undefined) origins.push({ accessGrantId: record.accessGrantId });
  if (record.parentSessionId !== undefined) origins.push({ parentSessionId: record.parentSessionId });
  // A delegation ends with the token it was exchanged from (revoked at the revocation endpoint).
  if (record.type === 'delegation') origins.push({ subjectTokenId: record.subjectTokenId });
  if (record.issuerSession !== undefined) origins.push({ issuerSession: record.issuerSession });
  return origins;
}

function activeIndexesOf(record: SessionRecord): string[] {
  const indexes = [ACTIVE, bySubject(record.subject)];
  if (record.actor !== undefined) indexes.push(byActor(record.actor));
  if (record.delegationKey !== undefined) indexes.push(byDelegationKey(record.delegationKey));
  return indexes;
}

function matches(record: SessionRecord, filter: SessionFilter): boolean {
  const named = ['subject', 'actor', 'clientId'] as const;
  return named.every((name) => filter[name] === undefined || record[name] === filter[name]);
}

function keptFor(record: SessionRecord): number {
  return Math.max(1, record.expiresAt + KEPT_AFTER_EXPIRY - Math.floor(Date.now() / 1000));
}

import { APPROVAL_MODEL } from '../adapters/models.js';
import type { AdapterPayload } from 'oidc-provider';
import type { ApprovalAdapter } from '../adapters/contracts/approvals.js';
import type { IndexEntry } from '../adapters/contracts/indexes.js';
import {
  grantStateOf,
  requestStateOf,
  type AccessGrant,
  type ApprovalDecision,
  type ApprovalRequest,
} from './record.js';

/** The adapter model name the access grants, approval requests and their indexes are kept under. */
export { APPROVAL_MODEL };

/** How long a grant or request outlives its expiry, so that it can still be read and told apart from an unknown id. */
const KEPT_AFTER_EXPIRY = 7 * 24 * 3600;

const GRANT = 'AccessGrant';
const REQUEST = 'ApprovalRequest';
const grantsOf = (subject: string) => `grants:${subject}`;
const givenBy = (subject: string) => `given:${subject}`;
/** How long a grant counts toward its customer's daily budget, whatever becomes of it (ms). */
const GIVEN_WINDOW_MS = 24 * 3600 * 1000;
const pendingOf = (subject: string) => `pending:${subject}`;
const askedBy = (clientId: string) => `asked:${clientId}`;

/**
 * How long a place reserved among a customer's grants in force is held for a
 * grant not saved yet (ms): far longer than a save takes, short enough that a
 * place whose grant never came (its process died) is soon free again.
 */
const RESERVED_FOR_MS = 5 * 60 * 1000;

/** The bounds a customer's new grant must fit in: grants in force, and grants given in the last 24 hours. */
export interface GrantBounds {
  inForce: number;
  givenPerDay: number;
}

/** A reservation's outcome: a place taken, or the bound that is reached. */
export type GrantReservation = 'reserved' | 'too_many_in_force' | 'too_many_given';

/** What closing a grant or answering a request did: `changedNow` for the one caller whose change it was. */
export interface Outcome<T> {
  record: T;
  changedNow: boolean;
}

/**
 * Access grants and approval requests on top of an adapter with sorted
 * indexes: each record by id; live grants and pending requests indexed by
 * their subject, each member expiring with its record, so that listing a
 * customer's reads one short index and never the store. A grant ends, and a
 * request is answered, once: the record's atomic consume picks the one caller
 * whose change it is, so a customer's "deny" racing with their "approve" (or
 * with the request's expiry) leaves exactly one answer.
 */
export class ApprovalStore {
  readonly #adapter: ApprovalAdapter;

  constructor(adapter: ApprovalAdapter) {
    this.#adapter = adapter;
  }

  /**
   * Takes a place for `grant` among its customer's grants in force and among
   * those they gave in the last 24 hours (ended or expired ones included:
   * what bounds the records, trail rows and notifications one customer can
   * make, however short their grants), both or neither, in one atomic step,
   * so that no burst of concurrent calls gets past either bound. The grant
   * is not in force until saveGrant writes it; the place in force is held
   * for RESERVED_FOR_MS until then, the one among those given for 24 hours.
   */
  async reserveGrant(grant: AccessGrant, bounds: GrantBounds): Promise<GrantReservation> {
    const full = await this.#adapter.indexAddWithin(
      [
        {
          index: grantsOf(grant.subject),
          expiresAt: Math.min(grant.expiresAt * 1000, Date.now() + RESERVED_FOR_MS),
          bound: bounds.inForce,
        },
        {
          index: givenBy(grant.subject),
          expiresAt: grant.createdAt * 1000 + GIVEN_WINDOW_MS,
          bound: bounds.givenPerDay,
        },
      ],
      grant.id,
    );
    if (full === undefined) return 'reserved';
    return full === grantsOf(grant.subject) ? 'too_many_in_force' : 'too_many_given';
  }

  /** Gives back the places of a grant that will not be saved (its approval lost to another answer). */
  async releaseGrant(grant: AccessGrant): Promise<void> {
    await this.#adapter.indexRemove([grantsOf(grant.subject), givenBy(grant.subject)], grant.id);
  }

  /** Writes a grant and puts it in force until its expiry (in the place reserveGrant took for it). */
  async saveGrant(grant: AccessGrant): Promise<void> {
    await Promise.all([
      this.#adapter.upsert(grant.id, toPayload(GRANT, grant), keptFor(grant.expiresAt)),
      this.#adapter.indexAdd([grantsOf(grant.subject)], grant.id, grant.expiresAt * 1000),
      this.#adapter.indexAdd([givenBy(grant.subject)], grant.id, grant.createdAt * 1000 + GIVEN_WINDOW_MS),
    ]);
  }

  async findGrant(id: string): Promise<AccessGrant | undefined> {
    return fromPayload<AccessGrant>(GRANT, await this.#adapter.find(id));
  }

  /** A customer's grants in force, latest expiry first, at most `limit`. */
  async activeGrants(subject: string, limit: number): Promise<AccessGrant[]> {
    const grants = await this.#members<AccessGrant>(grantsOf(subject), limit, (id) => this.findGrant(id));
    return grants.filter((grant) => grantStateOf(grant) === 'active');
  }

  /**
   * Ends a grant once. Whoever loses the consume writes nothing and gets the
   * record as it stands, which may not show the end yet while the winner is
   * still writing it.
   */
  async endGrant(grant: AccessGrant, ended: NonNullable<AccessGrant['ended']>): Promise<Outcome<AccessGrant>> {
    if (!(await this.#adapter.consumeOnce(grant.id))) {
      // An ender that won the consume and failed before this left the grant counted in force.
      await this.#adapter.indexRemove([grantsOf(grant.subject)], grant.id);
      return { record: (await this.findGrant(grant.id)) ?? grant, changedNow: false };
    }
    const record: AccessGrant = { ...grant, ended };
    await Promise.all([
      this.#adapter.upsert(grant.id, consumed(toPayload(GRANT, record)), keptFor(grant.expiresAt)),
      this.#adapter.indexRemove([grantsOf(grant.subject)], grant.id),
    ]);
    return { record, changedNow: true };
  }

  /**
   * Saves a request and lists it as waiting for its customer, unless they
   * have `maxPending` waiting already ('customer') or its client has
   * `maxPerClient` requests kept ('client'): the count and the listing are one
   * atomic step, so that no burst of concurrent asks gets past the bound.
   * The record is written first: until it is listed nobody knows its id, and
   * one that is refused (or whose listing fails) is never read.
   */
  async saveRequest(
    request: ApprovalRequest,
    maxPending: number,
    maxPerClient?: number,
  ): Promise<'saved' | 'customer' | 'client'> {
    const keptSeconds = keptFor(request.expiresAt);
    await this.#adapter.upsert(request.id, toPayload(REQUEST, request), keptSeconds);
    const perClient = { index: askedBy(request.requestedBy), expiresAt: Date.now() + keptSeconds * 1000 };
    const full = await this.#adapter.indexAddWithin(
      [
        { index: pendingOf(request.subject), expiresAt: request.expiresAt * 1000, bound: maxPending },
        ...(maxPerClient === undefined ? [] : [{ ...perClient, bound: maxPerClient }]),
      ],
      request.id,
    );
    if (full === undefined) return 'saved';
    await this.#adapter.destroy(request.id).catch(() => {});
    return full === pendingOf(request.subject) ? 'customer' : 'client';
  }

  async findRequest(id: string): Promise<ApprovalRequest | undefined> {
    return fromPayload<ApprovalRequest>(REQUEST, await this.#adapter.find(id));
  }

  /** A customer's requests still waiting for an answer, latest expiry first, at most `limit`. */
  async pendingRequests(subject: string, limit: number): Promise<ApprovalRequest[]> {
    const requests = await this.#members<ApprovalRequest>(pendingOf(subject), limit, (id) => this.findRequest(id));
    return requests.filter((request) => requestStateOf(request) === 'pending');
  }

  /**
   * Answers a request once: the one caller that wins the record's consume
   * writes its answer, and every other caller writes nothing (a denial must
   * never overwrite the approval that already made a grant) and gets the
   * record as it stands. The answer is also how an expiry is recorded, so
   * that an expired request is reported once, by whoever noticed it first.
   */
  async answer(
    request: ApprovalRequest,
    answer: { at: number; decision: ApprovalDecision; grantId?: string; reason?: string },
  ): Promise<Outcome<ApprovalRequest>> {
    if (!(await this.#adapter.consumeOnce(request.id))) {
      return { record: (await this.findRequest(request.id)) ?? request, changedNow: false };
    }
    const record: ApprovalRequest = { ...request, answer };
    // An answered request stays readable (its backend polls it) as long as an unanswered one would have.
    const keptUntil = Math.max(request.expiresAt, answer.at);
    await Promise.all([
      this.#adapter.upsert(request.id, consumed(toPayload(REQUEST, record)), keptFor(keptUntil)),
      this.#adapter.indexRemove([pendingOf(request.subject)], request.id),
    ]);
    return { record, changedNow: true };
  }

  async #members<T>(index: string, limit: number, read: (id: string) => Promise<T | undefined>): Promise<T[]> {
    const entries: IndexEntry[] = await this.#adapter.indexRange(index, undefined, limit);
    const records = await Promise.all(entries.map((entry) => read(entry.member)));
    return records.filter((record): record is Awaited<T> & T => record !== undefined);
  }
}

function keptFor(expiresAt: number): number {
  return Math.max(1, expiresAt + KEPT_AFTER_EXPIRY - Math.floor(Date.now() / 1000));
}

function consumed(payload: AdapterPayload): AdapterPayload {
  // Kept beside the record, so that a later consume still sees it taken (the memory adapter keeps it apart).
  return { ...payload, consumed: Math.floor(Date.now() / 1000) } as AdapterPayload;
}

function toPayload(kind: typeof GRANT | typeof REQUEST, record: AccessGrant | ApprovalRequest): AdapterPayload {
  // `kind` lets an adapter that lists entries tell ours from oidc-provider's, and a grant from a request.
  return { kind, ...record } as unknown as AdapterPayload;
}

function fromPayload<T extends AccessGrant | ApprovalRequest>(
  kind: typeof GRANT | typeof REQUEST,
  payload: AdapterPayload | undefined | void,
): T | undefined {
  const candidate = payload as (Partial<T> & { kind?: unknown; consumed?: unknown }) | undefined;
  if (
    candidate?.kind !== kind ||
    typeof candidate.id !== 'string' ||
    typeof candidate.subject !== 'string' ||
    typeof candidate.expiresAt !== 'number'
  ) {
    return undefined;
  }
  const { kind: _kind, consumed, ...record } = candidate;
  if (kind === REQUEST || consumed === undefined || consumed === null) return record as unknown as T;
  // A grant consumed but with no end written is being ended, or its ender failed right after
  // winning: either way it allows nothing more (else a failed end would leave it in force, and
  // every retry, losing the consume, would change nothing). A request in that state reads as
  // pending: its answer is on its way, and were it lost, the request expires on its own.
  const grant = record as unknown as AccessGrant;
  if (grant.ended) return record as unknown as T;
  const at = typeof consumed === 'number' ? consumed : Math.floor(Date.now() / 1000);
  return { ...grant, ended: { at, by: 'customer' } } as T;
}

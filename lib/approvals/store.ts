import type { AdapterPayload } from 'oidc-provider';
import type { ApprovalAdapter } from '../adapters/contracts/approvals.js';
import { recordOf, recordPayload } from '../adapters/records.js';
import { grantStateOf, requestStateOf, type AccessGrant, type ApprovalRequest, type GrantState } from './record.js';

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

/** How long a reserved place is held for a grant not saved yet (ms): far longer than a save. */
const RESERVED_FOR_MS = 5 * 60 * 1000;

/** What closing a grant or answering a request did: `changedNow` for the one caller whose change it was. */
interface Outcome<T> {
  record: T;
  changedNow: boolean;
}

/** What taking a grant's place did: taken, or which bound it reached. */
type Reservation = 'reserved' | 'too_many_in_force' | 'too_many_given';

/** Access grants and approval requests on an adapter with sorted indexes (Invariant 36). */
export class ApprovalStore {
  readonly #adapter: ApprovalAdapter;

  constructor(adapter: ApprovalAdapter) {
    this.#adapter = adapter;
  }

  /** Takes a place among grants in force and given in 24 hours, both or neither, atomically (Invariant 50); or names the bound reached. */
  async reserveGrant(grant: AccessGrant, bounds: { inForce: number; givenPerDay: number }): Promise<Reservation> {
    const reservedUntil = Math.min(grant.expiresAt * 1000, Date.now() + RESERVED_FOR_MS);
    const full = await this.#adapter.indexAddWithin(
      [
        { index: grantsOf(grant.subject), expiresAt: reservedUntil, bound: bounds.inForce },
        { index: givenBy(grant.subject), expiresAt: givenUntil(grant), bound: bounds.givenPerDay },
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
      this.#adapter.upsert(grant.id, recordPayload(GRANT, grant), keptFor(grant.expiresAt)),
      this.#adapter.indexAdd([grantsOf(grant.subject)], grant.id, grant.expiresAt * 1000),
      this.#adapter.indexAdd([givenBy(grant.subject)], grant.id, givenUntil(grant)),
    ]);
  }

  async findGrant(id: string): Promise<AccessGrant | undefined> {
    return fromPayload<AccessGrant>(GRANT, await this.#adapter.find(id));
  }

  /** A grant with its state as of the read, as the token exchange reads it (`ExchangeDependencies.customerGrants`). */
  async findGrantWithState(id: string): Promise<(AccessGrant & { state: GrantState }) | undefined> {
    const grant = await this.findGrant(id);
    return grant && { ...grant, state: grantStateOf(grant) };
  }

  /** A customer's grants in force, latest expiry first, at most `limit`. */
  async activeGrants(subject: string, limit: number): Promise<AccessGrant[]> {
    const grants = await this.#members<AccessGrant>(grantsOf(subject), limit, (id) => this.findGrant(id));
    return grants.filter((grant) => grantStateOf(grant) === 'active');
  }

  /** Ends a grant once (Invariant 36). */
  async endGrant(grant: AccessGrant, ended: NonNullable<AccessGrant['ended']>): Promise<Outcome<AccessGrant>> {
    if (!(await this.#adapter.consumeOnce(grant.id))) {
      // An ender that won the consume and failed before this left the grant counted in force.
      await this.#adapter.indexRemove([grantsOf(grant.subject)], grant.id);
      return { record: (await this.findGrant(grant.id)) ?? grant, changedNow: false };
    }
    const record: AccessGrant = { ...grant, ended };
    await Promise.all([
      this.#adapter.upsert(grant.id, consumed(recordPayload(GRANT, record)), keptFor(grant.expiresAt)),
      this.#adapter.indexRemove([grantsOf(grant.subject)], grant.id),
    ]);
    return { record, changedNow: true };
  }

  /** Saves a request, then lists it within `maxPending` per customer and `maxPerClient` per client atomically; an unlisted record is never read. */
  async saveRequest(
    request: ApprovalRequest,
    maxPending: number,
    maxPerClient?: number,
  ): Promise<'saved' | 'customer' | 'client'> {
    const keptSeconds = keptFor(request.expiresAt);
    await this.#adapter.upsert(request.id, recordPayload(REQUEST, request), keptSeconds);
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

  /** Answers a request once (Invariant 36). */
  async answer(
    request: ApprovalRequest,
    answer: NonNullable<ApprovalRequest['answer']>,
  ): Promise<Outcome<ApprovalRequest>> {
    if (!(await this.#adapter.consumeOnce(request.id)))
      return { record: (await this.findRequest(request.id)) ?? request, changedNow: false };
    const record: ApprovalRequest = { ...request, answer };
    // An answered request stays readable (its backend polls it) as long as an unanswered one would have.
    const keptUntil = Math.max(request.expiresAt, answer.at);
    await Promise.all([
      this.#adapter.upsert(request.id, consumed(recordPayload(REQUEST, record)), keptFor(keptUntil)),
      this.#adapter.indexRemove([pendingOf(request.subject)], request.id),
    ]);
    return { record, changedNow: true };
  }

  async #members<T>(index: string, limit: number, read: (id: string) => Promise<T | undefined>): Promise<T[]> {
    const entries = await this.#adapter.indexRange(index, undefined, limit);
    const records = await Promise.all(entries.map((entry) => read(entry.member)));
    return records.filter((record): record is Awaited<T> & T => record !== undefined);
  }
}

/** Until when a grant counts toward its customer's daily budget (ms). */
function givenUntil(grant: AccessGrant): number {
  return grant.createdAt * 1000 + GIVEN_WINDOW_MS;
}

function keptFor(expiresAt: number): number {
  return Math.max(1, expiresAt + KEPT_AFTER_EXPIRY - Math.floor(Date.now() / 1000));
}

function consumed(payload: AdapterPayload): AdapterPayload {
  // Kept beside the record, so that a later consume still sees it taken (the memory adapter keeps it apart).
  return { ...payload, consumed: Math.floor(Date.now() / 1000) } as AdapterPayload;
}

function fromPayload<T extends AccessGrant | ApprovalRequest>(
  kind: typeof GRANT | typeof REQUEST,
  payload: AdapterPayload | undefined | void,
): T | undefined {
  const found = recordOf<T>(kind, payload, { subject: 'string', expiresAt: 'number' });
  if (!found) return undefined;
  const { consumed, ...record } = found;
  const grant = record as unknown as AccessGrant;
  // Invariant 36: a grant consumed with no end written allows nothing.
  if (kind === REQUEST || consumed === undefined || consumed === null || grant.ended) return record as unknown as T;
  const at = typeof consumed === 'number' ? consumed : Math.floor(Date.now() / 1000);
  return { ...grant, ended: { at, by: 'customer' } } as T;
}

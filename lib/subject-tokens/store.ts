import { SUBJECT_TOKEN_MODEL } from '../adapters/models.js';
import type { AdapterPayload } from 'oidc-provider';
import type { QuotaCharge } from '../capacity.js';
import type { SubjectTokenAdapter } from '../adapters/contracts/subject-tokens.js';
import { recordOf, recordPayload } from '../adapters/records.js';
import { nowSeconds } from '../clock.js';
import { definedMembers, type JsonObject } from '../json.js';
import { hashSubjectToken, mintSubjectToken, newSubjectTokenId } from './token.js';

/** The adapter model name the subject tokens are kept under. */
export { SUBJECT_TOKEN_MODEL };

/** How long a redeemed or expired record outlives its expiry, so a late replay is told why. */
const TOMBSTONE_SECONDS = 300;

export interface SubjectTokenRecord {
  /** Non-secret id for audit events. */
  id: string;
  /** The impersonated user (account id). */
  subject: string;
  context: JsonObject;
  /** The client of the Management API caller that asked for it. */
  createdBy: string;
  /** Optional binding: only this client may redeem it. */
  clientId?: string;
  /** Optional binding: only this actor (account id) may redeem it. */
  actor?: string;
  /** The customer's access grant it was issued under: the exchange checks it again, and it bounds the session. */
  accessGrantId?: string;
  /** Issued without the customer's approval by a client allowed to bypass it (break-glass), for this reason. */
  breakGlass?: { reason: string };
  iat: number;
  exp: number;
  /** Set once, by the atomic consume. */
  consumed?: number;
  /** Set when the Management API withdrew it before redemption. */
  withdrawn?: number;
}

/** What the Management API asks for: the record's fields that are not the store's own, and a lifetime in seconds. */
export type NewSubjectToken = Pick<
  SubjectTokenRecord,
  'subject' | 'context' | 'createdBy' | 'clientId' | 'actor' | 'accessGrantId' | 'breakGlass'
> & { ttl: number };

export type FoundSubjectToken =
  | { state: 'unknown' }
  | { state: 'consumed' | 'withdrawn' | 'expired' | 'valid'; key: string; record: SubjectTokenRecord };

/** What withdrawing a subject token by its id did. */
export type Withdrawal = 'withdrawn' | 'unknown' | 'redeemed';

/** What a stored record must have, besides its id, to be read as one. */
const SHAPE = { subject: 'string', exp: 'number' } as const;

/** The entry that finds a record's store key from its public id, for withdrawal. */
const ID_POINTER = 'SubjectTokenId';

/** Save, find and redeem-once, on top of an adapter that stores only the token's hash. */
export class SubjectTokenStore {
  readonly #adapter: SubjectTokenAdapter;

  constructor(adapter: SubjectTokenAdapter) {
    this.#adapter = adapter;
  }

  /** Saves a new subject token charged to `quota` (its creator's share); undefined, writing nothing, when it is spent. */
  async create(
    input: NewSubjectToken,
    quota: QuotaCharge,
  ): Promise<{ value: string; record: SubjectTokenRecord } | undefined> {
    const value = mintSubjectToken();
    const iat = nowSeconds();
    const record: SubjectTokenRecord = {
      id: newSubjectTokenId(),
      subject: input.subject,
      context: input.context,
      createdBy: input.createdBy,
      ...definedMembers({ clientId: input.clientId, actor: input.actor, accessGrantId: input.accessGrantId }),
      ...(input.breakGlass === undefined ? {} : { breakGlass: { reason: input.breakGlass.reason } }),
      iat,
      exp: iat + input.ttl,
    };
    const key = hashSubjectToken(value);
    const expiresIn = input.ttl + TOMBSTONE_SECONDS;
    const payload = recordPayload(SUBJECT_TOKEN_MODEL, record);
    const write = { model: SUBJECT_TOKEN_MODEL, id: key, payload, expiresIn };
    const expiresAt = keptUntil(record);
    const saved = await this.#adapter.saveWithinQuotas({ write, indexes: [], expiresAt, quotas: [quota] });
    if (saved.outcome === 'spent') return undefined;
    const pointer = { kind: ID_POINTER, key } as unknown as AdapterPayload;
    await this.#adapter.upsert(record.id, pointer, expiresIn);
    return { value, record };
  }

  find(value: string): Promise<FoundSubjectToken> {
    const key = hashSubjectToken(value);
    return this.#adapter.find(key).then((payload): FoundSubjectToken => {
      const record = recordOf<SubjectTokenRecord>(SUBJECT_TOKEN_MODEL, payload, SHAPE);
      if (!record) return { state: 'unknown' };
      if (record.withdrawn) return { state: 'withdrawn', key, record };
      if (record.consumed) return { state: 'consumed', key, record };
      if (record.exp <= nowSeconds()) return { state: 'expired', key, record };
      return { state: 'valid', key, record };
    });
  }

  /** Withdraws an unredeemed token by its public id; Invariant 33 (again: `withdrawn`). */
  async withdraw(id: string): Promise<Withdrawal> {
    const pointer = (await this.#adapter.find(id)) as { kind?: unknown; key?: unknown } | undefined;
    if (pointer?.kind !== ID_POINTER || typeof pointer.key !== 'string') return 'unknown';
    const { key } = pointer;
    const record = recordOf<SubjectTokenRecord>(SUBJECT_TOKEN_MODEL, await this.#adapter.find(key), SHAPE);
    if (!record) return 'unknown';
    if (record.withdrawn) return 'withdrawn';
    if (!(await this.#adapter.consumeOnce(key))) return 'redeemed';
    const now = nowSeconds();
    const kept = Math.max(1, record.exp + TOMBSTONE_SECONDS - now);
    const withdrawn = { ...record, consumed: now, withdrawn: now };
    await this.#adapter.upsert(key, recordPayload(SUBJECT_TOKEN_MODEL, withdrawn), kept);
    return 'withdrawn';
  }

  /** Invariant 33: true for exactly one caller per token. */
  redeem(key: string): Promise<boolean> {
    return this.#adapter.consumeOnce(key);
  }
}

/** When a subject token's record leaves the store (ms since the epoch): from then on it is unknown. */
export function keptUntil(record: SubjectTokenRecord): number {
  return (record.exp + TOMBSTONE_SECONDS) * 1000;
}

import { hash } from 'node:crypto';
import type { ImpersonationEvent, ImpersonationEventName } from '../event-types.js';
import { headSignatureVerifies, type SignedHead } from './head.js';
import { checkpointText, verifierOf, type VerificationKey } from './signing.js';
import { invalidAuditQuery, notATrailRow } from '../errors/standalone.js';
import { canonicalJson, definedMembers } from '../json.js';

/** The hash the chain starts from: the `prev_hash` of row 1. */
export const GENESIS = '0'.repeat(64);

/** One row of the trail: what it says, as typed columns and as the canonical text its hash covers (null: not in its event). */
export type AuditRow = { at: string; event: string; context: unknown; outcome: string } & Record<
  'subject' | 'actor' | 'clientId' | 'resource' | 'scope' | 'subjectTokenId' | 'sessionId' | 'accessTokenId' | 'reason',
  string | null
>;

/** The fields of a row, in the order the canonical text lists them. */
export const FIELDS = [
  'at',
  'event',
  'subject',
  'actor',
  'clientId',
  'resource',
  'scope',
  'context',
  'subjectTokenId',
  'sessionId',
  'accessTokenId',
  'outcome',
  'reason',
] as const;

export function rowOf(name: ImpersonationEventName, event: ImpersonationEvent, at = new Date()): AuditRow {
  // Every field the event carries as it is (null when absent); the row's own four are then set.
  const row: Record<string, unknown> = {};
  for (const field of FIELDS) row[field] = (event as Record<string, unknown>)[field] ?? null;
  const reason =
    event.error !== undefined ? `${event.error}: ${event.reason ?? ''}` : (event.reason ?? event.endReason ?? null);
  return Object.assign(row, { at: at.toISOString(), event: name, outcome: outcomeOf(name), reason }) as AuditRow;
}

function outcomeOf(name: ImpersonationEventName): string {
  if (name.endsWith('.refused') || name.endsWith('.denied')) return 'refused';
  if (name.endsWith('.revoked') || name.endsWith('.withdrawn')) return 'revoked';
  if (name.endsWith('.ended') || name.endsWith('.expired')) return 'ended';
  return 'success';
}

/** The text a row's hash covers: a JSON array of its fields in a fixed order, object keys sorted. */
export function canonicalContent(row: AuditRow): string {
  return canonicalJson(FIELDS.map((field) => row[field]));
}

/** Each row's hash covers its number, its canonical text and the previous row's hash. */
export function rowHash(previousHash: string, seq: number | bigint | string, content: string): string {
  return hash('sha256', `${previousHash}:${seq}:${content}`, 'hex');
}

/** A row as its canonical text says it, for comparing with its typed columns. */
export function rowFromContent(content: string): AuditRow {
  const values = JSON.parse(content) as unknown[];
  if (!Array.isArray(values) || values.length !== FIELDS.length) throw notATrailRow();
  return Object.fromEntries(FIELDS.map((field, index) => [field, values[index]])) as unknown as AuditRow;
}

/** A row as a store keeps it: typed columns, the canonical text its hash covers, and its links. */
export interface ChainedRow extends AuditEntry {
  content: string;
  prevHash: string;
}

/** A row as a query answers it (memory and PostgreSQL alike): its number and hash, without the chain's inner links. */
export interface AuditEntry extends AuditRow {
  seq: number;
  hash: string;
}

/** Which check a verification failed (`problem` says it in words); docs/audit.md lists them. */
export type VerifyCheck =
  | 'tables'
  | 'row'
  | 'head'
  | 'published-head-signature'
  | 'published-head'
  | 'checkpoint-signature'
  | 'checkpoint'
  | 'checkpoint-missing';

export type VerifyResult =
  | { ok: true; count: number; checkpoints: number }
  | {
      ok: false;
      /** Rows 1 to `count` verified: with a key, only those a verifying signature pins; 0 when no row was read. */
      count: number;
      /** The row where verification failed (where the failing checkpoint or head is, for those). */
      seq: number;
      problem: string;
      check: VerifyCheck;
      /** With `checkpoint-signature`: the key id the checkpoint names (the log stores its algorithm there). */
      keyId?: string;
    };

type VerifyFailure = Extract<VerifyResult, { ok: false }>;

/** Every hash of the rows walked, for the signatures to be checked against. */
export type ChainWalk = { hashes: Map<number, string> } & (
  { ok: true; count: number } | { ok: false; failure: VerifyFailure }
);

const HEAD_MOVED = 'the chain does not end where its head says (rows were removed from the end, or the head was moved)';

/** Walks rows in ascending order, reporting the first that breaks the chain (Invariant 27); `keepHashes` for `checkSignatures`. */
export async function walkChain(
  batches: AsyncIterable<readonly ChainedRow[]> | Iterable<readonly ChainedRow[]>,
  head: () => Promise<{ seq: number; hash: string } | undefined>,
  keepHashes = false,
): Promise<ChainWalk> {
  let expectedSeq = 1;
  let previousHash = GENESIS;
  const hashes = new Map<number, string>();
  const failed = (seq: number, check: 'row' | 'head', problem: string): ChainWalk => ({
    ok: false,
    hashes,
    failure: { ok: false, count: seq - 1, seq, problem, check },
  });
  for await (const rows of batches) {
    for (const stored of rows) {
      const seq = stored.seq;
      if (seq !== expectedSeq)
        return failed(expectedSeq, 'row', `row ${expectedSeq} is missing (the next row is ${seq})`);
      const bad = (problem: string) => failed(seq, 'row', problem);
      if (stored.prevHash !== previousHash)
        return bad('its link to the previous row does not match (a row was removed, inserted or reordered)');
      if (rowHash(previousHash, seq, stored.content) !== stored.hash) return bad('its content does not match its hash');
      let claimed: AuditRow;
      try {
        claimed = rowFromContent(stored.content);
      } catch {
        return bad('its content is not a row of this trail');
      }
      if (canonicalContent(claimed) !== canonicalContent(stored))
        return bad('a column does not match the content its hash covers');
      if (keepHashes) hashes.set(seq, stored.hash);
      previousHash = stored.hash;
      expectedSeq += 1;
    }
  }
  const count = expectedSeq - 1;
  const end = await head();
  if (!end || end.seq !== count || end.hash !== previousHash) return failed(count + 1, 'head', HEAD_MOVED);
  return { ok: true, count, hashes };
}

/** A signed checkpoint as a store keeps it beside the rows. */
export interface StoredCheckpoint {
  seq: number;
  hash: string;
  signature: string;
  /** The key id stored with it (the PostgreSQL log stores the algorithm that signed it). */
  keyId?: string;
}

export interface SignatureCheck {
  key: VerificationKey;
  /** Every checkpoint the store holds, in ascending order. */
  checkpoints: readonly StoredCheckpoint[];
  /** Heads published outside the store, their signatures checked (`publishedHeadFailure`); each must be in the chain. */
  heads: readonly SignedHead[];
  /** The log's `checkpointEvery`: a chain at least this long without a checkpoint fails. */
  checkpointEvery: number;
  /** Every multiple of `checkpointEvery` up to the chain's length must have its checkpoint. */
  requireCheckpoints: boolean;
}

const ALGORITHMS: Record<string, string> = { 'hmac-sha256': 'HMAC-SHA-256', ed25519: 'Ed25519' };

/** An algorithm as a reader knows it; text read from a store is quoted, control characters escaped, never longer than 64. */
function algorithmName(alg: string): string {
  return ALGORITHMS[alg] ?? JSON.stringify(alg.slice(0, 64));
}

/** Published heads' signatures, checked before any row: a head that does not verify pins nothing. */
export function publishedHeadFailure(key: VerificationKey, heads: readonly SignedHead[]): VerifyFailure | undefined {
  const verifier = verifierOf(key);
  const given = algorithmName(verifier.kind);
  for (const head of heads) {
    if (headSignatureVerifies(verifier, head)) continue;
    const problem =
      head.alg === verifier.kind
        ? `the published head given for row ${head.seq} does not verify with the ${given} key given: it was signed with another key, or altered`
        : `the published head given for row ${head.seq} is signed with ${algorithmName(String(head.alg))}, and the key given is an ${given} key`;
    return { ok: false, count: 0, seq: head.seq, problem, check: 'published-head-signature' };
  }
  return undefined;
}

/** After a walk, checks what the key signed: only rows a verifying signature pins count as verified (Invariant 28). */
export function checkSignatures(walk: ChainWalk, check: SignatureCheck): VerifyResult {
  const { hashes } = walk;
  const verifier = verifierOf(check.key);
  const end = walk.ok ? walk.count : walk.failure.seq - 1;
  const checkpoints = new Map(check.checkpoints.map((checkpoint) => [checkpoint.seq, checkpoint]));
  const pins = [...new Set([...checkpoints.keys(), ...check.heads.map((head) => head.seq)])].sort((a, b) => a - b);

  let pinned = 0;
  let signed = 0;
  const fail = (seq: number, failed: VerifyCheck, problem: string, keyId?: string): VerifyFailure => {
    return { ok: false, count: pinned, seq, problem, check: failed, ...definedMembers({ keyId }) };
  };
  const rewritten = (seq: number, failed: 'checkpoint' | 'published-head', pin: string) =>
    fail(seq, failed, `the chain was rewritten up to here: its hash is not the one its ${pin} pins`);
  const verifies = (checkpoint: StoredCheckpoint) =>
    verifier.verify(checkpointText(checkpoint.seq, checkpoint.hash), checkpoint.signature);
  const signatureFailure = (checkpoint: StoredCheckpoint) => {
    const given = algorithmName(verifier.kind);
    const { keyId } = checkpoint;
    const named = keyId === undefined ? '' : ` (key id ${JSON.stringify(keyId.slice(0, 64))})`;
    let problem: string;
    if (keyId !== undefined && keyId !== verifier.kind)
      problem = `its signed checkpoint names key id ${JSON.stringify(keyId.slice(0, 64))}, and the key given is an ${given} key: verify with the key of that kind the trail is signed with`;
    else if (check.checkpoints.some((other) => other !== checkpoint && verifies(other)))
      problem = `its signed checkpoint${named} does not verify with the ${given} key given, though other checkpoints do: this one was forged or altered`;
    else if (check.checkpoints.length === 1)
      problem = `the trail's only signed checkpoint${named} does not verify with the ${given} key given: was the trail signed with another key?`;
    else
      problem = `none of the trail's ${check.checkpoints.length} signed checkpoints${named} verifies with the ${given} key given: was the trail signed with another key?`;
    return fail(checkpoint.seq, 'checkpoint-signature', problem, keyId);
  };

  for (const seq of pins) {
    const checkpoint = checkpoints.get(seq);
    if (seq > end) {
      // The walk's own failure comes first; past a whole chain's end, what pins a row that is not there fails.
      if (!walk.ok) break;
      if (checkpoint && !verifies(checkpoint)) return signatureFailure(checkpoint);
      const what = checkpoint ? 'signed checkpoint' : 'published head';
      const problem = `the chain ends before its ${what} at row ${seq} (rows were removed from the end)`;
      return fail(end + 1, checkpoint ? 'checkpoint' : 'published-head', problem);
    }
    if (checkpoint) {
      if (!verifies(checkpoint)) return signatureFailure(checkpoint);
      if (hashes.get(seq) !== checkpoint.hash) return rewritten(seq, 'checkpoint', 'signed checkpoint');
      signed += 1;
    }
    if (check.heads.some((head) => head.seq === seq && head.hash !== hashes.get(seq)))
      return rewritten(seq, 'published-head', 'published head');
    pinned = seq;
  }
  if (!walk.ok) return { ...walk.failure, count: pinned };

  const every = check.checkpointEvery;
  const missing = (seq: number, problem: string) => {
    pinned = pins.filter((pin) => pin < seq).at(-1) ?? 0;
    return fail(seq, 'checkpoint-missing', problem);
  };
  const unsigned = `no signed checkpoint in a chain of ${end} rows (they were deleted, or the log does not sign)`;
  if (check.checkpoints.length === 0 && end >= every) return missing(every, unsigned);
  if (check.requireCheckpoints) {
    for (let seq = every; seq <= end; seq += every)
      if (!checkpoints.has(seq)) return missing(seq, 'its signed checkpoint is missing');
  }
  return { ok: true, count: end, checkpoints: signed };
}

/** A page of a trail, newest first; its cursor is the number of its last row, base64url (null after the last page). */
export function pageOf(items: AuditEntry[], limit: number): { items: AuditEntry[]; nextCursor: string | null } {
  const last = items.length === limit ? items.at(-1) : undefined;
  return { items, nextCursor: last ? Buffer.from(String(last.seq)).toString('base64url') : null };
}

export function seqOfCursor(cursor: string): number {
  const before = Number(Buffer.from(cursor, 'base64url').toString('utf8'));
  if (!Number.isSafeInteger(before) || before < 1) throw invalidAuditQuery('cursor', 'is not one this log returned');
  return before;
}

/** `limit` of a query: default 50, at most 500. */
export function limitOf(limit: number | undefined): number {
  const value = limit ?? 50;
  if (!Number.isSafeInteger(value) || value < 1 || value > 500)
    throw invalidAuditQuery('limit', 'must be an integer from 1 to 500');
  return value;
}

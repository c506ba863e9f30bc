import { createHash } from 'node:crypto';
import type { ImpersonationEvent, ImpersonationEventName } from './events.js';
import { headSignatureVerifies, type SignedHead } from './head.js';
import { checkpointText, verifierOf, type VerificationKey } from './signing.js';
import { invalidAuditQuery, notATrailRow } from '../errors/standalone.js';

/** The hash the chain starts from: the `prev_hash` of row 1. */
export const GENESIS = '0'.repeat(64);

/** One row of the trail: what it says, as typed columns and as the canonical text its hash covers. */
export interface AuditRow {
  at: string;
  event: string;
  subject: string | null;
  actor: string | null;
  clientId: string | null;
  resource: string | null;
  scope: string | null;
  context: unknown;
  subjectTokenId: string | null;
  sessionId: string | null;
  accessTokenId: string | null;
  outcome: string;
  reason: string | null;
}

/** The fields of a row, in the order the canonical text lists them. */
const FIELDS = [
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
  return {
    at: at.toISOString(),
    event: name,
    subject: event.subject ?? null,
    actor: event.actor ?? null,
    clientId: event.clientId ?? null,
    resource: event.resource ?? null,
    scope: event.scope ?? null,
    context: event.context ?? null,
    subjectTokenId: event.subjectTokenId ?? null,
    sessionId: event.sessionId ?? null,
    accessTokenId: event.accessTokenId ?? null,
    outcome: outcomeOf(name),
    reason:
      event.error !== undefined ? `${event.error}: ${event.reason ?? ''}` : (event.reason ?? event.endReason ?? null),
  };
}

function outcomeOf(name: ImpersonationEventName): string {
  if (name.endsWith('.refused') || name.endsWith('.denied')) return 'refused';
  if (name.endsWith('.revoked') || name.endsWith('.withdrawn')) return 'revoked';
  if (name.endsWith('.ended') || name.endsWith('.expired')) return 'ended';
  return 'success';
}

/**
 * The text a row's hash covers: a JSON array of its fields in a fixed order,
 * objects with their keys sorted, so that the same row always gives the same
 * text whatever produced it.
 */
export function canonicalContent(row: AuditRow): string {
  return canonicalJson(FIELDS.map((field) => row[field]));
}

export function canonicalJson(value: unknown): string {
  if (value === null || typeof value !== 'object') return JSON.stringify(value ?? null);
  if (Array.isArray(value)) return `[${value.map(canonicalJson).join(',')}]`;
  const entries = Object.keys(value as Record<string, unknown>)
    .sort()
    .map((key) => `${JSON.stringify(key)}:${canonicalJson((value as Record<string, unknown>)[key])}`);
  return `{${entries.join(',')}}`;
}

/** Each row's hash covers its number, its canonical text and the previous row's hash. */
export function rowHash(previousHash: string, seq: number | bigint | string, content: string): string {
  return createHash('sha256').update(`${previousHash}:${seq}:${content}`, 'utf8').digest('hex');
}

/** A row as its canonical text says it, for comparing with its typed columns. */
export function rowFromContent(content: string): AuditRow {
  const values = JSON.parse(content) as unknown[];
  if (!Array.isArray(values) || values.length !== FIELDS.length) throw notATrailRow();
  return Object.fromEntries(FIELDS.map((field, index) => [field, values[index]])) as unknown as AuditRow;
}

/** A row as a store keeps it: typed columns, the canonical text its hash covers, and its links. */
export interface ChainedRow extends AuditRow {
  seq: number;
  content: string;
  prevHash: string;
  hash: string;
}

/** A row as a query answers it (memory and PostgreSQL alike): its number and hash, without the chain's inner links. */
export interface AuditEntry extends AuditRow {
  seq: number;
  hash: string;
}

export type VerifyResult =
  { ok: true; count: number; checkpoints: number } | { ok: false; count: number; seq: number; problem: string };

export type ChainWalk =
  { ok: true; count: number; lastHash: string; hashes: Map<number, string> } | Extract<VerifyResult, { ok: false }>;

/**
 * Walks rows given in ascending order: numbers without gaps from 1, each
 * `prevHash` the previous row's hash, each hash over its number and content,
 * each typed column what the content says, and the head where the chain ends.
 * Reports the first row that breaks any of these. Every store verifies with it.
 */
export async function walkChain(
  batches: AsyncIterable<readonly ChainedRow[]>,
  head: () => Promise<{ seq: number; hash: string } | undefined>,
  keepHashes = false,
): Promise<ChainWalk> {
  let expectedSeq = 1;
  let previousHash = GENESIS;
  const hashes = new Map<number, string>();
  for await (const rows of batches) {
    for (const stored of rows) {
      const seq = stored.seq;
      const count = expectedSeq - 1;
      const bad = (problem: string) => ({ ok: false as const, count, seq, problem });
      if (seq !== expectedSeq)
        return {
          ok: false,
          count,
          seq: expectedSeq,
          problem: `row ${expectedSeq} is missing (the next row is ${seq})`,
        };
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
  if (!end || end.seq !== count || end.hash !== previousHash) {
    return {
      ok: false,
      count,
      seq: count + 1,
      problem: 'the chain does not end where its head says (rows were removed from the end, or the head was moved)',
    };
  }
  return { ok: true, count, lastHash: previousHash, hashes };
}

/** A signed checkpoint as a store keeps it beside the rows. */
export interface StoredCheckpoint {
  seq: number;
  hash: string;
  signature: string;
}

export interface SignatureCheck {
  key: VerificationKey;
  /** Every checkpoint the store holds, in ascending order. */
  checkpoints: readonly StoredCheckpoint[];
  /** Heads published outside the store (the last one is enough); each must be in the chain. */
  heads: readonly SignedHead[];
  /** The log's `checkpointEvery`: a chain at least this long without a checkpoint fails. */
  checkpointEvery: number;
  /** Every multiple of `checkpointEvery` up to the chain's length must have its checkpoint. */
  requireCheckpoints: boolean;
}

/**
 * After a walk that found the rows consistent, checks what the key signed:
 * every checkpoint's signature and hash; every published head's signature,
 * and that the chain still reaches it with the hash it pins (a chain cut back
 * below a published head, or rewritten up to it, fails); and that a chain long
 * enough to have checkpoints has them. The memory and PostgreSQL logs share it.
 */
export function checkSignatures(walk: Extract<ChainWalk, { ok: true }>, check: SignatureCheck): VerifyResult {
  const { count, hashes } = walk;
  const fail = (seq: number, problem: string) => ({ ok: false as const, count, seq, problem });
  const verifier = verifierOf(check.key);
  for (const head of check.heads) {
    if (!headSignatureVerifies(verifier, head))
      return fail(head.seq, 'the published head given does not verify with this key');
    if (head.seq > count)
      return fail(
        count + 1,
        `the chain ends before its published head at row ${head.seq} (rows were removed from the end)`,
      );
    if (hashes.get(head.seq) !== head.hash)
      return fail(head.seq, 'the chain was rewritten up to here: its hash is not the one its published head pins');
  }
  const signed = new Set<number>();
  for (const checkpoint of check.checkpoints) {
    if (!verifier.verify(checkpointText(checkpoint.seq, checkpoint.hash), checkpoint.signature))
      return fail(checkpoint.seq, "its checkpoint's signature does not verify");
    if (checkpoint.seq > count || hashes.get(checkpoint.seq) !== checkpoint.hash)
      return fail(
        checkpoint.seq,
        'the chain was rewritten up to here: its hash is not the one its signed checkpoint pins',
      );
    signed.add(checkpoint.seq);
  }
  if (signed.size === 0 && count >= check.checkpointEvery)
    return fail(
      check.checkpointEvery,
      `no signed checkpoint in a chain of ${count} rows (they were deleted, or the log does not sign)`,
    );
  if (check.requireCheckpoints) {
    for (let seq = check.checkpointEvery; seq <= count; seq += check.checkpointEvery) {
      if (!signed.has(seq)) return fail(seq, 'its signed checkpoint is missing');
    }
  }
  return { ok: true, count, checkpoints: signed.size };
}

/** Paging cursors of a trail: the number of the last row of the page, base64url. */
export function cursorOfSeq(seq: number): string {
  return Buffer.from(String(seq)).toString('base64url');
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

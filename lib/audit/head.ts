/** Signed heads, published where the database's administrator cannot rewrite them (Invariant 28). */
import type { Signer, SignatureAlgorithm, Verifier } from './signing.js';
import { invalidPublishedHead } from '../errors/standalone.js';

export interface SignedHead {
  /** The number of rows the chain had. */
  seq: number;
  /** The hash of row `seq`. */
  hash: string;
  /** When it was signed (RFC 3339). */
  at: string;
  alg: SignatureAlgorithm;
  /** base64url, over `impersonation-audit-head:{seq}:{hash}:{at}`. */
  signature: string;
}

/** Receives each signed head as it is made; resolves once it is stored where the database's administrator cannot change it. */
export type HeadPublisher = (head: SignedHead) => Promise<void>;

function headText(seq: number, hash: string, at: string): string {
  return `impersonation-audit-head:${seq}:${hash}:${at}`;
}

export function signHead(signer: Signer, seq: number, hash: string, at = new Date()): SignedHead {
  const time = at.toISOString();
  return { seq, hash, at: time, alg: signer.kind, signature: signer.sign(headText(seq, hash, time)) };
}

export function headSignatureVerifies(verifier: Verifier, head: SignedHead): boolean {
  return head.alg === verifier.kind && verifier.verify(headText(head.seq, head.hash, head.at), head.signature);
}

const HASH = /^[0-9a-f]{64}$/;

/** A head as published (a parsed JSON line), checked field by field; throws a TypeError naming what is wrong. */
export function headOf(value: unknown): SignedHead {
  const head = value as Partial<Record<keyof SignedHead, unknown>> | null;
  if (typeof head !== 'object' || head === null) throw invalidPublishedHead('is a JSON object');
  const { seq, hash, at, alg, signature } = head;
  if (typeof seq !== 'number' || !Number.isSafeInteger(seq) || seq < 1)
    throw invalidPublishedHead('has a positive integer seq');
  if (typeof hash !== 'string' || !HASH.test(hash)) throw invalidPublishedHead('has a SHA-256 hash (hex)');
  if (typeof at !== 'string' || Number.isNaN(Date.parse(at))) throw invalidPublishedHead('has a time at');
  if (alg !== 'hmac-sha256' && alg !== 'ed25519') throw invalidPublishedHead('has alg hmac-sha256 or ed25519');
  if (typeof signature !== 'string' || !signature) throw invalidPublishedHead('has a signature');
  return { seq, hash, at, alg, signature };
}

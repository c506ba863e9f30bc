/**
 * The demo resource API (https://api.example.com): accepts JWT access tokens
 * of the identity service for that resource, verified by the package's
 * resource-server helper, which also refuses tokens of revoked impersonation
 * sessions within a second. It honours their sender constraint. A DPoP-bound token (`cnf.jkt`) counts only with the DPoP scheme
 * and a fresh proof of the same key for this very request (RFC 9449 7.1): a
 * stolen copy presented as Bearer, or with another key's proof, is refused.
 */
import { hash } from 'node:crypto';
import { calculateJwkThumbprint, EmbeddedJWK, jwtVerify, type JWTPayload } from 'jose';
import type Koa from 'koa';
import { LRUCache } from 'lru-cache';
import { ImpersonationTokenError, type ImpersonationVerifier } from '../lib/resource-server/index.js';
import { HttpError } from './http.js';

export interface ResourceApiOptions {
  /** Verifies the token's signature, issuer, audience and impersonation session. */
  verifier: ImpersonationVerifier;
  /** The URL this API is reached at, as a DPoP proof's `htu` must name it. */
  publicUrl: (ctx: Koa.Context) => string;
}

/** How far a proof's `iat` may be from now, seconds. */
const PROOF_WINDOW = 60;
const PROOF_ALGORITHMS = [
  'ES256',
  'ES384',
  'ES512',
  'PS256',
  'PS384',
  'PS512',
  'RS256',
  'RS384',
  'RS512',
  'EdDSA',
  'Ed25519',
];

export type VerifiedRequest = JWTPayload & { sub: string; exp: number };

export function createTokenCheck(options: ResourceApiOptions) {
  // Proofs seen, until they could no longer pass the iat window: a replayed proof is refused.
  const seenProofs = new LRUCache<string, true>({ max: 100_000, ttl: PROOF_WINDOW * 2 * 1000, ttlResolution: 0 });

  return async function verifyRequest(ctx: Koa.Context): Promise<VerifiedRequest> {
    const [scheme, token] = credentials(ctx.get('authorization'));
    if (!token) {
      ctx.set('WWW-Authenticate', 'Bearer, DPoP');
      throw new HttpError(401, 'invalid_token', 'a Bearer or DPoP access token is required');
    }
    let payload: JWTPayload;
    try {
      ({ payload } = await options.verifier.verify(token));
    } catch (error) {
      if (!(error instanceof ImpersonationTokenError)) throw error;
      if (error.status === 503) throw new HttpError(503, 'temporarily_unavailable', error.message);
      throw refused(
        ctx,
        scheme,
        error.code === 'session_revoked'
          ? error.message
          : `the access token is not valid for this API: ${error.message}`,
      );
    }
    const cnf = payload['cnf'] as { jkt?: unknown; 'x5t#S256'?: unknown } | undefined;
    if (cnf?.['x5t#S256'] !== undefined) {
      throw refused(ctx, scheme, 'certificate-bound access tokens are not accepted by this API');
    }
    if (cnf?.jkt !== undefined || scheme === 'dpop') {
      if (scheme !== 'dpop' || typeof cnf?.jkt !== 'string') {
        throw refused(ctx, 'dpop', 'this access token is DPoP-bound: present it with the DPoP scheme and a proof');
      }
      await verifyProof(ctx, token, cnf.jkt, options.publicUrl(ctx), seenProofs);
    }
    return payload as VerifiedRequest;
  };
}

async function verifyProof(
  ctx: Koa.Context,
  token: string,
  jkt: string,
  htu: string,
  seenProofs: LRUCache<string, true>,
): Promise<void> {
  const proof = ctx.get('dpop');
  if (!proof || proof.includes(','))
    throw refused(ctx, 'dpop', 'exactly one DPoP proof is required', 'invalid_dpop_proof');
  let payload: JWTPayload;
  let thumbprint: string;
  try {
    const verified = await jwtVerify(proof, EmbeddedJWK, { typ: 'dpop+jwt', algorithms: PROOF_ALGORITHMS });
    payload = verified.payload;
    thumbprint = await calculateJwkThumbprint(verified.protectedHeader.jwk!);
  } catch {
    throw refused(ctx, 'dpop', 'the DPoP proof is invalid', 'invalid_dpop_proof');
  }
  const now = Math.floor(Date.now() / 1000);
  if (thumbprint !== jkt)
    throw refused(
      ctx,
      'dpop',
      'the DPoP proof is signed by another key than the token is bound to',
      'invalid_dpop_proof',
    );
  if (payload['htm'] !== ctx.method || payload['htu'] !== htu)
    throw refused(ctx, 'dpop', 'the DPoP proof is for another request', 'invalid_dpop_proof');
  if (typeof payload.iat !== 'number' || Math.abs(now - payload.iat) > PROOF_WINDOW)
    throw refused(ctx, 'dpop', 'the DPoP proof is not fresh', 'invalid_dpop_proof');
  if (payload['ath'] !== hash('sha256', token, 'base64url'))
    throw refused(ctx, 'dpop', 'the DPoP proof is for another access token', 'invalid_dpop_proof');
  if (typeof payload.jti !== 'string' || !payload.jti)
    throw refused(ctx, 'dpop', 'the DPoP proof has no jti', 'invalid_dpop_proof');
  const seen = `${thumbprint}:${payload.jti}`;
  if (seenProofs.has(seen)) throw refused(ctx, 'dpop', 'the DPoP proof was already used', 'invalid_dpop_proof');
  seenProofs.set(seen, true);
}

function credentials(header: string): [scheme: 'bearer' | 'dpop' | undefined, token: string | undefined] {
  const match = /^(Bearer|DPoP) +([A-Za-z0-9\-._~+/]+=*) *$/i.exec(header);
  if (!match) return [undefined, undefined];
  return [match[1]!.toLowerCase() as 'bearer' | 'dpop', match[2]];
}

function refused(
  ctx: Koa.Context,
  scheme: 'bearer' | 'dpop' | undefined,
  reason: string,
  error: 'invalid_token' | 'invalid_dpop_proof' = 'invalid_token',
): HttpError {
  ctx.set('WWW-Authenticate', `${scheme === 'dpop' ? 'DPoP' : 'Bearer'} error="${error}"`);
  return new HttpError(401, error, reason);
}

import { createLocalJWKSet, createRemoteJWKSet, type JSONWebKeySet, type JWTVerifyGetKey } from 'jose';
import { optionChecks, type OptionChecks } from '../config/checks.js';
import { ID_JAG_DEFAULTS, ID_JAG_MAXIMA } from '../config/defaults.js';

/** An identity provider whose ID-JAGs are redeemed: its issuer identifier, and its public keys or an https URL of them. */
export type TrustedIssuer = { issuer: string; jwks?: JSONWebKeySet | undefined; jwksUri?: string | undefined };

/** Redeeming ID-JAGs with the jwt-bearer grant (docs/cross-app-access.md); nothing is accepted without it. */
export interface IdJagOptions {
  trustedIssuers: TrustedIssuer[];
  /** Redemptions per hour by one client; one issuer's assertions, ten times that; beyond either, 429. Default 1,000. */
  maxRedemptionsPerClient?: number | undefined;
}

/** Each trusted issuer's keys, by its issuer identifier; a client's hourly share. */
export interface ResolvedIdJagOptions {
  readonly trustedIssuers: ReadonlyMap<string, JWTVerifyGetKey>;
  readonly maxRedemptionsPerClient: number;
}

const NAMES: Array<keyof IdJagOptions> = ['trustedIssuers', 'maxRedemptionsPerClient'];
const ISSUER_NAMES: Array<keyof TrustedIssuer> = ['issuer', 'jwks', 'jwksUri'];
/** Hosts whose keys may be fetched over http. */
const LOCAL = new Set(['localhost', '127.0.0.1', '[::1]']);

const check: OptionChecks = optionChecks('createImpersonation');

/** `idJag`, checked at start-up: each issuer once, with its keys. */
export function resolveIdJagOptions(input: IdJagOptions): ResolvedIdJagOptions {
  check.object('idJag', input);
  check.known(input, NAMES, 'idJag.');
  const { trustedIssuers: entries, maxRedemptionsPerClient = ID_JAG_DEFAULTS.maxRedemptionsPerClient } = input;
  if (!Array.isArray(entries) || !entries.length) check.fail('idJag.trustedIssuers', 'must be a non-empty array');
  const trustedIssuers = new Map<string, JWTVerifyGetKey>();
  entries.forEach((entry, at) => {
    const name = `idJag.trustedIssuers[${at}]`;
    check.object(name, entry);
    check.known(entry, ISSUER_NAMES, `${name}.`);
    const { issuer, jwks, jwksUri } = entry;
    if (typeof issuer !== 'string' || !issuer || trustedIssuers.has(issuer)) check.fail(name, 'needs an issuer, once');
    if ((jwks === undefined) === (jwksUri === undefined)) check.fail(name, 'needs "jwks" or "jwksUri", not both');
    if (jwks !== undefined && !Array.isArray(jwks?.keys)) check.fail(`${name}.jwks`, 'must be { keys: [...] }');
    const url = URL.parse(String(jwksUri));
    if (jwks === undefined && url?.protocol !== 'https:' && !(url?.protocol === 'http:' && LOCAL.has(url.hostname))) {
      check.fail(`${name}.jwksUri`, 'must be an https URL (http only on a loopback host)');
    }
    trustedIssuers.set(issuer, jwks ? createLocalJWKSet(jwks) : createRemoteJWKSet(url!));
  });
  check.integer('idJag.maxRedemptionsPerClient', maxRedemptionsPerClient, ID_JAG_MAXIMA.maxRedemptionsPerClient);
  return Object.freeze({ trustedIssuers, maxRedemptionsPerClient });
}

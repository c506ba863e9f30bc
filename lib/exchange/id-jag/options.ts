import { createLocalJWKSet, createRemoteJWKSet, type JSONWebKeySet, type JWTVerifyGetKey } from 'jose';
import { optionChecks, type OptionChecks } from '../../config/checks.js';
import { ID_JAG_DEFAULTS, ID_JAG_MAXIMA } from '../../config/defaults.js';

/** An identity provider whose ID-JAGs this server redeems, and where its public keys are. */
export interface TrustedIssuer {
  /** Its issuer identifier, compared exactly with the assertion's `iss`. */
  issuer: string;
  /** Its public keys, given here; or `jwksUri`. */
  jwks?: JSONWebKeySet | undefined;
  /** Where its public keys are fetched (https, or http on a loopback host); or `jwks`. */
  jwksUri?: string | undefined;
}

/** Redeeming Identity Assertion JWT Authorization Grants (docs/cross-app-access.md). Default: none. */
export interface IdJagOptions {
  trustedIssuers: TrustedIssuer[];
  /** Longest an assertion may live, seconds, from `iat` and until `exp`. Default 300; at most 3600. */
  maxAssertionLifetime?: number | undefined;
  /** Redemptions per hour of one issuer's assertions; beyond them, 429. Default 10,000. */
  maxRedemptionsPerIssuer?: number | undefined;
  /** Redemptions per hour by one client; beyond them, 429. Default 1,000. */
  maxRedemptionsPerClient?: number | undefined;
}

export type ResolvedIdJagOptions = Readonly<{
  /** Each trusted issuer's keys, by its identifier. */
  trustedIssuers: ReadonlyMap<string, JWTVerifyGetKey>;
  maxAssertionLifetime: number;
  maxRedemptionsPerIssuer: number;
  maxRedemptionsPerClient: number;
}>;

const NAMES = Object.keys({
  trustedIssuers: true,
  maxAssertionLifetime: true,
  maxRedemptionsPerIssuer: true,
  maxRedemptionsPerClient: true,
} satisfies Record<keyof IdJagOptions, true>);

const ISSUER_NAMES = Object.keys({ issuer: true, jwks: true, jwksUri: true } satisfies Record<keyof TrustedIssuer, true>);

const LOOPBACK = new Set(['localhost', '127.0.0.1', '[::1]']);

const check: OptionChecks = optionChecks('createImpersonation');

/** `idJag`, checked at start-up: each issuer named once, with its keys or where they are. */
export function resolveIdJagOptions(input: IdJagOptions): ResolvedIdJagOptions {
  check.object('idJag', input);
  check.known(input, NAMES, 'idJag.');
  const { trustedIssuers } = input;
  if (!Array.isArray(trustedIssuers) || !trustedIssuers.length) {
    check.fail('idJag.trustedIssuers', 'must be a non-empty array of { issuer, jwks | jwksUri }');
  }
  const issuers = new Map<string, JWTVerifyGetKey>();
  trustedIssuers.forEach((entry, at) => {
    const name = `idJag.trustedIssuers[${at}]`;
    check.object(name, entry);
    check.known(entry, ISSUER_NAMES, `${name}.`);
    if (typeof entry.issuer !== 'string' || !URL.canParse(entry.issuer)) check.fail(`${name}.issuer`, 'must be a URL');
    if (issuers.has(entry.issuer)) check.fail(`${name}.issuer`, 'names an issuer listed already');
    if ((entry.jwks === undefined) === (entry.jwksUri === undefined)) check.fail(name, 'needs "jwks" or "jwksUri"');
    issuers.set(entry.issuer, entry.jwks ? localKeys(`${name}.jwks`, entry.jwks) : remoteKeys(`${name}.jwksUri`, entry.jwksUri));
  });
  return Object.freeze({
    trustedIssuers: issuers,
    maxAssertionLifetime: limit(input, 'maxAssertionLifetime'),
    maxRedemptionsPerIssuer: limit(input, 'maxRedemptionsPerIssuer'),
    maxRedemptionsPerClient: limit(input, 'maxRedemptionsPerClient'),
  });
}

function limit(input: IdJagOptions, name: keyof typeof ID_JAG_DEFAULTS): number {
  return check.integerOr(`idJag.${name}`, input[name], ID_JAG_DEFAULTS[name], ID_JAG_MAXIMA[name]);
}

function localKeys(name: string, jwks: unknown): JWTVerifyGetKey {
  try {
    return createLocalJWKSet(jwks as JSONWebKeySet);
  } catch {
    return check.fail(name, 'must be a JSON Web Key Set ({ keys: [...] }) of public keys');
  }
}

function remoteKeys(name: string, uri: unknown): JWTVerifyGetKey {
  const url = typeof uri === 'string' ? URL.parse(uri) : null;
  if (!url || !(url.protocol === 'https:' || (url.protocol === 'http:' && LOOPBACK.has(url.hostname)))) {
    check.fail(name, 'must be an https URL (http only on a loopback host)');
  }
  return createRemoteJWKSet(url);
}

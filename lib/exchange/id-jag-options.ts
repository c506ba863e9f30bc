import { createLocalJWKSet, createRemoteJWKSet, errors, type JSONWebKeySet, type JWTVerifyGetKey } from 'jose';
import type { CanBePromise } from 'oidc-provider';
import { optionChecks, type OptionChecks } from '../config/checks.js';
import type { ExchangeDecision } from '../config/decisions.js';
import {
  ID_JAG_DEFAULTS,
  ID_JAG_ISSUANCE_DEFAULTS,
  ID_JAG_ISSUANCE_MAXIMA as ISSUANCE_MAXIMA,
  ID_JAG_MAXIMA,
} from '../config/defaults.js';
import { issuerKeysUnavailable } from '../errors.js';
import { POLL_OPTION_NAMES, secureUrl, type SsfPollOptions } from '../resource-server/ssf-poll.js';

/** RFC 7523 3 (4, 6): seconds an assertion may be old, or live ahead. */
export const MAX_ASSERTION_LIFETIME = 300;
/** The clock tolerance for assertions, at most: a redeemed `jti` is kept past it by every instance (Invariant 37). */
export const MAX_CLOCK_SKEW = 60;

/** A verified ID-JAG's claims, as a trusted issuer's `accountOf` reads them. */
export type IdJagAssertion = Readonly<Record<string, unknown>> & { iss: string; sub: string; client_id: string };

/** An identity provider whose ID-JAGs are redeemed: its issuer identifier, its public keys or an https URL of them, and whose account each of its subjects is here. */
export type TrustedIssuer = {
  issuer: string;
  jwks?: JSONWebKeySet | undefined;
  jwksUri?: string | undefined;
  /** The local account the assertion's subject (`sub`, `tenant`, `aud_sub`) is, or undefined: then refused. */
  accountOf: (assertion: IdJagAssertion) => string | undefined | Promise<string | undefined>;
  /** The issuer's SSF stream this server polls: a stop there ends the tokens its ID-JAGs were redeemed for here. */
  ssf?: SsfPollOptions | undefined;
};

/** What a trusted issuer is held to: its keys, the accounts it may name, the stream of its stops. */
export interface ResolvedIssuer {
  keys: JWTVerifyGetKey;
  accountOf: TrustedIssuer['accountOf'];
  ssf?: SsfPollOptions | undefined;
}

/** What `canRedeem` decides on: the client, the account `accountOf` named, `act.sub`, the issuer, the token's resource and scopes. */
export interface IdJagRedeemInput {
  clientId: string;
  subject: string;
  actor?: string;
  issuer: string;
  resource: string;
  scope: string[];
}

/** Redeeming ID-JAGs with the jwt-bearer grant (docs/cross-app-access.md); nothing is accepted without it. */
export interface IdJagOptions {
  trustedIssuers: TrustedIssuer[];
  /** Decides each redemption before its `jti` is taken: allow, refuse, or narrow the scopes (never widen). Default: allow. */
  canRedeem?: ((input: IdJagRedeemInput) => ExchangeDecision | Promise<ExchangeDecision>) | undefined;
  /** Redemptions per hour by one client; one issuer's assertions, ten times that; beyond either, 429. Default 1,000. */
  maxRedemptionsPerClient?: number | undefined;
  /** Session stops one issuer's stream may mark here per hour; beyond, its stream goes stale (its ID-JAGs 503). Default 10,000. */
  maxStopsPerIssuer?: number | undefined;
}

/** Each trusted issuer's keys, by its issuer identifier; the redemption policy; a client's hourly share. */
export interface ResolvedIdJagOptions {
  readonly trustedIssuers: ReadonlyMap<string, ResolvedIssuer>;
  readonly canRedeem?: IdJagOptions['canRedeem'];
  readonly maxRedemptionsPerClient: number;
  readonly maxStopsPerIssuer: number;
}

const NAMES: (keyof IdJagOptions)[] = ['trustedIssuers', 'canRedeem', 'maxRedemptionsPerClient', 'maxStopsPerIssuer'];
const ISSUER_NAMES: (keyof TrustedIssuer)[] = ['issuer', 'jwks', 'jwksUri', 'accountOf', 'ssf'];

const check: OptionChecks = optionChecks('createImpersonation');

/** `idJag`, checked at start-up: each issuer once, with its keys. */
export function resolveIdJagOptions(input: IdJagOptions): ResolvedIdJagOptions {
  check.object('idJag', input);
  check.known(input, NAMES, 'idJag.');
  const { trustedIssuers: entries, maxRedemptionsPerClient = ID_JAG_DEFAULTS.maxRedemptionsPerClient } = input;
  const { maxStopsPerIssuer = ID_JAG_DEFAULTS.maxStopsPerIssuer, canRedeem } = input;
  check.optionalFunction('idJag.canRedeem', canRedeem);
  if (!Array.isArray(entries) || !entries.length) check.fail('idJag.trustedIssuers', 'must be a non-empty array');
  const trustedIssuers = new Map<string, ResolvedIssuer>();
  entries.forEach((entry, at) => {
    const name = `idJag.trustedIssuers[${at}]`;
    check.object(name, entry);
    check.known(entry, ISSUER_NAMES, `${name}.`);
    const { issuer, jwks, jwksUri, accountOf, ssf } = entry;
    if (!secureUrl(issuer) || trustedIssuers.has(issuer))
      check.fail(name, 'needs an https issuer identifier (http only on a loopback host), once');
    if (typeof accountOf !== 'function')
      check.fail(`${name}.accountOf`, "must be a function naming the issuer's subjects' accounts");
    if ((jwks === undefined) === (jwksUri === undefined)) check.fail(name, 'needs "jwks" or "jwksUri", not both');
    if (jwks !== undefined && !Array.isArray(jwks?.keys)) check.fail(`${name}.jwks`, 'must be { keys: [...] }');
    const url = jwks === undefined ? secureUrl(jwksUri) : undefined;
    if (jwks === undefined && !url)
      check.fail(`${name}.jwksUri`, 'must be an https URL (http only on a loopback host)');
    if (ssf !== undefined) checkStream(`${name}.ssf`, ssf);
    trustedIssuers.set(issuer, {
      keys: jwks ? createLocalJWKSet(jwks) : fetchedKeys(createRemoteJWKSet(url!)),
      accountOf,
      ssf,
    });
  });
  check.integer('idJag.maxRedemptionsPerClient', maxRedemptionsPerClient, ID_JAG_MAXIMA.maxRedemptionsPerClient);
  check.integer('idJag.maxStopsPerIssuer', maxStopsPerIssuer, ID_JAG_MAXIMA.maxStopsPerIssuer);
  return Object.freeze({ trustedIssuers, canRedeem, maxRedemptionsPerClient, maxStopsPerIssuer });
}

/** A poll receiver's options: an endpoint, an access token, the audience of its SETs. */
function checkStream(name: string, ssf: SsfPollOptions): void {
  check.object(name, ssf);
  check.known(ssf, POLL_OPTION_NAMES, `${name}.`);
  if (ssf.delivery !== undefined && ssf.delivery !== 'poll') check.fail(`${name}.delivery`, 'must be "poll"');
  if (!ssf.endpoint || !ssf.accessToken || typeof ssf.audience !== 'string' || !ssf.audience) {
    check.fail(name, 'needs "endpoint", "accessToken" and "audience"');
  }
  if (typeof ssf.endpoint !== 'function' && !secureUrl(ssf.endpoint))
    check.fail(`${name}.endpoint`, 'must be an https URL (http only on a loopback host), or a function resolving one');
}

/** Keys fetched from `jwksUri`: a set that cannot be fetched or read is an outage, not a bad assertion. */
function fetchedKeys(remote: JWTVerifyGetKey): JWTVerifyGetKey {
  return async (header, token) => {
    try {
      return await remote(header, token);
    } catch (error) {
      if (error instanceof errors.JWKSNoMatchingKey || error instanceof errors.JWKSMultipleMatchingKeys) throw error;
      throw issuerKeysUnavailable();
    }
  };
}

/** What `canIssue` decides on: the client, the user, the other authorization server, and what the ID-JAG would say. */
export interface IdJagIssueInput {
  clientId: string;
  subject: string;
  /** Who acts for the user, when the request carries an actor token: the user or client that token names. */
  actor?: string;
  audience: string;
  resource: string[];
  scope: string[];
}

/** The user and the client as the audience knows them: each member given replaces or adds that claim of the ID-JAG. */
export type IdJagSubjectAtAudience = Partial<Record<'sub' | 'aud_sub' | 'tenant' | 'client_id', string>>;

/** Issuing ID-JAGs at the token-exchange grant to clients whose `id_jag_audiences` metadata names the audience. */
export interface IdJagIssuanceOptions {
  /** Decides each issue: allow, refuse, or narrow the scopes (never widen). Default: allow. */
  canIssue?: ((input: IdJagIssueInput) => ExchangeDecision | Promise<ExchangeDecision>) | undefined;
  /** Asked once the policy allowed, with its scopes: the draft's Cross-Domain Client ID Handling. Default: the local names. */
  subjectAtAudience?: ((input: IdJagIssueInput) => CanBePromise<IdJagSubjectAtAudience | undefined>) | undefined;
  /** ID-JAGs issued per hour for one user at one client; beyond, 429. Default 100. */
  maxPerUser?: number | undefined;
  /** ID-JAGs issued per hour to one client; beyond, 429. Default 5,000. */
  maxPerClient?: number | undefined;
}

export type ResolvedIdJagIssuanceOptions = Readonly<
  IdJagIssuanceOptions & Required<Pick<IdJagIssuanceOptions, 'maxPerUser' | 'maxPerClient'>>
>;

/** `idJagIssuance`, checked at start-up. */
export function resolveIdJagIssuanceOptions(input: IdJagIssuanceOptions): ResolvedIdJagIssuanceOptions {
  check.object('idJagIssuance', input);
  check.known(input, ['canIssue', 'subjectAtAudience', 'maxPerUser', 'maxPerClient'], 'idJagIssuance.');
  check.optionalFunction('idJagIssuance.canIssue', input.canIssue);
  check.optionalFunction('idJagIssuance.subjectAtAudience', input.subjectAtAudience);
  const { maxPerUser, maxPerClient } = ID_JAG_ISSUANCE_DEFAULTS;
  return Object.freeze({
    canIssue: input.canIssue,
    subjectAtAudience: input.subjectAtAudience,
    maxPerUser: check.integerOr('idJagIssuance.maxPerUser', input.maxPerUser, maxPerUser, ISSUANCE_MAXIMA.maxPerUser),
    maxPerClient: check.integerOr(
      'idJagIssuance.maxPerClient',
      input.maxPerClient,
      maxPerClient,
      ISSUANCE_MAXIMA.maxPerClient,
    ),
  });
}

/** The jwt-bearer grant (RFC 7523) for Identity Assertion JWT Authorization Grants, redeemed here (docs/cross-app-access.md). */
import { decodeJwt, errors, jwtVerify, type JWTPayload } from 'jose';
import type { KoaContextWithOIDC, ResourceServerInstance } from 'oidc-provider';
import { isObject, scopeSet } from '../access-token.js';
import { redemptionQuotas, type DelegationCharge } from '../capacity.js';
import { nowSeconds } from '../clock.js';
import { DELEGATION_MAXIMA } from '../config/defaults.js';
import * as refuse from '../errors.js';
import { EVENTS, type ImpersonationEvent } from '../event-types.js';
import { announce } from '../events/publish.js';
import * as internals from '../provider-internals.js';
import { newSessionId, SESSION_CLAIM, type SessionRecord } from '../sessions/record.js';
import { isStorableText } from '../storable-text.js';
import { accountExists } from './account.js';
import type { ActClaim } from './actor.js';
import { commit } from './commit.js';
import { MAX_ASSERTION_LIFETIME, MAX_CLOCK_SKEW } from './id-jag-options.js';
import type { IdJagRedeemInput, ResolvedIdJagOptions, ResolvedIssuer } from './id-jag-options.js';
import { issuerDigestOf, type IssuerStreams } from './id-jag-streams.js';
import type { ExchangeDependencies } from './kind.js';
import { decide } from './policy.js';
import { grantedScopes, resolveSingleResource } from './request.js';
import { respond } from './respond.js';
import { newExchangeToken } from './token.js';

export const JWT_BEARER_GRANT = 'urn:ietf:params:oauth:grant-type:jwt-bearer';
/** `authorization_grant_profiles_supported`'s value for the ID-JAG profile. */
export const ID_JAG_PROFILE = 'urn:ietf:params:oauth:grant-profile:id-jag';
/** Seconds a redeemed `jti` is kept past `exp`: past any instance's tolerance and the stores' clocks' drift. */
const REDEEMED_KEPT = 2 * MAX_CLOCK_SKEW;
/** The claims jose names when their check fails. */
const CHECKED_CLAIMS = new Set(['typ', 'aud', 'iss', 'exp', 'iat', 'nbf', 'sub', 'jti']);
/** Characters of an asserted `act` chain the token and its session carry, at most. */
const MAX_ACT_LENGTH = 2048;
/** How a redemption's refusals name its policy. */
const REDEMPTION_POLICY = { policy: 'the redemption policy', refused: 'this redemption' };

type IdJagEventName = typeof EVENTS.idJagIssued | typeof EVENTS.idJagRedeemed;

type IdJagClaims = JWTPayload & Record<'iss' | 'sub' | 'client_id' | 'jti', string> & { exp: number; act?: ActClaim };

/** What the grant handler works with: the route's sessions, trail and token claims, its options, the issuers' streams. */
export type IdJagDependencies = Pick<ExchangeDependencies, 'sessions' | 'bus' | 'claims'> & {
  options: ResolvedIdJagOptions;
  streams: IssuerStreams;
};

/** The grant handler: the assertion and the request checked, the token and its session committed with the assertion taken once. */
export function createIdJagHandler({ options, sessions, bus, claims: tokenClaims, streams }: IdJagDependencies) {
  return async function idJagGrant(ctx: KoaContextWithOIDC): Promise<void> {
    const startedAt = Date.now();
    const client = ctx.oidc.client!;
    // The draft's Security Considerations: only confidential clients redeem assertions.
    if (client.clientAuthMethod === 'none') throw refuse.invalidClient('the grant needs client authentication');
    const { assertion } = ctx.oidc.params as { assertion?: string };
    if (!assertion) throw refuse.invalidRequest('missing required parameter: assertion');
    const dpop = await internals.validateDpop(ctx);
    // The draft: a client bound to DPoP that sends no proof is refused `invalid_grant` (oidc-provider's grants alike).
    if (!dpop && client.dpopBoundAccessTokens) throw refuse.invalidGrant('DPoP proof JWT not provided');
    const configured = internals.clockToleranceOf(internals.providerConfiguration(ctx.oidc.provider));
    const tolerance = Math.min(MAX_CLOCK_SKEW, configured);
    const { claims, issuer } = await verifiedAssertion(assertion, ctx.oidc.issuer, options, tolerance);
    if (claims.client_id !== client.clientId) throw refuse.invalidGrant('the assertion is for another client');
    // The draft's Cross-Domain Use: a server never redeems an assertion it issued.
    if (claims.iss === ctx.oidc.issuer) throw refuse.invalidGrant('this server redeems no assertion of its own');
    if (claims.authorization_details !== undefined) throw refuse.invalidGrant('authorization_details is not supported');
    // Fail closed: a stop at the issuer that this server cannot have heard of yet; checked again right before the commit.
    const streamCurrent = () => {
      if (!streams.current(claims.iss)) throw refuse.issuerStreamUnavailable();
    };
    streamCurrent();
    if (issuer.ssf && claims[SESSION_CLAIM] === undefined)
      throw refuse.invalidGrant(`the assertion names no session of its issuer ("${SESSION_CLAIM}")`);
    checkConfirmation(claims.cnf, dpop);
    const resourceServer = await assertedResource(ctx, claims.resource);
    const granted = assertedScopes(ctx, claims.scope, resourceServer);
    // Each issuer names only the accounts the deployment lets it name.
    const accountId = await issuer.accountOf(Object.freeze({ ...claims }));
    if (typeof accountId !== 'string' || !(await accountExists(ctx, accountId))) {
      throw refuse.invalidGrant('the assertion names no account here');
    }

    const token = newExchangeToken(ctx, { subject: accountId, scope: granted, resourceServer, dpop });
    token.gty = JWT_BEARER_GRANT;
    if (dpop) await internals.checkDpopReplay(ctx, dpop);
    // `canRedeem`, then the decision point, before the `jti` is taken or a share charged: a refusal is `invalid_grant`.
    const actor = claims.act ? { actor: claims.act.sub } : {};
    const asked = { clientId: client.clientId, subject: accountId, ...actor, issuer: claims.iss, scope: granted };
    const input: IdJagRedeemInput = Object.freeze({ ...asked, resource: resourceServer.identifier() });
    const scope = await decide(options.canRedeem, input, REDEMPTION_POLICY, refuse.invalidGrant);
    token.scope = scope.join(' ') || undefined;
    // A token never outlives the assertion it came from.
    internals.setTokenLifetime(token, Math.max(1, Math.min(token.expiration, Math.floor(claims.exp) - nowSeconds())));
    const session = sessionOf(claims, accountId, resourceServer.identifier(), scope, token.expiration);
    tokenClaims.attach(token, { ...(claims.act ? { act: claims.act } : {}), [SESSION_CLAIM]: session.id });
    // Invariant 37: the assertion's `iss` and `jti` taken once, with its issuer's and client's shares, in the commit.
    const once: DelegationCharge = {
      principal: 'ID-JAG assertion',
      key: `quota:id-jag:${session.subjectTokenId}`,
      max: 1,
      expiresAt: (Math.ceil(claims.exp) + REDEEMED_KEPT) * 1000,
    };
    const quotas = [once, ...redemptionQuotas(options.maxRedemptionsPerClient, claims.client_id, claims.iss)];
    const event = () => idJagEvent(EVENTS.idJagRedeemed, session);
    const value = await commit(
      ctx,
      { sessions, bus },
      { token, session, quotas, startedAt, event, record: true, delegation: false, recheck: streamCurrent },
    ).catch((error: unknown) => {
      if (error instanceof refuse.PrincipalQuotaReached) ctx.set('Retry-After', String(error.retryAfter));
      throw error;
    });
    respond(ctx, { value, token });
    announce(ctx.oidc.provider, event(), ctx);
  };
}

/** The redemption's session: the local account, the client, the resource; ended with the issuer's session it names. */
function sessionOf(claims: IdJagClaims, subject: string, resource: string, scope: string[], expiresIn: number) {
  const createdAt = nowSeconds();
  const issuerSession = claims[SESSION_CLAIM] as string | undefined;
  return {
    id: newSessionId(),
    type: 'id-jag-redemption',
    subject,
    ...(claims.act ? { actor: claims.act.sub } : {}),
    clientId: claims.client_id,
    resource,
    scope,
    context: { issuer: claims.iss, assertionId: claims.jti },
    // The assertion's non-secret name: its issuer and `jti`, digested.
    subjectTokenId: issuerDigestOf(claims.iss, claims.jti),
    // Named by the commit, once the token has its id.
    accessTokenId: '',
    createdAt,
    expiresAt: createdAt + expiresIn,
    ...(issuerSession === undefined ? {} : { issuerSession: issuerDigestOf(claims.iss, issuerSession) }),
  } satisfies SessionRecord;
}

/** An ID-JAG's event, issued or redeemed, told from its session (its actor, when one acts); an issue names the token it attests. */
export function idJagEvent(name: IdJagEventName, session: SessionRecord): ImpersonationEvent<IdJagEventName> {
  return {
    name,
    sessionId: session.id,
    subject: session.subject,
    clientId: session.clientId,
    resource: session.resource,
    scope: session.scope.join(' '),
    context: session.context,
    ...(session.actor === undefined ? {} : { actor: session.actor }),
    ...(name === EVENTS.idJagIssued ? { subjectTokenId: session.subjectTokenId } : {}),
    accessTokenId: session.accessTokenId,
    expiresAt: session.expiresAt,
  } as ImpersonationEvent<IdJagEventName>;
}

/** RFC 7523 3 and the draft's processing rules: `invalid_grant` for any assertion that fails, never quoting it. */
async function verifiedAssertion(assertion: string, audience: string, options: ResolvedIdJagOptions, skew: number) {
  let issuer: ResolvedIssuer | undefined;
  const { payload } = await jwtVerify(
    assertion,
    (header, token) => {
      issuer = options.trustedIssuers.get(decodeJwt(assertion).iss ?? '');
      if (!issuer) throw refuse.invalidGrant('the assertion is not from a trusted issuer');
      return issuer.keys(header, token);
    },
    // The draft's explicit type (RFC 8725 3.11).
    { typ: 'oauth-id-jag+jwt', audience, clockTolerance: skew, maxTokenAge: MAX_ASSERTION_LIFETIME },
  ).catch((error: unknown) => {
    throw error instanceof errors.JOSEError
      ? refuse.invalidGrant(`the assertion is invalid: ${joseFailure(error)}`)
      : error;
  });
  // The draft: an `aud` array holds exactly one member, this server.
  if (Array.isArray(payload.aud) && payload.aud.length !== 1)
    throw refuse.invalidGrant('the assertion\'s "aud" names another server too');
  const isName = (value: unknown) => typeof value === 'string' && value !== '' && isStorableText(value);
  const named = payload[SESSION_CLAIM] === undefined ? [] : [SESSION_CLAIM];
  const malformed = ['sub', 'client_id', 'jti', ...named].find((name) => !isName(payload[name]));
  if (malformed) throw refuse.invalidGrant(`the assertion's "${malformed}" claim must be a non-empty string`);
  // RFC 8693 4.1: each actor of the chain an object naming its `sub`, the chain bounded as a delegation's.
  let depth = 0;
  for (let act = payload['act']; act !== undefined; act = (act as ActClaim).act) {
    depth += 1;
    if (!isObject(act) || !isName(act['sub']) || depth > DELEGATION_MAXIMA.maxChainDepth) {
      throw refuse.invalidGrant(
        'the assertion\'s "act" claim is no chain of objects naming a "sub", or nests too deep',
      );
    }
  }
  if (JSON.stringify(payload['act'] ?? '').length > MAX_ACT_LENGTH) {
    throw refuse.invalidGrant(`the assertion's "act" claim must be at most ${MAX_ACT_LENGTH} characters`);
  }
  // RFC 7523 3 (4): an `exp` required, and one unreasonably far ahead refused, so a redeemed `jti` is kept only so long.
  if (!((payload.exp ?? Infinity) <= nowSeconds() + MAX_ASSERTION_LIFETIME + skew)) {
    throw refuse.invalidGrant(`the assertion needs an "exp" at most ${MAX_ASSERTION_LIFETIME} s from now`);
  }
  return { claims: payload as IdJagClaims, issuer: issuer! };
}

/** What failed, in jose's fixed words: its code, and a claim's name only when it is one jose checks (never a value). */
export function joseFailure(error: InstanceType<typeof errors.JOSEError>): string {
  const claim = (error as { claim?: unknown }).claim;
  if (typeof claim === 'string' && CHECKED_CLAIMS.has(claim)) return `the "${claim}" claim check failed`;
  if (error instanceof errors.JWSSignatureVerificationFailed) return 'signature verification failed';
  return error.code;
}

/** The draft's key binding: a `cnf.jkt` assertion is redeemed only with a DPoP proof of that key. */
function checkConfirmation(cnf: unknown, dpop: internals.DpopProof | undefined): void {
  if (cnf === undefined) return;
  const { jkt, ...other } = (cnf ?? {}) as { jkt?: unknown };
  if (typeof jkt !== 'string' || Object.keys(other).length)
    throw refuse.invalidGrant('the assertion\'s "cnf" is not supported');
  if (dpop?.thumbprint !== jkt)
    throw refuse.invalidGrant("the assertion is bound to a key this request's DPoP proof is not of");
}

/** The one resource: the request's, which the assertion's `resource` lists if it has one; else the assertion's only one. */
async function assertedResource(ctx: KoaContextWithOIDC, asserted: unknown): Promise<ResourceServerInstance> {
  const listed = asserted === undefined ? undefined : [asserted].flat();
  if (listed?.some((uri) => typeof uri !== 'string')) throw refuse.invalidGrant('the resource claim is malformed');
  const params = ctx.oidc.params as { resource?: string };
  params.resource ??= listed?.length === 1 ? (listed[0] as string) : undefined;
  if (listed && !listed.includes(params.resource ?? '')) {
    throw refuse.invalidTarget(params.resource ? 'resource is not in the assertion' : 'name one of its resources');
  }
  if (params.resource && !isStorableText(params.resource)) throw refuse.invalidTarget('resource is malformed');
  return resolveSingleResource(ctx);
}

/** RFC 6749 3.3 within the assertion's `scope`: each asked for must be in it; none asked, those in it the resource defines. */
function assertedScopes(ctx: KoaContextWithOIDC, asserted: unknown, server: ResourceServerInstance): string[] {
  if (asserted !== undefined && typeof asserted !== 'string') throw refuse.invalidGrant('the scope claim is malformed');
  const requested = (ctx.oidc.params as { scope?: string }).scope;
  const allowed = scopeSet(asserted as string | undefined);
  const wider = [...scopeSet(requested)].filter((name) => !allowed.has(name));
  if (wider.length) throw refuse.invalidScope(`scope wider than the assertion's: ${wider.join(' ')}`, wider.join(' '));
  const defined = [...allowed].filter((name) => server.scopes.has(name));
  return grantedScopes(ctx, requested ?? defined.join(' '), server);
}

/** Issuing Identity Assertion JWT Authorization Grants (ID-JAGs) as a kind of the one exchange route (docs/cross-app-access.md). */
import { randomUUID } from 'node:crypto';
import { createLocalJWKSet, errors as jose, jwtVerify, type JSONWebKeySet } from 'jose';
import type { ClientMetadata, Configuration, KoaContextWithOIDC } from 'oidc-provider';
import { publicTokenId, scopeSet } from '../access-token.js';
import { idJagIssueQuotas } from '../capacity.js';
import { nowSeconds } from '../clock.js';
import { withExchangeListMetadata } from '../config/client-metadata.js';
import * as refuse from '../errors.js';
import { EVENTS } from '../event-types.js';
import { definedMembers } from '../json.js';
import * as internals from '../provider-internals.js';
import { newSessionId, type SessionRecord } from '../sessions/record.js';
import { isStorableText } from '../storable-text.js';
import { SESSION_CLAIM } from '../token-claims.js';
import { checkMayAct, delegationActor } from './actor.js';
import { idJagEvent, joseFailure } from './id-jag.js';
import type { IdJagIssueInput, IdJagSubjectAtAudience, ResolvedIdJagIssuanceOptions } from './id-jag-options.js';
import type { ExchangeDependencies, ExchangeKind, Subject } from './kind.js';
import { decide } from './policy.js';
import { RefusalBudget } from './refusals.js';
import { reportImpersonationRefusal } from './report.js';
import { ACCESS_TOKEN_TYPE, exchangeParameters, JWT_TOKEN_TYPE, type Accepted } from './request.js';
import type { ExchangeParams } from './request.js';

export const ID_JAG_TOKEN_TYPE = 'urn:ietf:params:oauth:token-type:id-jag';
export const ID_TOKEN_TYPE = 'urn:ietf:params:oauth:token-type:id_token';
export const REFRESH_TOKEN_TYPE = 'urn:ietf:params:oauth:token-type:refresh_token';
/** The draft's explicit JWT type (RFC 8725 3.11). */
export const ID_JAG_JWT_TYPE = 'oauth-id-jag+jwt';
/** Client metadata: the issuers of the authorization servers the client may ask ID-JAGs for. */
export const ID_JAG_AUDIENCES_METADATA = 'id_jag_audiences';
/** Seconds an ID-JAG lives, at most: the redeeming side keeps its `jti` no longer (RFC 7523 3). */
export const ID_JAG_LIFETIME = 300;
/** What one ID-JAG may carry, signed and kept with its session: resources, and characters of a resource or of `scope`. */
const MAX_RESOURCES = 10;
const MAX_TEXT = 2048;

/** The deployment's `extraClientMetadata`, with `id_jag_audiences` added when ID-JAGs are issued. */
export function withIdJagMetadata(own: NonNullable<Configuration['extraClientMetadata']>, issued: boolean) {
  const valid = (names: string[]) => names.length > 0 && names.every((name) => URL.parse(name)?.protocol === 'https:');
  return issued ? withExchangeListMetadata(own, ID_JAG_AUDIENCES_METADATA, 'https issuer URLs', valid) : own;
}

/** The user the client's ID token or refresh token attests, until its `exp`. */
interface AttestedSubject extends Subject {
  /** The subject token's non-secret name: `sha256.` and its digest. */
  id: string;
  exp: number;
  /** RFC 8693 4.4, as an ID token carries it: checkMayAct refuses any but an object naming the actor. */
  mayAct?: unknown;
  signIn: { auth_time?: unknown; acr?: unknown; amr?: unknown };
}

type Attested = Omit<AttestedSubject, 'id' | 'spendsProof'>;

const ACCEPTS: Accepted = {
  subjectTokenType: (type) => type === ID_TOKEN_TYPE || type === REFRESH_TOKEN_TYPE,
  subjectTokenTypes: `use ${ID_TOKEN_TYPE} or ${REFRESH_TOKEN_TYPE}`,
  actorTokenTypes: [ACCESS_TOKEN_TYPE, JWT_TOKEN_TYPE],
  requestedTokenTypes: [ID_JAG_TOKEN_TYPE],
  audience: true,
};

/** The draft's token exchange: this provider's ID token or refresh token for an ID-JAG to another authorization server. */
export function idJagIssuance(
  dependencies: ExchangeDependencies,
  options: ResolvedIdJagIssuanceOptions,
): ExchangeKind<AttestedSubject, string | undefined, string> {
  const refusals = new RefusalBudget();
  // The agent acts as itself: an actor token of this provider issued to the requesting client, no other client's.
  const actorClients: ReadonlySet<string> = new Set();
  return {
    handles: (ctx) => (ctx.oidc.params as Record<string, unknown>)['requested_token_type'] === ID_JAG_TOKEN_TYPE,

    parameters(ctx) {
      if (audiencesOf(ctx.oidc.client!) === undefined)
        throw refuse.unauthorizedClient('this client may not request ID-JAGs');
      const params = exchangeParameters(ctx, ACCEPTS);
      const audiences = [params.audience ?? []].flat();
      if (!audiences.length) throw refuse.invalidRequest('missing required parameter audience');
      if (audiences.length > 1) throw refuse.invalidTarget('exactly one audience is required for an ID-JAG');
      const resources = [params.resource ?? []].flat();
      if (resources.length > MAX_RESOURCES || resources.some((resource) => !isResourceIndicator(resource))) {
        throw refuse.invalidTarget(`resource must be at most ${MAX_RESOURCES} absolute URIs without a fragment`);
      }
      if (params.scope !== undefined && !(params.scope.length <= MAX_TEXT && isStorableText(params.scope))) {
        throw refuse.invalidScope(`scope must be storable text of at most ${MAX_TEXT} characters`, '');
      }
      return params;
    },

    async subject(ctx, params, _progress, dpop) {
      const { subject_token: value, subject_token_type: type } = params;
      const attested =
        type === REFRESH_TOKEN_TYPE ? await refreshTokenSubject(ctx, params, dpop) : await verifiedIdToken(ctx, value);
      // A DPoP proof binds the ID-JAG (`cnf`): it is spent as any exchange's.
      return { ...attested, id: publicTokenId('opaque', value), spendsProof: true };
    },

    async target(ctx, params) {
      const audience = [params.audience!].flat()[0]!;
      if (!audiencesOf(ctx.oidc.client!)!.has(audience)) {
        throw refuse.invalidTarget('this client may not request an ID-JAG for this audience');
      }
      return audience;
    },

    // The scopes are the other authorization server's: none of them is resolved here.
    scopes: (_ctx, params) => [...scopeSet(params.scope)],
    async actor(ctx, params, subject, proof, progress) {
      // RFC 8693 4.4: `may_act` narrows who may act; with no actor token no one acts, and the ID-JAG names none.
      if (params.actor_token === undefined) return undefined;
      const actor = await delegationActor(ctx, dependencies.tokens, params, { ...proof, actorClients });
      progress.actor = actor.sub;
      checkMayAct(ctx, subject, actor);
      return actor.sub;
    },
    ceiling: (_subject, _actor, target) => ({ scope: target.scope, secondsLeft: Infinity }),

    decide: (ctx, subject, actor, { resource: audience, scope }, params) =>
      decide(options.canIssue, issueInput(ctx, subject.sub, actor, audience, params, scope), {
        policy: 'the ID-JAG policy',
        refused: 'this ID-JAG',
      }),

    lifetime(subject, _actor, bound) {
      // An ID-JAG never outlives the token it attests.
      const expiresIn = Math.min(ID_JAG_LIFETIME, bound, subject.exp - nowSeconds());
      if (expiresIn < 1) throw refuse.invalidRequest('subject_token has expired');
      return expiresIn;
    },

    async prepare(ctx, { params, dpop, subject, actor, resource: audience, scope, expiresIn, startedAt, progress }) {
      const clientId = ctx.oidc.client!.clientId;
      const resources = [params.resource ?? []].flat();
      // Before the session: a failing hook leaves no trace of one. The session keeps the local names.
      const atAudience = await subjectAtAudience(options, issueInput(ctx, subject.sub, actor, audience, params, scope));
      const createdAt = nowSeconds();
      const session: SessionRecord = {
        id: newSessionId(),
        type: 'id-jag',
        subject: subject.sub,
        ...(actor === undefined ? {} : { actor }),
        clientId,
        resource: audience,
        scope,
        context: resources.length ? { resource: resources } : {},
        subjectTokenId: subject.id,
        // The ID-JAG's `jti`: the redeeming side names it so too.
        accessTokenId: randomUUID(),
        createdAt,
        expiresAt: createdAt + expiresIn,
      };
      progress.session = session;
      const claims = {
        iss: ctx.oidc.issuer,
        sub: subject.sub,
        aud: audience,
        client_id: clientId,
        ...atAudience,
        ...definedMembers(subject.signIn),
        jti: session.accessTokenId,
        iat: session.createdAt,
        exp: session.expiresAt,
        // The session a stop ends: the redeeming side, told of it by this provider's SSF stream, ends its tokens.
        [SESSION_CLAIM]: session.id,
        ...(actor === undefined ? {} : { act: { sub: actor } }),
        ...(resources.length ? { resource: resources.length === 1 ? resources[0] : resources } : {}),
        ...(scope.length ? { scope: scope.join(' ') } : {}),
        // The draft's proof of possession: the key the request proved, which the redeeming side then requires.
        ...(dpop ? { cnf: { jkt: dpop.thumbprint } } : {}),
      };
      const value = await internals.signWithProviderKey(ctx.oidc.provider, claims, ID_JAG_JWT_TYPE);
      return {
        issuedTokenType: ID_JAG_TOKEN_TYPE,
        // The draft: not an access token, so `N_A`; no refresh token.
        minted: { expiresIn, scope: scope.join(' '), tokenType: 'N_A' },
        commit: {
          minted: value,
          session,
          // Invariant 50: each issue is a session the store holds, charged to its user and its client.
          quotas: idJagIssueQuotas(options, subject.sub, clientId),
          startedAt,
          event: () => idJagEvent(EVENTS.idJagIssued, session),
          record: true,
          delegation: false,
        },
      };
    },

    refused: (ctx, progress, error) => reportImpersonationRefusal(ctx, dependencies.bus, refusals, progress, error),
  };
}

/** What `canIssue` and `subjectAtAudience` are asked about. */
function issueInput(
  ctx: KoaContextWithOIDC,
  subject: string,
  actor: string | undefined,
  audience: string,
  params: ExchangeParams,
  scope: string[],
): IdJagIssueInput {
  const resource = [params.resource ?? []].flat();
  const clientId = ctx.oidc.client!.clientId;
  return Object.freeze({ clientId, subject, ...(actor === undefined ? {} : { actor }), audience, resource, scope });
}

const AUDIENCE_CLAIMS: ReadonlySet<string> = new Set(['sub', 'aud_sub', 'tenant', 'client_id']);
const MAX_AUDIENCE_NAME = 255;

/** The hook's claims, or none; any other answer, or a throw, fails the issue (500) before anything is signed or charged. */
async function subjectAtAudience(options: ResolvedIdJagIssuanceOptions, input: IdJagIssueInput) {
  const answer: unknown = await options.subjectAtAudience?.(input);
  if (answer === undefined) return {};
  // Read once: a getter answers the check and the claims alike.
  const entries = typeof answer === 'object' && answer !== null && !Array.isArray(answer) && Object.entries(answer);
  const isName = (value: unknown) => typeof value === 'string' && value.length > 0 && value.length <= MAX_AUDIENCE_NAME;
  if (!entries || entries.some(([name, value]) => !AUDIENCE_CLAIMS.has(name) || !isName(value))) {
    throw refuse.invalidCall(
      'idJagIssuance.subjectAtAudience',
      `must answer undefined or { sub, aud_sub, tenant, client_id }, each optional, each 1 to ${MAX_AUDIENCE_NAME} characters`,
    );
  }
  return Object.fromEntries(entries) as IdJagSubjectAtAudience;
}

/** The audiences a client may ask ID-JAGs for; `undefined` when it may ask for none. */
function audiencesOf(client: { metadata(): ClientMetadata }): ReadonlySet<string> | undefined {
  const value = client.metadata()[ID_JAG_AUDIENCES_METADATA];
  return typeof value === 'string' ? new Set(value.split(' ')) : undefined;
}

/** RFC 8707 2: an absolute URI without a fragment, as sent (no space or control character a parser would drop), bounded. */
function isResourceIndicator(value: string): boolean {
  return value.length <= MAX_TEXT && /^[^\s\p{Cc}#]+$/u.test(value) && URL.canParse(value);
}

/** The provider's own ID token for this client: its keys, `iss`, `aud` holding the client, `exp`, as `id_token_hint`s are. */
async function verifiedIdToken(ctx: KoaContextWithOIDC, value: string): Promise<Attested> {
  const { provider, client } = ctx.oidc;
  const alg = client!.idTokenSignedResponseAlg ?? 'none';
  // An HMAC-signed ID token is signed with the client's own secret: it proves nothing the client could not make.
  if (alg.startsWith('HS') || alg === 'none')
    throw refuse.invalidRequest("this client's ID tokens cannot be exchanged");
  const keys = createLocalJWKSet(internals.providerJwks(provider) as JSONWebKeySet);
  const { payload, protectedHeader } = await jwtVerify(value, keys, {
    issuer: ctx.oidc.issuer,
    audience: client!.clientId,
    algorithms: [alg],
    clockTolerance: internals.clockToleranceOf(internals.providerConfiguration(provider)),
    requiredClaims: ['sub', 'exp'],
  }).catch((error: unknown) => {
    if (error instanceof jose.JOSEError)
      throw refuse.invalidRequest(`subject_token is not a valid ID token: ${joseFailure(error)}`);
    throw error;
  });
  // Another JWT of this provider's keys (an access token, an ID-JAG) is not an ID token.
  if (protectedHeader.typ !== undefined && protectedHeader.typ.toLowerCase() !== 'jwt')
    throw refuse.invalidRequest('subject_token is not an ID token');
  if (typeof payload.sub !== 'string' || !payload.sub || !isStorableText(payload.sub))
    throw refuse.invalidRequest('subject_token names no storable subject');
  const { auth_time, acr, amr } = payload;
  return { sub: payload.sub, exp: payload.exp!, mayAct: payload['may_act'], signIn: { auth_time, acr, amr } };
}

/** This provider's refresh token of this client, checked as its refresh_token grant does; never rotated or consumed. */
async function refreshTokenSubject(ctx: KoaContextWithOIDC, params: ExchangeParams, dpop?: internals.DpopProof) {
  const { provider, client } = ctx.oidc;
  if (!client!.grantTypeAllowed('refresh_token')) throw refuse.unauthorizedClient('this client uses no refresh token');
  // OpenID Connect Core 8.1: a pairwise client never learns the account id its refresh token names.
  if (client!.subjectType === 'pairwise') throw refuse.invalidRequest("a pairwise client's subject is not passed on");
  // `find` has no unknown, expired or revoked token, nor one that ended with its sign-in (`expiresWithSession`).
  const token = await provider.RefreshToken.find(params.subject_token);
  if (!token || token.clientId !== client!.clientId)
    throw refuse.invalidRequest('subject_token is not a valid refresh token of this client');
  if (token.jkt !== undefined && token.jkt !== dpop?.thumbprint)
    throw refuse.invalidRequest('subject_token is bound to a DPoP key this request does not prove');
  // Only a public or attesting client's refresh token is bound so; checks not made here refuse it.
  if (token['x5t#S256'] !== undefined || token.attestationJkt !== undefined)
    throw refuse.invalidRequest('subject_token is bound to a client certificate or attestation, not accepted here');
  const { grantId } = token;
  if (token.consumed) {
    // As the refresh_token grant: a rotated refresh token presented again revokes its grant (and `grant.revoked`).
    if (grantId) await internals.revokeGrant(ctx, grantId);
    throw refuse.invalidRequest('subject_token is not a valid refresh token of this client');
  }
  const grant = grantId === undefined ? undefined : await provider.Grant.find(grantId);
  if (!grant || grant.clientId !== token.clientId || grant.accountId !== token.accountId)
    throw refuse.invalidRequest("subject_token's grant has ended");
  const signIn = { auth_time: token.authTime, acr: token.acr, amr: token.amr };
  return { sub: token.accountId, exp: token.exp ?? Infinity, signIn };
}

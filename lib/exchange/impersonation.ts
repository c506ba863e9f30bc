import type { AccessToken, KoaContextWithOIDC } from 'oidc-provider';
import type { VerifiedAccessToken } from '../access-token.js';
import { invalidRequest } from '../errors.js';
import { deepFreeze } from '../json.js';
import type { CustomJwtClaimsInput, ResolvedCoreOptions as ResolvedOptions } from '../core-options.js';
import { certificateThumbprintOf, checkDpopReplay, setTokenLifetime } from '../provider-internals.js';
import { newSessionId, SESSION_CLAIM, stateOf, type SessionRecord } from '../sessions/record.js';
import type { SessionStore } from '../sessions/store.js';
import type { SubjectTokenRecord } from '../subject-tokens/store.js';
import { accountExists } from './account.js';
import {
  actFor,
  lookUpActorToken,
  validateActorToken,
  type ActClaim,
  type ActorTokenLookup,
  type ImpersonationActorRules,
} from './actor.js';
import { actClaims, runCustomClaims } from './claims.js';
import { commit } from './commit.js';
import { exchangeStep } from '../telemetry/exchange.js';
import { customerGrantBounds, readCustomerGrant } from './customer-grant.js';
import { checkActorAuthentication } from './freshness.js';
import type { ExchangeDependencies, ExchangeKind } from './kind.js';
import { decide } from './policy.js';
import { readProof } from './proof.js';
import { ExchangeReport, exchangeSucceeded, type ExchangeProgress } from './report.js';
import {
  ACCESS_TOKEN_TYPE,
  exchangeParameters,
  grantedScopes,
  resolveSingleResource,
  TOKEN_EXCHANGE_GRANT,
} from './request.js';
import { checkSubjectTokenShape, IMPERSONATION_ACCEPTS, usableSubjectToken } from './subject/impersonation.js';
import { newExchangeToken } from './token.js';

/** Impersonation: a Management API subject token (`ist_…`), redeemed once by the commit (Invariant 20). */
export function impersonationExchange(dependencies: ExchangeDependencies): ExchangeKind<ExchangeProgress> {
  const { options, store, sessions, customerGrants, claims } = dependencies;
  const actorClients: ReadonlySet<string> = new Set(options.actorClients);
  const sessionActive = async (id: string) => {
    const session = await sessions.find(id);
    return session !== undefined && stateOf(session) === 'active';
  };
  const report = new ExchangeReport();

  async function exchange(ctx: KoaContextWithOIDC, progress: ExchangeProgress) {
    const client = ctx.oidc.client!;
    const startedAt = Date.now();

    const params = exchangeParameters(ctx, IMPERSONATION_ACCEPTS);
    checkSubjectTokenShape(params.subject_token);
    // As oidc-provider's own grants, the proof is checked first; it writes nothing.
    const dpop = await readProof(ctx);

    // The actor token is looked up meanwhile; its verdict is read after the subject token's, in protocol order.
    const actorLookup = params.actor_token === undefined ? undefined : lookUpActorToken(ctx, params.actor_token);
    const { record, key } = usableSubjectToken(
      await exchangeStep(ctx, 'subject', () => store.find(params.subject_token)),
      client.clientId,
      (found) => {
        progress.subjectToken = found;
      },
    );
    // The record is this request's own copy: frozen in place before the policy, the hook and the events share it.
    deepFreeze(record.context);
    // The customer's grant is read beside the actor token's Grant and sign-in: one wait for both.
    const customerGrantRead = readCustomerGrant(customerGrants, record);
    // Spent before the deployment's code runs, and only for a subject token that can be redeemed.
    if (dpop) await checkDpopReplay(ctx, dpop);

    const resourceServer = await resolveSingleResource(ctx);
    progress.resource = resourceServer.identifier();
    const requested = grantedScopes(ctx, params.scope, resourceServer);
    progress.scope = requested;
    const token = newExchangeToken(ctx, { subject: record.subject, scope: requested, resourceServer, dpop });

    const actor = await actorOf(ctx, actorLookup, record, { actorClients, dpop, sessionActive, token });
    if (actor && options.actorAuthentication) await checkActorAuthentication(ctx, actor, options.actorAuthentication);
    const act = actor && actFor(actor);
    if (act) progress.actor = act.sub;
    if (!(await accountExists(ctx, record.subject))) {
      throw invalidRequest('subject_token names a user that no longer exists');
    }

    const customerGrant =
      customerGrantRead &&
      (await customerGrantBounds(customerGrantRead, record, {
        actor: act?.sub,
        resource: resourceServer.identifier(),
        scope: requested,
      }));
    const allowed = customerGrant?.scope ?? requested;
    progress.scope = allowed;

    const scopes = await exchangeStep(ctx, 'policy', () =>
      decide(options, {
        clientId: client.clientId,
        subject: record.subject,
        ...(act ? { actor: act.sub } : {}),
        resource: resourceServer.identifier(),
        scope: allowed,
        context: record.context,
      }),
    );
    progress.scope = scopes;
    token.scope = scopes.join(' ') || undefined;

    // An exchanged actor token's remaining life bounds a re-exchange.
    const exchanged = actor?.act !== undefined || actor?.impersonationSession !== undefined;
    const actorLeft = exchanged ? actor!.exp - Math.floor(Date.now() / 1000) : Infinity;
    const expiresIn = Math.min(
      options.accessTokenTTL,
      token.expiration,
      customerGrant?.secondsLeft ?? Infinity,
      actorLeft,
    );
    if (expiresIn < 1) throw invalidRequest('actor_token has expired');
    setTokenLifetime(token, expiresIn);
    const custom = options.getCustomJwtClaims
      ? await exchangeStep(ctx, 'claims', () =>
          runCustomClaims(
            options.getCustomJwtClaims!,
            customClaimsInput(token, record, act, options),
            options.customClaimsTimeout,
          ),
        )
      : {};
    const session = sessionOf(record, client.clientId, resourceServer.identifier(), scopes, actor, expiresIn);
    progress.session = session;
    claims.attach(token, { ...custom, ...actClaims(act), [SESSION_CLAIM]: session.id });
    const event = () => exchangeSucceeded(client.clientId, record, session);

    const value = await exchangeStep(ctx, 'commit', () =>
      commit(ctx, dependencies, {
        token,
        session,
        subjectTokenKey: key,
        startedAt,
        event,
        onTrail: true,
        notify: true,
        confirm: actor?.format === 'opaque' ? () => announceActor(ctx, sessions, session) : undefined,
      }),
    );
    return { value, token, issuedTokenType: ACCESS_TOKEN_TYPE, event };
  }

  return { exchange, refused: (ctx, progress, error) => report.refused(ctx, progress, error) };
}

/** The actor's Grant and sign-in, announced and read again (Invariant 23). */
async function announceActor(ctx: KoaContextWithOIDC, sessions: SessionStore, session: SessionRecord): Promise<void> {
  const { provider } = ctx.oidc;
  await sessions.announce(session);
  const [grant, signIn] = await Promise.all([
    session.actorGrantId === undefined || provider.Grant.find(session.actorGrantId),
    session.actorSessionUid === undefined || provider.Session.findByUid(session.actorSessionUid),
  ]);
  if (!grant || !signIn) throw invalidRequest('actor_token was revoked, or its sign-in ended, during the exchange');
}

/** The `act` claim, from the actor token; a subject token bound to an actor requires that actor's. */
async function actorOf(
  ctx: KoaContextWithOIDC,
  actorLookup: ActorTokenLookup | undefined,
  record: SubjectTokenRecord,
  { token, ...rules }: Omit<ImpersonationActorRules, 'certificateThumbprint'> & { token: AccessToken },
): Promise<VerifiedAccessToken | undefined> {
  if (actorLookup === undefined) {
    if (record.actor !== undefined)
      throw invalidRequest("subject_token is bound to an actor; send that actor's actor_token");
    return undefined;
  }
  const certificateThumbprint = certificateThumbprintOf(token);
  const actor = await validateActorToken(ctx, actorLookup, { ...rules, certificateThumbprint });
  if (record.actor !== undefined && record.actor !== actor.sub) {
    throw invalidRequest('actor_token is not from the actor this subject_token is bound to');
  }
  return actor;
}

function sessionOf(
  record: SubjectTokenRecord,
  clientId: string,
  resource: string,
  scope: string[],
  actor: VerifiedAccessToken | undefined,
  expiresIn: number,
): SessionRecord {
  const createdAt = Math.floor(Date.now() / 1000);
  return {
    id: newSessionId(),
    subject: record.subject,
    ...(actor ? { actor: actor.sub } : {}),
    clientId,
    resource,
    scope,
    context: record.context,
    subjectTokenId: record.id,
    accessTokenId: '',
    ...(actor?.grantId === undefined ? {} : { actorGrantId: actor.grantId }),
    ...(actor?.sessionUid === undefined ? {} : { actorSessionUid: actor.sessionUid }),
    ...(record.accessGrantId === undefined ? {} : { accessGrantId: record.accessGrantId }),
    ...(record.breakGlass === undefined ? {} : { breakGlass: { reason: record.breakGlass.reason } }),
    createdAt,
    expiresAt: createdAt + expiresIn,
  };
}

function customClaimsInput(
  token: AccessToken,
  record: SubjectTokenRecord,
  act: ActClaim | undefined,
  options: ResolvedOptions,
): CustomJwtClaimsInput {
  const clientId = token.client!.clientId;
  return {
    token: Object.freeze({
      sub: record.subject,
      aud: token.aud,
      client_id: clientId,
      scope: token.scope,
      ...actClaims(act),
    }),
    context: {
      grant: { type: TOKEN_EXCHANGE_GRANT, subjectTokenContext: record.context },
      client: { id: clientId },
      user: { id: record.subject },
      ...(act ? { actor: { id: act.sub } } : {}),
    },
    environmentVariables: options.environmentVariables,
  };
}

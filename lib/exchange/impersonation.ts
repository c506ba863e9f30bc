import type { KoaContextWithOIDC } from 'oidc-provider';
import { forgetReadAheads, type VerifiedAccessToken } from '../access-token.js';
import { invalidRequest } from '../errors.js';
import { deepFreeze } from '../json.js';
import { newSessionId, SESSION_CLAIM, stateOf, type SessionRecord } from '../sessions/record.js';
import type { SessionStore } from '../sessions/store.js';
import type { FoundSubjectToken, SubjectTokenRecord } from '../subject-tokens/store.js';
import { looksLikeSubjectToken } from '../subject-tokens/token.js';
import { TOKEN_EXCHANGE_GRANT } from '../token-claims.js';
import { actFor, lookUpActorToken, validateActorToken, type ActorTokenLookup } from './actor.js';
import { runCustomClaims } from './claims.js';
import { customerGrantBounds, readCustomerGrant, type CustomerGrantRead } from './customer-grant.js';
import { checkActorAuthentication } from './freshness.js';
import type { ExchangeDependencies, ExchangeKind, Prepared, Subject } from './kind.js';
import { decide } from './policy.js';
import { RefusalBudget } from './refusals.js';
import { exchangeSucceeded, reportImpersonationRefusal, type ExchangeProgress } from './report.js';
import {
  ACCESS_TOKEN_TYPE,
  exchangeParameters,
  grantedScopes,
  IMPERSONATION_ACCEPTS,
  resolveSingleResource,
} from './request.js';

/** An impersonation's subject: the Management API's subject token, and the reads started beside it. */
interface SubjectToken extends Subject {
  record: SubjectTokenRecord;
  /** Its store key, which the commit redeems. */
  key: string;
  actorLookup: ActorTokenLookup | undefined;
  customerGrantRead: CustomerGrantRead;
}

const EXCHANGE_POLICY = { policy: 'the exchange policy', refused: 'this impersonation' };

/** Impersonation: a Management API subject token (`ist_…`), redeemed once by the commit (Invariant 20). */
export function impersonationExchange(
  dependencies: ExchangeDependencies,
): ExchangeKind<SubjectToken, VerifiedAccessToken | undefined> {
  const { options, store, sessions, customerGrants, claims, tokens } = dependencies;
  const actorClients: ReadonlySet<string> = new Set(options.actorClients);
  const sessionActive = async (id: string) => {
    const session = await sessions.find(id);
    return session !== undefined && stateOf(session) === 'active';
  };
  const refusals = new RefusalBudget();

  return {
    handles: () => true,

    parameters(ctx) {
      const params = exchangeParameters(ctx, IMPERSONATION_ACCEPTS);
      // A value that cannot be a subject token is refused before any store is read.
      if (!looksLikeSubjectToken(params.subject_token)) throw invalidRequest('subject_token is unknown');
      return params;
    },

    subject(ctx, params, progress) {
      // The actor token is looked up meanwhile; its verdict is read after the subject token's, in protocol order.
      const actorLookup = params.actor_token === undefined ? undefined : lookUpActorToken(tokens, params.actor_token);
      return store.find(params.subject_token).then((found) => {
        const { record, key } = usable(found, ctx.oidc.client!.clientId, progress);
        // The record is this request's own copy: frozen in place before the policy, the hook and the events share it.
        deepFreeze(record.context);
        // The customer's grant is read beside the actor token's Grant and sign-in: one wait for both.
        const customerGrantRead = readCustomerGrant(customerGrants, record);
        return { sub: record.subject, spendsProof: true, record, key, actorLookup, customerGrantRead };
      });
    },

    target: (ctx) => resolveSingleResource(ctx),
    scopes: (ctx, params, _subject, resourceServer) => grantedScopes(ctx, params.scope, resourceServer),

    actor(ctx, _params, { record, actorLookup }, proof, progress) {
      if (actorLookup === undefined) {
        return record.actor === undefined
          ? Promise.resolve(undefined)
          : Promise.reject(invalidRequest("subject_token is bound to an actor; send that actor's actor_token"));
      }
      return validateActorToken(ctx, actorLookup, { ...proof, actorClients, sessionActive }).then((actor) => {
        if (record.actor !== undefined && record.actor !== actor.sub) {
          throw invalidRequest('actor_token is not from the actor this subject_token is bound to');
        }
        const accepted = () => ((progress.actor = actor.sub), actor);
        const { actorAuthentication } = options;
        return actorAuthentication
          ? checkActorAuthentication(ctx, actor, actorAuthentication).then(accepted)
          : accepted();
      });
    },

    ceiling({ record, customerGrantRead }, actor, target) {
      if (!customerGrantRead) return { scope: target.scope, secondsLeft: Infinity };
      return customerGrantBounds(customerGrantRead, record, { ...target, actor: actor?.sub });
    },

    decide(ctx, { record }, actor, target) {
      if (!options.canExchange) return target.scope;
      const input = {
        ...target,
        clientId: ctx.oidc.client!.clientId,
        subject: record.subject,
        context: record.context,
      };
      return decide(options.canExchange, actor ? { ...input, actor: actor.sub } : input, EXCHANGE_POLICY);
    },

    lifetime(_subject, actor, bound) {
      // An exchanged actor token's remaining life bounds a re-exchange.
      const exchanged = actor?.act !== undefined || actor?.impersonationSession !== undefined;
      const actorLeft = exchanged ? actor!.exp - Math.floor(Date.now() / 1000) : Infinity;
      const expiresIn = Math.min(options.accessTokenTTL, bound, actorLeft);
      if (expiresIn < 1) throw invalidRequest('actor_token has expired');
      return expiresIn;
    },

    prepare(ctx, { token, subject: { record, key }, actor, resource, scope, expiresIn, startedAt, progress, step }) {
      const clientId = ctx.oidc.client!.clientId;
      const act = actor && actFor(actor);
      const claimed = options.getCustomJwtClaims
        ? step('claims')(
            runCustomClaims(
              options.getCustomJwtClaims,
              {
                token: Object.freeze({
                  sub: record.subject,
                  aud: token.aud,
                  client_id: clientId,
                  scope: token.scope,
                  ...(act ? { act } : {}),
                }),
                context: {
                  grant: { type: TOKEN_EXCHANGE_GRANT, subjectTokenContext: record.context },
                  client: { id: clientId },
                  user: { id: record.subject },
                  ...(act ? { actor: { id: act.sub } } : {}),
                },
                environmentVariables: options.environmentVariables,
              },
              options.customClaimsTimeout,
            ),
          )
        : {};
      // A hook that answers at once is not waited for.
      return claimed instanceof Promise ? claimed.then(prepared) : prepared(claimed);

      function prepared(custom: Awaited<typeof claimed>): Prepared {
        const createdAt = Math.floor(Date.now() / 1000);
        const session: SessionRecord = {
          id: newSessionId(),
          subject: record.subject,
          clientId,
          resource,
          scope,
          context: record.context,
          subjectTokenId: record.id,
          accessTokenId: '',
          createdAt,
          expiresAt: createdAt + expiresIn,
        };
        if (actor) session.actor = actor.sub;
        if (actor?.grantId !== undefined) session.actorGrantId = actor.grantId;
        if (actor?.sessionUid !== undefined) session.actorSessionUid = actor.sessionUid;
        if (record.accessGrantId !== undefined) session.accessGrantId = record.accessGrantId;
        if (record.breakGlass) session.breakGlass = { reason: record.breakGlass.reason };
        progress.session = session;
        claims.attach(
          token,
          act ? { ...custom, act, [SESSION_CLAIM]: session.id } : { ...custom, [SESSION_CLAIM]: session.id },
        );
        return {
          issuedTokenType: ACCESS_TOKEN_TYPE,
          commit: {
            token,
            session,
            subjectTokenKey: key,
            startedAt,
            event: () => exchangeSucceeded(clientId, record, session),
            record: true,
            delegation: false,
            confirm: actor?.format === 'opaque' ? () => announceActor(ctx, sessions, session, startedAt) : undefined,
          },
        };
      }
    },

    refused: (ctx, progress, error) => reportImpersonationRefusal(ctx, dependencies.bus, refusals, progress, error),
  };
}

/** The subject token as found: its client binding first, so another client learns nothing of its state. */
function usable(
  found: FoundSubjectToken,
  clientId: string,
  progress: ExchangeProgress,
): { record: SubjectTokenRecord; key: string } {
  if (found.state === 'unknown') throw invalidRequest('subject_token is unknown');
  const { record, key } = found;
  progress.subjectToken = record;
  if (record.clientId !== undefined && record.clientId !== clientId) {
    throw invalidRequest('subject_token was issued for another client');
  }
  if (found.state === 'withdrawn') throw invalidRequest('subject_token was withdrawn');
  if (found.state === 'consumed') throw invalidRequest('subject_token was already used');
  if (found.state === 'expired') throw invalidRequest('subject_token has expired');
  return { record, key };
}

/** The actor's Grant and sign-in, announced and read again (Invariant 23); nothing to wait for when both stand. */
function announceActor(ctx: KoaContextWithOIDC, sessions: SessionStore, session: SessionRecord, since: number) {
  const { provider } = ctx.oidc;
  return sessions.announce(session, since)?.then(async () => {
    forgetReadAheads(provider);
    const [grant, signIn] = await Promise.all([
      session.actorGrantId === undefined || provider.Grant.find(session.actorGrantId),
      session.actorSessionUid === undefined || provider.Session.findByUid(session.actorSessionUid),
    ]);
    if (!grant || !signIn) throw invalidRequest('actor_token was revoked, or its sign-in ended, during the exchange');
  });
}

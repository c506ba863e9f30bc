import type { KoaContextWithOIDC, ResourceServerInstance } from 'oidc-provider';
import { announce } from '../events/publish.js';
import { invalidRequest, PrincipalQuotaReached } from '../errors.js';
import {
  certificateThumbprintOf,
  checkDpopReplay,
  checkDpopRequired,
  setTokenLifetime,
  validateDpop,
} from '../provider-internals.js';
import { tracedExchange, type ExchangeStep } from '../telemetry/exchange.js';
import { accountExists } from './account.js';
import { commit, type ExchangeEvent } from './commit.js';
import { delegationExchange } from './delegation.js';
import { idJagIssuance } from './id-jag-issuance.js';
import { impersonationExchange } from './impersonation.js';
import type { Destination, ExchangeDependencies, ExchangeKind, Exchanged, Issue, Subject } from './kind.js';
import type { ExchangeProgress } from './report.js';
import { checkClientAuthentication } from './request.js';
import { respond } from './respond.js';
import { newExchangeToken } from './token.js';

export { ACCESS_TOKEN_TYPE, EXCHANGE_DUPLICATES, EXCHANGE_PARAMETERS } from './request.js';
export type { ExchangeDependencies } from './kind.js';

/**
 * The token-exchange grant handler: an ID-JAG when one is requested and issued here, a delegation when the client may
 * delegate this subject token, else an impersonation.
 */
export function createExchangeHandler(dependencies: ExchangeDependencies) {
  const issuance = dependencies.options.idJagIssuance;
  const idJag = issuance && idJagIssuance(dependencies, issuance);
  const delegation = delegationExchange(dependencies);
  const impersonation = impersonationExchange(dependencies);
  // A throw while choosing the kind is a rejection the trace counts, as any refusal; no async frame around the answer.
  return tracedExchange(dependencies.telemetry, (ctx, step) => {
    try {
      if (idJag?.handles(ctx)) return handleExchange(ctx, dependencies, idJag, step);
      return delegation.handles(ctx)
        ? handleExchange(ctx, dependencies, delegation, step)
        : handleExchange(ctx, dependencies, impersonation, step);
    } catch (error) {
      return Promise.reject(error as Error);
    }
  });
}

/** One token-exchange request, from the authenticated client to the answer and the success event. */
export function handleExchange<S extends Subject, A, D extends Destination>(
  ctx: KoaContextWithOIDC,
  dependencies: ExchangeDependencies,
  kind: ExchangeKind<S, A, D>,
  step: ExchangeStep,
): Promise<void> {
  const progress: ExchangeProgress = {};
  return exchange(ctx, dependencies, kind, progress, step).then(
    (exchanged) => {
      respond(ctx, exchanged);
      // A listener that throws fails the request after its token was issued; it is never reported as a refusal.
      if (exchanged.event) announce(ctx.oidc.provider, exchanged.event(), ctx);
    },
    async (error: unknown) => {
      if (error instanceof PrincipalQuotaReached) ctx.set('Retry-After', String(error.retryAfter));
      await kind.refused(ctx, progress, error);
      throw error;
    },
  );
}

/** Every exchange's steps, in protocol order; the kind supplies what differs. */
async function exchange<S extends Subject, A, D extends Destination>(
  ctx: KoaContextWithOIDC,
  dependencies: ExchangeDependencies,
  kind: ExchangeKind<S, A, D>,
  progress: ExchangeProgress,
  step: ExchangeStep,
): Promise<Exchanged> {
  dependencies.preflight?.(ctx);
  checkClientAuthentication(ctx);
  const startedAt = Date.now();
  const params = kind.parameters(ctx, progress);
  // As oidc-provider's own grants, the proof is checked first (its replay later); it writes nothing. No proof, no wait.
  const dpop = ctx.get('DPoP') ? await validateDpop(ctx) : undefined;
  checkDpopRequired(ctx, dpop);
  const subject = await step('subject')(kind.subject(ctx, params, progress, dpop));
  // Spent before the deployment's code runs, and only for a subject that can be exchanged.
  if (dpop && subject.spendsProof) await checkDpopReplay(ctx, dpop);

  const destination = await kind.target(ctx, params);
  // A destination elsewhere (an ID-JAG's audience) gets no access token of this provider.
  const resourceServer = typeof destination === 'string' ? undefined : (destination as ResourceServerInstance);
  const resource = resourceServer ? resourceServer.identifier() : (destination as string);
  progress.resource = resource;
  const requested = kind.scopes(ctx, params, subject, destination);
  progress.scope = requested;
  const token =
    resourceServer && newExchangeToken(ctx, { subject: subject.sub, scope: requested, resourceServer, dpop });

  const certificateThumbprint = token && certificateThumbprintOf(token);
  const actor = await kind.actor(ctx, params, subject, { dpop, certificateThumbprint }, progress);
  const exists = accountExists(ctx, subject.sub);
  if (!(exists instanceof Promise ? await exists : exists)) {
    throw invalidRequest('subject_token names a user that no longer exists');
  }

  const bounds = kind.ceiling(subject, actor, { resource, scope: requested });
  const ceiling = bounds instanceof Promise ? await bounds : bounds;
  progress.scope = ceiling.scope;
  const decided = step('policy')(kind.decide(ctx, subject, actor, { resource, scope: ceiling.scope }, params));
  const scope = decided instanceof Promise ? await decided : decided;
  progress.scope = scope;
  if (token) token.scope = scope.join(' ') || undefined;

  const expiresIn = kind.lifetime(subject, actor, Math.min(token?.expiration ?? Infinity, ceiling.secondsLeft));
  if (token) setTokenLifetime(token, expiresIn);
  const preparing = kind.prepare(ctx, {
    params,
    dpop,
    token: token as Issue<S, A, D>['token'],
    subject,
    actor,
    resource,
    scope,
    expiresIn,
    startedAt,
    progress,
    step,
  });
  const prepared = preparing instanceof Promise ? await preparing : preparing;
  if ('issued' in prepared) return prepared.issued;
  // Built once: for the commit's subscribers, then for the listeners.
  let built: ExchangeEvent | undefined;
  const event = () => (built ??= prepared.commit.event());
  try {
    const value = await step('commit')(commit(ctx, dependencies, { ...prepared.commit, event }));
    const { issuedTokenType, minted } = prepared;
    return { value, token, minted, issuedTokenType, event };
  } catch (error) {
    const recovered = await prepared.recover?.(error);
    if (recovered) return recovered;
    throw error;
  }
}

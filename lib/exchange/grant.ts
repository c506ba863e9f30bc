import type { KoaContextWithOIDC } from 'oidc-provider';
import { announce } from '../events/publish.js';
import { PrincipalQuotaReached } from '../errors.js';
import { delegationExchange } from './delegation/delegation.js';
import { impersonationExchange } from './impersonation.js';
import type { ExchangeDependencies, ExchangeKind, Exchanged } from './kind.js';
import { checkClientAuthentication } from './request.js';
import { respond } from './respond.js';

export { ACCESS_TOKEN_TYPE, EXCHANGE_DUPLICATES, EXCHANGE_PARAMETERS, TOKEN_EXCHANGE_GRANT } from './request.js';
export type { ExchangeDependencies } from './kind.js';

/**
 * The token-exchange grant, the one handler registered for it. By the time it
 * runs oidc-provider has parsed the form, authenticated the client and checked
 * that its `grant_types` allow this grant. The kind of exchange follows from
 * the request: a client allowed to delegate that names a subject token a
 * delegation verifies (never a Management API subject token, `ist_…`)
 * delegates; every other request is an impersonation's, refused as one when
 * it is none. Then the kind's steps, the response, and the report.
 */
export function createExchangeHandler(dependencies: ExchangeDependencies) {
  const impersonation = impersonationExchange(dependencies);
  const delegation = delegationExchange(dependencies);

  async function run<Progress extends object>(ctx: KoaContextWithOIDC, kind: ExchangeKind<Progress>): Promise<void> {
    const progress = {} as Progress;
    let exchanged: Exchanged;
    try {
      dependencies.preflight?.(ctx);
      checkClientAuthentication(ctx);
      exchanged = await kind.exchange(ctx, progress);
    } catch (error) {
      if (error instanceof PrincipalQuotaReached) ctx.set('Retry-After', String(error.retryAfter));
      await kind.refused(ctx, progress, error);
      throw error;
    }
    respond(ctx, exchanged);
    // A listener that throws fails the request after its token was issued; it is never reported as a refusal.
    if (exchanged.event) announce(ctx.oidc.provider, exchanged.event(), ctx);
  }

  return function tokenExchangeHandler(ctx: KoaContextWithOIDC): Promise<void> {
    return delegation.handles(ctx) ? run(ctx, delegation) : run(ctx, impersonation);
  };
}

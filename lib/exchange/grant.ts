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

/** The token-exchange grant handler: a delegation when the client may delegate this subject token, else an impersonation. */
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

/** The token an exchange issues, built and sender-bound (DPoP, mTLS) as oidc-provider's own grants build theirs. */
import type { AccessToken, KoaContextWithOIDC, Provider, ResourceServerInstance } from 'oidc-provider';
import { checkMtlsCert, type DpopProof } from '../provider-internals.js';
import { TOKEN_EXCHANGE_GRANT } from '../token-claims.js';

export function newExchangeToken(
  ctx: KoaContextWithOIDC,
  {
    subject,
    scope,
    resourceServer,
    dpop,
  }: {
    subject: string;
    scope: readonly string[];
    resourceServer: ResourceServerInstance;
    dpop: DpopProof | undefined;
  },
): AccessToken {
  const provider: Provider = ctx.oidc.provider;
  const token = new provider.AccessToken({
    accountId: subject,
    client: ctx.oidc.client!,
    gty: TOKEN_EXCHANGE_GRANT,
    scope: scope.join(' ') || undefined,
    resourceServer,
  } as ConstructorParameters<Provider['AccessToken']>[0]);
  const certificate = checkMtlsCert(ctx);
  if (certificate) token.setThumbprint('x5t', certificate);
  if (dpop) token.setThumbprint('jkt', dpop.thumbprint);
  return token;
}

import type { KoaContextWithOIDC } from 'oidc-provider';
import { providerConfiguration } from '../provider-internals.js';
import { isThenable } from './claims.js';

/** Whether `findAccount` still knows `accountId`: a deleted user is no subject, nor actor, of an exchange. */
export function accountExists(ctx: KoaContextWithOIDC, accountId: string): boolean | Promise<boolean> {
  const found = providerConfiguration(ctx.oidc.provider).findAccount(ctx, accountId);
  const exists = (account: Awaited<typeof found>) => account?.accountId === accountId;
  // An account found at once is not waited for.
  return isThenable(found) ? Promise.resolve(found).then(exists) : exists(found);
}

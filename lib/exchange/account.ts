import type { KoaContextWithOIDC } from 'oidc-provider';
import { providerConfiguration } from '../provider-internals.js';
import { isThenable } from './claims.js';

/** Whether `findAccount` still knows `accountId`: a deleted user is no subject, nor actor, of an exchange. */
export async function accountExists(ctx: KoaContextWithOIDC, accountId: string): Promise<boolean> {
  const found = providerConfiguration(ctx.oidc.provider).findAccount(ctx, accountId);
  // An account found at once is not waited for.
  const account = isThenable(found) ? await found : found;
  return account !== undefined && account !== null && account.accountId === accountId;
}

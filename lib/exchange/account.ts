import type { KoaContextWithOIDC } from 'oidc-provider';
import { providerConfiguration } from '../provider-internals.js';

/** Whether `findAccount` still knows `accountId`: a deleted user is no subject, nor actor, of an exchange. */
export async function accountExists(ctx: KoaContextWithOIDC, accountId: string): Promise<boolean> {
  const account = await providerConfiguration(ctx.oidc.provider).findAccount(ctx, accountId);
  return account !== undefined && account !== null && account.accountId === accountId;
}

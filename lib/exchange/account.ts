import type { KoaContextWithOIDC } from 'oidc-provider';
import { providerConfiguration } from '../provider-internals.js';

/**
 * Whether `findAccount` still knows `accountId`: a user deleted since their
 * token was issued is no subject, and no actor, of an exchange. A token of
 * theirs stays valid until it expires; the exchange does not extend it.
 */
export async function accountExists(ctx: KoaContextWithOIDC, accountId: string): Promise<boolean> {
  const account = await providerConfiguration(ctx.oidc.provider).findAccount(ctx, accountId);
  return account !== undefined && account !== null && account.accountId === accountId;
}

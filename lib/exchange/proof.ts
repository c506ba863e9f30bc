import type { KoaContextWithOIDC } from 'oidc-provider';
import { checkDpopRequired, validateDpop, type DpopProof } from '../provider-internals.js';

/**
 * The request's DPoP proof, checked as oidc-provider's own grants check it,
 * first: a client whose tokens must be DPoP-bound is refused without one.
 * Writes nothing; its replay is checked once the subject is known.
 */
export async function readProof(ctx: KoaContextWithOIDC): Promise<DpopProof | undefined> {
  const dpop = await validateDpop(ctx);
  checkDpopRequired(ctx, dpop);
  return dpop;
}

import type { KoaContextWithOIDC } from 'oidc-provider';
import { checkDpopRequired, validateDpop, type DpopProof } from '../provider-internals.js';

/** The request's DPoP proof, checked first as oidc-provider's grants do; its replay is checked later. */
export async function readProof(ctx: KoaContextWithOIDC): Promise<DpopProof | undefined> {
  const dpop = await validateDpop(ctx);
  checkDpopRequired(ctx, dpop);
  return dpop;
}

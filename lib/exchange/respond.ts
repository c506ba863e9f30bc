import type { AccessToken, KoaContextWithOIDC } from 'oidc-provider';

/** What an exchange issued: the token's value, the token, and the type RFC 8693 2.2.1 names it by. */
export interface Issued {
  value: string;
  /** The access token issued; none for a token its kind minted itself, answered as `minted` says. */
  token?: AccessToken | undefined;
  minted?: { expiresIn: number; scope: string; tokenType: string } | undefined;
  /** None for a grant that answers as RFC 6749 5.1 (the jwt-bearer grant). */
  issuedTokenType?: string;
}

/** RFC 8693 2.2.1, as oidc-provider answers its own grants; no refresh token; `scope` always (spec 2.5). */
export function respond(ctx: KoaContextWithOIDC, { value, token, minted, issuedTokenType }: Issued): void {
  const { expiresIn, scope, tokenType } = minted ?? {
    expiresIn: token!.expiration,
    scope: token!.scope ?? '',
    tokenType: token!.tokenType,
  };
  const answer: Record<string, unknown> = { access_token: value, token_type: tokenType, expires_in: expiresIn, scope };
  if (issuedTokenType !== undefined) answer['issued_token_type'] = issuedTokenType;
  ctx.body = answer;
}

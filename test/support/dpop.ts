import { randomUUID } from 'node:crypto';
import { calculateJwkThumbprint, exportJWK, generateKeyPair, SignJWT, type JWK } from 'jose';

/** A DPoP key pair that signs proofs for one endpoint (RFC 9449). */
export class DpopKey {
  private constructor(
    private readonly privateKey: CryptoKey,
    readonly jwk: JWK,
    readonly thumbprint: string,
  ) {}

  static async generate(): Promise<DpopKey> {
    const { privateKey, publicKey } = await generateKeyPair('ES256', { extractable: true });
    const jwk = await exportJWK(publicKey);
    return new DpopKey(privateKey, jwk, await calculateJwkThumbprint(jwk));
  }

  /** A proof for `htm` `htu`; `claims` adds e.g. `ath`, the hash of the access token it goes with. */
  proof(htu: string, htm = 'POST', claims: Record<string, unknown> = {}): Promise<string> {
    return new SignJWT({ htm, htu, jti: randomUUID(), ...claims })
      .setProtectedHeader({ alg: 'ES256', typ: 'dpop+jwt', jwk: this.jwk })
      .setIssuedAt()
      .sign(this.privateKey);
  }
}

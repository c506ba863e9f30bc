/** Trail signatures (checkpoints, published heads): HMAC-SHA-256 with a shared secret, or Ed25519. */
import {
  createHmac,
  createPrivateKey,
  createPublicKey,
  sign,
  timingSafeEqual,
  verify as verifySignature,
  type KeyObject,
} from 'node:crypto';
import { invalidKey, invalidOption } from '../errors/standalone.js';

export type SigningKey = { hmac: string | Buffer } | { ed25519: string | KeyObject };
/** What verifies checkpoints and heads: the HMAC secret, or the Ed25519 public (or private) key. */
export type VerificationKey = { hmac: string | Buffer } | { ed25519: string | KeyObject };

export type SignatureAlgorithm = 'hmac-sha256' | 'ed25519';

/** As long as the hash's output (RFC 2104, section 3): a random secret of 256 bits. */
export const MIN_HMAC_KEY_BYTES = 32;

export type Signer = { kind: SignatureAlgorithm; sign(text: string): string };
export type Verifier = { kind: SignatureAlgorithm; verify(text: string, signature: string): boolean };

/** What a checkpoint's signature covers: the row number and the chain's hash there. */
export function checkpointText(seq: string | number, hash: string): string {
  return `impersonation-audit-checkpoint:${seq}:${hash}`;
}

/** `caller` is the function that was given the key, for the error that names it. */
export function signerOf(key: SigningKey, caller: string): Signer {
  if ('hmac' in key) {
    // A short secret can be guessed offline from any checkpoint, and then every signature forged.
    if (
      (typeof key.hmac !== 'string' && !Buffer.isBuffer(key.hmac)) ||
      Buffer.byteLength(key.hmac) < MIN_HMAC_KEY_BYTES
    ) {
      throw invalidOption(caller, 'signingKey.hmac', `must be a secret of at least ${MIN_HMAC_KEY_BYTES} bytes`);
    }
    return { kind: 'hmac-sha256', sign: (text) => createHmac('sha256', key.hmac).update(text).digest('base64url') };
  }
  const privateKey = typeof key.ed25519 === 'string' ? createPrivateKey(key.ed25519) : key.ed25519;
  if (privateKey.asymmetricKeyType !== 'ed25519' || privateKey.type !== 'private')
    throw invalidOption(caller, 'signingKey.ed25519', 'must be an Ed25519 private key');
  return { kind: 'ed25519', sign: (text) => sign(null, Buffer.from(text), privateKey).toString('base64url') };
}

export function verifierOf(key: VerificationKey): Verifier {
  if ('hmac' in key) {
    return {
      kind: 'hmac-sha256',
      verify: (text, signature) => {
        const expected = createHmac('sha256', key.hmac).update(text).digest();
        const given = Buffer.from(signature, 'base64url');
        return given.length === expected.length && timingSafeEqual(given, expected);
      },
    };
  }
  const given = key.ed25519;
  const publicKey = typeof given !== 'string' && given.type === 'public' ? given : createPublicKey(given);
  if (publicKey.asymmetricKeyType !== 'ed25519') throw invalidKey('the verification key is not an Ed25519 key');
  return {
    kind: 'ed25519',
    verify: (text, signature) =>
      verifySignature(null, Buffer.from(text), publicKey, Buffer.from(signature, 'base64url')),
  };
}

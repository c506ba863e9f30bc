/**
 * The identity service's keys: the JWT signing key and the cookie keys.
 * Instances that share a store (REDIS_URL, DATABASE_URL) must share these
 * too, or a token one signs is refused by another's resource API. They come
 * from DEMO_KEYS (JSON), or from a key file that the first instance to start
 * creates (mode 0600) and every later one reads.
 */
import { generateKeyPairSync, randomBytes, randomUUID } from 'node:crypto';
import { readFile, writeFile } from 'node:fs/promises';
import type { JWKS } from 'oidc-provider';

export interface DemoKeys {
  /** Private signing keys (JWK), RS256. */
  jwks: JWKS;
  cookieKeys: string[];
}

/** Fresh keys, for one instance on its own. */
export function generateDemoKeys(): DemoKeys {
  const { privateKey } = generateKeyPairSync('rsa', { modulusLength: 2048 });
  const jwk = privateKey.export({ format: 'jwk' });
  return {
    jwks: { keys: [{ ...jwk, kid: randomUUID(), alg: 'RS256', use: 'sig' }] } as JWKS,
    cookieKeys: [randomBytes(32).toString('base64url')],
  };
}

/** Checks what was read, so that a damaged file stops the start with a message rather than a token nobody can verify. */
export function parseDemoKeys(text: string, source: string): DemoKeys {
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch {
    throw new Error(`${source} is not JSON: delete it to have new keys made, or fix it`);
  }
  const keys = value as Partial<DemoKeys> | null;
  const signing = keys?.jwks?.keys;
  if (
    !Array.isArray(signing) ||
    !signing.length ||
    signing.some((key) => typeof key !== 'object' || key === null || typeof (key as { d?: unknown }).d !== 'string') ||
    !Array.isArray(keys?.cookieKeys) ||
    !keys.cookieKeys.length ||
    keys.cookieKeys.some((key) => typeof key !== 'string' || key.length < 16)
  ) {
    throw new Error(
      `${source} must be {"jwks":{"keys":[private JWKs]},"cookieKeys":[strings of 16 characters or more]}`,
    );
  }
  return keys as DemoKeys;
}

/**
 * DEMO_KEYS when set; otherwise the key file, made on first start. Two
 * instances starting together agree: the file is created exclusively, and
 * the one that loses the race reads what the other wrote.
 */
export async function sharedDemoKeys(
  file: string,
  env: Readonly<Record<string, string | undefined>> = process.env,
): Promise<{ keys: DemoKeys; source: string }> {
  const inline = env['DEMO_KEYS'];
  if (inline) return { keys: parseDemoKeys(inline, 'DEMO_KEYS'), source: 'DEMO_KEYS' };
  const fresh = generateDemoKeys();
  try {
    await writeFile(file, `${JSON.stringify(fresh)}\n`, { flag: 'wx', mode: 0o600 });
    return { keys: fresh, source: `${file} (created)` };
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== 'EEXIST') throw error;
  }
  for (let attempt = 0; ; attempt += 1) {
    const text = await readFile(file, 'utf8');
    // The instance that created it may still be writing.
    if (!text.endsWith('\n') && attempt < 20) {
      await new Promise((resolve) => setTimeout(resolve, 50));
      continue;
    }
    return { keys: parseDemoKeys(text, file), source: file };
  }
}

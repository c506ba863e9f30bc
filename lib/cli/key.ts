/** The `audit verify` key, named by its place (file, variable), never inline: a command line is readable by every user. */
import { readFileSync } from 'node:fs';
import type { VerificationKey } from '../audit/signing.js';
import { invalidCommandLine } from '../errors/standalone.js';

const KEY_FORMS = '--key hmac-file:PATH, --key hmac-env:VARIABLE or --key ed25519:PUBLIC_KEY.pem';

/** Messages name the form and the place, never the key. */
export function verificationKeyOf(spec: string, env: NodeJS.ProcessEnv = process.env): VerificationKey {
  const separator = spec.indexOf(':');
  const kind = separator < 0 ? '' : spec.slice(0, separator);
  const place = spec.slice(separator + 1);
  if (kind === 'hmac')
    throw invalidCommandLine(
      `--key hmac:SECRET is refused: a secret on the command line is visible to every user of this machine; use ${KEY_FORMS}`,
    );
  if (!place) throw invalidCommandLine(`--key must be one of ${KEY_FORMS}`);
  if (kind === 'hmac-file') {
    // A trailing newline is the editor's, not the key's.
    const secret = readKeyFile(place, 'hmac-file: the key file').replace(/\r?\n$/, '');
    if (!secret) throw invalidCommandLine('--key hmac-file: the key file is empty');
    return { hmac: secret };
  }
  if (kind === 'hmac-env') {
    const secret = env[place];
    if (!secret) throw invalidCommandLine('--key hmac-env: that environment variable is not set or empty');
    return { hmac: secret };
  }
  if (kind === 'ed25519') return { ed25519: readKeyFile(place, 'ed25519: the public key file') };
  throw invalidCommandLine(`--key must be one of ${KEY_FORMS}`);
}

function readKeyFile(path: string, named: string): string {
  try {
    return readFileSync(path, 'utf8');
  } catch {
    throw invalidCommandLine(`--key ${named} cannot be read`);
  }
}

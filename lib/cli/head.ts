/** The published heads given to `audit verify --head`: a JSON value, or a file whose last line is taken. */
import { readLastHead } from '../audit/head-file.js';
import { headOf, type SignedHead } from '../audit/head.js';
import { invalidCommandLine } from '../errors/standalone.js';

export async function publishedHeadOf(value: string): Promise<SignedHead> {
  if (value.trimStart().startsWith('{')) {
    let parsed: unknown;
    try {
      parsed = JSON.parse(value);
    } catch {
      throw invalidCommandLine('--head: not a JSON object');
    }
    return headOf(parsed);
  }
  try {
    return await readLastHead(value);
  } catch (error) {
    if (error instanceof TypeError) throw invalidCommandLine(`--head: ${error.message}`, error);
    throw invalidCommandLine('--head: the head file cannot be read', error);
  }
}

/** The published heads given to `audit verify --head`: a JSON value, or a file whose last line is taken. */
import { readLastHead } from '../audit/head-file.js';
import { headOf, type SignedHead } from '../audit/head.js';
import { invalidCommandLine } from '../errors/standalone.js';
import { parseJson } from '../json.js';

export async function publishedHeadOf(value: string): Promise<SignedHead> {
  if (value.trimStart().startsWith('{'))
    return headOf(parseJson(value, () => invalidCommandLine('--head: not a JSON object')));
  try {
    return await readLastHead(value);
  } catch (error) {
    if (error instanceof TypeError) throw invalidCommandLine(`--head: ${error.message}`, error);
    throw invalidCommandLine('--head: the head file cannot be read', error);
  }
}

/** Published heads in a file (O_APPEND, flushed before the append resolves); keep it beyond the database's reach. */
import { open, readFile } from 'node:fs/promises';
import { headOf, type HeadPublisher, type SignedHead } from './head.js';
import { invalidArgument, invalidHeadFile } from '../errors/standalone.js';
import { parseJson } from '../json.js';

export function appendHeadsToFile(path: string): HeadPublisher {
  if (typeof path !== 'string' || !path) throw invalidArgument('appendHeadsToFile', 'path', 'must be a file path');
  // One write at a time, so that lines never interleave and the file's order is the order of publication.
  let last: Promise<void> = Promise.resolve();
  return (head) => {
    const line = `${JSON.stringify(head)}\n`;
    const written = last.then(async () => {
      const file = await open(path, 'a', 0o644);
      try {
        await file.appendFile(line, 'utf8');
        await file.sync();
      } finally {
        await file.close();
      }
    });
    last = written.catch(() => {});
    return written;
  };
}

/** The last head of a file that `appendHeadsToFile` wrote. */
export async function readLastHead(path: string): Promise<SignedHead> {
  const lines = (await readFile(path, 'utf8')).split('\n').filter((line) => line.trim());
  const lastLine = lines.at(-1);
  if (lastLine === undefined) throw invalidHeadFile('the head file holds no head');
  return headOf(parseJson(lastLine, () => invalidHeadFile('the last line of the head file is not JSON')));
}

/**
 * The command's standard output, which its reader may close before the end
 * (`audit export … | head -1`): a closed output is the reader's choice, as for
 * any Unix filter, not a failure, so it ends the writing quietly instead of
 * crashing on an unhandled EPIPE.
 */
import { once } from 'node:events';

interface Output {
  /** Writes text; false once the reader has closed the output: nothing more is read, so nothing more need be written. */
  write(text: string): Promise<boolean>;
}

export function outputTo(stream: NodeJS.WritableStream): Output {
  let readerGone = false;
  let failure: Error | undefined;
  // Installed before the first write: a write's error is emitted after the write returns. Node's
  // stdout is never destroyed by it, so a write after a closed pipe errors again, never hangs.
  stream.on('error', (error: NodeJS.ErrnoException) => {
    if (error.code === 'EPIPE') readerGone = true;
    else failure ??= error;
  });
  const open = (): boolean => {
    if (failure) throw failure;
    return !readerGone;
  };
  return {
    async write(text) {
      if (!open()) return false;
      // A write refused by a closed pipe never drains: once() rejects on its error instead.
      if (!stream.write(text)) await once(stream, 'drain').catch(() => {});
      return open();
    },
  };
}

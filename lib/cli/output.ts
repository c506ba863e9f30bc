/** Standard output whose reader may close it early (`| head -1`): that ends the writing quietly, not on an EPIPE. */
import { once } from 'node:events';

export function outputTo(stream: NodeJS.WritableStream) {
  let readerGone = false;
  let failure: Error | undefined;
  // Installed before the first write: its error is emitted after the write returns.
  stream.on('error', (error: NodeJS.ErrnoException) => {
    if (error.code === 'EPIPE') readerGone = true;
    else failure ??= error;
  });
  const open = (): boolean => {
    if (failure) throw failure;
    return !readerGone;
  };
  return {
    /** Writes text; false once the reader has closed the output: nothing more need be written. */
    async write(text: string): Promise<boolean> {
      if (!open()) return false;
      // A write refused by a closed pipe never drains: once() rejects on its error instead.
      if (!stream.write(text)) await once(stream, 'drain').catch(() => {});
      return open();
    },
  };
}

import { once } from 'node:events';
import { connect } from 'node:net';
import { REDIS_URL } from './adapter.js';

/**
 * MONITOR on a connection of its own, read line by line: ioredis's monitor() takes a command relayed in the
 * same packet as MONITOR's answer for a reply it never asked, whenever another client of the server is busy.
 */
export async function monitorRedis(onLine: (line: string) => void) {
  const { hostname, port } = new URL(REDIS_URL);
  const socket = connect(Number(port || 6379), hostname);
  socket.setEncoding('utf8');
  let buffer = '';
  const waiting = new Map<string, () => void>();
  let monitoring!: () => void;
  const started = new Promise<void>((resolve) => (monitoring = resolve));
  socket.on('data', (chunk: string) => {
    buffer += chunk;
    for (let end = buffer.indexOf('\r\n'); end >= 0; end = buffer.indexOf('\r\n')) {
      const line = buffer.slice(0, end);
      buffer = buffer.slice(end + 2);
      if (line === '+OK') monitoring();
      for (const [marker, seen] of waiting) if (line.includes(marker)) seen();
      onLine(line);
    }
  });
  await once(socket, 'connect');
  socket.write('MONITOR\r\n');
  await started;
  return {
    /** Resolves once a command whose line names `marker` has been relayed. */
    async seen(marker: string): Promise<void> {
      await new Promise<void>((resolve) => waiting.set(marker, resolve));
    },
    stop: () => socket.destroy(),
  };
}

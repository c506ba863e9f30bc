import { once } from 'node:events';
import { connect, createServer, type AddressInfo, type Server, type Socket } from 'node:net';

/**
 * A TCP relay to a store (Redis, PostgreSQL) that a test can cut and restore,
 * so that the provider loses its store while the shared server keeps running
 * for everyone else.
 */
export class TcpRelay {
  readonly #target: URL;
  readonly #sockets = new Set<Socket>();
  #server: Server | undefined;
  port = 0;
  /** Connections stay open but nothing passes: a server that hangs, or a network path gone silent. */
  frozen = false;

  constructor(
    target: string,
    readonly defaultPort: number,
  ) {
    this.#target = new URL(target);
  }

  /** The target's URL with the relay in place of the server (credentials and database kept). */
  get url(): string {
    const url = new URL(this.#target.href);
    url.hostname = '127.0.0.1';
    url.port = String(this.port);
    return url.href;
  }

  async start(): Promise<void> {
    if (this.#server) return;
    const server = createServer((downstream) => {
      const upstream = connect(Number(this.#target.port || this.defaultPort), this.#target.hostname);
      for (const socket of [downstream, upstream]) {
        this.#sockets.add(socket);
        socket.on('close', () => this.#sockets.delete(socket));
        socket.on('error', () => {
          downstream.destroy();
          upstream.destroy();
        });
      }
      // Chunks are dropped, not queued, while frozen: what is lost never reaches the server.
      downstream.on('data', (chunk: Buffer) => {
        if (!this.frozen) upstream.write(chunk);
      });
      upstream.on('data', (chunk: Buffer) => {
        if (!this.frozen) downstream.write(chunk);
      });
    });
    server.listen(this.port, '127.0.0.1');
    await once(server, 'listening');
    this.port = (server.address() as AddressInfo).port;
    this.#server = server;
  }

  /** Refuses new connections and drops the open ones, as a server that went away would. */
  async stop(): Promise<void> {
    const server = this.#server;
    this.#server = undefined;
    for (const socket of this.#sockets) socket.destroy();
    if (server) await new Promise((resolve) => server.close(resolve));
  }
}

import http from 'node:http';
import type { AddressInfo } from 'node:net';

/**
 * An HTTP load balancer on 127.0.0.1: each request goes to the next of its
 * targets in turn, so that instances behind one address serve every flow
 * between them, as they would behind a real one.
 */
export class RoundRobinProxy {
  /** Origins requests are sent to, e.g. http://localhost:41234; settable once they are known. */
  targets: string[] = [];
  /** How many requests each target answered, by origin. */
  readonly served = new Map<string, number>();
  readonly #server = http.createServer((request, response) => this.#forward(request, response));
  // One connection per request, so that nothing is left open towards a target when it closes.
  readonly #agent = new http.Agent({ keepAlive: false });
  #next = 0;

  async start(): Promise<void> {
    await new Promise<void>((resolve, reject) => {
      this.#server.once('error', reject);
      this.#server.listen(0, '127.0.0.1', () => resolve());
    });
  }

  /** The balancer's own address, with the host name the demo's URLs use. */
  get url(): string {
    return `http://localhost:${(this.#server.address() as AddressInfo).port}`;
  }

  async close(): Promise<void> {
    const closed = new Promise<void>((resolve) => this.#server.close(() => resolve()));
    this.#server.closeAllConnections();
    this.#agent.destroy();
    await closed;
  }

  #forward(request: http.IncomingMessage, response: http.ServerResponse): void {
    if (!this.targets.length) {
      response.writeHead(503).end();
      return;
    }
    const target = this.targets[this.#next++ % this.targets.length]!;
    const { hostname, port } = new URL(target);
    const upstream = http.request(
      {
        host: hostname === 'localhost' ? '127.0.0.1' : hostname,
        port,
        method: request.method,
        path: request.url,
        headers: request.headers,
        agent: this.#agent,
      },
      (answer) => {
        this.served.set(target, (this.served.get(target) ?? 0) + 1);
        response.writeHead(answer.statusCode ?? 502, answer.headers);
        answer.pipe(response);
      },
    );
    upstream.on('error', () => {
      if (!response.headersSent) response.writeHead(502);
      response.end();
    });
    request.pipe(upstream);
  }
}

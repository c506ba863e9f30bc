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
  /** Every request answered: by which target, and from which user agent. */
  readonly answered: Array<{ target: string; method: string; path: string; userAgent: string }> = [];
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
        this.answered.push({
          target,
          method: request.method ?? '',
          path: request.url ?? '',
          userAgent: request.headers['user-agent'] ?? '',
        });
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

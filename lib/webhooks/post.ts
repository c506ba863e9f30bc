import { Agent as HttpAgent, request as httpRequest, type IncomingMessage } from 'node:http';
import { Agent as HttpsAgent, request as httpsRequest } from 'node:https';

/** A receiver's answer: its status (0 when none came), any Retry-After, and the first bytes of its body when asked for. */
export interface PostAnswer {
  status: number;
  retryAfter: string | null;
  text: string;
}

export interface PostOptions {
  /** The whole exchange's bound: connecting, sending, the answer and its body. */
  timeoutMs: number;
  signal: AbortSignal;
  /** Bytes of the body to keep as `text` (the rest is never read); 0 drains it unread. */
  readBytes?: number | undefined;
}

/**
 * POSTs deliveries over keep-alive connections, one pool per delivery loop.
 * `node:http` rather than `fetch`: a delivery runs on the main thread of an
 * instance that also answers token requests, and the WHATWG streams `fetch`
 * builds for every request cost several times the request itself. Redirects
 * are never followed. `close` ends the pooled connections.
 */
export interface Poster {
  post(url: string, headers: Readonly<Record<string, string>>, body: string, options: PostOptions): Promise<PostAnswer>;
  close(): void;
}

/** Connections kept open per receiver's host. */
const SOCKETS_PER_HOST = 16;

export function createPoster(): Poster {
  const agents = {
    http: new HttpAgent({ keepAlive: true, maxSockets: SOCKETS_PER_HOST }),
    https: new HttpsAgent({ keepAlive: true, maxSockets: SOCKETS_PER_HOST }),
  };
  return {
    post: (url, headers, body, options) => postOnce(agents, url, headers, body, options),
    close() {
      agents.http.destroy();
      agents.https.destroy();
    },
  };
}

function postOnce(
  agents: { http: HttpAgent; https: HttpsAgent },
  url: string,
  headers: Readonly<Record<string, string>>,
  body: string,
  { timeoutMs, signal, readBytes = 0 }: PostOptions,
): Promise<PostAnswer> {
  return new Promise((resolve) => {
    const none: PostAnswer = { status: 0, retryAfter: null, text: '' };
    if (signal.aborted) {
      resolve(none);
      return;
    }
    let answer = none;
    const chunks: Buffer[] = [];
    let kept = 0;
    const finish = (): void => {
      clearTimeout(deadline);
      signal.removeEventListener('abort', abort);
      resolve(readBytes ? { ...answer, text: Buffer.concat(chunks).subarray(0, readBytes).toString('utf8') } : answer);
    };
    const target = new URL(url);
    const secure = target.protocol === 'https:';
    const request = (secure ? httpsRequest : httpRequest)(
      target,
      {
        method: 'POST',
        agent: secure ? agents.https : agents.http,
        headers: { ...headers, 'content-length': String(Buffer.byteLength(body)) },
      },
      (response: IncomingMessage) => {
        answer = { status: response.statusCode ?? 0, retryAfter: headerOf(response, 'retry-after'), text: '' };
        response.on('data', (chunk: Buffer) => {
          if (kept >= readBytes) return;
          chunks.push(chunk);
          kept += chunk.byteLength;
          // Enough kept: the rest is not read (the connection is then not reused).
          if (kept >= readBytes) response.destroy();
        });
        response.on('close', finish);
      },
    );
    const abort = (): void => {
      request.destroy();
    };
    const deadline = setTimeout(abort, timeoutMs);
    deadline.unref();
    signal.addEventListener('abort', abort, { once: true });
    // Before the answer: no status. After it: the status stands, whatever happens to the rest of the body.
    request.on('error', () => {});
    request.on('close', () => {
      if (answer === none) finish();
    });
    request.end(body);
  });
}

function headerOf(response: IncomingMessage, name: string): string | null {
  const value = response.headers[name];
  return typeof value === 'string' ? value : null;
}

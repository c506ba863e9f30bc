import { Agent as HttpAgent, request as httpRequest, type ClientRequest, type IncomingMessage } from 'node:http';
import { Agent as HttpsAgent, request as httpsRequest } from 'node:https';
import type { LookupFunction } from 'node:net';

/** A receiver's answer: its status (0 when none came), any Retry-After, and the first bytes of its body when asked for. */
export type PostAnswer = { status: number; retryAfter: string | null; text: string };

interface PostOptions {
  /** The whole exchange's bound: connecting, sending, the answer and its body. */
  timeoutMs: number;
  signal: AbortSignal;
  /** Bytes of the body to keep as `text` (the rest is never read); 0 drains it unread. */
  readBytes?: number | undefined;
  /** Resolves the host to refuse addresses the POST may not reach; such POSTs never reuse an unchecked connection. */
  lookup?: LookupFunction | undefined;
}

/** POSTs deliveries over keep-alive `node:http` connections (cheaper than `fetch` on the main thread); never follows redirects. */
export interface Poster {
  post(url: string, headers: Readonly<Record<string, string>>, body: string, options: PostOptions): Promise<PostAnswer>;
  close(): void;
}

/** Idle connections kept per receiver's host; requests in flight are bounded by the delivery loop (per subscription), not here. */
const FREE_SOCKETS_PER_HOST = 16;
/** An idle connection is closed after this long, before a receiver or a middlebox drops it unseen. */
const IDLE_SOCKET_MS = 4000;
/** The most of a body drained to keep its connection; past it the connection is closed instead. */
const DRAIN_BYTES = 64 * 1024;
const USER_AGENT = 'oidc-provider-impersonation';

export function createPoster(): Poster {
  const settings = { keepAlive: true, maxFreeSockets: FREE_SOCKETS_PER_HOST, timeout: IDLE_SOCKET_MS };
  const agents = { http: new HttpAgent(settings), https: new HttpsAgent(settings) };
  const checked = { http: new HttpAgent(settings), https: new HttpsAgent(settings) };
  const aborts = abortsBySignal();
  return {
    post: (url, headers, body, options) =>
      postOnce(options.lookup ? checked : agents, aborts, url, headers, body, options),
    close() {
      for (const agent of [agents.http, agents.https, checked.http, checked.https]) agent.destroy();
    },
  };
}

/** Resolves, never rejects: status 0 when no answer came within `timeoutMs`. */
function postOnce(
  agents: { http: HttpAgent; https: HttpsAgent },
  aborts: ReturnType<typeof abortsBySignal>,
  url: string,
  headers: Readonly<Record<string, string>>,
  body: string,
  { timeoutMs, signal, readBytes = 0, lookup }: PostOptions,
): Promise<PostAnswer> {
  return new Promise((resolve) => {
    const none: PostAnswer = { status: 0, retryAfter: null, text: '' };
    let answer = none;
    const chunks: Buffer[] = [];
    let read = 0;
    // Called again when both the response and the request close: the first resolution stands.
    const finish = (): void => {
      resolve(readBytes ? { ...answer, text: Buffer.concat(chunks).subarray(0, readBytes).toString('utf8') } : answer);
    };
    let request: ClientRequest;
    try {
      if (signal.aborted) return finish();
      const target = new URL(url);
      const secure = target.protocol === 'https:';
      request = (secure ? httpsRequest : httpRequest)(
        target,
        {
          method: 'POST',
          agent: secure ? agents.https : agents.http,
          ...(lookup ? { lookup } : {}),
          headers: { 'user-agent': USER_AGENT, ...headers, 'content-length': String(Buffer.byteLength(body)) },
        },
        (response: IncomingMessage) => {
          answer = { status: response.statusCode ?? 0, retryAfter: response.headers['retry-after'] ?? null, text: '' };
          if (!readBytes) finish();
          response.on('data', (chunk: Buffer) => {
            read += chunk.byteLength;
            if (readBytes && read - chunk.byteLength < readBytes) chunks.push(chunk);
            // Enough read (or more than is worth draining): the rest is not, and the connection is not reused.
            if (read >= (readBytes || DRAIN_BYTES)) response.destroy();
          });
          response.on('close', () => {
            cleanUp();
            finish();
          });
        },
      );
    } catch {
      // A URL or header the options let through but node:http refuses: no answer.
      return finish();
    }
    const abort = () => request.destroy();
    const deadline = setTimeout(abort, timeoutMs);
    deadline.unref();
    const forget = aborts.add(signal, abort);
    const cleanUp = (): void => {
      clearTimeout(deadline);
      forget();
    };
    request.on('error', () => {});
    request.on('close', () => {
      if (answer !== none) return;
      cleanUp();
      finish();
    });
    request.end(body);
  });
}

/** The POSTs in flight under each signal, behind one listener per signal rather than one per POST. */
function abortsBySignal() {
  const bySignal = new Map<AbortSignal, { pending: Set<() => void>; listener: () => void }>();
  return {
    /** Calls `abort` when `signal` aborts; the function returned forgets it. */
    add(signal: AbortSignal, abort: () => void): () => void {
      let entry = bySignal.get(signal);
      if (!entry) {
        const pending = new Set<() => void>();
        const listener = (): void => {
          bySignal.delete(signal);
          for (const each of pending) each();
        };
        entry = { pending, listener };
        bySignal.set(signal, entry);
        signal.addEventListener('abort', listener, { once: true });
      }
      const { pending, listener } = entry;
      pending.add(abort);
      return () => {
        if (!pending.delete(abort) || pending.size) return;
        if (bySignal.get(signal)?.pending === pending) bySignal.delete(signal);
        signal.removeEventListener('abort', listener);
      };
    },
  };
}

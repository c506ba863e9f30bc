import http from 'node:http';
import net, { type AddressInfo } from 'node:net';
import type Koa from 'koa';

/** Default bind address: the demo is for this machine only. */
export const LOOPBACK = '127.0.0.1';

/**
 * A port of `host` that nothing listens on now, found by binding port 0 for a
 * moment: the demo builds its URLs on it before anything listens there.
 * Another process may take it in between; `listen()` then fails with
 * EADDRINUSE (see `addressInUse`) and the caller may ask again.
 */
export async function freePort(host: string = LOOPBACK): Promise<number> {
  const probe = net.createServer();
  await new Promise<void>((resolve, reject) => {
    probe.once('error', reject);
    probe.listen(0, host, () => resolve());
  });
  const { port } = probe.address() as AddressInfo;
  await new Promise((resolve) => probe.close(resolve));
  return port;
}

/** Whether `error` is `listen()` finding `port` taken. */
export function addressInUse(error: unknown, port: number): boolean {
  const { code, port: taken } = error as { code?: unknown; port?: unknown };
  return code === 'EADDRINUSE' && taken === port;
}

/**
 * Serves `app` on `port` (0 picks a free one). The server gets its handler
 * when it is created and listens last: a request that reached a server
 * without a handler would get no answer at all, so a probe sent during
 * start-up would wait for ever. Callers build everything the app needs first.
 */
export async function listen(app: Koa, port: number, host: string = LOOPBACK): Promise<http.Server> {
  const server = http.createServer(app.callback());
  // Bound every connection, so a stuck peer cannot keep the demo or a test alive.
  server.requestTimeout = 30_000;
  server.headersTimeout = 10_000;
  server.keepAliveTimeout = 2_000;
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, host, () => {
      server.off('error', reject);
      resolve();
    });
  });
  return server;
}

export function portOf(server: http.Server): number {
  return (server.address() as AddressInfo).port;
}

export async function closeServer(server: http.Server): Promise<void> {
  if (!server.listening) return;
  const closed = new Promise<void>((resolve) => server.close(() => resolve()));
  server.closeAllConnections();
  await closed;
}

export class HttpError extends Error {
  constructor(
    readonly status: number,
    readonly error: string,
    description: string,
  ) {
    super(description);
  }
}

/** Reads a request body of at most `limit` bytes, as it came: a signature covers these very bytes. */
export async function readRawBody(ctx: Koa.Context, limit = 16 * 1024): Promise<Buffer> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of ctx.req as AsyncIterable<Buffer>) {
    size += chunk.length;
    if (size > limit) throw new HttpError(413, 'request_too_large', `body exceeds ${limit} bytes`);
    chunks.push(chunk);
  }
  return Buffer.concat(chunks);
}

/** Reads a request body of at most `limit` bytes. */
export async function readBody(ctx: Koa.Context, limit = 16 * 1024): Promise<string> {
  return (await readRawBody(ctx, limit)).toString('utf8');
}

export async function readForm(ctx: Koa.Context): Promise<URLSearchParams> {
  if (!ctx.is('application/x-www-form-urlencoded')) {
    throw new HttpError(415, 'invalid_request', 'expected a form (application/x-www-form-urlencoded)');
  }
  return new URLSearchParams(await readBody(ctx));
}

export async function readJson(ctx: Koa.Context): Promise<unknown> {
  if (!ctx.is('application/json')) {
    throw new HttpError(400, 'invalid_request', 'Content-Type must be application/json');
  }
  const text = await readBody(ctx);
  try {
    return JSON.parse(text) as unknown;
  } catch {
    throw new HttpError(400, 'invalid_request', 'body is not valid JSON');
  }
}

export function escapeHtml(value: unknown): string {
  return String(value)
    .replace(/&/g, '&amp;')
    .replace(/</g, '&lt;')
    .replace(/>/g, '&gt;')
    .replace(/"/g, '&quot;')
    .replace(/'/g, '&#39;');
}

/** RFC 6749 2.3.1: id and secret are form-encoded before they are joined. */
export function basic(id: string, secret: string): string {
  return `Basic ${Buffer.from(`${encodeURIComponent(id)}:${encodeURIComponent(secret)}`).toString('base64')}`;
}

export async function jsonOf(response: Response): Promise<Record<string, unknown> | undefined> {
  try {
    const value = (await response.json()) as unknown;
    return typeof value === 'object' && value !== null && !Array.isArray(value)
      ? (value as Record<string, unknown>)
      : undefined;
  } catch {
    return undefined;
  }
}

/** Shared look of the demo's server-rendered pages. */
export const STYLE = `
:root { color-scheme: light; --fg: #1f2933; --muted: #616e7c; --line: #d9e2ec; --accent: #2f6fdb; --bad: #b42318; --bad-bg: #fef3f2; --ok: #067647; --ok-bg: #ecfdf3; }
* { box-sizing: border-box; }
body { margin: 0; font: 15px/1.5 system-ui, -apple-system, "Segoe UI", sans-serif; color: var(--fg); background: #f5f7fa; }
header { background: #102a43; color: #fff; padding: 12px 24px; display: flex; align-items: center; gap: 16px; }
header h1 { font-size: 18px; margin: 0; flex: 1; }
header .who { font-size: 14px; opacity: .9; }
main { max-width: 880px; margin: 24px auto; padding: 0 16px; }
.card { background: #fff; border: 1px solid var(--line); border-radius: 8px; padding: 20px 24px; margin-bottom: 16px; }
.card h2 { font-size: 16px; margin: 0 0 12px; }
label { display: block; font-weight: 600; margin: 12px 0 4px; }
input, textarea { width: 100%; padding: 8px 10px; border: 1px solid #bcccdc; border-radius: 6px; font: inherit; }
button, .button { display: inline-block; margin-top: 16px; padding: 8px 18px; border: 0; border-radius: 6px; background: var(--accent); color: #fff; font: inherit; font-weight: 600; cursor: pointer; text-decoration: none; }
button.secondary, .button.secondary { background: #e4e7eb; color: var(--fg); }
button:disabled { opacity: .6; cursor: wait; }
.error { border: 1px solid #fda29b; background: var(--bad-bg); color: var(--bad); border-radius: 6px; padding: 10px 14px; margin: 12px 0; white-space: pre-wrap; }
.ok { color: var(--ok); }
.muted { color: var(--muted); font-size: 13px; }
code, pre { font-family: ui-monospace, "SFMono-Regular", Menlo, monospace; font-size: 13px; }
pre { background: #f0f4f8; border-radius: 6px; padding: 10px 12px; overflow-x: auto; white-space: pre-wrap; word-break: break-all; margin: 6px 0; }
table { border-collapse: collapse; width: 100%; }
th, td { text-align: left; vertical-align: top; padding: 6px 8px; border-bottom: 1px solid var(--line); }
th { width: 190px; color: var(--muted); font-weight: 600; }
`;

export function page(title: string, body: string, head = ''): string {
  return `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>${escapeHtml(title)}</title>
<link rel="icon" href="data:,">
<style>${STYLE}</style>
${head}
</head>
<body>
${body}
</body>
</html>`;
}

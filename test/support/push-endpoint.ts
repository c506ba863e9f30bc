import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { ImpersonationVerifier } from '../../lib/resource-server/index.js';

/** The resource server's push endpoint: hands each push to the verifier, unless the test cut it. */
export async function pushEndpoint(
  verifier: () => ImpersonationVerifier | undefined,
): Promise<{ url: string; cut: boolean; server: Server }> {
  const endpoint = { url: '', cut: false, server: createServer() };
  endpoint.server.on('request', (request, response) => {
    const chunks: Buffer[] = [];
    request.on('data', (chunk: Buffer) => chunks.push(chunk));
    request.on('end', () => {
      const receiver = verifier();
      if (endpoint.cut || !receiver) {
        response.writeHead(503).end();
        return;
      }
      receiver
        .receivePush({ body: Buffer.concat(chunks).toString(), authorization: request.headers['authorization'] })
        .then(({ status, body }) => {
          response.writeHead(status, body ? { 'content-type': 'application/json' } : {});
          response.end(body ? JSON.stringify(body) : undefined);
        });
    });
  });
  await new Promise<void>((resolve) => endpoint.server.listen(0, '127.0.0.1', resolve));
  endpoint.url = `http://127.0.0.1:${(endpoint.server.address() as AddressInfo).port}/caep`;
  return endpoint;
}

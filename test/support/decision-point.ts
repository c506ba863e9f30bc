/**
 * A small AuthZEN policy decision point on 127.0.0.1 (a free port): it keeps
 * every Access Evaluation it receives, headers and body as sent, and answers
 * as the test sets `answer`: a decision, a refusal with the user's reason,
 * no answer at all (a timeout), a failure status, or something that is not
 * a decision. The caller closes it.
 */
import { createServer, type IncomingHttpHeaders, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';

export type DecisionPointAnswer =
  { allow: true } | { deny: string | undefined } | { hang: true } | { status: number } | { body: string };

export interface ReceivedEvaluation {
  path: string;
  headers: IncomingHttpHeaders;
  /** The body as sent, before parsing. */
  raw: string;
  body: {
    subject: { type: string; id: string };
    action: { name: string };
    resource: { type: string; id: string };
    context: Record<string, unknown>;
  };
}

export interface DecisionPoint {
  url: string;
  received: ReceivedEvaluation[];
  /** What the next evaluations are answered with; a function answers each by what it asks. */
  answer: DecisionPointAnswer | ((evaluation: ReceivedEvaluation['body']) => DecisionPointAnswer);
  close(): Promise<void>;
}

export async function startDecisionPoint(): Promise<DecisionPoint> {
  const hanging = new Set<() => void>();
  const point: DecisionPoint = {
    url: '',
    received: [],
    answer: { allow: true },
    close: () =>
      new Promise<void>((resolve) => {
        for (const release of hanging) release();
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
  const server: Server = createServer((request, response) => {
    const chunks: Buffer[] = [];
    request.on('data', (chunk: Buffer) => chunks.push(chunk));
    request.on('end', () => {
      const raw = Buffer.concat(chunks).toString('utf8');
      const received: ReceivedEvaluation = {
        path: request.url ?? '',
        headers: request.headers,
        raw,
        body: JSON.parse(raw) as ReceivedEvaluation['body'],
      };
      point.received.push(received);
      const answer = typeof point.answer === 'function' ? point.answer(received.body) : point.answer;
      if ('hang' in answer) {
        const release = () => response.destroy();
        hanging.add(release);
        response.on('close', () => hanging.delete(release));
        return;
      }
      if ('status' in answer) {
        response.writeHead(answer.status, { 'content-type': 'application/json' }).end('{"error":"policy store down"}');
        return;
      }
      const body =
        'body' in answer
          ? answer.body
          : JSON.stringify(
              'allow' in answer
                ? { decision: true }
                : {
                    decision: false,
                    context:
                      answer.deny === undefined
                        ? { reason_admin: { en: 'policy P-7 refused' } }
                        : { reason_admin: { en: 'policy P-7 refused' }, reason_user: { 'en-403': answer.deny } },
                  },
            );
      response.writeHead(200, { 'content-type': 'application/json' }).end(body);
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  point.url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/pdp`;
  return point;
}

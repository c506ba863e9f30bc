import { metrics, trace } from '@opentelemetry/api';
import { expect } from 'chai';
import { impersonate } from '../support/impersonations.js';
import { userAccessToken } from '../support/http.js';
import { startProvider, type TestProvider } from '../support/provider.js';
import { inMemoryTelemetry, type InMemoryTelemetry } from '../support/telemetry.js';

/*
 * The option left out: the providers registered with @opentelemetry/api, as the Node SDK's
 * start() registers them. A deployment may start the SDK before or after createImpersonation()
 * and install(): the spans and metrics are the same.
 */
describe('OpenTelemetry through the global providers, registered after the plugin started', function () {
  this.timeout(30_000);
  let telemetry: InMemoryTelemetry;
  let tp: TestProvider;

  before(async () => {
    tp = await startProvider({});
    // Before the SDK: counted among the exchanges, kept for no gauge.
    await impersonate(tp, { actorToken: await userAccessToken(tp, 'alice'), subject: { userId: 'carol' } });
    telemetry = inMemoryTelemetry();
    trace.setGlobalTracerProvider(telemetry.options.tracerProvider);
    metrics.setGlobalMeterProvider(telemetry.options.meterProvider);
  });

  after(async () => {
    trace.disable();
    metrics.disable();
    await tp?.close();
    await telemetry?.close();
  });

  it('traces the exchanges made once the SDK is in place, counts them all, and gauges the sessions issued since', async () => {
    await impersonate(tp, {
      actorToken: await userAccessToken(tp, 'alice'),
      subject: { userId: 'bob', context: { ticket: 'SUP-7' } },
    });
    const names = telemetry.spans().map((span) => span.name);
    expect(names).to.include.members(['impersonation.token_exchange', 'impersonation.token_exchange.commit']);
    const counted = (await telemetry.metrics()).find(
      (metric) => metric.descriptor.name === 'impersonation.token_exchange.requests',
    );
    expect(counted?.dataPoints.map(({ value }) => value)).to.deep.equal([2]);
    const sessions = (await telemetry.metrics()).find(
      (metric) => metric.descriptor.name === 'impersonation.sessions.active',
    );
    expect(sessions?.dataPoints.map(({ value }) => value)).to.deep.equal([1]);
  });
});

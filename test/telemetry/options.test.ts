import { expect } from 'chai';
import { createImpersonation } from '../../lib/index.js';

const RESOURCE = 'https://as.example/api';

describe('The telemetry option is checked as every other option', () => {
  it('refuses a misspelt key, naming the nearest known one', () => {
    expect(() =>
      createImpersonation({ managementResource: RESOURCE, telemetry: { tracerprovider: {} } as never }),
    ).to.throw(
      /^createImpersonation: option "telemetry\.tracerprovider" is unknown; did you mean "telemetry\.tracerProvider"\?$/,
    );
  });

  it('refuses what is neither false nor an object of providers', () => {
    expect(() => createImpersonation({ managementResource: RESOURCE, telemetry: [] as never })).to.throw(
      /^createImpersonation: option "telemetry" must be false or \{ tracerProvider\?, meterProvider\? \}$/,
    );
    expect(() =>
      createImpersonation({ managementResource: RESOURCE, telemetry: { meterProvider: {} } as never }),
    ).to.throw(/option "telemetry\.meterProvider" must be a MeterProvider/);
  });
});

import { auditSinkContract } from '../support/audit-sink-contract.js';
import { AUDIT_LOGS } from '../support/audit-sinks.js';

// The contract every audit log the package ships meets; what each does of its own is in its own tests.
for (const kind of AUDIT_LOGS) {
  describe(`${kind.name} audit log: the sink contract`, function () {
    this.timeout(30_000);
    auditSinkContract(kind);
  });
}

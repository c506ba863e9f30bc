// What the fragments of docs/ take from the page around them, as a reader's
// deployment has it: the provider's issuer and configuration, the plugin, the
// provider built from both, the resource server's verifier. A block that
// defines one of these itself shadows it.
import type Provider from 'oidc-provider';
import type { Configuration } from 'oidc-provider';
import type { Impersonation } from 'oidc-provider-impersonation';
import type { ImpersonationVerifier } from 'oidc-provider-impersonation/resource-server';

declare global {
  const issuer: string;
  const configuration: Configuration;
  const managementResource: string;
  const impersonation: Impersonation;
  const provider: Provider;
  const verifier: ImpersonationVerifier;
}

// The deployment's own adapter that docs/adding-to-your-deployment.md starts from.
import type { Adapter } from 'oidc-provider';

export declare const MongoAdapter: new (name: string) => Adapter;

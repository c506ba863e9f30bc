/** A support engineer (or any signed-in user) as the backend knows them from their access token. */
export interface Actor {
  sub: string;
  name?: string;
  roles: string[];
  /** The application the engineer signed in with: the subject token is bound to it. */
  clientId: string;
}

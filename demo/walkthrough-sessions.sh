#!/usr/bin/env bash
# Impersonate, list the impersonation, stop it, and watch the resource API refuse
# the token, against a running `npm run demo`. IDENTITY and BACKEND default to
# the demo's addresses, on PORT and BACKEND_PORT as for npm run demo.
set -euo pipefail
IDENTITY=${IDENTITY:-http://localhost:${PORT:-3000}}
BACKEND=${BACKEND:-http://localhost:${BACKEND_PORT:-3001}}
JAR=$(mktemp)
trap 'rm -f "$JAR"' EXIT
json() { sed -n "s/.*\"$1\":\"\([^\"]*\)\".*/\1/p"; }
# A JWT's payload as JSON: base64url, padded for base64 -d.
claims() { local part; part=$(printf '%s' "$1" | cut -d. -f2 | tr '_-' '/+'); while [ $(( ${#part} % 4 )) -ne 0 ]; do part="$part="; done; printf '%s' "$part" | base64 -d; }

echo '# 1. alice signs in (support-web), asks the backend to impersonate dave (who needs no approval), and exchanges the subject token'
FORM=$(curl -sSL -c "$JAR" -b "$JAR" -o /dev/null -w '%{url_effective}' "$BACKEND/web/login")
ACTOR_TOKEN=$(curl -sSL -c "$JAR" -b "$JAR" -d login=alice -d password=alice-password "$FORM/login" \
  | sed -n 's/.*<pre id="access-token">\([^<]*\)<.*/\1/p')
SUBJECT_TOKEN=$(curl -sS -H "Authorization: Bearer $ACTOR_TOKEN" -H 'Content-Type: application/json' \
  -d '{"userId":"dave","reason":"Cannot see the invoices","ticketId":"T-1234"}' \
  "$BACKEND/api/request-impersonation" | json subjectToken)
ACCESS_TOKEN=$(curl -sS -u support-web:support-web-secret \
  -d grant_type=urn:ietf:params:oauth:grant-type:token-exchange -d scope=profile:read -d resource=https://api.example.com \
  -d subject_token="$SUBJECT_TOKEN" -d subject_token_type=urn:ietf:params:oauth:token-type:access_token \
  -d actor_token="$ACTOR_TOKEN" -d actor_token_type=urn:ietf:params:oauth:token-type:access_token \
  "$IDENTITY/oidc/token" | json access_token)
curl -sS -H "Authorization: Bearer $ACCESS_TOKEN" "$BACKEND/api/me"; echo

echo '# 2. The support team lists active impersonations of dave (M2M token with impersonations:read and :revoke)'
ADMIN=$(curl -sS -u impersonation-backend:impersonation-backend-secret \
  -d grant_type=client_credentials -d resource="$IDENTITY/api" -d 'scope=impersonations:read impersonations:revoke' \
  "$IDENTITY/oidc/token" | json access_token)
curl -sS -H "Authorization: Bearer $ADMIN" "$IDENTITY/api/impersonations?subject=dave"; echo
# The token names its session in the impersonation_session claim.
SESSION=$(claims "$ACCESS_TOKEN" | json impersonation_session)

echo "# 3. Stop it: DELETE /api/impersonations/$SESSION"
curl -sS -o /dev/null -w 'HTTP %{http_code}\n' -X DELETE -H "Authorization: Bearer $ADMIN" \
  -H 'Content-Type: application/json' -d '{"reason":"ticket closed"}' "$IDENTITY/api/impersonations/$SESSION"
STOPPED=$(date +%s%N)

echo '# 4. The resource API refuses the token (it polls its SSF stream every 250 ms)'
for _ in $(seq 1 40); do
  STATUS=$(curl -sS -o /tmp/walkthrough-me.json -w '%{http_code}' -H "Authorization: Bearer $ACCESS_TOKEN" "$BACKEND/api/me")
  [ "$STATUS" != 200 ] && break
  sleep 0.05
done
echo "HTTP $STATUS after $(( ($(date +%s%N) - STOPPED) / 1000000 )) ms: $(cat /tmp/walkthrough-me.json)"
curl -sS -H "Authorization: Bearer $ADMIN" "$IDENTITY/api/impersonations/$SESSION"; echo
